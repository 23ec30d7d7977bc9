"""Slot storage for a decode batch: what lives across steps, in preallocated
arrays that grow by doubling and are compacted by moving the last live entry
into each hole (so the entries that stay are never copied).

Two spaces, because a beam's rows share one sentence's memory:
- `Memory`: one slot per sentence: the tensors the manifest declares as its
  `memory` (RNNsearch's annotations, keys and source mask), written once by the
  encoder when the sentence joins.
- `Rows`: one slot per hypothesis row: the step state, the previous token,
  which memory slot it attends, its running score and length, and its history
  (tokens, log-probs and α of every step so far), so a finished row's answer is
  a slice, not a walk through back-pointers.

On the device path (`device.py`) the numbers live on the execution device: `Memory`
then holds only the source mask and `Rows` no state, and each entry's
`origin` says where on the device its numbers are; entries carry it when they move.
"""

from __future__ import annotations

import numpy as np

from attnmt.service.modeldir.manifest import SRC_MASK


def _rounded(length: int) -> int:
    """Memory lengths in multiples of 8 positions."""
    return (length + 7) // 8 * 8


def positions(axis: int, start: int | None = None, stop: int | None = None) -> tuple:
    """An index of one entry (a sentence's or row's tensor, axis 0 gone) that takes
    positions [start, stop) along `axis` of the batched tensor (axis >= 1)."""
    return (slice(None),) * (axis - 1) + (slice(start, stop),)


def _resized(shape: tuple[int, ...], entries: int, axis: int, length: int) -> tuple[int, ...]:
    """`shape` with `entries` on axis 0 and `length` positions on `axis`."""
    out = list(shape)
    out[0], out[axis] = entries, length
    return tuple(out)


def _head(array: np.ndarray, length: int, live: int, axis: int = 1) -> np.ndarray:
    """The first `length` positions along `axis` of the first `live` slots or rows,
    contiguous (ONNX Runtime would copy a strided view at every step), in an array of
    the same capacity whose other entries are zeros: only the live entries are copied,
    the capacity often being several times the live rows."""
    out = np.zeros(_resized(array.shape, array.shape[0], axis, length), dtype=array.dtype)
    out[:live] = array[(slice(0, live), *positions(axis, 0, length))]
    return out


def _grown(array: np.ndarray, shape: tuple[int, ...], live: int) -> np.ndarray:
    """A zeroed array of `shape` holding the first `live` entries of `array` (clipped)."""
    out = np.zeros(shape, dtype=array.dtype)
    live = min(live, array.shape[0])
    region = tuple(slice(0, min(a, b)) for a, b in zip(array.shape[1:], shape[1:]))
    out[(slice(0, live),) + region] = array[(slice(0, live),) + region]
    return out


class Memory:
    """Sentence slots [0, n): the attention memory the decoder step reads, each declared
    tensor N x S x ..., zero (False) beyond a sentence's length."""

    def __init__(self, shapes: dict[str, tuple[tuple[int, ...], np.dtype]], axes: dict[str, int] | None = None):
        """shapes: each memory tensor's shape beyond its sentence and source axes and its dtype,
        by name (src_mask: (), bool); axes: the axis of the batched tensor its source positions
        run along (default 1)."""
        self.n = 0
        self.capacity, self.length = 0, 0
        self.axes = {name: (axes or {}).get(name, 1) for name in shapes}
        self.tensors = {}
        for name, (shape, dtype) in shapes.items():
            axis = self.axes[name]
            self.tensors[name] = np.zeros((0, *shape[:axis - 1], 0, *shape[axis - 1:]), dtype=dtype)
        self.tag = np.zeros(0, dtype=np.int64)       # N: which add() filled the slot (unique)
        self.origin = np.zeros(0, dtype=np.int64)    # N: where the slot's numbers are on the device (device.py)
        self._added = 0
        self.version = 0        # bumped whenever the memory changes (device copies go stale)

    @property
    def mask(self) -> np.ndarray:
        """N x S, True on each sentence's pieces."""
        return self.tensors[SRC_MASK]

    def reserve(self, n: int, length: int) -> None:
        """Room for `n` sentences of up to `length` pieces. The length grows to what is
        needed, without headroom: every step reads the full length of every row, and
        under a server's random mix a longer sentence than any live one is rare, while
        headroom would be paid at every step until the memory shrinks again."""
        if n <= self.capacity and length <= self.length:
            return
        capacity = max(n, self.capacity, 8)
        if n > self.capacity and self.capacity:
            capacity = max(n, 2 * self.capacity)
        length = max(self.length, _rounded(length))
        for name, array in self.tensors.items():
            self.tensors[name] = _grown(array, _resized(array.shape, capacity, self.axes[name], length), self.n)
        self.tag = _grown(self.tag, (capacity,), self.n)
        self.origin = _grown(self.origin, (capacity,), self.n)
        self.capacity, self.length = capacity, length
        self.version += 1

    def shrink(self, longest: int) -> None:
        """Drop trailing padding once the longest live sentence needs at most 7/8 of the
        length: every step reads the full length of every row. The copy costs about a
        step, and an eighth of the attention pays it back within a few dozen steps; a
        coarser threshold leaves the memory well above the longest live sentence under
        a server's random mix."""
        length = _rounded(longest)
        if self.length > 16 and length <= self.length * 7 // 8:
            self.tensors = {name: _head(array, length, self.n, self.axes[name])
                            for name, array in self.tensors.items()}
            self.length = length
            self.version += 1

    def add(self, values: dict[str, np.ndarray], origin: int = 0) -> int:
        """Store one encoded sentence: each memory tensor with src_len positions, by name (on
        the device path only src_mask, its numbers being at `origin` on the device); returns
        its slot."""
        slot, n = self.n, len(values[SRC_MASK])
        self.reserve(slot + 1, n)
        for name, array in self.tensors.items():
            axis = self.axes[name]
            array[slot][positions(axis, 0, n)] = values[name]
            array[slot][positions(axis, n)] = 0
        self.tag[slot] = self._added
        self.origin[slot] = origin
        self._added += 1
        self.n += 1
        self.version += 1
        return slot

    def free(self, slots: list[int]) -> dict[int, int]:
        """Release slots; returns {old slot: new slot} for the sentences that moved."""
        moves = _compact(self.n, slots)
        if moves:
            src, dst = np.array(list(moves)), np.array(list(moves.values()))
            for array in (*self.tensors.values(), self.tag, self.origin):
                array[dst] = array[src]
        self.n -= len(slots)
        self.version += 1
        return moves

    def view(self) -> dict[str, np.ndarray]:
        n = self.n
        return {name: array[:n] for name, array in self.tensors.items()}


class RowMemory:
    """Each row's copy of its sentence's memory, for the direct step graph when a
    sentence has several rows (a beam). The step graph would otherwise gather the
    memory row by row at every step (`decoder_step_shared`), while a row's sentence
    changes only when the beam opens or narrows, or rows are compacted (a few rows
    per step); so the copies are kept across steps, and a row whose sentence
    changed copies that sentence's pieces only."""

    def __init__(self):
        self.tag = np.zeros(0, dtype=np.int64)        # R: Memory.tag of the sentence each row holds, -1: none
        self.filled = np.zeros(0, dtype=np.int64)     # R: source positions that may be nonzero
        self.length = -1                              # the memory length the copies have
        self.tensors: dict[str, np.ndarray] = {}      # Memory.tensors' names, R x S x ...

    def view(self, memory: Memory, slots: np.ndarray) -> dict[str, np.ndarray]:
        """The memory by name, R x S x ..., row r holding memory slot slots[r]."""
        R = len(slots)
        axes = memory.axes
        if memory.length < self.length and len(self.tag) >= R:    # the memory shrank: so do the copies
            L = self.length = memory.length
            self.tensors = {name: _head(array, L, R, axes[name]) for name, array in self.tensors.items()}
            np.minimum(self.filled, L, out=self.filled)
            self.tag[R:], self.filled[R:] = -1, 0          # rows past R were not copied
        if self.length != memory.length or len(self.tag) < R:
            capacity = max(R, 2 * len(self.tag) if R > len(self.tag) else len(self.tag), 8)
            self.tensors = {name: np.zeros(_resized(array.shape, capacity, axes[name], memory.length), array.dtype)
                            for name, array in memory.tensors.items()}
            self.tag = np.full(capacity, -1, dtype=np.int64)
            self.filled = np.zeros(capacity, dtype=np.int64)
            self.length = memory.length
        tags = memory.tag[slots]
        stale = np.flatnonzero(self.tag[:R] != tags)
        triples = [(self.tensors[name], array, axes[name]) for name, array in memory.tensors.items()]
        mask = memory.mask
        for row, slot in zip(stale.tolist(), slots[stale].tolist()):
            n = int(mask[slot].sum())                 # the sentence's source length
            end = max(n, int(self.filled[row]))       # beyond n: zeros, as in the memory itself
            for copy, array, axis in triples:         # (the row's copy, the memory, its source axis)
                copy[row][positions(axis, 0, end)] = array[slot][positions(axis, 0, end)]
            self.filled[row] = n
        self.tag[stale] = tags[stale]
        return {name: array[:R] for name, array in self.tensors.items()}


class StateBuffers:
    """Memory for an appending batch's caches when they are given room (`Rows._with_room`):
    two flat buffers a state, by name, used in turn, the one the current cache is not in.
    Fresh arrays cost a page fault per 4 kB as they are written, which two decode threads
    take in turn (ONNX Runtime's own outputs come from its arena); so a buffer only grows, by
    a quarter more than asked, and holds the largest cache it was asked for until it is
    dropped. One batch uses a set at a time; `offline.decode_all` hands sets from one batch
    to the next."""

    def __init__(self):
        self.pairs: dict[str, list[np.ndarray]] = {}

    def array(self, name: str, shape: list[int], dtype: np.dtype, avoid: np.ndarray) -> np.ndarray:
        """An uninitialised array of `shape` on the buffer of `name` that `avoid` is not in."""
        size = int(np.prod(shape))
        pair = self.pairs.setdefault(name, [np.empty(0, dtype), np.empty(0, dtype)])
        i = 1 if np.may_share_memory(pair[0], avoid) else 0
        if pair[i].size < size or pair[i].dtype != dtype:
            pair[i] = np.empty(size + size // 4, dtype=dtype)
        return pair[i][:size].reshape(shape)


class Rows:
    """Hypothesis rows [0, n) and their histories."""

    def __init__(self, state_shapes: dict[str, tuple[int, ...]], axes: dict[str, int] | None = None,
                 buffers: StateBuffers | None = None, appending: bool = False):
        """state_shapes: each step state's shape for one row, by name; axes: the axis of the
        batched state a growing state's positions run along (default 1); appending: the
        states are caches with room to grow, a step returning only their new entries
        (`append_state`; the engine's append step); buffers: the memory their room is given
        on (default: a set of its own)."""
        self.n = 0
        self.axes = {name: (axes or {}).get(name, 1) for name in state_shapes}
        self.capacity, self.max_steps, self.length = 0, 0, 0
        self.state = {name: np.zeros((0, *shape), dtype=np.float32) for name, shape in state_shapes.items()}
        self.prev = np.zeros(0, dtype=np.int64)          # R: the token each row feeds next
        self.slot = np.zeros(0, dtype=np.int64)          # R: the memory slot each row attends
        self.score = np.zeros(0, dtype=np.float64)       # R: Σ log p of the row's tokens
        self.steps = np.zeros(0, dtype=np.int64)         # R: tokens generated so far
        self.kind = np.zeros(0, dtype=np.int8)           # R: greedy, forced or beam (search.py)
        self.limit = np.zeros(0, dtype=np.int64)         # R: the sentence's max_length
        self.origin = np.zeros(0, dtype=np.int64)        # R: where the row's state is on the device (device.py)
        self.tokens = np.zeros((0, 0), dtype=np.int64)   # R x T
        self.log_probs = np.zeros((0, 0), dtype=np.float32)   # R x T
        self.alpha = np.zeros((0, 0, 0), dtype=np.float32)    # R x T x S
        self.buffers = buffers if buffers is not None else StateBuffers()
        self.appending = appending
        self.cache_len = 0          # appending: the positions of every cache in use (the rest is zeros)

    _PER_ROW = ("prev", "slot", "score", "steps", "kind", "limit", "origin")
    _HISTORY = ("tokens", "log_probs", "alpha")

    def reserve(self, n: int, steps: int, length: int) -> None:
        """Room for `n` rows of `steps` tokens over sources of `length` pieces."""
        if n <= self.capacity and steps <= self.max_steps and length <= self.length:
            return
        capacity = max(n, 2 * self.capacity if n > self.capacity else self.capacity, 8)
        max_steps = max(steps, 2 * self.max_steps if steps > self.max_steps else self.max_steps, 16)
        length = max(length, self.length)
        for name, array in self.state.items():
            self.state[name] = _grown(array, (capacity, *array.shape[1:]), self.n)
        for name in self._PER_ROW:
            setattr(self, name, _grown(getattr(self, name), (capacity,), self.n))
        self.tokens = _grown(self.tokens, (capacity, max_steps), self.n)
        self.log_probs = _grown(self.log_probs, (capacity, max_steps), self.n)
        self.alpha = _grown(self.alpha, (capacity, max_steps, length), self.n)
        self.capacity, self.max_steps, self.length = capacity, max_steps, length

    def _state_rows(self, name: str, needed: int) -> np.ndarray:
        """The state `name` with at least `needed` rows: a step's output kept as it is
        (`store_state`) has only the rows that ran; a row joining or a beam's child beyond
        them gets the full capacity, once."""
        array = self.state[name]
        if array.shape[0] < needed:
            # Uninitialised beyond the live rows: every row past them is written whole before a step
            # reads it (put_state, copy), and zeroing a cache of the full capacity at every step where
            # rows join was a tenth of a server's time at 64 clients.
            grown = np.empty((self.capacity, *array.shape[1:]), dtype=array.dtype)
            live = min(self.n, array.shape[0])          # rows just added have no state yet
            grown[:live] = array[:live]
            array = self.state[name] = grown
        return array

    APPEND_ROOM = 16      # positions of room a full cache is given: one copy of the caches every so many steps

    def _with_room(self, name: str, axis: int, keep: int, shift: int = 0) -> np.ndarray:
        """(appending) State `name` with room: for the live rows, zeros, then their positions
        [cache_len - keep, cache_len) at [shift, shift + keep), then APPEND_ROOM positions of
        zeros; rows to capacity, those past the live ones unset (a row is written whole when
        it is added). On `buffers`, whose memory is reused: fresh arrays cost page faults,
        which two decode threads take in turn."""
        array, T, n = self.state[name], self.cache_len, self.n
        shape = _resized(array.shape, max(array.shape[0], self.capacity), axis, shift + keep + self.APPEND_ROOM)
        out = self.buffers.array(name, list(shape), array.dtype, avoid=array)
        out[(slice(0, n), *positions(axis, 0, shift))] = 0
        out[(slice(0, n), *positions(axis, shift, shift + keep))] = array[(slice(0, n), *positions(axis, T - keep, T))]
        out[(slice(0, n), *positions(axis, shift + keep))] = 0
        return out

    def _put_appending(self, row: int, state: dict[str, np.ndarray]) -> None:
        """put_state with caches of room: the joining row's initial cache ends at cache_len (the
        live rows' caches move right first if it is longer than theirs: an empty batch)."""
        wants = max(value.shape[self.axes[name] - 1] for name, value in state.items())
        if wants > self.cache_len:
            for name in state:
                self._state_rows(name, row + 1)
                self.state[name] = self._with_room(name, self.axes[name], self.cache_len, wants - self.cache_len)
            self.cache_len = wants
        T = self.cache_len
        for name, value in state.items():
            array = self._state_rows(name, row + 1)
            axis = self.axes[name]
            if array.shape[axis] <= T:
                array = self.state[name] = self._with_room(name, axis, T)
            n = value.shape[axis - 1]
            array[row][positions(axis, 0, T - n)] = 0
            array[row][positions(axis, T - n, T)] = value
            array[row][positions(axis, T)] = 0

    def append_state(self, entries: dict[str, np.ndarray], n: int) -> None:
        """(appending) A step's new entry of each cache for rows [0, n) (one position each),
        written at cache_len, the caches given room first where they are full."""
        T = self.cache_len
        for name, entry in entries.items():
            array = self._state_rows(name, n)
            axis = self.axes[name]
            if array.shape[axis] <= T:
                array = self.state[name] = self._with_room(name, axis, T)
            array[(slice(0, n), *positions(axis, T, T + 1))] = entry
        self.cache_len = T + 1

    def put_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        """A joining row's initial state. A per-row state of rank 2 or more whose positions
        differ in number from the batch's (a cache, manifest.py) is aligned on the right:
        the shorter one is padded with zeros on the left, the batch's if the row's is longer."""
        if self.appending:
            self._put_appending(row, state)
            return
        for name, value in state.items():
            array = self._state_rows(name, row + 1)
            axis = self.axes[name]
            if value.ndim >= 2 and value.shape[axis - 1] != array.shape[axis]:
                has, wants = array.shape[axis], value.shape[axis - 1]
                if wants > has:
                    grown = np.zeros((self.capacity, *value.shape), dtype=array.dtype)
                    grown[(slice(0, self.n), *positions(axis, wants - has))] = array[:self.n]
                    array = self.state[name] = grown
                    has = wants
                array[row][positions(axis, 0, has - wants)] = 0
                array[row][positions(axis, has - wants)] = value
            else:
                array[row] = value

    def store_state(self, state: dict[str, np.ndarray], n: int) -> None:
        """A step's new state for rows [0, n). A state whose shape changed (a cache that grew
        by a step) is kept as the step returned it, the live rows' own array: copying it into
        an array of `capacity` rows moved the whole cache once a step (7 % of a Transformer's
        greedy time at batch 64, 21 % of beam 5's); rows beyond it are added on demand."""
        for name, value in state.items():
            array = self.state[name]
            if array.shape[1:] == value.shape[1:]:
                array[:n] = value
            elif n == self.n and value.shape[0] == n and value.flags.c_contiguous and value.flags.writeable:
                self.state[name] = value
            else:
                array = self.state[name] = np.zeros((self.capacity, *value.shape[1:]), dtype=array.dtype)
                array[:n] = value

    def trim_states(self, keep: int) -> None:
        """Cut the growing states (a cache [R, T, ...]) to their last `keep` positions once
        the rows that needed the older ones have left. Rows are aligned on the right, so a
        cache is as long as the oldest row it ever held: with sentences joining as others
        leave it would grow for as long as the batch never empties, and every step would read
        and every beam copy move the dead positions (a Transformer's Bible test, 1,048 verses at
        beam 5: 6 GB and 30 minutes instead of 2). Cut when a quarter or more is dead, so the
        copy is paid rarely; `keep` 0 once the batch is empty."""
        if self.appending:
            T = self.cache_len
            if self._worth_trimming(T, keep):
                for name in self.state:
                    self.state[name] = self._with_room(name, self.axes[name], keep)
                self.cache_len = keep
            return
        for name, array in self.state.items():
            axis = self.axes[name]
            T = array.shape[axis] if array.ndim >= 3 else 0
            if self._worth_trimming(T, keep):
                self.state[name] = np.ascontiguousarray(array[(slice(0, self.n), *positions(axis, T - keep))])

    def _worth_trimming(self, T: int, keep: int) -> bool:
        """Whether caches of T positions are cut to `keep`: a quarter or more dead, or the batch empty."""
        return T > keep and (4 * (T - keep) >= T or self.n == 0)

    def add(self, count: int) -> np.ndarray:
        """Append `count` rows (reserve first); returns their indices."""
        rows = np.arange(self.n, self.n + count)
        self.n += count
        return rows

    def copy(self, dst: np.ndarray, src: np.ndarray, steps: np.ndarray, lengths: np.ndarray) -> None:
        """Rows `dst` become copies of rows `src` (a beam's children of their parents): the
        state (on the device path its origin) and what the sentence fixes (slot, kind, limit;
        prev, score and steps are the caller's to set), and each pair's first `steps` entries
        of history, α over its sentence's first `lengths` source positions (nothing reads α
        beyond a row's source)."""
        if len(dst):
            for name in self.state:
                self._state_rows(name, int(dst.max()) + 1)
        for array in self._inherited_per_row():
            array[dst] = array[src]
        longest = int(steps.max())
        self.tokens[dst, :longest] = self.tokens[src, :longest]
        self.log_probs[dst, :longest] = self.log_probs[src, :longest]
        # The states and α row by row: one copy each, where fancy indexing gathers every moved
        # row into a temporary first, twice the memory traffic (dst rows are never sources: a
        # beam's children copy into rows no candidate extends).
        pairs = list(zip(dst.tolist(), src.tolist()))
        for array in self.state.values():
            for d, s in pairs:
                array[d] = array[s]
        alpha = self.alpha
        for (d, s), n, length in zip(pairs, steps.tolist(), lengths.tolist()):
            alpha[d, :n, :length] = alpha[s, :n, :length]

    def free(self, rows: list[int]) -> dict[int, int]:
        """Release rows; returns {old row: new row} for the rows that moved."""
        moves = _compact(self.n, rows)
        if moves:
            src, dst = np.array(list(moves)), np.array(list(moves.values()))
            for array in self._row_arrays():
                array[dst] = array[src]
            used = int(self.steps[dst].max()) + 1      # history beyond a row's steps is never read
            for array in (self.tokens, self.log_probs, self.alpha):
                array[dst, :used] = array[src, :used]
        self.n -= len(rows)
        return moves

    def permute(self, order: np.ndarray) -> None:
        """Reorder the live rows: row i becomes old row order[i]."""
        n = self.n
        used = int(self.steps[:n].max(initial=0)) + 1  # history beyond a row's steps is never read
        for array in (self.tokens, self.log_probs, self.alpha):
            array[:n, :used] = array[order, :used]
        for array in self._row_arrays():
            array[:n] = array[order]

    def _inherited_per_row(self) -> list[np.ndarray]:
        """What a beam's child takes from its parent besides its state; the caller sets prev,
        score and steps."""
        return [self.slot, self.kind, self.limit, self.origin]

    def _row_arrays(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in self._PER_ROW] + [self._state_rows(name, self.n)
                                                                   for name in self.state]


def _compact(n: int, freed: list[int]) -> dict[int, int]:
    """Which live entries move into which holes when `freed` leave [0, n)."""
    gone = set(freed)
    new_n = n - len(gone)
    holes = sorted(i for i in gone if i < new_n)
    movers = [i for i in range(new_n, n) if i not in gone]
    return dict(zip(movers, holes))
