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
