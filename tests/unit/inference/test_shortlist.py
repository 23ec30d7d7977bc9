"""The lexical shortlist: built from co-occurrence, exported as two more step graphs,
and used so that a sentence's output never depends on its batch-mates."""

from __future__ import annotations

import numpy as np

from conftest import synthetic_corpus, write_corpus


def test_build_ranks_each_source_pieces_translation_first():
    # source 10 always comes with target 20, source 11 with 21; 30 is in every target (frequent)
    sources = [[10, 5], [11, 5], [10, 6], [11, 6], [10, 5]]
    targets = [[20, 30], [21, 30], [20, 30], [21, 30], [20, 30]]
    from attnmt.model.export.shortlist import build
    frequent, table = build(sources, targets, vocab_size=40, exclude=[0, 2], frequent=1, per_source=2)
    assert frequent.tolist() == [30]
    assert table[10, 0] == 20 and table[11, 0] == 21
    assert 30 not in table                     # frequent pieces are not repeated per source
    assert (table[12] == -1).all()             # a source piece never seen has no entries


def engines(model_dir):
    from attnmt.service.inference.engine import Engine, EngineOptions
    return Engine(model_dir, EngineOptions(shortlist=False)), Engine(model_dir, EngineOptions(shortlist=True))


def test_shortlist_graph_over_every_id_equals_the_full_graph(listed_model):
    full, listed = engines(listed_model)
    sentences = [s for s, _ in synthetic_corpus(8, seed=3)]
    encoded = full.encode([full.tokenizer.encode(s) + [full.eos_id] for s in sentences])
    memory = encoded.memory
    prev = np.full(len(sentences), full.bos_id, dtype=np.int64)
    forced = np.full(len(sentences), 5, dtype=np.int64)
    everything = np.arange(full.vocab_size)
    k = 4
    a = full.step(prev, encoded.init_state, memory, k, forced)
    b = listed.step(prev, encoded.init_state, memory, k, forced, vocab_bias=full.default_bias,
                    candidates=everything)
    assert np.array_equal(a.topk_ids, b.topk_ids)
    np.testing.assert_allclose(a.topk_log_probs, b.topk_log_probs, atol=1e-5)
    np.testing.assert_allclose(a.forced_log_probs, b.forced_log_probs, atol=1e-5)


def test_a_rows_softmax_runs_over_its_own_candidates(listed_model):
    full, listed = engines(listed_model)
    source = full.tokenizer.encode("kasa granda vidas peru .") + [full.eos_id]
    encoded = full.encode([source])
    memory = encoded.memory
    prev, forced = np.array([full.bos_id]), np.array([0])
    everything = full.step(prev, encoded.init_state, memory, full.vocab_size - 2, forced)
    log_p = np.full(full.vocab_size, -np.inf)
    log_p[everything.topk_ids[0]] = everything.topk_log_probs[0]                 # the full distribution
    own = listed.shortlist.candidates(source)
    assert 0 < len(own) < full.vocab_size - 2
    renormalised = log_p[own] - np.logaddexp.reduce(log_p[own])
    out = listed.step(prev, encoded.init_state, memory, len(own), forced,
                      vocab_bias=np.zeros((1, len(own)), dtype=np.float32), candidates=own)
    np.testing.assert_allclose(np.sort(out.topk_log_probs[0]), np.sort(renormalised), atol=1e-5)
    assert set(out.topk_ids[0].tolist()) == set(own.tolist())


def test_output_does_not_depend_on_batch_mates(listed_model):
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.translator import Translator
    _, listed = engines(listed_model)
    translator = Translator(listed)
    target = "kasa granda vidas peru ."
    others = [s for s, _ in synthetic_corpus(40, seed=5)]
    for options in (SearchOptions(), SearchOptions(beam_size=3, n_best=3)):
        alone = translator.translate([target], options)[0]
        crowded = translator.translate(others[:20] + [target] + others[20:], options, max_rows=16)[20]
        assert [h.text for h in alone.hypotheses] == [h.text for h in crowded.hypotheses]
        for a, b in zip(alone.hypotheses, crowded.hypotheses):
            np.testing.assert_allclose(a.token_log_probs, b.token_log_probs, atol=1e-5)
            np.testing.assert_allclose(a.alignment, b.alignment, atol=1e-5)


def test_forced_alignment_beside_shortlisted_sentences_scores_over_the_full_vocabulary(listed_model):
    from attnmt.service.inference.batch import DecodeBatch
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.translator import Translator
    full, listed = engines(listed_model)
    source, target = "kasa granda vidas peru .", "the big house sees the dog ."
    reference = Translator(full).search(source, SearchOptions(), target=target)
    mixed = Translator(listed)
    forced = mixed.search(source, SearchOptions(), target=target)
    greedy = [mixed.search(s, SearchOptions()) for s, _ in synthetic_corpus(6, seed=8)]
    assert forced.candidates is None and all(s.candidates is not None for s in greedy)
    for engine, searches in ((full, [reference]), (listed, greedy + [forced])):
        batch = DecodeBatch(engine)
        batch.add(searches)
        while len(batch):
            batch.step()
    np.testing.assert_allclose(forced.finished[0].token_log_probs, reference.finished[0].token_log_probs, atol=1e-5)


def test_manifest_lists_the_shortlist(listed_model):
    from attnmt.service.modeldir.manifest import SHORTLIST_GRAPHS, load_manifest
    m = load_manifest(listed_model)
    assert m.shortlist["file"] == "shortlist.npz" and "shortlist.npz" in m.files
    assert set(SHORTLIST_GRAPHS.values()) <= set(m.files)


def test_export_without_shortlist_has_none_and_the_shortlist_is_opt_in(tiny_model, listed_model):
    from attnmt.service.inference.engine import Engine, EngineOptions
    assert Engine(tiny_model, EngineOptions(shortlist=True)).shortlist is None
    assert Engine(listed_model).shortlist is None


def test_shortlist_change_is_measured(listed_model, tmp_path):
    from attnmt.bench.evaluate import shortlist_change
    from attnmt.service.modeldir.manifest import load_manifest
    data = write_corpus(tmp_path / "data", {"dev": 30})
    import shutil
    model = tmp_path / "model"
    shutil.copytree(listed_model, model)
    report = shortlist_change(model, data)
    assert {"full", "shortlist", "bleu_change", "mean_candidates"} <= set(report)
    assert load_manifest(model).shortlist["dev"]["bleu_change"] == report["bleu_change"]


def test_the_union_graph_and_the_masked_full_vocabulary_give_the_same_translation(listed_model, monkeypatch):
    from attnmt.service.inference import vocab_bias
    from attnmt.service.inference.batch import DecodeBatch
    from attnmt.service.inference.search import SearchOptions
    from attnmt.service.text.translator import Translator
    _, listed = engines(listed_model)
    translator = Translator(listed)
    sentences = [s for s, _ in synthetic_corpus(12, seed=4)]
    results = {}
    for share in (1e9, 0.0):                  # always the shortlist graph / always the full one, masked
        monkeypatch.setattr(vocab_bias, "UNION_SHARE", share)
        batch = DecodeBatch(listed)
        batch.add([translator.search(s, SearchOptions()) for s in sentences])
        candidates, bias = batch._vocabulary()
        if share:
            assert candidates is not None and bias.shape == (12, len(candidates))
            assert set(candidates.tolist()) == set(np.concatenate([s.candidates for s in batch.searches]).tolist())
        else:
            assert candidates is None and bias.shape == (12, listed.vocab_size)
        by_slot = sorted(batch.searches, key=lambda s: s.slot)
        assert [np.isfinite(row).sum() for row in bias] == [len(s.candidates) for s in by_slot]
        results[share] = translator.translate(sentences, SearchOptions())
    for a, b in zip(results[1e9], results[0.0]):
        assert a.best.text == b.best.text
        np.testing.assert_allclose(a.best.token_log_probs, b.best.token_log_probs, atol=1e-5)
