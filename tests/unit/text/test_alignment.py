"""Properties of word aggregation and hard links, for any pieces and any α."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.service.modeldir.links import format_pharaoh, target_argmax, threshold_links
from attnmt.service.text.alignment import aggregate_to_words, hard_pairs, shift_att, shifted_rows, word_groups

piece = st.sampled_from(["▁la", "▁luz", "s", "▁", ",", "▁Dios", "ción", "▁«", "»", "ó"])
pieces = st.lists(piece, min_size=1, max_size=12).map(lambda p: p + ["</s>"])


@st.composite
def alignment_case(draw):
    src, tgt = draw(pieces), draw(pieces)
    raw = draw(st.lists(st.floats(0.01, 10), min_size=len(src) * len(tgt), max_size=len(src) * len(tgt)))
    alpha = np.array(raw).reshape(len(tgt), len(src))
    return src, tgt, alpha / alpha.sum(1, keepdims=True)


@settings(max_examples=200, deadline=None)
@given(alignment_case())
def test_word_aggregation_keeps_rows_distributions(case):
    src, tgt, alpha = case
    sg, tg = word_groups(src), word_groups(tgt)
    assert sorted(i for g in sg for i in g) == list(range(len(src)))      # every piece in one word
    assert all(g == sorted(g) and g == list(range(g[0], g[-1] + 1)) for g in sg)  # words are contiguous
    assert sg[-1] == [len(src) - 1]                                          # </s> alone
    words = aggregate_to_words(alpha, sg, tg)
    assert words.shape == (len(tg), len(sg))
    assert np.allclose(words.sum(1), 1)
    assert np.all(words >= 0)


@settings(max_examples=200, deadline=None)
@given(alignment_case(), st.floats(0.05, 1.0))
def test_hard_links_are_in_range_and_thresholds_nest(case, threshold):
    src, tgt, alpha = case
    argmax = hard_pairs(alpha, src, tgt)
    assert len(argmax) == len(tgt) - 1                     # one link per target token but </s>
    for i, j in argmax:
        assert 0 <= i < len(src) - 1 and 0 <= j < len(tgt) - 1
    strict = set(hard_pairs(alpha, src, tgt, threshold))
    loose = set(hard_pairs(alpha, src, tgt, threshold / 2))
    assert strict <= loose
    assert format_pharaoh(strict).count("-") == len(strict)


def test_hard_links_are_the_rules_of_the_model_directory_without_eos():
    rng = np.random.default_rng(1)
    alpha = rng.dirichlet(np.ones(6), size=5)                     # 4 target words + </s>, 5 source words + </s>
    source, target = [f"s{k}" for k in range(5)] + ["</s>"], [f"t{k}" for k in range(4)] + ["</s>"]
    assert hard_pairs(alpha, source, target) == sorted(target_argmax(alpha[:-1, :-1]))
    assert hard_pairs(alpha, source, target, 0.2) == sorted(threshold_links(alpha[:-1, :-1], 0.2))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 7), st.integers(1, 4), st.integers(-9, 9))
def test_shifted_rows_move_each_row_by_steps_clipped_at_the_ends(T, S, steps):
    alpha = np.arange(T * S, dtype=np.float32).reshape(T, S)
    want = alpha[np.clip(np.arange(T) + steps, 0, T - 1)] if T else alpha     # the definition, indexed
    got = shifted_rows(alpha, steps)
    assert got.dtype == alpha.dtype and got.shape == alpha.shape and np.array_equal(got, want)
    if T:
        assert np.array_equal(shift_att(alpha), alpha[np.minimum(np.arange(T) + 1, T - 1)])


@settings(max_examples=200, deadline=None)
@given(alignment_case(), st.sampled_from([None, 0.2]), st.data())
def test_hard_links_skip_an_eos_anywhere(case, threshold, data):
    """`</s>` inside the pieces (a source or a target cut anywhere) is left out as at the end."""
    src, tgt, alpha = case
    src = src[:data.draw(st.integers(1, len(src)))] + src[data.draw(st.integers(1, len(src))):]
    tgt = tgt[:data.draw(st.integers(1, len(tgt)))] + tgt[data.draw(st.integers(1, len(tgt))):]
    alpha = np.resize(alpha, (len(tgt), len(src)))
    src_keep = [j for j, t in enumerate(src) if t != "</s>"]
    tgt_keep = [i for i, t in enumerate(tgt) if t != "</s>"]
    if not src_keep or not tgt_keep:
        assert hard_pairs(alpha, src, tgt, threshold) == []
        return
    links = (threshold_links(alpha[np.ix_(tgt_keep, src_keep)], threshold) if threshold is not None
             else target_argmax(alpha[np.ix_(tgt_keep, src_keep)]))
    assert hard_pairs(alpha, src, tgt, threshold) == sorted((src_keep[i], tgt_keep[j]) for i, j in links)
