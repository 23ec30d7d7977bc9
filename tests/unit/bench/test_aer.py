"""AER, precision, recall, bootstrap intervals and the diagonal floor on hand-made cases
(attnmt.bench.aer); the rules that make the links are tested in tests/unit/modeldir/test_links.py."""

import numpy as np
import pytest

from attnmt.bench.aer import aer_ratio, diagonal, pair_counts, score_with_intervals, scores
from attnmt.corpus.word_links import parse_pharaoh


def score(pairs):
    """pairs: [(predicted, gold Pharaoh string)] -> point scores."""
    counts = []
    for predicted, gold in pairs:
        sure, possible = parse_pharaoh(gold)
        counts.append(pair_counts(predicted, sure, possible))
    return {k: float(v) for k, v in scores(np.array(counts)).items()}


def test_perfect_links_score_zero_and_empty_links_one():
    gold = "0-0 1-1 2p2"
    assert score([({(0, 0), (1, 1)}, gold)]) == {"aer": 0.0, "precision": 1.0, "recall": 1.0}
    # a Possible link predicted is not an error
    assert score([({(0, 0), (1, 1), (2, 2)}, gold)]) == {"aer": 0.0, "precision": 1.0, "recall": 1.0}
    assert score([(set(), gold)]) == {"aer": 1.0, "precision": 0.0, "recall": 0.0}


def test_a_known_small_example():
    # S = {0-0, 1-1, 2-2}, P = S + {1-2}; A = {0-0, 1-2, 2-1}:
    # |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 3 -> AER = 1 - 3/6, precision 2/3, recall 1/3
    result = score([({(0, 0), (1, 2), (2, 1)}, "0-0 1-1 2-2 1p2")])
    assert result == pytest.approx({"aer": 0.5, "precision": 2 / 3, "recall": 1 / 3})


def test_scores_are_micro_averages_over_the_corpus():
    # a long perfect pair and a short wrong one: micro weighs links, not pairs
    long_gold = " ".join(f"{k}-{k}" for k in range(8))
    result = score([({(k, k) for k in range(8)}, long_gold), ({(0, 1)}, "0-0")])
    assert result["aer"] == pytest.approx(1 - 16 / 18)          # a macro mean would say 0.5
    assert result["precision"] == pytest.approx(8 / 9)
    assert result["recall"] == pytest.approx(8 / 9)


def test_bootstrap_is_seeded_and_brackets_the_point():
    rng = np.random.default_rng(0)
    counts = np.array([[a, s, min(a, s) - rng.integers(0, 2), min(a, s)] for a, s in rng.integers(3, 12, (40, 2))])
    first = score_with_intervals(counts, samples=300, seed=5)
    assert first == score_with_intervals(counts, samples=300, seed=5)
    for metric in ("aer", "precision", "recall"):
        r = first[metric]
        assert r["low"] <= r["value"] <= r["high"] and r["low"] < r["high"]
    same = score_with_intervals(np.array([[4, 4, 3, 4]] * 10), samples=100)
    assert same["aer"]["low"] == same["aer"]["value"] == same["aer"]["high"] == pytest.approx(1 - 7 / 8)


def test_aer_ratio_is_paired():
    reference = np.array([[4, 4, 3, 4], [5, 5, 4, 4], [3, 3, 3, 3], [6, 6, 4, 5]])
    worse = reference.copy()
    worse[:, 2:] -= 1                                             # one link fewer right in every pair
    ratio = aer_ratio(worse, reference, samples=200)
    assert ratio["value"] == pytest.approx(float(scores(worse)["aer"] / scores(reference)["aer"]))
    assert 1 < ratio["low"] <= ratio["value"] <= ratio["high"]
    assert aer_ratio(reference, reference, samples=50) == {"value": 1.0, "low": 1.0, "high": 1.0}


def test_diagonal():
    assert diagonal(4, 2) == {(0, 0), (2, 1)}
    assert diagonal(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    assert diagonal(0, 3) == set()
