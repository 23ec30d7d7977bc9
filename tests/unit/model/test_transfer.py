"""Vocabulary transfer: a trained model's weights carried over to a new vocabulary."""

from __future__ import annotations

import torch

from conftest import synthetic_corpus, tiny_config, write_corpus


def test_rows_of_shared_pieces_are_copied_and_new_pieces_composed(tiny_run, tmp_path):
    import sentencepiece as spm

    from attnmt.model.tokenizer import train_tokenizer
    from attnmt.model.transfer import piece_map, transfer_state
    # A vocabulary over the same text and new words: some pieces are shared, others new.
    sentences = [s for pair in synthetic_corpus(500, seed=1) for s in pair] + ["quetzal xilofono zumbido"] * 50
    new_spm = train_tokenizer(sentences, tmp_path, vocab_size=80)
    state = torch.load(tiny_run / "best.pt", weights_only=False)["state_dict"]
    moved, counts = transfer_state(state, tiny_run / "spm.model", new_spm)
    old = spm.SentencePieceProcessor(model_file=str(tiny_run / "spm.model"))
    new = spm.SentencePieceProcessor(model_file=str(new_spm))
    table, moved_table = state["encoder.embedding.weight"], moved["encoder.embedding.weight"]
    assert moved_table.shape == (new.get_piece_size(), table.shape[1])
    assert counts["shared_pieces"] > 10 and counts["composed_pieces"] > 0
    for i, sources in enumerate(piece_map(old, new)):
        torch.testing.assert_close(moved_table[i], table[sources].mean(0))
        if old.id_to_piece(sources[0]) == new.id_to_piece(i):
            torch.testing.assert_close(moved_table[i], table[sources[0]])
    # everything that does not depend on the vocabulary is copied as it is
    torch.testing.assert_close(moved["decoder.cell.weight_hh"], state["decoder.cell.weight_hh"])
    assert moved["decoder.output_layer.bias"].shape == (new.get_piece_size(),)


def test_training_continues_from_a_model_with_a_new_vocabulary(tiny_run, tmp_path):
    from attnmt.model.train import train
    data = write_corpus(tmp_path / "data", {"train": 300, "dev": 20})
    cfg = tiny_config(data, vocab_size=80, max_epochs=1, init_from=str(tiny_run), new_vocabulary=True)
    result = train(cfg, tmp_path / "run")
    log = (tmp_path / "run" / "train.log").read_text()
    assert "vocabulary transferred" in log
    # the carried-over weights already translate: far above what one epoch from scratch gives
    assert result["best_dev_bleu"] > 20, log


def test_a_widened_model_computes_what_the_narrow_one_did(tiny_run):
    from attnmt.model.architectures.rnnsearch import ModelConfig, RNNsearch
    from attnmt.model.train import load_model
    from attnmt.model.transfer import widen_state
    narrow = load_model(tiny_run / "best.pt")
    old = narrow.cfg.to_dict()
    new = {**old, "encoder_hidden": old["encoder_hidden"] + 8, "decoder_hidden": old["decoder_hidden"] + 5,
           "attention_size": old["attention_size"] + 3}
    torch.manual_seed(0)
    wide = RNNsearch(ModelConfig(**new))
    wide.load_state_dict(widen_state(narrow.state_dict(), old, new, wide.state_dict()))
    wide.eval()
    src = torch.tensor([[5, 9, 12, 7, 3], [8, 6, 3, 0, 0]])
    lengths = torch.tensor([5, 3])
    tgt_in = torch.tensor([[1, 10, 11, 4], [1, 9, 4, 0]])
    with torch.no_grad():
        narrow_logits, narrow_alpha = narrow(src, lengths, tgt_in)
        wide_logits, wide_alpha = wide(src, lengths, tgt_in)
    torch.testing.assert_close(wide_logits, narrow_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(wide_alpha, narrow_alpha, rtol=0, atol=1e-6)
    # the new units are live: their recurrent weights are random, not a zero block that never learns
    hh = wide.decoder.cell.weight_hh
    assert hh[old["decoder_hidden"]:new["decoder_hidden"]].abs().sum() > 0


def test_widening_refuses_what_it_cannot_preserve(tiny_run):
    import pytest

    from attnmt.model.architectures.rnnsearch import ModelConfig, RNNsearch
    from attnmt.model.train import load_model
    from attnmt.model.transfer import widen_state
    narrow = load_model(tiny_run / "best.pt")
    old = narrow.cfg.to_dict()
    for change, message in (({"embedding_size": old["embedding_size"] * 2, "readout_size": old["readout_size"] * 2},
                             "keeps embedding_size, readout_size"),
                            ({"decoder_hidden": old["decoder_hidden"] - 2}, "narrower")):
        new = {**old, **change}
        with pytest.raises(ValueError, match=message):
            widen_state(narrow.state_dict(), old, new, RNNsearch(ModelConfig(**new)).state_dict())


def test_training_continues_from_a_narrower_model(tiny_run, tmp_path):
    import dataclasses

    from attnmt.model.train import load_model, train
    data = write_corpus(tmp_path / "data", {"train": 300, "dev": 20})
    narrow = load_model(tiny_run / "best.pt").cfg
    wide = dataclasses.replace(narrow, encoder_hidden=narrow.encoder_hidden + 8)
    train(tiny_config(data, max_epochs=1, init_from=str(tiny_run), model=wide), tmp_path / "run")
    log = (tmp_path / "run" / "train.log").read_text()
    assert f"widened from encoder_hidden {narrow.encoder_hidden}" in log
    assert load_model(tmp_path / "run" / "last.pt").cfg.encoder_hidden == narrow.encoder_hidden + 8
