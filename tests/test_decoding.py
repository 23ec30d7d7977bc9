"""The engine's search: batch invariance, beam vs greedy, alignments, forced alignment."""

import numpy as np
import pytest

from attnmt.model.search import translate_ids
from attnmt.model.train import load_model
from attnmt.service.alignment import aggregate_to_words, hard_pairs, word_groups
from attnmt.service.decoding import DecodeBatch, Search, SearchOptions, decode_all
from attnmt.service.engine import Engine
from attnmt.service.errors import InvalidInput
from attnmt.service.translator import Translator

from conftest import markov_model, synthetic_corpus

SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."


def test_greedy_matches_pytorch_greedy(tiny_model, translator):
    model = load_model(tiny_model / "checkpoint.pt")
    texts = [s for s, _ in synthetic_corpus(20, seed=5)] + [LONG]
    ids = [translator.tokenizer.encode(t) for t in texts]
    expected = translate_ids(model, ids)
    got = translator.translate(texts)
    for e, t in zip(expected, got):
        assert t.best.target_tokens[:-1] == translator.tokenizer.pieces(e)


@pytest.mark.parametrize("beam", [1, 4])
def test_batch_invariance(translator, beam):
    """A sentence's output does not depend on what else is in its batch."""
    options = SearchOptions(beam_size=beam, n_best=beam)
    alone = translator.translate([SHORT], options)[0]
    crowd = [LONG, "gato .", SHORT, LONG + " " + LONG, "sola amas luna granda ."]
    together = translator.translate(crowd, options)[2]
    assert [h.text for h in alone.hypotheses] == [h.text for h in together.hypotheses]
    for a, b in zip(alone.hypotheses, together.hypotheses):
        assert abs(a.score - b.score) < 1e-5
        assert np.abs(a.alignment - b.alignment).max() < 1e-5
        assert np.allclose(a.token_log_probs, b.token_log_probs, atol=1e-5)


def test_joining_mid_decode_gives_the_same_answer(engine, translator):
    """Iteration-level batching: a sentence that joins a running batch at step 3
    gets the answer it gets alone."""
    alone = translator.translate([SHORT])[0].best
    batch = DecodeBatch(engine)
    batch.add([translator.search(LONG, SearchOptions())])
    for _ in range(3):
        batch.step()
    late = translator.search(SHORT, SearchOptions())
    batch.add([late])
    while not late.done:
        batch.step()
    got = translator.result(SHORT, late).best
    assert got.text == alone.text
    assert np.abs(got.alignment - alone.alignment).max() < 1e-5


def test_slot_arrays_grow_and_compact_without_changing_results(engine, translator):
    """Rows move between slots as beams open and sentences leave; answers must not."""
    texts = [SHORT, LONG, "gato .", LONG + " " + LONG, "sola amas luna granda ."]
    options = SearchOptions(beam_size=4, n_best=4)
    want = translator.translate(texts, options)
    batch = DecodeBatch(engine, capacity=1)          # forces growth in the middle of a step
    searches = [translator.search(t, options) for t in texts]
    batch.add(searches[:2])
    batch.step()
    batch.add(searches[2:])
    while len(batch):
        batch.step()
    assert batch.rows == 0
    for w, search, text in zip(want, searches, texts):
        got = translator.result(text, search)
        assert [h.text for h in got.hypotheses] == [h.text for h in w.hypotheses]
        for a, b in zip(got.hypotheses, w.hypotheses):
            assert abs(a.score - b.score) < 1e-5 and np.abs(a.alignment - b.alignment).max() < 1e-5


def test_io_binding_path_gives_the_same_answers(tiny_model, translator):
    """The IO-binding path (used on CUDA, where the attention memory stays on the
    device between steps) runs here on the CPU provider and must agree exactly."""
    from attnmt.service.engine import Engine, EngineOptions
    bound = Translator(Engine(tiny_model, EngineOptions(io_binding=True, intra_op_threads=1)))
    assert bound.engine.io_binding
    texts = [SHORT, LONG, "gato .", "sola amas luna granda ."]
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=3)):
        for a, b in zip(translator.translate(texts, options), bound.translate(texts, options)):
            assert [h.text for h in a.hypotheses] == [h.text for h in b.hypotheses]
            assert all(np.abs(x.alignment - y.alignment).max() < 1e-6 for x, y in zip(a.hypotheses, b.hypotheses))


def test_beam_one_is_greedy_exactly(translator):
    texts = [s for s, _ in synthetic_corpus(12, seed=8)]
    greedy = translator.translate(texts, SearchOptions(beam_size=1))
    for t in greedy:
        assert len(t.hypotheses) == 1
    beam = translator.translate(texts, SearchOptions(beam_size=5, n_best=5))
    for g, b in zip(greedy, beam):
        scores = [h.score for h in b.hypotheses]
        assert scores == sorted(scores, reverse=True)
        assert b.best.score >= g.best.score - 1e-6    # beam never does worse on the model score


def test_alignment_rows_sum_to_one_and_words_preserve_it(translator):
    for t in translator.translate([SHORT, LONG], SearchOptions(beam_size=3, n_best=3)):
        for h in t.hypotheses:
            assert h.alignment.shape == (len(h.target_tokens), len(h.source_tokens))
            assert np.allclose(h.alignment.sum(1), 1, atol=1e-5)
            assert h.word_alignment.shape == (len(h.target_words), len(h.source_words))
            assert np.allclose(h.word_alignment.sum(1), 1, atol=1e-5)
            assert h.source_words[-1] == "</s>"


def test_word_grouping_and_hard_alignments():
    pieces = ["▁Y", "▁aconte", "ció", "▁en", "▁", "«", "luz", "»", "</s>"]
    assert word_groups(pieces) == [[0], [1, 2], [3], [4, 5], [6], [7], [8]] or \
        word_groups(pieces)[1] == [1, 2]
    alpha = np.array([[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]])      # 2 target x 3 source pieces
    words = aggregate_to_words(alpha, [[0], [1, 2]], [[0, 1]])
    assert np.allclose(words, [[0.4, 0.6]])
    src, tgt = ["a", "b", "</s>"], ["x", "y"]
    assert hard_pairs(alpha, src, tgt) == [(0, 1), (1, 0)]
    assert hard_pairs(alpha, src, tgt, threshold=0.5) == [(0, 1), (1, 0)]
    assert hard_pairs(alpha, src, tgt, threshold=0.1) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_toy_alignment_follows_the_reordering(translator):
    """In the toy language adjectives follow nouns in the source and precede them in
    the target: the hard alignment must cross, not run down the diagonal."""
    hyp = translator.translate(["kasa granda vidas peru ."])[0].best
    assert hyp.text == "the big house sees the dog ."
    pairs = set(hyp.hard_alignment())
    src, tgt = hyp.source_words, hyp.target_words
    assert (src.index("granda"), tgt.index("big")) in pairs
    assert (src.index("kasa"), tgt.index("house")) in pairs


def test_forced_alignment_of_own_output_reproduces_it(translator):
    for hyp in (t.best for t in translator.translate([SHORT, LONG])):
        forced = translator.align([(hyp_src, hyp.text)])[0].best if (hyp_src := " ".join(
            w for w in hyp.source_words if w != "</s>")) else None
        assert forced.target_tokens == hyp.target_tokens
        assert np.abs(forced.alignment - hyp.alignment).max() < 1e-5
        assert abs(forced.log_prob - hyp.log_prob) < 1e-4


def test_search_options_are_checked():
    with pytest.raises(InvalidInput, match="beam_size"):
        SearchOptions(beam_size=0).validate()
    with pytest.raises(InvalidInput, match="n_best"):
        SearchOptions(beam_size=2, n_best=3).validate()
    with pytest.raises(InvalidInput, match="max_length_ratio"):
        SearchOptions(max_length_ratio=0).validate()


def test_unknown_piece_is_replaced_from_the_source(translator):
    search = translator.search(SHORT, SearchOptions(), target="the dog sees the house .")
    unk = translator.engine.unk_id
    search.forced[1] = unk                      # force an <unk> into the output
    decode_all(translator.engine, [search])
    plain = translator.result(SHORT, search).best
    replaced = translator.result(SHORT, search, replace_unk=True).best
    assert "⁇" in plain.text or "<unk>" in plain.target_tokens[1]
    attended = plain.source_tokens[int(plain.alignment[1].argmax())]
    assert replaced.target_tokens[1] == attended


# --- a constructed model on which greedy search cannot find the best output ---

def test_beam_finds_the_better_hypothesis_greedy_misses(tiny_model, engine, tmp_path):
    vocab, bos, eos, a, b = engine.manifest.vocab_size, engine.bos_id, engine.eos_id, 10, 11
    probs = np.full((vocab, vocab), 1e-6)
    probs[bos, [a, b]] = [0.6, 0.4]          # greedy takes a ...
    probs[a, [eos, a, b]] = [0.4, 0.3, 0.3]  # ... and then ends at 0.6 * 0.4 = 0.24
    probs[b, eos] = 0.99                     # while b </s> has 0.4 * 0.99 = 0.396
    for row in range(vocab):
        if probs[row].sum() < 0.5:
            probs[row, eos] = 1.0
    table = np.log(probs / probs.sum(1, keepdims=True)).astype(np.float32)
    markov = Engine(markov_model(tmp_path, tiny_model, table))
    greedy, beam = Search([20, 21, eos]), Search([20, 21, eos], SearchOptions(beam_size=2, n_best=2, length_penalty=0))
    decode_all(markov, [greedy, beam])
    assert greedy.best()[0].tokens == [a, eos]
    assert beam.best()[0].tokens == [b, eos]
    assert beam.best()[0].log_prob == pytest.approx(table[bos, b] + table[b, eos], abs=1e-5)
    assert beam.best()[0].log_prob > greedy.best()[0].log_prob
    assert beam.best()[1].tokens == [a, eos]           # the n-best list keeps the runner-up
    # The alignment of the chosen hypothesis comes from its own rows (uniform here: 1/3 each).
    assert np.allclose(beam.best()[0].alignment, 1 / 3)
