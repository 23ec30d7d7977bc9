"""Decoding over the step graph: greedy, beam and forced, batched over many
sentences of different lengths that may join and leave at any step.

`DecodeBatch` is the unit both callers drive: `attnmt translate` adds a whole
file's sentences and steps until it is empty; the server's decode worker adds
sentences at step boundaries as requests arrive (iteration-level batching) and
hands each one back the step it finishes.

A step costs one ONNX Runtime call and a few numpy operations over all rows:
greedy and forced rows take the graph's first choice (or their forced token)
in one vectorised assignment, beam sentences are merged together by
`search.select_beams`, and histories live in row slots (`slots.Rows`), so a
finished hypothesis is a slice. The only Python loops are over sentences that
finish and over beam sentences when their rows are reassigned.

Beam size 1 is greedy search. When every sentence has one row, rows and
memory slots coincide and `decoder_step` reads the memory as it is. Beam rows
of one sentence share its attention memory: on the host each row reads a copy
kept across steps (`slots.RowMemory`); on the device path (`device.py`, the
default on CUDA) the memory and the state stay on the device and
`decoder_step_shared` gathers the memory through a row -> sentence index.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from attnmt.service.inference.device import DeviceSlots
from attnmt.service.inference.engine import Engine
from attnmt.service.errors import InvalidInput
from attnmt.service.inference.beam import select_beams
from attnmt.service.inference.shortlist import union_bias
from attnmt.service.inference.slots import Memory, RowMemory, Rows

GREEDY, FORCED, BEAM = 0, 1, 2
# The shortlist graph runs while the batch's candidate sets add up to at most this share of the
# vocabulary (one or two sentences): measured on 2 cores, the union of 64 Bible verses covers
# 40-50 % of the vocabulary and is slower than the full output layer; one sentence's ~11 % is faster.
UNION_SHARE = 0.25


# The encoder's cost, measured on 2 cores (bundled model): about one call overhead per call
# plus a constant per padded source piece (every row runs to the longest), the overhead worth
# about this many padded pieces.
ENCODER_CALL_PIECES = 48
ENCODER_MAX_ROWS = 64


def encoder_chunks(lengths: list[int]) -> list[slice]:
    """Split sentences sorted longest first into encoder calls of consecutive sentences
    that minimise ENCODER_CALL_PIECES per call plus the padded pieces (rows x longest),
    at most ENCODER_MAX_ROWS a call. Exact, by dynamic programming over the split points
    (a few thousand additions for 128 sentences): one call over a file's first 128
    verses padded 46 % of its pieces, the long tail against the rest."""
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


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 1            # 1: greedy
    n_best: int = 1               # hypotheses returned, at most beam_size
    length_penalty: float = 1.0   # final score = log P / (length ** length_penalty); 0: raw log P
    max_length_ratio: float = 1.5  # target pieces at most ratio * source pieces + max_length_extra
    max_length_extra: int = 10
    max_target_tokens: int = 512  # a hard cap whatever ratio and extra say (the server's setting)

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


_ids = itertools.count()


@dataclass(eq=False)
class Search:
    """One sentence to decode. `forced` (target ids) turns it into forced
    decoding: the given target is scored and aligned, not searched."""
    source: list[int]                       # source ids ending with </s>
    options: SearchOptions = field(default_factory=SearchOptions)
    forced: list[int] | None = None         # target ids ending with </s>
    id: int = field(default_factory=lambda: next(_ids))
    protected: tuple[str, ...] = ()         # placeholders hidden behind sentinels (protect.py), for the translator
    candidates: np.ndarray | None = None    # sorted target ids it may produce (lexical shortlist); None: all
    finished: list[Hypothesis] = field(default_factory=list)
    steps: int = 0
    done: bool = False
    # Filled in by DecodeBatch:
    slot: int = -1                          # memory slot
    rows: list[int] = field(default_factory=list)   # live hypothesis rows
    encoded: tuple | None = None            # (annotations, keys, init_state) before joining

    @property
    def src_len(self) -> int:
        return len(self.source)

    @cached_property
    def kind(self) -> int:          # read for every sentence at every step
        if self.forced is not None:
            return FORCED
        return GREEDY if self.options.beam_size == 1 else BEAM

    @cached_property
    def max_length(self) -> int:
        if self.forced is not None:
            return len(self.forced)
        wanted = int(self.options.max_length_ratio * (self.src_len - 1)) + self.options.max_length_extra
        return max(1, min(wanted, self.options.max_target_tokens))

    def finish(self, tokens: np.ndarray, log_probs: np.ndarray, alignment: np.ndarray) -> None:
        total = float(np.sum(log_probs, dtype=np.float64))
        n = len(tokens)
        score = total / (n ** self.options.length_penalty) if self.options.length_penalty else total
        self.finished.append(Hypothesis(tokens.tolist(), log_probs.tolist(), alignment, total, score))

    def restart(self) -> None:
        """Forget all progress, to decode again from the first step."""
        self.finished, self.steps, self.done = [], 0, False
        self.slot, self.rows, self.encoded = -1, [], None

    def best(self) -> list[Hypothesis]:
        """The n-best hypotheses, best first."""
        return self.finished[:self.options.n_best]


class DecodeBatch:
    """Rows of many sentences decoded together, one engine step at a time.

    Sentences join with `add` and leave when done (or by `remove`) at step
    boundaries.
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.searches: list[Search] = []
        self.memory: Memory | None = None
        self.rows: Rows | None = None
        self._owner: list[Search | None] = []     # row -> its sentence
        self._device = DeviceSlots(engine) if engine.io_binding else None   # the device path's buffers
        self._row_memory = RowMemory()            # beam rows' memory, off the device path
        self._kinds: tuple | None = None          # _by_kind's answer until sentences join or leave
        self._choice: tuple | None = None         # (memory version, candidates, bias per memory slot)
        self._masks: dict[int, np.ndarray] = {}   # search id -> its shortlist as a bias over the vocabulary

    def __len__(self) -> int:
        return len(self.searches)

    @property
    def n_rows(self) -> int:
        return self.rows.n if self.rows else 0

    @property
    def longest(self) -> int:
        return max((s.src_len for s in self.searches), default=0)

    # --- joining and leaving ---------------------------------------------------

    def encode(self, searches: list[Search]) -> None:
        """Encode sentences ahead of joining (`add` skips them then), in as few encoder
        calls as pay: sentences of similar length together (`encoder_chunks`). On the
        device path `add` encodes (the encoder's output goes straight to the device)."""
        if self._device is not None:
            return
        todo = sorted((s for s in searches if s.encoded is None), key=lambda s: -s.src_len)
        for chunk in encoder_chunks([s.src_len for s in todo]):
            group = todo[chunk]
            encoded = self.engine.encode([s.source for s in group])
            for i, search in enumerate(group):
                n = search.src_len
                state = {name: value[i] for name, value in encoded.init_state.items()}
                search.encoded = (encoded.annotations[i, :n], encoded.keys[i, :n], state)

    def add(self, searches: list[Search]) -> None:
        """Let sentences join at the next step (encoding those not encoded yet)."""
        if not searches:
            return
        joining = self._joining(searches)
        if self.memory is None:
            annotations, keys, state, _ = joining[0]
            self.memory = Memory(annotations.shape[-1], keys.shape[-1])
            self.rows = Rows({name: value.shape for name, value in state.items()})
        memory, rows = self.memory, self.rows
        memory.reserve(memory.n + len(searches), max(s.src_len for s in searches))
        rows.reserve(rows.n + len(searches), max(s.max_length for s in searches) + 1, memory.length)
        for search, (annotations, keys, state, origin) in zip(searches, joining):
            search.encoded = None                      # the slot holds it now
            search.slot = memory.add(annotations, keys, origin)
            (row,) = rows.add(1)
            rows.origin[row] = origin
            rows.put_state(row, state)
            rows.prev[row], rows.slot[row], rows.score[row], rows.steps[row] = self.engine.bos_id, search.slot, 0, 0
            rows.kind[row], rows.limit[row] = search.kind, search.max_length
            search.rows = [int(row)]
            self._set_owner(row, search)
        self.searches.extend(searches)
        self._kinds = None

    def _joining(self, searches: list[Search]) -> list[tuple]:
        """What each joining sentence brings to its slots: (annotations, keys, initial state,
        origin). On the device path its numbers stay on the device and the host gets
        src_len x 0 arrays, no state, and where on the device they are (`device.py`)."""
        if self._device is None:
            self.encode(searches)
            return [(*s.encoded, 0) for s in searches]
        first = self._device.encode([s.source for s in searches])
        return [(np.zeros((s.src_len, 0), np.float32),) * 2 + ({}, -1 - (first + j)) for j, s in enumerate(searches)]

    def remove(self, search: Search) -> None:
        """Drop a sentence before the next step (cancelled or expired)."""
        self.searches.remove(search)
        self._kinds = None
        self._release([search])

    def _set_owner(self, row: int, search: Search | None) -> None:
        while len(self._owner) <= row:
            self._owner.append(None)
        self._owner[row] = search

    def _free_rows(self, freed: list[int]) -> None:
        """Release rows; the rows that move into the holes tell their sentences."""
        for old, new in self.rows.free(freed).items():
            search = self._owner[old]
            search.rows[search.rows.index(old)] = new
            self._owner[new] = search
        del self._owner[self.rows.n:]

    def _release(self, gone: list[Search]) -> None:
        """Free the rows and memory slots of sentences that left."""
        if not gone:
            return
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

    # --- one step ------------------------------------------------------------

    def _memory(self) -> tuple:
        return self.memory.view() if self._device is None else self._device.step_memory(self.memory)

    def _vocabulary(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(candidates, vocab_bias per memory slot) for this batch's sentences; recomputed only
        when sentences join or leave. A shortlisted sentence's rows are confined to its own
        candidates whichever graph runs (service/inference/shortlist.py), so its output never depends on
        its batch-mates: the shortlist graph over the union while the union is small, else the
        full graph with each row masked (the union of many sentences covers much of the
        vocabulary, and gathering it costs more than it saves: docs/benchmarks.md)."""
        if self.engine.shortlist is None:          # shortlist off (the default): nothing to work out
            return None, None
        key = (self.memory.version, self.memory.n)
        if self._choice is not None and self._choice[0] == key:
            return self._choice[1], self._choice[2]
        by_slot = sorted(self.searches, key=lambda s: s.slot)
        listed = {s.id: s.candidates for s in by_slot if s.candidates is not None}
        candidates = bias = None
        small = sum(len(c) for c in listed.values()) <= UNION_SHARE * self.engine.vocab_size
        if len(listed) == len(by_slot) and small:
            candidates, bias = union_bias([s.candidates for s in by_slot])          # C, N x C
        if listed and candidates is None:
            for gone in self._masks.keys() - listed.keys():
                del self._masks[gone]
            for i, ids in listed.items():
                if i not in self._masks:
                    row = np.full(self.engine.vocab_size, -np.inf, dtype=np.float32)
                    row[ids] = 0.0
                    self._masks[i] = row
            default = self.engine.default_bias[0]
            bias = np.stack([self._masks.get(s.id, default) for s in by_slot])   # N x V
        self._choice = (key, candidates, bias)
        return candidates, bias

    def step(self, idle: bool = False) -> list[Search]:
        """Run one decoder step for every row; return the sentences that finished. idle: the
        machine has cores to spare (the server's worker decides; Engine.step(idle=))."""
        if not self.searches:
            return []
        rows, memory, engine = self.rows, self.memory, self.engine
        memory_index = None
        if rows.n == memory.n:          # one row per sentence: the direct graph, row r -> slot r
            if not np.array_equal(rows.slot[:rows.n], np.arange(rows.n)):
                self._align_rows_to_slots()
            step_memory = self._memory()
        elif self._device is not None:  # the memory stays on the device: the graph gathers it there
            memory_index = rows.slot[:rows.n].copy()
            step_memory = self._memory()
        else:                           # on the host: the rows' copies, kept across steps
            step_memory = engine.row_memory(self._row_memory, memory, rows.slot[:rows.n])
        R = rows.n
        kinds, limits = rows.kind[:R], rows.limit[:R]                      # R, R
        special, beams, forced, k = self._by_kind() if (kinds != GREEDY).any() else ((), (), (), 1)
        forced_next = np.zeros(R, dtype=np.int64)                          # R
        for s in forced:
            forced_next[s.rows[0]] = s.forced[s.steps]
        candidates, slot_bias = self._vocabulary()
        bias = None if slot_bias is None else slot_bias[rows.slot[:R]]   # R x C (or V)
        state = ({n: a[:R] for n, a in rows.state.items()} if self._device is None
                 else self._device.step_state(rows))
        out = engine.step(rows.prev[:R], state, step_memory, k, forced_next, memory_index, vocab_bias=bias,
                          candidates=candidates, idle=idle, positions=rows.steps[:R] if engine.positions else None)

        t = rows.steps[:R].copy()                                          # R: where this step writes
        S = out.alpha.shape[1]
        rows.reserve(R, int(t.max()) + 2, S)
        everyone = np.arange(R)
        rows.alpha[everyone, t, :S] = out.alpha                            # α belongs to the row that produced it
        if S < rows.length:
            rows.alpha[everyone, t, S:] = 0
        if self._device is None:
            rows.store_state(out.state, R)
        else:
            self._device.keep(out.state)

        finished: list[Search] = []
        for kind, present, tokens, log_probs in (
                (GREEDY, len(special) < len(self.searches), out.topk_ids[:, 0], out.topk_log_probs[:, 0]),
                (FORCED, bool(forced), forced_next, out.forced_log_probs)):
            if not present:
                continue
            chosen = np.flatnonzero(kinds == kind)
            tok, lp = tokens[chosen], log_probs[chosen]
            rows.tokens[chosen, t[chosen]] = tok
            rows.log_probs[chosen, t[chosen]] = lp
            rows.prev[chosen] = tok
            rows.score[chosen] += lp
            rows.steps[chosen] += 1
            ending = (rows.steps[chosen] >= limits[chosen]) | ((tok == engine.eos_id) & (kind == GREEDY))
            for row in chosen[ending]:
                search = self._owner[row]
                n = int(rows.steps[row])
                search.finish(rows.tokens[row, :n].copy(), rows.log_probs[row, :n].copy(),
                              rows.alpha[row, :n, :search.src_len].copy())
                search.done = True
                finished.append(search)
        for search in special:                     # greedy sentences count steps in rows.steps
            search.steps += 1
        if beams:
            finished += self._advance_beams(beams, out, t)
        if finished:
            done = {s.id for s in finished}
            self.searches = [s for s in self.searches if s.id not in done]
            self._kinds = None
            self._release(finished)
        return finished

    def _by_kind(self) -> tuple[list[Search], list[Search], list[Search], int]:
        """(beam and forced sentences, beam ones, forced ones, the largest beam): only these
        need a per-sentence look at each step; worked out again when sentences join or leave."""
        if self._kinds is None:
            special = [s for s in self.searches if s.kind != GREEDY]
            beams = [s for s in special if s.kind == BEAM]
            self._kinds = (special, beams, [s for s in special if s.kind == FORCED],
                           max((s.options.beam_size for s in beams), default=1))
        return self._kinds

    def _align_rows_to_slots(self) -> None:
        """After beam sentences left, put row i back on memory slot i (the direct graph's layout)."""
        order = np.argsort(self.rows.slot[:self.rows.n], kind="stable")
        self.rows.permute(order)
        for search in self.searches:
            search.rows = [search.slot]
            self._owner[search.slot] = search

    def _advance_beams(self, beams: list[Search], out, t: np.ndarray) -> list[Search]:
        rows, eos = self.rows, self.engine.eos_id
        width = max(len(s.rows) for s in beams)
        matrix = np.array([s.rows + [-1] * (width - len(s.rows)) for s in beams], dtype=np.int64)   # B x W
        sizes, open_places, last = np.array([(s.options.beam_size, s.options.beam_size - len(s.finished),
                                              s.steps >= s.max_length) for s in beams], dtype=np.int64).T
        last = last.astype(bool)
        choice = select_beams(matrix, rows.score, out.topk_ids, out.topk_log_probs, sizes, open_places, last, eos)

        finished: list[Search] = []
        for i, c in zip(*np.nonzero(choice.ends)):          # hypotheses that end here (few)
            search, p = beams[i], choice.parent[i, c]
            n = search.steps                                 # tokens including this step's
            tokens, log_probs = rows.tokens[p, :n].copy(), rows.log_probs[p, :n].copy()   # the parent's history
            tokens[-1], log_probs[-1] = choice.token[i, c], choice.log_prob[i, c]       # and this step's choice
            search.finish(tokens, log_probs, rows.alpha[p, :n, :search.src_len].copy())
        going = choice.keep & ~choice.ends                   # B x K: candidates that continue
        b, c = np.nonzero(going)                             # by sentence, best first
        parents = choice.parent[b, c]
        parent_list = parents.tolist()
        counts = going.sum(axis=1).tolist()
        # Rows belong to one sentence each, so a parent chosen twice is a sentence's own
        # (a parent with two children); a sentence without one that keeps its width keeps
        # its rows, each child in its parent's row (the usual step), with no _assign.
        shared = np.bincount(b[(np.bincount(parents, minlength=rows.n) > 1)[parents]], minlength=len(beams))
        dst: list[int] = []
        freed: list[int] = []
        start = 0
        for i, search in enumerate(beams):
            width, old = counts[i], search.rows
            if width == len(old) and not shared[i]:
                mine, spare = parent_list[start:start + width], ()
            else:
                if width > len(old):                         # the beam opens: new rows
                    rows.reserve(rows.n + width - len(old), rows.max_steps, rows.length)
                    new = rows.add(width - len(old)).tolist()
                    for r in new:
                        self._set_owner(r, search)
                    old = old + new
                mine, spare = self._assign(parent_list[start:start + width], old)
            start += width
            search.rows = mine
            freed += spare
            dst += mine
            if not width:
                search.done = True
                search.finished.sort(key=lambda h: -h.score)
                finished.append(search)
        if dst:
            d, s = np.array(dst), parents
            moved = d != s                                   # a child in its parent's own row copies nothing
            if moved.any():                                  # others take state and history
                lengths = np.array([search.src_len for search in beams])[b]
                rows.copy(d[moved], s[moved], t[s[moved]] + 1, lengths[moved])
            at = t[s]
            rows.tokens[d, at] = choice.token[b, c]
            rows.log_probs[d, at] = choice.log_prob[b, c]
            rows.prev[d] = choice.token[b, c]
            rows.score[d] = choice.score[b, c]
            rows.steps[d] = at + 1
        if freed:
            self._free_rows(freed)         # rows a narrowing beam gave up (no longer in search.rows)
        return finished

    @staticmethod
    def _assign(parents: list[int], rows: list[int]) -> tuple[list[int], list[int]]:
        """A row for each continuing candidate (in rank order), and the rows left over:
        the first child of a parent takes over the parent's own row (parents are always
        among the sentence's rows), so only the other children copy a history; they take
        the rows no candidate continues from, in order."""
        taken = set(parents)
        spare = [r for r in rows if r not in taken]
        if len(taken) == len(parents):      # every candidate extends a different row (the usual case)
            return parents, spare
        mine: list[int] = []
        seen: set[int] = set()
        free = iter(spare)
        for parent in parents:
            if parent in seen:
                mine.append(next(free))
            else:
                seen.add(parent)
                mine.append(parent)
        return mine, spare[len(parents) - len(taken):]


# Rows per step offline (`decode_all`), measured on 2 cores (docs/benchmarks.md): greedy is
# fastest at 64 (at 128, 0.88x as fast); beams at 96, where about 19 sentences instead of 13
# share each step's fixed costs (beam 5: 1.04x, its host-side share 0.111 -> 0.097; beam 8:
# 1.04x; beam 3: the same).
OFFLINE_ROWS, OFFLINE_BEAM_ROWS = 64, 96


def decode_all(engine: Engine, searches: list[Search], max_rows: int | None = None) -> list[Search]:
    """Offline decoding of a list of searches, at most `max_rows` rows at a time
    (default: OFFLINE_ROWS, OFFLINE_BEAM_ROWS with beams), longest sources first (the
    memory is sized once, then only shrinks); new sentences join as others finish."""
    if max_rows is None:
        max_rows = OFFLINE_BEAM_ROWS if any(s.kind == BEAM for s in searches) else OFFLINE_ROWS
    pending = sorted(searches, key=lambda s: s.src_len)   # pop() takes the longest
    batch = DecodeBatch(engine)
    while pending or len(batch):
        joining, rows = [], batch.n_rows
        while pending and (rows + pending[-1].options.beam_size <= max_rows or not (len(batch) or joining)):
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
