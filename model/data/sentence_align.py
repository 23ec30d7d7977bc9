"""Sentence alignment within an aligned paragraph pair: Gale and Church (1993).

Gale, W. A. and Church, K. W. (1993), "A Program for Aligning Sentences in
Bilingual Corpora", Computational Linguistics 19(1). A translated sentence's
length in characters is roughly proportional to its original's, so the
alignment that makes the lengths agree best, under priors on how often a
sentence is merged, split or dropped, is found by dynamic programming over
the two sentence sequences.

Written here rather than installed: Debian bookworm ships no sentence aligner
(`hunalign` is absent), and the PyPI ports are unmaintained or pull in a
lexicon we do not need. Within a paragraph pair the search space is tiny (a
handful of sentences a side), so the textbook algorithm is all it takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Bead types (source sentences, target sentences) and their prior probabilities,
# estimated by Gale and Church on the Canadian Hansards (their Table 5).
PRIORS = {(1, 1): 0.89, (1, 0): 0.0099, (0, 1): 0.0099, (2, 1): 0.089, (1, 2): 0.089, (2, 2): 0.011}
VARIANCE = 6.8   # s²: variance of the target length per source character (their estimate)


@dataclass(frozen=True)
class Bead:
    """One step of an alignment: source sentences [s0, s1) ↔ target sentences [t0, t1)."""
    s0: int
    s1: int
    t0: int
    t1: int

    @property
    def kind(self) -> tuple[int, int]:
        return self.s1 - self.s0, self.t1 - self.t0


def _norm_sf(z: float) -> float:
    """P(|Z| ≥ z) for a standard normal Z: 2 (1 − Φ(z))."""
    return math.erfc(z / math.sqrt(2))


def match_cost(source_chars: int, target_chars: int, ratio: float = 1.0) -> float:
    """−log P(δ | match), δ = (l₂ − c·l₁) / sqrt(l·s²), l the mean of l₁ and l₂/c (as in
    Gale and Church's own program, so that a long target does not go unpenalised)."""
    if source_chars == 0 and target_chars == 0:
        return 0.0
    mean = (source_chars + target_chars / ratio) / 2
    delta = (target_chars - ratio * source_chars) / math.sqrt(mean * VARIANCE)
    return -math.log(max(_norm_sf(abs(delta)), 1e-300))


def gale_church(source_lengths: list[int], target_lengths: list[int], ratio: float = 1.0) -> list[Bead]:
    """The most probable sequence of beads covering both sentence lists.

    `source_lengths`, `target_lengths`: characters per sentence; `ratio`: target
    characters per source character (the corpus's c). Costs are −log probabilities.
    """
    n, m = len(source_lengths), len(target_lengths)
    priors = {kind: -math.log(p) for kind, p in PRIORS.items()}
    # cost[i][j]: best cost of aligning the first i source and first j target sentences
    cost = [[math.inf] * (m + 1) for _ in range(n + 1)]
    back: list[list[tuple[int, int] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            for (di, dj), prior in priors.items():
                if di > i or dj > j or cost[i - di][j - dj] == math.inf:
                    continue
                chars_s = sum(source_lengths[i - di:i])
                chars_t = sum(target_lengths[j - dj:j])
                c = cost[i - di][j - dj] + prior + match_cost(chars_s, chars_t, ratio)
                if c < cost[i][j]:
                    cost[i][j], back[i][j] = c, (di, dj)
    beads = []
    i, j = n, m
    while i or j:
        di, dj = back[i][j]
        beads.append(Bead(i - di, i, j - dj, j))
        i, j = i - di, j - dj
    return beads[::-1]


KEPT = {(1, 1), (1, 2), (2, 1)}


def align_sentences(source: list[str], target: list[str], ratio: float = 1.0) -> list[tuple[str, str]]:
    """Sentence pairs of a paragraph pair: the 1-1 beads, and 1-2 / 2-1 beads with
    the two sentences joined; deletions, insertions and 2-2 beads are dropped
    (a 2-2 bead is as likely a misalignment as a true crossing)."""
    if len(source) == 1 and len(target) == 1:
        return [(source[0], target[0])]
    beads = gale_church([len(s) for s in source], [len(t) for t in target], ratio)
    return [(" ".join(source[b.s0:b.s1]), " ".join(target[b.t0:b.t1])) for b in beads if b.kind in KEPT]
