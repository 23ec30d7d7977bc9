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


def transfer_state(state: dict[str, torch.Tensor], old_spm: Path,
                   new_spm: Path) -> tuple[dict[str, torch.Tensor], dict]:
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


# Widening: a trained model's function carried over to wider recurrent layers.
#
# Net2WiderNet (Chen, Goodfellow & Shlens 2016, "Net2Net") in its zero-fan-out form:
# every old weight is copied to its unit's new position; a new unit starts with the
# fresh model's random incoming weights but every weight from it to an old unit or an
# output (v_a, the readout, old units' gates) starts at zero. The wider model then
# computes exactly what the narrow one did, and training grows the new units from
# there. The bidirectional layout needs care: annotations are [→h; ←h], so the old
# backward half moves from column n to column N. No library widens a custom
# PyTorch module (torch's own pruning goes the other way), hence this code.

# the ModelConfig sizes widen_state may grow; everything else must stay as it was
WIDENABLE = ("encoder_hidden", "decoder_hidden", "attention_size")


def _segments(*parts: tuple[int, int]) -> torch.Tensor:
    """Positions of old units in a vector made of consecutive (old, new) sized parts,
    each part's old units first."""
    index, offset = [], 0
    for old, new in parts:
        index.extend(range(offset, offset + old))
        offset += new
    return torch.tensor(index)


def widen_state(state: dict[str, torch.Tensor], old: dict, new: dict,
                fresh: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` of a model with ModelConfig dict `old`, placed into `fresh` (the
    state of a newly initialised model with config `new`: same vocabulary and
    embedding size, recurrent and attention layers at least as wide)."""
    if old["attention"] != "bahdanau" or new["attention"] != "bahdanau":
        raise ValueError("widening supports the additive (bahdanau) attention only")
    fixed = ("vocab_size", "embedding_size", "readout_size", "readout", "tie_embeddings")
    changed = [k for k in fixed if old[k] != new[k]]
    if changed:
        raise ValueError(f"widening keeps {', '.join(changed)}: only {', '.join(WIDENABLE)} may grow")
    n, d, a, m = old["encoder_hidden"], old["decoder_hidden"], old["attention_size"], old["embedding_size"]
    N, D, A = new["encoder_hidden"], new["decoder_hidden"], new["attention_size"]
    if N < n or D < d or A < a:
        raise ValueError("widening cannot make a layer narrower")
    gates_n, gates_d = _segments(*[(n, N)] * 3), _segments(*[(d, D)] * 3)
    ann = _segments((n, N), (n, N))                     # [→h; ←h]
    kinds = {"m": _segments((m, m)), "n": _segments((n, N)), "d": _segments((d, D)), "a": _segments((a, A)),
             "3n": gates_n, "3d": gates_d, "2n": ann, "one": _segments((1, 1)),
             "m+2n": _segments((m, m), (n, N), (n, N)),
             "d+m+2n": _segments((d, D), (m, m), (n, N), (n, N))}
    layout = {"rnn.weight_ih_l0": ("3n", "m"), "rnn.weight_hh_l0": ("3n", "n"),
              "rnn.bias_ih_l0": ("3n",), "rnn.bias_hh_l0": ("3n",),
              "attention.key_layer.weight": ("a", "2n"), "attention.query_layer.weight": ("a", "d"),
              "attention.energy_layer.weight": ("one", "a"),
              "init_layer.weight": ("d", "n"), "init_layer.bias": ("d",),
              "cell.weight_ih": ("3d", "m+2n"), "cell.weight_hh": ("3d", "d"),
              "cell.bias_ih": ("3d",), "cell.bias_hh": ("3d",),
              "readout_layer.weight": (None, "d+m+2n")}
    out = {}
    for key, value in state.items():
        target = fresh[key].clone()
        if target.shape == value.shape:
            out[key] = value.clone()
            continue
        spec = next((s for suffix, s in layout.items() if key.endswith(suffix)), None)
        if spec is None:
            raise ValueError(f"widening does not know how to place {key} {tuple(value.shape)}")
        rows = kinds[spec[0]] if spec[0] else torch.arange(value.shape[0])
        if len(spec) == 1:
            target[rows] = value
        else:
            cols = kinds[spec[1]]
            target[rows] = 0.0            # old units read nothing from new ones ...
            target[rows[:, None], cols] = value   # ... and what they read before
        out[key] = target
    return out
