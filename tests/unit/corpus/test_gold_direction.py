"""The gold set read the other way (attnmt.corpus.word_links): an English→Spanish model
scores its alignments on the Spanish→English pairs, each reversed, links (i, j) → (j, i)."""

import numpy as np
import pytest

from attnmt.bench.aer import diagonal, pair_counts, scores
from attnmt.corpus.word_links import gold_reversed, read_gold, reversed_links, reversed_pair
from conftest import REPO

GOLD = REPO / "tests" / "data" / "gold-alignments"
HEADER = "id\tdomain\tsource\ttarget\tlinks\n"


def test_the_gold_set_declares_spanish_to_english():
    assert gold_reversed(GOLD, "es", "en") is False
    assert gold_reversed(GOLD, "en", "es") is True


def test_reversing_twice_is_the_identity():
    pairs = read_gold(GOLD / "dev.tsv")
    once = read_gold(GOLD / "dev.tsv", reverse=True)
    assert once == [reversed_pair(p) for p in pairs]
    assert all(a != p for a, p in zip(once, pairs))            # once is another pair...
    assert [reversed_pair(p) for p in once] == pairs           # ...twice the same one


def test_a_reversed_pair_links_the_same_words_the_other_way(tmp_path):
    (tmp_path / "dev.tsv").write_text(HEADER + "x\tbible\tla casa roja\tthe red house\t0-0 1-2 2-1 0p2\n",
                                      encoding="utf-8")
    (pair,) = read_gold(tmp_path / "dev.tsv", reverse=True)
    assert (pair.source, pair.target) == ("the red house", "la casa roja")
    words = lambda links: {(pair.source.split()[i], pair.target.split()[j]) for i, j in links}   # noqa: E731
    assert words(pair.sure) == {("the", "la"), ("house", "casa"), ("red", "roja")}
    assert words(pair.possible - pair.sure) == {("house", "la")}

    # every pair of the gold set: the reversed links name the same word pairs, swapped
    for forward, backward in zip(read_gold(GOLD / "test.tsv"), read_gold(GOLD / "test.tsv", reverse=True)):
        src, tgt = forward.source.split(), forward.target.split()
        assert {(tgt[j], src[i]) for i, j in forward.possible} == \
            {(backward.source.split()[i], backward.target.split()[j]) for i, j in backward.possible}


def test_aer_is_the_same_read_either_way():
    forward, backward = read_gold(GOLD / "test.tsv"), read_gold(GOLD / "test.tsv", reverse=True)
    # a hypothesis that is not its own reverse: the diagonal of each pair's (source, target) words
    hypotheses = [diagonal(len(p.source.split()), len(p.target.split())) for p in forward]
    aer = lambda pairs, found: scores(np.array([pair_counts(f, p.sure, p.possible)           # noqa: E731
                                                for p, f in zip(pairs, found)]))["aer"]
    unreversed = aer(forward, hypotheses)
    assert 0.2 < unreversed < 1
    assert aer(backward, [reversed_links(h) for h in hypotheses]) == pytest.approx(unreversed, abs=1e-12)
    assert aer(backward, hypotheses) != pytest.approx(unreversed)       # the hypothesis unreversed scores otherwise


def test_a_model_of_neither_order_is_refused(tmp_path):
    (tmp_path / "languages.txt").write_text("es\ten\n", encoding="utf-8")
    with pytest.raises(ValueError, match="declares the gold set es→en; the model translates en→fr"):
        gold_reversed(tmp_path, "en", "fr")
    with pytest.raises(ValueError, match="es→en.*fr→en"):
        gold_reversed(tmp_path, "fr", "en")
    assert gold_reversed(tmp_path / "undeclared", "en", "fr") is False     # no languages.txt: read as it is
