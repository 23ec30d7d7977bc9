"""Word links on hand-made cases (attnmt.service.modeldir.links): the rules that make links
from α or two directional alignments. Reading Pharaoh files and the gold set:
tests/unit/corpus/test_word_links.py."""

import numpy as np
import pytest

from attnmt.service.modeldir.links import (
    grow_diag,
    links_from_alpha,
    rules_from_alpha,
    source_argmax,
    symmetrise,
    target_argmax,
    threshold_links,
)

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
    assert target_argmax(np.zeros((0, 3))) == source_argmax(np.zeros((0, 3))) == set()


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


def test_links_from_alpha_applies_each_rule_the_server_may_serve():
    rng = np.random.default_rng(3)
    alpha = rng.dirichlet(np.ones(5), size=4)                  # 4 target words x 5 source words
    for rule, links in rules_from_alpha(alpha).items():
        assert links_from_alpha(alpha, rule) == links
    assert links_from_alpha(alpha) == target_argmax(alpha)     # the default
    assert links_from_alpha(alpha, "threshold", 0.2) == threshold_links(alpha, 0.2)
    assert links_from_alpha(alpha, "union", 0.2) == threshold_links(alpha, 0.2)   # a threshold overrides the rule
    with pytest.raises(ValueError, match="needs a threshold"):
        links_from_alpha(alpha, "threshold")
    with pytest.raises(ValueError, match="unknown symmetrisation rule"):
        links_from_alpha(alpha, "closest")
