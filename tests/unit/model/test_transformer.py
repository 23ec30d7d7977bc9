"""The Transformer (model/architectures/transformer.py), its training (warm-up, guided alignment,
checkpoint averaging) and its PyTorch search: tiny sizes, a few seconds."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.model.architectures.rnnsearch import ModelConfig, RNNsearch
from attnmt.model.architectures.transformer import Transformer, TransformerConfig, sinusoids
from attnmt.model.batching import make_batch
from attnmt.model.guided_alignment import (
    GuidedAlignmentConfig,
    guide_matrix,
    guided_alignment_loss,
    piece_links,
    piece_words,
    shifted_alignment_loss,
    word_starts,
)
from attnmt.model.search import beam_search, greedy_decode
from attnmt.model.tokenizer import EOS_ID, Tokenizer
from attnmt.model.train import (
    TrainConfig,
    average_checkpoints,
    build_model,
    learning_rate,
    load_model,
    save_weights,
    train,
)
from conftest import ADJECTIVES, NOUNS, REPO, VERBS, synthetic_corpus

V = 40


def tiny(**kw) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=V, d_model=16, heads=4, ffn_size=32, encoder_layers=2, decoder_layers=2,
                            dropout=0.0, max_positions=64, **kw)
    return Transformer(cfg).eval()


def test_default_size_is_the_cpu_serving_one():
    cfg = TransformerConfig()
    assert (cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.heads, cfg.ffn_size) == (6, 2, 256, 8, 1024)
    # the position table covers the server's longest source and target
    from attnmt.service.server.settings import Settings
    limits = [Settings.model_fields[name].default for name in ("max_tokens_per_sentence", "max_target_tokens")]
    assert limits == [256, 512] and cfg.max_positions >= max(limits)
    n = sum(p.numel() for p in Transformer(cfg).parameters())
    assert 8.5e6 < n < 9.5e6                      # one tied 8k x 256 table


def test_shapes_and_alpha_rows():
    model = tiny()
    batch = make_batch([[5, 6], [7, 8, 9, 10, 11]], [[4, 5, 6], [7]], [0, 1])
    with torch.no_grad():
        logits, alphas = model(batch.src, batch.lengths, batch.tgt_in)
    assert logits.shape == (2, 4, V)
    assert len(alphas) == 2 and all(a.shape == (2, 4, 4, 6) for a in alphas)   # B, H, T, S per layer
    for a in alphas:
        assert torch.allclose(a.sum(-1), torch.ones(2, 4, 4), atol=1e-6)
        assert torch.all(a[0, :, :, 3:] == 0)            # sentence 0 has 3 source tokens with </s>
    assert model.alignment(alphas).shape == (2, 4, 6)
    assert model.decoder.output_layer.weight is model.encoder.embedding.weight is model.decoder.embedding.weight


def test_sinusoids_are_ctranslate2s():
    pe = sinusoids(10, 8)
    # [sin | cos], timescales 10000^(-i/(d/2-1)), row 0 = position 1
    for row, position in ((0, 1), (9, 10)):
        for i in range(4):
            angle = position * 10000 ** (-i / 3)
            assert pe[row, i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[row, 4 + i].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_a_later_target_token_does_not_change_earlier_outputs():
    model = tiny()
    src, lengths = torch.tensor([[5, 6, 7, 3]]), torch.tensor([4])
    tgt = torch.tensor([[2, 10, 11, 12, 13]])
    changed = tgt.clone()
    changed[0, 3] = 20
    with torch.no_grad():
        a, alphas_a = model(src, lengths, tgt)
        b, alphas_b = model(src, lengths, changed)
    assert torch.equal(a[0, :3], b[0, :3])
    assert not torch.allclose(a[0, 3:], b[0, 3:])
    assert torch.equal(alphas_a[-1][:, :, :3], alphas_b[-1][:, :, :3])


def test_a_sentence_alone_equals_the_same_sentence_padded_in_a_batch():
    model = tiny()
    sources = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [20]]
    targets = [[4, 5], [6, 7, 8, 9, 10, 11], [12, 13, 14]]
    batch = make_batch(sources, targets, [0, 1, 2])
    with torch.no_grad():
        logits, alphas = model(batch.src, batch.lengths, batch.tgt_in)
        for row, (s, t) in enumerate(zip(sources, targets)):
            one = make_batch([s], [t], [0])
            alone, alone_alphas = model(one.src, one.lengths, one.tgt_in)
            n, m = len(s) + 1, len(t) + 1
            assert torch.allclose(logits[row, :m], alone[0], atol=1e-5)
            assert torch.allclose(alphas[-1][row, :, :m, :n], alone_alphas[-1][0], atol=1e-5)


def test_incremental_decoding_equals_the_full_forward():
    model = tiny()
    batch = make_batch([[5, 6, 7], [8, 9, 10, 11, 12]], [[4, 5, 6, 7, 8], [9, 10, 11, 12, 13]], [0, 1])
    with torch.no_grad():
        full, full_alphas = model(batch.src, batch.lengths, batch.tgt_in)
        state = model.start(*model.encode(batch.src, batch.lengths))
        for t in range(batch.tgt_in.size(1)):
            logits, state, alphas = model.step_logits(batch.tgt_in[:, t], state)
            assert torch.allclose(logits, full[:, t], atol=1e-5)
            for layer in range(2):
                assert torch.allclose(alphas[layer], full_alphas[layer][:, :, t], atol=1e-5)
            assert state.self_kv[0][0].shape == (2, 4, t + 1, 4)          # the cache grew by one position


def test_warm_up_then_inverse_square_root():
    cfg = TrainConfig(learning_rate=1e-3, warmup_steps=100)
    assert learning_rate(cfg, 1) == pytest.approx(1e-5)
    assert learning_rate(cfg, 50) == pytest.approx(5e-4)
    assert learning_rate(cfg, 100) == pytest.approx(1e-3)
    assert learning_rate(cfg, 400) == pytest.approx(5e-4)
    assert learning_rate(cfg, 10_000) == pytest.approx(1e-4)


def test_guided_alignment_loss_is_zero_for_alpha_on_the_links():
    links = [np.array([[0, 0], [2, 1], [1, 2], [3, 3]], dtype=np.int32)]    # (source piece, target piece)
    guide = guide_matrix(links, src_len=4, tgt_len=4)
    loss, rows = guided_alignment_loss(guide, guide)
    assert rows == 4 and loss.item() < 1e-6
    uniform = torch.full((1, 4, 4), 0.25)
    loss, _ = guided_alignment_loss(uniform, guide)
    assert loss.item() == pytest.approx(4 * math.log(4), rel=1e-5)
    # a target piece without links is skipped; one with two links wants half of α on each
    guide = guide_matrix([np.array([[0, 0], [1, 0], [2, 2]], dtype=np.int32)], 3, 3)
    assert guide[0, 0].tolist() == [0.5, 0.5, 0.0] and guide[0, 1].sum() == 0
    assert guide_matrix([None, None], 3, 3) is None


def test_the_shifted_loss_reads_the_next_row_and_skips_the_end():
    # target pieces: a b </s>; piece 0 links source 1, piece 1 source 0, </s> source 2 (</s>)
    guide = guide_matrix([np.array([[1, 0], [0, 1], [2, 2]], dtype=np.int32)], src_len=3, tgt_len=3)
    targets = torch.tensor([[10, 11, EOS_ID]])
    on_shift = torch.tensor([[[1 / 3] * 3, [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]])   # row t + 1 on piece t's link
    loss, rows = shifted_alignment_loss(on_shift, guide, targets, EOS_ID)
    assert rows == 2 and loss.item() < 1e-6                 # </s> is read by no step: not supervised
    loss, _ = shifted_alignment_loss(guide, guide, targets, EOS_ID)   # the unshifted α is wrong here
    assert loss.item() > 10
    with pytest.raises(ValueError, match="shift_head 0 must be another"):
        TrainConfig(architecture="transformer", model=TransformerConfig(d_model=16, heads=2, ffn_size=16),
                    guided_alignment=GuidedAlignmentConfig(links="x.links", head=0, shift_head=0))


def test_word_links_become_piece_links():
    tok = Tokenizer(REPO / "models" / "rnnsearch-es-en" / "spm.model")
    source, target = "¿Dónde está la estación de tren?", "Where is the train station?"
    src_ids, tgt_ids = tok.encode(source), tok.encode(target)
    assert tok.pieces(src_ids) == ["▁¿", "Dónde", "▁está", "▁la", "▁esta", "ción", "▁de", "▁", "t", "ren", "?"]
    assert tok.pieces(tgt_ids) == ["▁", "Where", "▁is", "▁the", "▁tra", "in", "▁st", "ation", "?"]
    starts = word_starts(tok)
    src_words, tgt_words = piece_words(src_ids, starts), piece_words(tgt_ids, starts)
    assert src_words.tolist() == [0, 0, 1, 2, 3, 3, 4, 5, 5, 5, 5] and src_words[-1] + 1 == len(source.split())
    assert tgt_words.tolist() == [0, 0, 1, 2, 3, 3, 4, 4, 4]
    # ¿Dónde-Where, está-is, la-the, estación-station?, tren?-train ("de" unaligned)
    pairs = {tuple(p) for p in piece_links([(0, 0), (1, 1), (2, 2), (3, 4), (5, 3)], src_words, tgt_words).tolist()}
    expected = ({(s, t) for s in (0, 1) for t in (0, 1)} | {(2, 2), (3, 3)}
                | {(s, t) for s in (4, 5) for t in (6, 7, 8)} | {(s, t) for s in (7, 8, 9, 10) for t in (4, 5)}
                | {(11, 9)})                                               # </s>-</s>
    assert pairs == expected


def toy_links(source: str, target: str) -> str:
    """The toy corpus's true word alignment: each word to its dictionary translation."""
    lexicon = {**NOUNS, **ADJECTIVES, **VERBS, ".": "."}
    tgt = target.split()
    used: set[int] = set()
    links = []
    for i, word in enumerate(source.split()):
        j = next(j for j, w in enumerate(tgt) if w == lexicon[word] and j not in used)
        used.add(j)
        links.append(f"{i}-{j}")
    return " ".join(links)


def toy_transformer_config(data: Path, **overrides) -> TrainConfig:
    model = TransformerConfig(d_model=32, heads=4, ffn_size=64, encoder_layers=2, decoder_layers=1, dropout=0.0,
                              max_positions=64)
    values = dict(architecture="transformer", data_dir=str(data), vocab_size=64, token_budget=400,
                  learning_rate=5e-3, warmup_steps=50, adam_beta2=0.98, adam_eps=1e-9, max_epochs=8,
                  validate_every=80, checkpoint_every=40, log_every=20, patience=20, seed=7, threads=1,
                  keep_checkpoints=3, label_smoothing=0.0, model=model)
    values.update(overrides)
    return TrainConfig(**values)


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("toy")
    for seed, (split, n) in enumerate({"train": 600, "dev": 20, "test": 20}.items()):
        pairs = synthetic_corpus(n, seed)
        (data / f"{split}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
        if split == "train":
            (data / "train.links").write_text("".join(toy_links(s, t) + "\n" for s, t in pairs))
    return data


@pytest.fixture(scope="module")
def toy_run(toy_data, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run") / "transformer"
    cfg = toy_transformer_config(toy_data, guided_alignment=GuidedAlignmentConfig(
        links=str(toy_data / "train.links"), weight=0.5, layer=-1, head=1, shift_head=2))
    # Stopped after the first log line, as a killed process would be; then resumed.
    train(TrainConfig(**{**cfg.__dict__, "max_minutes": 1e-9}), run)
    train(cfg, run)
    return run


def test_a_tiny_transformer_overfits_the_toy_corpus_with_guided_alignment(toy_run, toy_data):
    log = (toy_run / "train.log").read_text()
    assert "Transformer with" in log and "guided alignment on layer -1 head 1" in log
    assert "and shifted (Shift-Att) on layer -1 head 2" in log
    assert log.count("links for 600 of 600 pairs") == 1                 # the resume read them from the cache
    assert log.count("600 pairs with links") == 2
    assert "resumed from step 20" in log
    losses = [float(line.split("loss ")[1].split()[0]) for line in log.splitlines() if " loss " in line]
    assert losses[-1] < 0.3 < losses[0]                      # cross entropy per token, from log(64) ≈ 4.2
    # the guided head's cross-entropy, towards its floor: the entropy of a word's several pieces
    aligned = [float(line.split("alignment ")[1].split()[0]) for line in log.splitlines() if " loss " in line]
    assert aligned[-1] < aligned[0] / 2
    shifted = [float(line.split("shifted ")[1].split()[0]) for line in log.splitlines() if " loss " in line]
    assert shifted[-1] < shifted[0] / 2
    history = json.loads((toy_run / "history.json").read_text())
    assert max(h["dev_bleu"] for h in history) > 60
    model = load_model(toy_run / "best.pt")
    assert isinstance(model, Transformer) and (model.cfg.alignment_layer, model.cfg.alignment_head) == (-1, 1)

    # The guided head points each linked target word at its source word.
    tok = Tokenizer(toy_run / "spm.model")
    starts = word_starts(tok)
    pairs = synthetic_corpus(30, 0)                          # training pairs: the head was taught these
    hits = shifted_hits = total = 0
    for s, t in pairs:
        src, tgt = tok.encode(s), tok.encode(t)
        batch = make_batch([src], [tgt], [0])
        with torch.no_grad():
            alphas = model(batch.src, batch.lengths, batch.tgt_in)[1]
        alpha, shift = model.alignment(alphas)[0], alphas[-1][0, 2]                 # T x S each
        src_words, tgt_words = piece_words(src, starts), piece_words(tgt, starts)
        for link in toy_links(s, t).split():
            i, j = map(int, link.split("-"))
            first = int(np.flatnonzero(tgt_words == j)[0])
            hits += int(src_words[int(alpha[first, :-1].argmax())] == i)
            # the shifted head: the row of the step that reads the word's first piece
            shifted_hits += int(src_words[int(shift[first + 1, :-1].argmax())] == i)
            total += 1
    assert hits / total > 0.9 and shifted_hits / total > 0.9


def test_beam_search_for_both_architectures(toy_run, toy_data):
    model = load_model(toy_run / "best.pt")
    tok = Tokenizer(toy_run / "spm.model")
    sources = [tok.encode(s) for s, _ in synthetic_corpus(6, 2)]
    batch = make_batch(sources, None, list(range(6)))
    greedy = greedy_decode(model, batch.src, batch.lengths)
    one = beam_search(model, batch.src, batch.lengths, beam_size=1)
    five = beam_search(model, batch.src, batch.lengths, beam_size=5, n_best=5)
    for g, o, f, s in zip(greedy, one, five, sources):
        assert o[0].tokens == g + [3]                       # beam 1 is greedy (with </s>)
        assert len(f) == 5 and [h.score for h in f] == sorted((h.score for h in f), reverse=True)
        assert f[0].score >= o[0].score - 1e-6
        assert f[0].alignment.shape == (len(f[0].tokens), len(s) + 1)
        assert np.allclose(f[0].alignment.sum(-1), 1, atol=1e-5)
    rnn = RNNsearch(ModelConfig(vocab_size=len(tok), embedding_size=16, encoder_hidden=8, decoder_hidden=8,
                                attention_size=8, readout_size=16)).eval()
    hyps = beam_search(rnn, batch.src, batch.lengths, beam_size=3, max_extra=2)
    assert all(len(h[0].tokens) <= int(1.5 * len(s)) + 2 for h, s in zip(hyps, sources))


def test_averaged_checkpoint_is_the_mean_of_the_kept_ones(toy_run, tmp_path):
    kept = sorted((toy_run / "checkpoints").glob("step-*.pt"))
    assert len(kept) == 3                                    # keep_checkpoints
    report = average_checkpoints(kept, tmp_path / "averaged.pt")
    assert report["averaged"] == 3
    states = [torch.load(p, weights_only=False)["state_dict"] for p in kept]
    averaged = torch.load(tmp_path / "averaged.pt", weights_only=False)
    for key, value in averaged["state_dict"].items():
        assert torch.allclose(value, sum(s[key] for s in states) / 3, atol=1e-6)
    assert isinstance(load_model(tmp_path / "averaged.pt"), Transformer)
    # the tied table is saved once, as in the checkpoints averaged
    assert (tmp_path / "averaged.pt").stat().st_size < 1.1 * kept[0].stat().st_size


def test_evaluate_run_scores_a_checkpoint(toy_run, toy_data):
    from attnmt.bench.evaluate_run import evaluate_run
    report = evaluate_run(toy_run, toy_data, "test", beam=3, heatmaps=1)
    assert report["architecture"] == "transformer" and report["sentences"] == 20
    assert report["greedy"]["bleu"] > 50 and report["beam3"]["bleu"] > 50
    assert (toy_run / "eval" / toy_data.name / "test.beam3.en").exists()


def test_training_without_the_links_file_goes_on(toy_data, tmp_path):
    cfg = toy_transformer_config(toy_data, max_epochs=1, validate_every=0, keep_checkpoints=0,
                                 guided_alignment=GuidedAlignmentConfig(links=str(tmp_path / "missing.links")))
    result = train(TrainConfig(**{**cfg.__dict__, "max_minutes": 1e-9}), tmp_path / "run")
    assert result["steps"] == 20
    assert "guided alignment off" in (tmp_path / "run" / "train.log").read_text()


def test_configs_load_for_both_architectures(tmp_path):
    rnn = TrainConfig.from_yaml(REPO / "model" / "configs" / "rnnsearch-es-en-copies.yaml")
    assert rnn.architecture == "rnnsearch" and isinstance(rnn.model, ModelConfig)
    transformer = TrainConfig.from_yaml(REPO / "model" / "configs" / "transformer-es-en.yaml")
    assert transformer.architecture == "transformer" and isinstance(transformer.model, TransformerConfig)
    assert transformer.warmup_steps > 0 and transformer.keep_checkpoints >= 5
    # A checkpoint from before the key existed is an RNNsearch.
    model = RNNsearch(ModelConfig(vocab_size=30, embedding_size=8, encoder_hidden=8, decoder_hidden=8,
                                  attention_size=8, readout_size=8))
    torch.save({"model_config": model.cfg.to_dict(), "state_dict": model.state_dict()}, tmp_path / "old.pt")
    assert isinstance(load_model(tmp_path / "old.pt"), RNNsearch)
    save_weights(tiny(), TrainConfig(architecture="transformer", model=tiny().cfg), tmp_path / "new.pt")
    assert isinstance(build_model(torch.load(tmp_path / "new.pt", weights_only=False)), Transformer)
    for config in sorted((REPO / "model" / "configs").glob("*.yaml")):     # every named config still loads
        assert TrainConfig.from_yaml(config).architecture in ("rnnsearch", "transformer"), config.name
    bad = tmp_path / "bad.yaml"
    bad.write_text("architecture: lstm\n")
    with pytest.raises(ValueError, match="architecture must be"):
        TrainConfig.from_yaml(bad)


def test_pytorch_beam_search_is_the_serving_engines(tiny_model, engine):
    """model/search.py's beam search follows service/inference/beam.py: the same n-best on the
    exported RNNsearch, so `evaluate --run` figures compare with the served model's."""
    from attnmt.service.inference.offline import decode_all
    from attnmt.service.inference.search import Search, SearchOptions
    model = load_model(tiny_model / "checkpoint.pt")
    tok = Tokenizer(tiny_model / "spm.model")
    ids = [tok.encode(s) for s, _ in synthetic_corpus(24, 5)]
    batch = make_batch(ids, None, list(range(len(ids))))
    for beam in (1, 4):
        searches = [Search(i + [3], SearchOptions(beam_size=beam)) for i in ids]
        decode_all(engine, searches)
        ours = beam_search(model, batch.src, batch.lengths, beam_size=beam)
        for search, hyps in zip(searches, ours):
            assert hyps[0].tokens == search.best()[0].tokens
            assert hyps[0].score == pytest.approx(search.best()[0].score, abs=1e-4)


def test_the_links_cache_survives_a_copy_of_the_run(toy_run, toy_data, tmp_path):
    """Keyed by the links' content, not their path or time: a corpus and run directory copied to
    another machine (a GPU's) keep the cache, and a changed links file does not."""
    data, run = tmp_path / "data", tmp_path / "run"
    shutil.copytree(toy_data, data)                          # another path, other times
    run.mkdir()
    for name in ("piece_links.npz", "spm.model"):
        shutil.copy(toy_run / name, run)
    guided = GuidedAlignmentConfig(links=str(data / "train.links"), weight=0.5, layer=-1, head=1, shift_head=2)
    train(toy_transformer_config(data, guided_alignment=guided, max_steps=1), run)
    log = (run / "train.log").read_text()
    assert "600 pairs with links" in log and "links for" not in log
    links = (data / "train.links").read_text().splitlines()
    (data / "train.links").write_text("\n".join([""] + links[1:]) + "\n")   # the first pair's links gone
    again = tmp_path / "again"
    shutil.copytree(run, again)
    (again / "last.pt").unlink()
    (again / "train.log").unlink()
    train(toy_transformer_config(data, guided_alignment=guided, max_steps=1), again)
    log = (again / "train.log").read_text()
    assert "links for 599 of 600 pairs" in log and "599 pairs with links" in log
