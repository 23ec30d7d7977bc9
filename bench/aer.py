"""Word alignments against hand-made links: AER, precision, recall and paired
bootstrap intervals, and the diagonal, the floor every rule is scored above. The rules
that make links are attnmt.service.modeldir.links; the gold set is read by
attnmt.corpus.word_links.

A link is (i, j): i a source word, j a target word, 0-based. Gold links are Sure
or Possible-only; Sure ⊆ Possible.

Och & Ney (2003), "A systematic comparison of various statistical alignment
models", micro-averaged over a corpus of predicted links A:
    precision = |A∩P| / |A|    recall = |A∩S| / |S|
    AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|)
"""

from __future__ import annotations

import numpy as np

from attnmt.corpus.word_links import Links


def diagonal(source_words: int, target_words: int) -> Links:
    """No model at all: target word j links to the source word at the same relative
    position (a floor for every rule)."""
    if not source_words:
        return set()
    return {(min(source_words - 1, int(j * source_words / target_words)), j) for j in range(target_words)}


def pair_counts(predicted: Links, sure: Links, possible: Links) -> np.ndarray:
    """[|A|, |S|, |A∩S|, |A∩P|] for one sentence pair: what micro averages add up."""
    return np.array([len(predicted), len(sure), len(predicted & sure), len(predicted & (possible | sure))])


def scores(counts: np.ndarray) -> dict[str, float]:
    """counts: pairs x 4 (`pair_counts` rows), or samples x pairs x 4 -> arrays of samples."""
    a, s, a_s, a_p = np.moveaxis(counts.sum(axis=-2), -1, 0)                    # each: () or samples
    aer = np.where(a + s > 0, 1 - (a_s + a_p) / np.maximum(a + s, 1), 0.0)
    precision = np.where(a > 0, a_p / np.maximum(a, 1), 0.0)                   # undefined without links:
    recall = np.where(s > 0, a_s / np.maximum(s, 1), 0.0)                      # reported as 0
    return {"aer": aer, "precision": precision, "recall": recall}


def resamples(pairs: int, samples: int = 1000, seed: int = 25) -> np.ndarray:
    """samples x pairs indices of pairs drawn with replacement. The same for every rule
    scored on the same pairs, so intervals of two rules (and their ratio) are paired."""
    return np.random.default_rng(seed).integers(0, pairs, size=(samples, pairs))


def _interval(value: float, resampled: np.ndarray, level: float) -> dict[str, float]:
    tail = (1 - level) / 2 * 100
    return {"value": float(value), "low": float(np.percentile(resampled, tail)),
            "high": float(np.percentile(resampled, 100 - tail))}


def score_with_intervals(counts: np.ndarray, samples: int = 1000, seed: int = 25,
                         level: float = 0.95) -> dict[str, dict[str, float]]:
    """Micro AER, precision and recall with percentile bootstrap intervals over
    `samples` resamples of the sentence pairs (one fixed seed: two runs agree)."""
    counts = np.asarray(counts).reshape(-1, 4)
    point, resampled = scores(counts), scores(counts[resamples(len(counts), samples, seed)])
    return {name: _interval(point[name], resampled[name], level) for name in point}


def aer_ratio(counts: np.ndarray, reference: np.ndarray, samples: int = 1000, seed: int = 25,
              level: float = 0.95) -> dict[str, float]:
    """AER of one rule over a reference's on the same pairs (e.g. the served links over a
    statistical aligner's), with a paired bootstrap interval."""
    index = resamples(len(counts), samples, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = scores(counts)["aer"] / scores(reference)["aer"]
        resampled = scores(counts[index])["aer"] / scores(reference[index])["aer"]
    finite = resampled[np.isfinite(resampled)]
    return _interval(value, finite if finite.size else np.array([value]), level)
