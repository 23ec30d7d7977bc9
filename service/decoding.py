"""Search over the decoder step: greedy, beam and forced decoding, batched over
many sentences of different lengths that may join and leave at any step.

`DecodeBatch` is the unit both callers drive: `attnmt translate` adds a whole
file's batch and steps until it is empty; the server's scheduler adds sentences
at step boundaries as requests arrive (iteration-level batching) and answers
each one the step it finishes.

Beam search follows Marian: the beam starts with one row, each step keeps the
top-k of (rows x vocabulary) continuations, a continuation ending in </s>
finishes and shrinks the beam by one, and the sentence is done when the beam
is empty or the length limit is reached. Beam size 1 is exactly greedy search.
Each hypothesis is a chain of back-pointers, so the alignment returned is the
chosen hypothesis's own α rows, not the last beam's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .engine import Engine
from .errors import InvalidInput


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 1            # 1: greedy
    n_best: int = 1               # hypotheses returned, at most beam_size
    length_penalty: float = 1.0   # final score = log P / (length ** length_penalty); 0: raw log P
    max_length_ratio: float = 1.5  # target pieces at most ratio * source pieces + max_length_extra
    max_length_extra: int = 10

    def validate(self, max_beam: int = 64) -> "SearchOptions":
        if not 1 <= self.beam_size <= max_beam:
            raise InvalidInput(f"beam_size must be between 1 and {max_beam}, got {self.beam_size}")
        if not 1 <= self.n_best <= self.beam_size:
            raise InvalidInput(f"n_best must be between 1 and beam_size ({self.beam_size}), got {self.n_best}")
        if not 0.0 <= self.length_penalty <= 5.0:
            raise InvalidInput(f"length_penalty must be between 0 and 5, got {self.length_penalty}")
        if not 0.0 < self.max_length_ratio <= 10.0:
            raise InvalidInput(f"max_length_ratio must be in (0, 10], got {self.max_length_ratio}")
        if not 0 <= self.max_length_extra <= 1000:
            raise InvalidInput(f"max_length_extra must be between 0 and 1000, got {self.max_length_extra}")
        return self


@dataclass
class Hypothesis:
    tokens: list[int]             # target ids, ending with </s> unless the length limit cut it
    token_log_probs: list[float]  # log p of each token in `tokens`
    alignment: np.ndarray         # α: len(tokens) x src_len (source incl. </s>), rows sum to 1
    log_prob: float               # Σ token_log_probs
    score: float                  # length-normalised log_prob, what n-best is sorted by


class _Node:
    """One step of a hypothesis: a back-pointer chain shared between beam rows."""
    __slots__ = ("token", "log_prob", "alpha", "parent", "length")

    def __init__(self, token: int, log_prob: float, alpha: np.ndarray, parent: "_Node | None"):
        self.token, self.log_prob, self.alpha, self.parent = token, log_prob, alpha, parent
        self.length = 1 if parent is None else parent.length + 1

    def unroll(self) -> tuple[list[int], list[float], list[np.ndarray]]:
        tokens, log_probs, alphas = [], [], []
        node: _Node | None = self
        while node is not None:
            tokens.append(node.token)
            log_probs.append(node.log_prob)
            alphas.append(node.alpha)
            node = node.parent
        return tokens[::-1], log_probs[::-1], alphas[::-1]


_ids = itertools.count()


@dataclass(eq=False)
class Search:
    """The search state of one sentence. `forced` (target ids) turns it into
    forced decoding: the given target is scored and aligned, not searched."""
    source: list[int]                       # source ids ending with </s>
    options: SearchOptions = field(default_factory=SearchOptions)
    forced: list[int] | None = None         # target ids ending with </s>
    tag: object = None                      # the caller's handle (the scheduler's request)
    id: int = field(default_factory=lambda: next(_ids))
    # Filled in by DecodeBatch:
    rows: list[_Node | None] = field(default_factory=lambda: [None])   # alive hypotheses; None = <s> only
    row_scores: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.float32))
    finished: list[Hypothesis] = field(default_factory=list)
    steps: int = 0
    done: bool = False
    slots: list[int] = field(default_factory=list)   # this sentence's rows in its DecodeBatch
    encoded: tuple | None = None                      # (annotations, keys, s_0) before joining

    @property
    def src_len(self) -> int:
        return len(self.source)

    @property
    def width(self) -> int:
        return len(self.rows)

    @property
    def max_length(self) -> int:
        if self.forced is not None:
            return len(self.forced)
        return max(1, int(self.options.max_length_ratio * (self.src_len - 1)) + self.options.max_length_extra)

    def _finish(self, node: _Node) -> None:
        tokens, log_probs, alphas = node.unroll()
        total = float(np.sum(log_probs, dtype=np.float64))
        score = total / (len(tokens) ** self.options.length_penalty) if self.options.length_penalty else total
        self.finished.append(Hypothesis(tokens, [float(x) for x in log_probs], np.stack(alphas), total, score))

    def advance_greedy(self, token: int, log_prob: float, alpha: np.ndarray, eos: int) -> None:
        """Beam size 1, the token already chosen by the batch's argmax: the same as
        `advance` with k = 1, without a per-sentence top-k."""
        self.steps += 1
        node = _Node(token, log_prob, alpha, self.rows[0])
        if token == eos or self.steps >= self.max_length:
            self._finish(node)
            self.rows, self.done = [], True
        else:
            self.rows = [node]

    def advance(self, log_probs: np.ndarray, alpha: np.ndarray, eos: int) -> tuple[np.ndarray, np.ndarray]:
        """Consume one step's output for this sentence's rows.
        log_probs: width x V, alpha: width x src_len.
        Returns (parent row of each surviving row, its next input token)."""
        self.steps += 1
        if self.forced is not None:
            token = self.forced[self.steps - 1]
            node = _Node(token, float(log_probs[0, token]), alpha[0], self.rows[0])
            if self.steps == len(self.forced):
                self._finish(node)
                self.rows, self.done = [], True
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            self.rows = [node]
            return np.zeros(1, dtype=np.int64), np.array([token], dtype=np.int64)

        width, vocab = log_probs.shape
        k = self.options.beam_size - len(self.finished)          # beam still open
        scores = (self.row_scores[:, None] + log_probs).reshape(-1)  # width*V
        if k < scores.size:
            best = np.argpartition(-scores, k - 1)[:k]
        else:
            best = np.arange(scores.size)
        best = best[np.lexsort((best, -scores[best]))]            # by score, ties by index: deterministic
        last_step = self.steps >= self.max_length
        parents, tokens, rows, row_scores = [], [], [], []
        for flat in best:
            parent, token = divmod(int(flat), vocab)
            node = _Node(token, float(log_probs[parent, token]), alpha[parent], self.rows[parent])
            if token == eos or last_step:
                self._finish(node)
            else:
                parents.append(parent)
                tokens.append(token)
                rows.append(node)
                row_scores.append(scores[flat])
        self.rows = rows
        self.row_scores = np.array(row_scores, dtype=np.float32)
        if not rows:
            self.done = True
            self.finished.sort(key=lambda h: -h.score)
        return np.array(parents, dtype=np.int64), np.array(tokens, dtype=np.int64)

    def best(self) -> list[Hypothesis]:
        """The n-best hypotheses, best first."""
        return self.finished[:self.options.n_best]


class DecodeBatch:
    """Rows of many sentences decoded together, one engine step at a time.

    Sentences join with `add` and leave when done (or by `remove`) at step
    boundaries. Rows live in preallocated slot arrays: a leaving row is filled by
    moving the last live row into its slot, so the attention memory of the
    rows that stay is never copied (a full rebuild would copy every row's
    annotations at nearly every step once sentences finish at different times).
    Greedy rows pick their token with one vectorised argmax over the batch.
    """

    def __init__(self, engine: Engine, capacity: int = 64):
        self.engine = engine
        self.searches: list[Search] = []
        self.n = 0                                   # live rows: slots [0, n)
        self._owner: list[tuple[Search, int]] = []   # slot -> (search, index in search.slots)
        self._cap_rows, self._cap_len = 0, 0
        self._annotations = self._keys = self._mask = None
        self._state = self._prev = None
        self._capacity_hint = capacity
        self._version = 0                            # bumped whenever the attention memory changes
        self._device_memory: tuple | None = None     # (version, rows, OrtValues) with IO binding

    def __len__(self) -> int:
        return len(self.searches)

    @property
    def rows(self) -> int:
        return self.n

    # --- slot storage -----------------------------------------------------

    def _reserve(self, rows: int, src_len: int) -> None:
        """Grow (or, when mostly padding, shrink) the slot arrays to hold `rows` x `src_len`."""
        live_len = max([s.src_len for s in self.searches] + [src_len])
        grow = rows > self._cap_rows or live_len > self._cap_len
        shrink = self._cap_len > 16 and live_len <= self._cap_len // 2
        if not (grow or shrink) and self._annotations is not None:
            return
        cap_rows = max(rows, self._cap_rows, self._capacity_hint)
        if rows > self._cap_rows and self._cap_rows:
            cap_rows = max(rows, 2 * self._cap_rows)
        if live_len > self._cap_len:      # grow with headroom: each reallocation copies every row
            cap_len = max(live_len, self._cap_len * 5 // 4)
        elif shrink:
            cap_len = live_len
        else:
            cap_len = self._cap_len
        cap_len = (cap_len + 7) // 8 * 8
        a_dim, k_dim, d = self._widths
        annotations = np.zeros((cap_rows, cap_len, a_dim), dtype=np.float32)    # rows x S x 2n
        keys = np.zeros((cap_rows, cap_len, k_dim), dtype=np.float32)           # rows x S x K
        mask = np.zeros((cap_rows, cap_len), dtype=bool)                        # rows x S
        state = np.zeros((cap_rows, d), dtype=np.float32)                       # rows x d
        prev = np.zeros(cap_rows, dtype=np.int64)                               # rows
        if self._annotations is not None and self.n:
            keep = min(cap_len, self._cap_len)
            annotations[:self.n, :keep] = self._annotations[:self.n, :keep]
            keys[:self.n, :keep] = self._keys[:self.n, :keep]
            mask[:self.n, :keep] = self._mask[:self.n, :keep]
            state[:self.n] = self._state[:self.n]
            prev[:self.n] = self._prev[:self.n]
        self._annotations, self._keys, self._mask, self._state, self._prev = annotations, keys, mask, state, prev
        self._cap_rows, self._cap_len = cap_rows, cap_len
        self._version += 1

    def _append_rows(self, search: Search, count: int) -> list[int]:
        slots = list(range(self.n, self.n + count))
        for slot in slots:
            self._owner.append((search, 0))
        self.n += count
        return slots

    def _free(self, slots: list[int]) -> None:
        """Release slots; live rows from the end move into the holes."""
        if not slots:
            return
        freed = set(slots)
        new_n = self.n - len(freed)
        holes = sorted(f for f in freed if f < new_n)
        movers = [r for r in range(new_n, self.n) if r not in freed]
        if holes:
            h, m = np.array(holes), np.array(movers)
            for array in (self._annotations, self._keys, self._mask, self._state, self._prev):
                array[h] = array[m]
            self._version += 1
            for hole, mover in zip(holes, movers):
                search, index = self._owner[mover]
                search.slots[index] = hole
                self._owner[hole] = (search, index)
        del self._owner[new_n:]
        self.n = new_n

    def _set_slots(self, search: Search, slots: list[int]) -> None:
        search.slots = slots
        for index, slot in enumerate(slots):
            self._owner[slot] = (search, index)

    # --- joining and leaving ---------------------------------------------------

    def encode(self, searches: list[Search]) -> None:
        """Encode sentences (one encoder call) ahead of joining; `add` skips them then."""
        todo = [s for s in searches if s.encoded is None]
        if not todo:
            return
        encoded = self.engine.encode([s.source for s in todo])
        for row, search in enumerate(todo):
            n = search.src_len
            search.encoded = (encoded.annotations[row, :n], encoded.keys[row, :n], encoded.init_state[row])

    def add(self, searches: list[Search]) -> None:
        """Let sentences join at the next step (encoding those not encoded yet)."""
        if not searches:
            return
        self.encode(searches)
        annotations, keys, state = searches[0].encoded
        self._widths = (annotations.shape[-1], keys.shape[-1], state.shape[-1])
        self._reserve(self.n + len(searches), max(s.src_len for s in searches))
        self.searches.extend(searches)
        self._version += 1
        for search in searches:
            (slot,) = self._append_rows(search, 1)
            self._set_slots(search, [slot])
            n = search.src_len
            annotations, keys, state = search.encoded
            search.encoded = None                    # the slot holds it now
            self._annotations[slot, :n] = annotations
            self._annotations[slot, n:] = 0
            self._keys[slot, :n] = keys
            self._keys[slot, n:] = 0
            self._mask[slot] = False
            self._mask[slot, :n] = True
            self._state[slot] = state
            self._prev[slot] = self.engine.bos_id

    def remove(self, search: Search) -> None:
        """Drop a sentence before the next step (cancelled or expired)."""
        self.searches.remove(search)
        self._free(list(search.slots))
        search.slots = []

    # --- one step ------------------------------------------------------------

    def step(self) -> list[Search]:
        """Run one decoder step for every row; return the sentences that finished."""
        if not self.searches:
            return []
        n, eos = self.n, self.engine.eos_id
        memory = None
        if self.engine.io_binding:
            if self._device_memory is None or self._device_memory[:2] != (self._version, n):
                values = self.engine.upload_memory(self._annotations[:n], self._keys[:n], self._mask[:n])
                self._device_memory = (self._version, n, values)
            memory = self._device_memory[2]
        log_probs, new_state, alpha = self.engine.step(
            self._prev[:n], self._state[:n], self._annotations[:n], self._keys[:n], self._mask[:n], memory)
        greedy_tokens = log_probs.argmax(axis=1)                           # rows: the greedy choice
        freed: list[int] = []
        finished, alive = [], []
        state, prev = self._state, self._prev
        state[:n] = new_state
        for search in self.searches:
            slots = search.slots
            if search.forced is None and search.options.beam_size == 1:
                slot = slots[0]
                token = int(greedy_tokens[slot])
                search.advance_greedy(token, float(log_probs[slot, token]), alpha[slot, :search.src_len], eos)
                if not search.done:
                    prev[slot] = token
            else:
                rows = np.array(slots)
                parents, tokens = search.advance(log_probs[rows], alpha[rows, :search.src_len], eos)
                width = len(tokens)
                if width > len(slots):                                     # the beam opens: new rows
                    extra = width - len(slots)
                    self._reserve(self.n + extra, 0)
                    state, prev = self._state, self._prev
                    new_slots = self._append_rows(search, extra)
                    for array in (self._annotations, self._keys, self._mask):
                        array[new_slots] = array[slots[0]]
                    self._version += 1
                    slots = slots + new_slots
                if width:
                    state[slots[:width]] = new_state[rows[parents]]
                    prev[slots[:width]] = tokens
                freed += slots[width:]
                self._set_slots(search, slots[:width])
            if search.done:
                finished.append(search)
                freed += search.slots
                search.slots = []
            else:
                alive.append(search)
        self.searches = alive
        self._free(freed)
        return finished


def decode_all(engine: Engine, searches: list[Search], max_rows: int = 64) -> list[Search]:
    """Offline decoding of a list of searches, at most `max_rows` rows at a time,
    longest sources first (the memory is sized once, then only shrinks); new
    sentences join as others finish."""
    pending = sorted(searches, key=lambda s: s.src_len)   # pop() takes the longest
    batch = DecodeBatch(engine)
    while pending or len(batch):
        joining = []
        rows = batch.rows
        while pending and rows + pending[-1].options.beam_size <= max_rows or (pending and not len(batch) and not joining):
            search = pending.pop()
            joining.append(search)
            rows += search.options.beam_size
        if joining and joining[0].encoded is None:
            # Encode a batch's worth ahead: sentences join a few at a time as others
            # finish, and one encoder call per joiner would cost more than the steps.
            batch.encode(joining + pending[-max_rows:])
        batch.add(joining)
        batch.step()
    return searches
