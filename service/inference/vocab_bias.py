"""The step graph's `vocab_bias` for a decode batch when the lexical shortlist is on:
each row confined to its own sentence's candidates (`shortlist.py`), so its softmax
runs over exactly that set and its output never depends on its batch-mates.

Two ways to the same answer, chosen per batch. While the batch's candidate sets are
small, the shortlist graph runs the output layer over their union only, each row
with -inf on the candidates that are not its sentence's. Once the union covers much
of the vocabulary, gathering it costs more than it saves: the full graph runs, each
row masked over the whole vocabulary (docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

from attnmt.service.inference.search import Search
from attnmt.service.inference.slots import Memory

# The shortlist graph runs while the batch's candidate sets add up to at most this share of
# the vocabulary: one or two sentences' sets, not a full batch's union.
UNION_SHARE = 0.25


def union_bias(sets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(candidates[C], bias[len(sets), C]): the union of the sets, and per set 0 on its own
    candidates and -inf on the others."""
    candidates = np.unique(np.concatenate(sets))                             # C, sorted
    bias = np.full((len(sets), len(candidates)), -np.inf, dtype=np.float32)  # sets x C
    for i, ids in enumerate(sets):
        bias[i, np.searchsorted(candidates, ids)] = 0.0
    return candidates, bias


class VocabularyBias:
    """One batch's (candidates, vocab_bias per memory slot), worked out again only when
    sentences join or leave."""

    def __init__(self, vocab_size: int, default_bias: np.ndarray):
        self.vocab_size = vocab_size
        self.default = default_bias[0]            # V: a sentence without a shortlist (forced decoding)
        self._answer: tuple | None = None         # (memory version, candidates, bias per memory slot)
        self._masks: dict[int, np.ndarray] = {}   # search id -> its shortlist as a bias over the vocabulary

    def per_slot(self, searches: list[Search], memory: Memory) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(candidates[C] or None for the full vocabulary, bias: N x C or N x V, row i for memory slot i)."""
        key = (memory.version, memory.n)
        if self._answer is not None and self._answer[0] == key:
            return self._answer[1], self._answer[2]
        by_slot = sorted(searches, key=lambda s: s.slot)
        listed = {s.id: s.candidates for s in by_slot if s.candidates is not None}
        candidates = bias = None
        small = sum(len(c) for c in listed.values()) <= UNION_SHARE * self.vocab_size
        if len(listed) == len(by_slot) and small:
            candidates, bias = union_bias([s.candidates for s in by_slot])          # C, N x C
        if listed and candidates is None:
            bias = np.stack([self._mask(s) for s in by_slot])                      # N x V
            for gone in self._masks.keys() - listed.keys():
                del self._masks[gone]
        self._answer = (key, candidates, bias)
        return candidates, bias

    def _mask(self, search: Search) -> np.ndarray:
        """V: 0 on the sentence's candidates, -inf elsewhere (kept while the sentence stays)."""
        if search.candidates is None:
            return self.default
        if search.id not in self._masks:
            row = np.full(self.vocab_size, -np.inf, dtype=np.float32)
            row[search.candidates] = 0.0
            self._masks[search.id] = row
        return self._masks[search.id]
