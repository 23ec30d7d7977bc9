"""The decode batch: rows of many sentences of different lengths decoded
together over the step graph, one engine step at a time, sentences joining and
leaving at step boundaries.

`DecodeBatch` is the unit both callers drive: `attnmt translate` adds a whole
file's sentences and steps until it is empty (`offline.py`); the server's decode
worker adds sentences at step boundaries as requests arrive (iteration-level
batching) and hands each one back the step it finishes.

A step costs one ONNX Runtime call and a few numpy operations over all rows:
greedy and forced rows take the graph's first choice (or their forced token)
in one vectorised assignment, beam sentences are advanced together by
`beam.advance_beams`, and histories live in row slots (`slots.Rows`), so a
finished hypothesis is a slice. The only Python loops are over sentences that
finish and over beam sentences when their rows are reassigned.

Beam size 1 is greedy search. The step's memory takes one of four paths:
- beams in a step of GROUPED_ROWS rows or more, on the CPU provider, with a Transformer
  exported with `decoder_step_grouped`: that graph reads the memory as it is, once per
  sentence, and each step is told which rows are whose (`manifest.sentence_groups`);
- every sentence has one row: rows and memory slots coincide and `decoder_step`
  reads the memory as it is;
- beams on the host: each row reads a copy of its sentence's memory kept across
  steps (`slots.RowMemory`), for the same graph;
- beams on the device path (`device.py`, the default on CUDA): the memory and the
  state stay on the device and `decoder_step_shared` gathers the memory through
  a row -> sentence index.
"""

from __future__ import annotations

import numpy as np

from attnmt.service.inference.beam import advance_beams
from attnmt.service.inference.device import DeviceSlots
from attnmt.service.inference.engine import Engine, StepOutput
from attnmt.service.inference.search import BEAM, FORCED, GREEDY, Search
from attnmt.service.inference.slots import Memory, RowMemory, Rows, StateBuffers, positions
from attnmt.service.inference.vocab_bias import VocabularyBias
from attnmt.service.modeldir.manifest import SRC_MASK, sentence_groups

# The encoder's cost: about one call overhead per call plus a constant per padded source
# piece (every row runs to the longest); the overhead is worth about this many padded pieces
# (a fit over 11 shapes, one thread: 1.3 ms a call, 110 µs a piece; AMD EPYC, 2026-11-29).
# The server at 64 clients spent 8.5 % less time encoding than with 48 (padding 1.19 -> 1.05).
ENCODER_CALL_PIECES = 12
ENCODER_MAX_ROWS = 64
# Steps of beams with at least this many rows take the grouped step where the engine has it.
# Its grouping costs nodes that a few rows feel and greedy rows do not need (one row at a
# time: 0.94x the append step's time; 5 beam rows 0.99x; 26 greedy rows 0.97x), and it pays
# where many rows read their sentences' memory (65 beam rows 1.02x, 320 rows 1.03x, and no
# copy of the memory per row on the host). AMD EPYC, one thread, docs/benchmarks.md.
GROUPED_ROWS = 32


def encoder_chunks(lengths: list[int]) -> list[slice]:
    """Split sentences sorted longest first into encoder calls of consecutive sentences
    that minimise ENCODER_CALL_PIECES per call plus the padded pieces (rows x longest),
    at most ENCODER_MAX_ROWS a call. Exact, by dynamic programming over the split points
    (a few thousand additions for 128 sentences); one call over all of them would pad
    the long tail to the longest."""
    n = len(lengths)
    best = [0] + [float("inf")] * n            # best[j]: cost of the first j sentences
    split = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - ENCODER_MAX_ROWS), j):
            cost = best[i] + ENCODER_CALL_PIECES + (j - i) * lengths[i]   # lengths[i]: the chunk's longest
            if cost < best[j]:
                best[j], split[j] = cost, i
    chunks, j = [], n
    while j:
        chunks.append(slice(split[j], j))
        j = split[j]
    return chunks[::-1]


class DecodeBatch:
    """Rows of many sentences decoded together, one engine step at a time.

    Sentences join with `add` and leave when done (or by `remove`) at step
    boundaries.
    """

    def __init__(self, engine: Engine, buffers: StateBuffers | None = None):
        """buffers: memory for the caches of an append step, reused from an earlier batch
        (`slots.StateBuffers`; offline decoding); default: the batch's own."""
        self.engine = engine
        self._buffers = buffers
        self.searches: list[Search] = []
        self.memory: Memory | None = None
        self.rows: Rows | None = None
        self._owner: list[Search | None] = []     # row -> its sentence
        self._device = DeviceSlots(engine) if engine.io_binding else None   # the device path's buffers
        self._appending = engine.append and self._device is None  # caches with room (slots.Rows.append_state)
        self._row_memory = RowMemory()            # beam rows' memory, off the device path
        self._kinds: tuple | None = None          # _by_kind's answer until sentences join or leave
        self._in_slot_order = False               # row r known to read memory slot r (until rows change)
        self._order = np.arange(0)                # 0, 1, 2, ...: row indices, kept between steps
        self._bias = VocabularyBias(engine.vocab_size, engine.default_bias)

    def __len__(self) -> int:
        return len(self.searches)

    @property
    def n_rows(self) -> int:
        return self.rows.n if self.rows else 0

    @property
    def longest(self) -> int:
        return max((s.src_len for s in self.searches), default=0)

    def cache_bytes(self) -> int:
        """Bytes the growing states (a Transformer's self-attention caches) take now: every row
        is as long as the longest live row (rows are aligned on the right), with an append step
        at most Rows.APPEND_ROOM positions more."""
        entry = self.engine.cache_entry_bytes
        return self.n_rows * (self.cache_length() + self._room()) * entry if entry else 0

    def cache_peak_bytes(self, rows: int, max_length: int) -> int:
        """A bound on the growing states' bytes if the batch had `rows` rows and a sentence of
        at most `max_length` target tokens joined: each row grows by one position a step, at
        most until the longest-lived sentence ends, and is as long as the longest row (with an
        append step, and its room)."""
        entry = self.engine.cache_entry_bytes
        if not entry:
            return 0
        live = self.n_rows
        steps = int(self.rows.steps[:live].max()) if live else 0
        longest_to_come = max([max_length] + [s.max_length for s in self.searches])
        return rows * (self.engine.cache_initial_length + steps + longest_to_come + self._room()) * entry

    def _room(self) -> int:
        """Positions of room an appending batch's caches may hold beyond those in use."""
        return Rows.APPEND_ROOM if self._appending else 0

    # --- joining and leaving ---------------------------------------------------

    def encode(self, searches: list[Search], idle: bool = False) -> None:
        """Encode sentences ahead of joining (`add` skips them then), in as few encoder
        calls as pay: sentences of similar length together (`encoder_chunks`). On the
        device path `add` encodes (the encoder's output goes straight to the device).
        idle: the machine has cores to spare (Engine.encode)."""
        if self._device is not None:
            return
        todo = sorted((s for s in searches if s.encoded is None), key=lambda s: -s.src_len)
        for chunk in encoder_chunks([s.src_len for s in todo]):
            group = todo[chunk]
            encoded = self.engine.encode([s.source for s in group], idle=idle)
            for i, search in enumerate(group):
                n = search.src_len
                memory = {name: value[i][positions(self.engine.position_axis(name), 0, n)]
                          for name, value in encoded.memory.items()}
                state = {name: value[i] for name, value in encoded.init_state.items()}
                search.encoded = (memory, state)

    def add(self, searches: list[Search], idle: bool = False) -> None:
        """Let sentences join at the next step (encoding those not encoded yet; idle: as in `encode`)."""
        if not searches:
            return
        joining = self._joining(searches, idle)
        if self.memory is None:
            values, state, _ = joining[0]
            axes = self.engine.position_axes
            beyond = {name: tuple(d for i, d in enumerate(value.shape) if i != axes.get(name, 1) - 1)
                      for name, value in values.items()}             # the shape beyond the source axis
            self.memory = Memory({name: (beyond[name], value.dtype) for name, value in values.items()}, axes)
            self.rows = Rows({name: value.shape for name, value in state.items()}, axes, self._buffers,
                             appending=self._appending)
        memory, rows = self.memory, self.rows
        memory.reserve(memory.n + len(searches), max(s.src_len for s in searches))
        rows.reserve(rows.n + len(searches), max(s.max_length for s in searches) + 1, memory.length)
        for search, (values, state, origin) in zip(searches, joining):
            search.encoded = None                      # the slot holds it now
            search.slot = memory.add(values, origin)
            (row,) = rows.add(1)
            rows.origin[row] = origin
            rows.put_state(row, state)
            rows.prev[row], rows.slot[row], rows.score[row], rows.steps[row] = self.engine.bos_id, search.slot, 0, 0
            rows.kind[row], rows.limit[row] = search.kind, search.max_length
            search.rows = [int(row)]
            self._set_owner(row, search)
        self.searches.extend(searches)
        self._kinds = None

    def _joining(self, searches: list[Search], idle: bool = False) -> list[tuple]:
        """What each joining sentence brings to its slots: (memory by name, initial state,
        origin). On the device path its numbers stay on the device and the host gets
        only its source mask, no state, and where on the device they are (`device.py`)."""
        if self._device is None:
            self.encode(searches, idle)
            return [(*s.encoded, 0) for s in searches]
        first = self._device.encode([s.source for s in searches])
        return [({SRC_MASK: np.ones(s.src_len, bool)}, {}, -1 - (first + j)) for j, s in enumerate(searches)]

    def remove(self, search: Search) -> None:
        """Drop a sentence before the next step (cancelled or expired)."""
        self.searches.remove(search)
        self._kinds = None
        self._release([search])

    def _leave(self, finished: list[Search]) -> None:
        done = {s.id for s in finished}
        self.searches = [s for s in self.searches if s.id not in done]
        self._kinds = None
        self._release(finished)

    def _set_owner(self, row: int, search: Search | None) -> None:
        self._in_slot_order = False
        while len(self._owner) <= row:
            self._owner.append(None)
        self._owner[row] = search

    def _free_rows(self, freed: list[int]) -> None:
        """Release rows; the rows that move into the holes tell their sentences."""
        self._in_slot_order = False
        for old, new in self.rows.free(freed).items():
            search = self._owner[old]
            search.rows[search.rows.index(old)] = new
            self._owner[new] = search
        del self._owner[self.rows.n:]

    def _release(self, gone: list[Search]) -> None:
        """Free the rows and memory slots of sentences that left."""
        if not gone:
            return
        self._in_slot_order = False
        self._free_rows([r for s in gone for r in s.rows])
        moved = self.memory.free([s.slot for s in gone])
        if moved:
            by_slot = {s.slot: s for s in self.searches}
            for old, new in moved.items():
                search = by_slot[old]
                search.slot = new
                self.rows.slot[search.rows] = new
        for s in gone:
            s.rows, s.slot = [], -1
        self.memory.shrink(self.longest)
        if self.engine.cache_entry_bytes and self._device is None:     # the device path cuts in its gather
            self.rows.trim_states(self.cache_length())

    def cache_length(self) -> int:
        """Positions the live rows' growing states need: the oldest row's (aligned on the right)."""
        live = self.rows.n
        return self.engine.cache_initial_length + int(self.rows.steps[:live].max()) if live else 0

    # --- one step ------------------------------------------------------------

    def step(self, idle: bool = False) -> list[Search]:
        """Run one decoder step for every row; return the sentences that finished. idle: the
        machine has cores to spare (the server's worker decides; Engine.step(idle=))."""
        if not self.searches:
            return []
        step_memory, memory_index, groups = self._step_memory()      # may put rows back in slot order
        R = self.rows.n
        special, beams, forced, k = self._by_kind()
        forced_next = np.zeros(R, dtype=np.int64)                          # R: forced rows' next token
        for s in forced:
            forced_next[s.rows[0]] = s.forced[s.steps]
        out = self._run(step_memory, memory_index, groups, k, forced_next, idle)
        t = self._keep_alpha_and_state(out)                                # R: where this step wrote

        finished: list[Search] = []
        if len(special) < len(self.searches):
            finished += self._advance_one_token(GREEDY, out.topk_ids[:, 0], out.topk_log_probs[:, 0], t,
                                                every_row=not special)
        if forced:
            finished += self._advance_one_token(FORCED, forced_next, out.forced_log_probs, t)
        for search in special:                     # greedy sentences count steps in rows.steps
            search.steps += 1
        if beams:
            finished += self._advance_beams(beams, out, t)
        if finished:
            self._leave(finished)
        return finished

    def _step_memory(self) -> tuple[dict, np.ndarray | None, tuple[np.ndarray, np.ndarray] | None]:
        """The step's memory feeds, the row -> memory slot index where the graph gathers it
        (None: row r reads memory row r) and the grouped step's groups (None: not that graph).
        One of the four paths in the module docstring."""
        rows, memory = self.rows, self.memory
        if self.engine.grouped and memory.n < rows.n >= GROUPED_ROWS:   # the memory as it is, rows grouped
            return self._memory(), None, sentence_groups(rows.slot[:rows.n], memory.n)
        if rows.n == memory.n:          # one row per sentence: the direct graph, row r -> slot r
            if not self._in_slot_order:     # checked again only once rows joined, left or moved
                if (rows.slot[:rows.n] != self._arange(rows.n)).any():
                    self._align_rows_to_slots()
                self._in_slot_order = True
            return self._memory(), None, None
        if self._device is not None:    # the memory stays on the device: the graph gathers it there
            memory_index = rows.slot[:rows.n].copy()
            return self._memory(), memory_index, None
        # on the host: the rows' copies, kept across steps
        return self.engine.row_memory(self._row_memory, memory, rows.slot[:rows.n]), None, None

    def _memory(self) -> dict:
        return self.memory.view() if self._device is None else self._device.step_memory(self.memory)

    def _arange(self, n: int) -> np.ndarray:
        """np.arange(n), from an array kept between steps."""
        if len(self._order) < n:
            self._order = np.arange(max(n, 2 * len(self._order)))
        return self._order[:n]

    def _align_rows_to_slots(self) -> None:
        """After beam sentences left, put row i back on memory slot i (the direct graph's layout)."""
        order = np.argsort(self.rows.slot[:self.rows.n], kind="stable")
        self.rows.permute(order)
        for search in self.searches:
            search.rows = [search.slot]
            self._owner[search.slot] = search

    def _by_kind(self) -> tuple[list[Search], list[Search], list[Search], int]:
        """(beam and forced sentences, beam ones, forced ones, the largest beam): only these
        need a per-sentence look at each step; worked out again when sentences join or leave."""
        if self._kinds is None:
            special = [s for s in self.searches if s.kind != GREEDY]
            beams = [s for s in special if s.kind == BEAM]
            self._kinds = (special, beams, [s for s in special if s.kind == FORCED],
                           max((s.options.beam_size for s in beams), default=1))
        return self._kinds

    def _vocabulary(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(candidates, vocab_bias per memory slot): (None, None) with the shortlist off (the
        default), else `vocab_bias.VocabularyBias`'s answer."""
        if self.engine.shortlist is None:
            return None, None
        return self._bias.per_slot(self.searches, self.memory)

    def _run(self, step_memory: dict, memory_index: np.ndarray | None, groups: tuple | None, k: int,
             forced_next: np.ndarray, idle: bool) -> StepOutput:
        """The engine's step over all R rows, each returning its k best tokens."""
        rows, engine = self.rows, self.engine
        R = rows.n
        candidates, slot_bias = self._vocabulary()
        bias = None if slot_bias is None else slot_bias[rows.slot[:R]]   # R x C (or V)
        state = ({n: a[:R] for n, a in rows.state.items()} if self._device is None
                 else self._device.step_state(rows, self.cache_length))
        return engine.step(rows.prev[:R], state, step_memory, k, forced_next, memory_index, vocab_bias=bias,
                           candidates=candidates, idle=idle, positions=rows.steps[:R] if engine.positions else None,
                           cache_length=rows.cache_len if rows.appending else None, groups=groups)

    def _keep_alpha_and_state(self, out: StepOutput) -> np.ndarray:
        """Write each row's α into its history and keep the new state; returns t (R), the
        history position this step wrote for each row."""
        rows = self.rows
        R = rows.n
        t = rows.steps[:R].copy()                                          # R
        S = out.alpha.shape[1]
        rows.reserve(R, int(t.max()) + 2, S)
        everyone = self._arange(R)
        rows.alpha[everyone, t, :S] = out.alpha                            # α belongs to the row that produced it
        if S < rows.length:
            rows.alpha[everyone, t, S:] = 0
        if rows.appending:
            rows.append_state(out.state, R)
        elif self._device is None:
            rows.store_state(out.state, R)
        else:
            self._device.keep(out.state)
        return t

    def _advance_one_token(self, kind: int, tokens: np.ndarray, log_probs: np.ndarray,
                           t: np.ndarray, every_row: bool = False) -> list[Search]:
        """Rows of one `kind` that take a single token each (greedy: the graph's first choice;
        forced: the given one), in one vectorised assignment; returns the sentences that end:
        at their length limit, or greedy ones at </s>. every_row: all rows are of `kind` (the
        usual greedy step), so the per-row fields are updated through slices, not a selection."""
        rows = self.rows
        if every_row:
            R = rows.n
            chosen, tok, lp, taken = self._arange(R), tokens, log_probs, slice(0, R)
            rows.tokens[chosen, t] = tok
            rows.log_probs[chosen, t] = lp
        else:
            chosen = taken = np.flatnonzero(rows.kind[:rows.n] == kind)
            tok, lp = tokens[chosen], log_probs[chosen]
            rows.tokens[chosen, t[chosen]] = tok
            rows.log_probs[chosen, t[chosen]] = lp
        rows.prev[taken] = tok
        rows.score[taken] += lp
        rows.steps[taken] += 1
        ending = (rows.steps[taken] >= rows.limit[taken]) | ((tok == self.engine.eos_id) & (kind == GREEDY))
        finished = []
        for row in chosen[ending]:
            search = self._owner[row]
            n = int(rows.steps[row])
            search.finish(rows.tokens[row, :n].copy(), rows.log_probs[row, :n].copy(),
                          rows.alpha[row, :n, :search.src_len].copy())
            search.done = True
            finished.append(search)
        return finished

    def _advance_beams(self, beams: list[Search], out: StepOutput, t: np.ndarray) -> list[Search]:
        step = advance_beams(self.rows, beams, out.topk_ids, out.topk_log_probs, t, self.engine.eos_id)
        for row, search in step.opened:
            self._set_owner(row, search)
        if step.freed:
            self._free_rows(step.freed)
        return step.finished
