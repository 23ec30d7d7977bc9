"""Vocabulary transfer: start a model with a new SentencePiece vocabulary from a
trained one.

A model trained on one domain (the Bible) has learnt its recurrent layers and
attention at a real cost in CPU hours; a second domain needs a vocabulary that
covers its words too, which changes every piece id. Only the vocabulary-sized
tensors depend on the ids (the tied embedding / output matrix and the output
bias), so everything else is copied, and each row of a new piece is

- the old row of the same piece, where the old vocabulary had it (most frequent
  words and all special ids), or
- the mean of the old rows of the pieces the old tokenizer cuts its surface
  into (a new piece `▁archivo` starts as the mean of `▁ar`, `ch`, `ivo`).

This is the "embedding initialisation from subword decomposition" of vocabulary
adaptation work (e.g. Minixhofer et al. 2022, WECHSEL, in its simplest form);
no library does it for a custom PyTorch model, hence this module.
"""

from __future__ import annotations

from pathlib import Path

import sentencepiece as spm
import torch

# state_dict keys whose first dimension is the vocabulary (tied tensors appear under each name).
VOCAB_TENSORS = ("encoder.embedding.weight", "decoder.embedding.weight",
                 "decoder.output_layer.weight", "decoder.output_layer.bias")


def piece_map(old: spm.SentencePieceProcessor, new: spm.SentencePieceProcessor) -> list[list[int]]:
    """For each new id, the old ids whose rows start it (one id when the piece is shared)."""
    sources: list[list[int]] = []
    for i in range(new.get_piece_size()):
        piece = new.id_to_piece(i)
        same = old.piece_to_id(piece)
        if new.is_control(i) or new.is_unknown(i) or (same != old.unk_id() and old.id_to_piece(same) == piece):
            sources.append([i if new.is_control(i) or new.is_unknown(i) else same])
            continue
        surface = piece.replace("\u2581", " ")
        ids = [t for t in old.encode(surface) if t != old.unk_id()]
        if piece.startswith("\u2581") and ids and old.id_to_piece(ids[0]) == "\u2581":
            ids = ids[1:] or ids            # a lone '▁' carries no meaning of its own
        sources.append(ids or [old.unk_id()])
    return sources


def transfer_state(state: dict[str, torch.Tensor], old_spm: Path, new_spm: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The state dict re-indexed for the new vocabulary, and counts for the log."""
    old = spm.SentencePieceProcessor(model_file=str(old_spm))
    new = spm.SentencePieceProcessor(model_file=str(new_spm))
    sources = piece_map(old, new)
    out = dict(state)
    for key in VOCAB_TENSORS:
        if key not in state:
            continue
        table = state[key].float()          # old_vocab x ... (or old_vocab for the bias)
        rows = [table[ids].mean(0) for ids in sources]
        out[key] = torch.stack(rows)        # new_vocab x ...
    shared = sum(1 for i, ids in enumerate(sources) if len(ids) == 1
                 and old.id_to_piece(ids[0]) == new.id_to_piece(i))
    return out, {"new_vocab": len(sources), "shared_pieces": shared, "composed_pieces": len(sources) - shared}
