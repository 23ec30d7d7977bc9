"""AER, precision, recall, bootstrap intervals and symmetrisation on hand-made cases
(attnmt.bench.aer)."""

import numpy as np
import pytest

from attnmt.service.text.alignment import hard_pairs
from attnmt.bench.aer import (aer_ratio, diagonal, format_pharaoh, grow_diag, pair_counts, parse_pharaoh,
                                           rules_from_alpha, score_with_intervals, scores, source_argmax, symmetrise,
                                           target_argmax, threshold_links)


def score(pairs):
    """pairs: [(predicted, gold Pharaoh string)] -> point scores."""
    counts = []
    for predicted, gold in pairs:
        sure, possible = parse_pharaoh(gold)
        counts.append(pair_counts(predicted, sure, possible))
    return {k: float(v) for k, v in scores(np.array(counts)).items()}


def test_pharaoh_sure_and_possible():
    sure, possible = parse_pharaoh("0-0 1p2 2-1\n")
    assert sure == {(0, 0), (2, 1)}
    assert possible == {(0, 0), (1, 2), (2, 1)}                # Sure ⊆ Possible
    assert parse_pharaoh("") == (set(), set())
    assert format_pharaoh({(2, 1), (0, 0), (1, 2)}) == "0-0 1-2 2-1"


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


# α: target words (rows) x source words (columns); links are (source, target)
ALPHA = np.array([
    [0.7, 0.2, 0.1, 0.0],
    [0.1, 0.3, 0.6, 0.0],
    [0.0, 0.5, 0.4, 0.1],
    [0.0, 0.1, 0.2, 0.7],
])


def test_argmaxes_and_threshold_on_a_known_matrix():
    assert target_argmax(ALPHA) == {(0, 0), (2, 1), (1, 2), (3, 3)}
    assert source_argmax(ALPHA) == {(0, 0), (1, 2), (2, 1), (3, 3)}
    assert threshold_links(ALPHA, 0.5) == {(0, 0), (2, 1), (1, 2), (3, 3)}
    assert threshold_links(ALPHA, 0.35) == {(0, 0), (2, 1), (1, 2), (2, 2), (3, 3)}


def test_target_argmax_is_what_the_server_returns():
    rng = np.random.default_rng(1)
    alpha = rng.dirichlet(np.ones(6), size=5)                     # 4 target words + </s>, 5 source words + </s>
    source, target = [f"s{k}" for k in range(5)] + ["</s>"], [f"t{k}" for k in range(4)] + ["</s>"]
    assert target_argmax(alpha[:-1, :-1]) == set(hard_pairs(alpha, source, target))
    assert threshold_links(alpha[:-1, :-1], 0.2) == set(hard_pairs(alpha, source, target, 0.2))


def test_symmetrisation_on_a_known_matrix():
    alpha = np.array([                                            # target x source
        [0.8, 0.1, 0.1],
        [0.1, 0.5, 0.4],
        [0.1, 0.3, 0.6],
        [0.1, 0.6, 0.3],
    ])
    forward, backward = target_argmax(alpha), source_argmax(alpha)
    assert forward == {(0, 0), (1, 1), (2, 2), (1, 3)}
    assert backward == {(0, 0), (1, 3), (2, 2)}
    rules = rules_from_alpha(alpha)
    assert rules["intersection"] == {(0, 0), (1, 3), (2, 2)}
    assert rules["union"] == forward
    # (1, 1) neighbours (2, 2) diagonally and target word 1 is unaligned: grown
    assert rules["grow-diag"] == forward
    assert rules["grow-diag-final-and"] == forward


def test_grow_diag_final_and_differs_from_final():
    # forward has (2, 0), whose source word 2 is unaligned but target word 0 is: final adds it, final-and does not
    forward = {(0, 0), (2, 0)}
    backward = {(0, 0), (1, 3)}
    assert grow_diag(forward, backward) == {(0, 0)}                       # no neighbour of (0, 0) in the union
    assert grow_diag(forward, backward, "final") == {(0, 0), (2, 0), (1, 3)}
    assert grow_diag(forward, backward, "final-and") == {(0, 0), (1, 3)}
    assert symmetrise(forward, backward, "grow-diag-final-and") == {(0, 0), (1, 3)}
    with pytest.raises(ValueError, match="unknown"):
        symmetrise(forward, backward, "grow")


def test_grow_diag_only_grows_into_the_union_and_unaligned_words():
    # a full 3x3 union with the diagonal intersection: nothing to grow, every word aligned already
    forward = {(i, j) for i in range(3) for j in range(3)}
    backward = {(0, 0), (1, 1), (2, 2)}
    assert grow_diag(forward, backward) == backward
    # a diagonal chain reached step by step from one intersection point
    forward = {(0, 0), (1, 1), (2, 2), (3, 3)}
    backward = {(0, 0)}
    assert grow_diag(forward, backward) == forward


def test_diagonal():
    assert diagonal(4, 2) == {(0, 0), (2, 1)}
    assert diagonal(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    assert diagonal(0, 3) == set()


def test_aer_ratio_is_paired():
    reference = np.array([[4, 4, 3, 4], [5, 5, 4, 4], [3, 3, 3, 3], [6, 6, 4, 5]])
    worse = reference.copy()
    worse[:, 2:] -= 1                                             # one link fewer right in every pair
    ratio = aer_ratio(worse, reference, samples=200)
    assert ratio["value"] == pytest.approx(float(scores(worse)["aer"] / scores(reference)["aer"]))
    assert 1 < ratio["low"] <= ratio["value"] <= ratio["high"]
    assert aer_ratio(reference, reference, samples=50) == {"value": 1.0, "low": 1.0, "high": 1.0}
