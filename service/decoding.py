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
    boundaries; the attention memory is rebuilt only when the set of rows changes."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.searches: list[Search] = []
        self._memory: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # search id -> (annotations, keys) S x ...
        self._state = np.zeros((0, 0), dtype=np.float32)              # rows x d
        self._prev = np.zeros(0, dtype=np.int64)                      # rows
        self._layout: tuple | None = None
        self._annotations = self._keys = self._mask = None

    def __len__(self) -> int:
        return len(self.searches)

    @property
    def rows(self) -> int:
        return sum(s.width for s in self.searches)

    def add(self, searches: list[Search]) -> None:
        """Encode new sentences (one encoder call) and let them join at the next step."""
        if not searches:
            return
        encoded = self.engine.encode([s.source for s in searches])
        states = [self._state] if self.searches else []
        prevs = [self._prev] if self.searches else []
        for row, search in enumerate(searches):
            n = search.src_len
            self._memory[search.id] = (encoded.annotations[row, :n], encoded.keys[row, :n])
            states.append(encoded.init_state[row:row + 1])
            prevs.append(np.array([self.engine.bos_id], dtype=np.int64))
        self._state = np.concatenate(states)
        self._prev = np.concatenate(prevs)
        self.searches.extend(searches)

    def remove(self, search: Search) -> None:
        """Drop a sentence before the next step (cancelled or expired)."""
        index = self.searches.index(search)
        start = sum(s.width for s in self.searches[:index])
        keep = np.r_[0:start, start + search.width:len(self._prev)]
        self._state, self._prev = self._state[keep], self._prev[keep]
        self.searches.pop(index)
        self._memory.pop(search.id, None)

    def _memory_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        layout = tuple((s.id, s.width) for s in self.searches)
        if layout != self._layout:
            rows = sum(w for _, w in layout)
            src_len = max(s.src_len for s in self.searches)
            first = next(iter(self._memory.values()))
            annotations = np.zeros((rows, src_len, first[0].shape[-1]), dtype=np.float32)  # rows x S x 2n
            keys = np.zeros((rows, src_len, first[1].shape[-1]), dtype=np.float32)         # rows x S x K
            mask = np.zeros((rows, src_len), dtype=bool)                                     # rows x S
            offset = 0
            for search in self.searches:
                a, k = self._memory[search.id]
                n, w = search.src_len, search.width
                annotations[offset:offset + w, :n] = a
                keys[offset:offset + w, :n] = k
                mask[offset:offset + w, :n] = True
                offset += w
            self._layout, self._annotations, self._keys, self._mask = layout, annotations, keys, mask
        return self._annotations, self._keys, self._mask

    def step(self) -> list[Search]:
        """Run one decoder step for every row; return the sentences that finished."""
        if not self.searches:
            return []
        annotations, keys, mask = self._memory_arrays()
        log_probs, new_state, alpha = self.engine.step(self._prev, self._state, annotations, keys, mask)
        states, prevs, finished, alive = [], [], [], []
        offset = 0
        for search in self.searches:
            w = search.width
            parents, tokens = search.advance(log_probs[offset:offset + w], alpha[offset:offset + w, :search.src_len],
                                             self.engine.eos_id)
            if search.done:
                finished.append(search)
                self._memory.pop(search.id, None)
            else:
                states.append(new_state[offset + parents])
                prevs.append(tokens)
                alive.append(search)
            offset += w
        self.searches = alive
        d = new_state.shape[-1]
        self._state = np.concatenate(states) if states else np.zeros((0, d), dtype=np.float32)
        self._prev = np.concatenate(prevs) if prevs else np.zeros(0, dtype=np.int64)
        return finished


def decode_all(engine: Engine, searches: list[Search], max_rows: int = 64) -> list[Search]:
    """Offline decoding of a list of searches, at most `max_rows` rows at a time,
    shortest sources first; new sentences join as others finish."""
    pending = sorted(searches, key=lambda s: s.src_len, reverse=True)   # pop() takes the shortest
    batch = DecodeBatch(engine)
    while pending or len(batch):
        joining = []
        rows = batch.rows
        while pending and rows + pending[-1].options.beam_size <= max_rows or (pending and not len(batch) and not joining):
            search = pending.pop()
            joining.append(search)
            rows += search.options.beam_size
        batch.add(joining)
        batch.step()
    return searches
