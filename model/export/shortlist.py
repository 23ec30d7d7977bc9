"""Lexical shortlist: the target pieces a sentence may produce, so a decoder step
computes the output layer over a few thousand candidates instead of the whole
vocabulary (the 8,000 x 256 output projection is about 60 % of a step's FLOPs).

As Marian's lexical shortlist (`--shortlist lex.s2t 100 100`), a sentence's
candidates are the `frequent` most frequent target pieces, plus for each of its
source pieces the `per_source` target pieces that co-occur with it most
strongly, plus its own source pieces (names, numbers and placeholder sentinels
are copied). Marian scores pairs with fast_align's lexical probabilities; we
use the Dice coefficient of sentence-level co-occurrence in the training
split, which needs no aligner and ranks a word's translations above the
function words every sentence contains (those are in the frequent set anyway).

The service (service/inference/shortlist.py) reads `shortlist.npz` and gives each
sentence its own candidate set; every row is masked to its own sentence's set,
over the union of a small batch's sets or over the full vocabulary in a large
batch (service/inference/vocab_bias.py), so a translation never depends on its batch-mates
(the per-batch shortlist bug of mozilla/translations #977).

The two step graphs written here are the contract's `decoder_step_shortlist`
and `decoder_step_shared_shortlist` (service/modeldir/manifest.py): the step graphs with
one more input, `candidates[C]`; `vocab_bias` is then `[1 or R, C]` and
`forced_tokens` are positions in `candidates`; `topk_ids` are vocabulary ids.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnmt.model.architectures.rnnsearch import RNNsearch

FILE = "shortlist.npz"
FREQUENT = 500       # most frequent target pieces every sentence may use
PER_SOURCE = 20      # strongest co-occurring target pieces per source piece
MIN_COUNT = 2        # co-occurrences below this are noise


def build(sources: list[list[int]], targets: list[list[int]], vocab_size: int, exclude: list[int],
          frequent: int = FREQUENT, per_source: int = PER_SOURCE) -> tuple[np.ndarray, np.ndarray]:
    """(frequent ids [F], table [V, per_source] of target ids per source id, -1 padded)."""
    tgt_count = np.zeros(vocab_size, dtype=np.int64)
    src_count = np.zeros(vocab_size, dtype=np.int64)
    pair_keys = []
    for src, tgt in zip(sources, targets):
        s, t = np.unique(src), np.unique(tgt)
        src_count[s] += 1
        tgt_count[t] += 1
        pair_keys.append((s[:, None] * vocab_size + t[None, :]).ravel())   # |s| x |t| co-occurrences
    keys, counts = np.unique(np.concatenate(pair_keys), return_counts=True)
    keep = counts >= MIN_COUNT
    keys, counts = keys[keep], counts[keep]
    s, t = keys // vocab_size, keys % vocab_size
    dice = 2 * counts / (src_count[s] + tgt_count[t])                      # pairs
    occurrences = tgt_count.copy()
    occurrences[exclude] = -1
    top = np.argsort(-occurrences, kind="stable")[:frequent]
    top = top[occurrences[top] > 0]
    allowed = np.ones(vocab_size, dtype=bool)
    allowed[exclude] = False
    allowed[top] = False                   # already every sentence's candidate
    s, t, dice = s[allowed[t]], t[allowed[t]], dice[allowed[t]]
    order = np.lexsort((-dice, s))         # by source id, strongest first
    s, t = s[order], t[order]
    table = np.full((vocab_size, per_source), -1, dtype=np.int32)
    starts = np.searchsorted(s, np.arange(vocab_size))
    ends = np.searchsorted(s, np.arange(vocab_size), side="right")
    for sid in np.flatnonzero(ends > starts):
        chosen = t[starts[sid]:min(ends[sid], starts[sid] + per_source)]
        table[sid, :len(chosen)] = chosen
    return np.sort(top).astype(np.int32), table


def save(out_dir: Path, frequent_ids: np.ndarray, table: np.ndarray) -> Path:
    path = out_dir / FILE
    with open(path, "wb") as f:            # np.savez would add ".npz" to a name without it
        np.savez(f, frequent=frequent_ids, table=table)
    return path


class ShortlistStepGraph(nn.Module):
    """`decoder_step_shortlist.onnx`: the direct step graph over `candidates` only."""

    def __init__(self, model: RNNsearch):
        super().__init__()
        self.model = model

    def forward(self, prev_tokens: Tensor, state: Tensor, annotations: Tensor, keys: Tensor, src_mask: Tensor,
                vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, candidates: Tensor):
        decoder = self.model.decoder
        prev_embedded = decoder.embedding(prev_tokens)
        readout_in, new_state, alpha = decoder.forward_step(prev_embedded, state, keys, annotations, src_mask)
        hidden = decoder.readout_hidden(readout_in)                                      # R x readout
        weight = decoder.output_layer.weight.index_select(0, candidates)                 # C x readout
        bias = decoder.output_layer.bias.index_select(0, candidates)                     # C
        log_probs = torch.log_softmax(hidden @ weight.t() + bias + vocab_bias, dim=-1)   # R x C
        topk_log_probs, positions = log_probs.topk(k, dim=-1)                            # R x k
        topk_ids = candidates[positions]                                                 # R x k vocabulary ids
        forced_log_probs = log_probs.gather(1, forced_tokens.unsqueeze(1)).squeeze(1)    # R
        return topk_log_probs, topk_ids, forced_log_probs, new_state, alpha


class SharedShortlistStepGraph(ShortlistStepGraph):
    """`decoder_step_shared_shortlist.onnx`: per-sentence memory and memory_index[R]."""

    def forward(self, prev_tokens: Tensor, state: Tensor, annotations: Tensor, keys: Tensor, src_mask: Tensor,
                vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor, candidates: Tensor, memory_index: Tensor):
        return super().forward(prev_tokens, state, annotations.index_select(0, memory_index),
                               keys.index_select(0, memory_index), src_mask.index_select(0, memory_index),
                               vocab_bias, k, forced_tokens, candidates)


def export_graphs(model: RNNsearch, out_dir: Path, files: dict[str, str], opset: int, example: dict) -> None:
    """Write both shortlist step graphs; `example` holds the traced inputs of the plain step graphs."""
    candidates = torch.tensor([3, 4, 5, 6, 7, 9, 11])     # C differs from every other traced size
    per_row = {0: "rows", 1: "src_len"}
    axes = {"prev_tokens": {0: "rows"}, "state": {0: "rows"}, "vocab_bias": {0: "bias_rows", 1: "candidates"},
            "forced_tokens": {0: "rows"}, "candidates": {0: "candidates"}, "topk_log_probs": {0: "rows", 1: "k"},
            "topk_ids": {0: "rows", 1: "k"}, "forced_log_probs": {0: "rows"}, "new_state": {0: "rows"},
            "alpha": per_row}
    bias = torch.zeros(1, len(candidates))
    choice = (bias, example["k"], torch.tensor([0, 1, 2]))
    outputs = ["topk_log_probs", "topk_ids", "forced_log_probs", "new_state", "alpha"]
    base = ["prev_tokens", "state", "annotations", "keys", "src_mask", "vocab_bias", "k", "forced_tokens",
            "candidates"]
    per_sentence = {0: "sentences", 1: "src_len"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(ShortlistStepGraph(model), (example["prev"], example["state"], *example["row_memory"],
                                                      *choice, candidates),
                          str(out_dir / files["decoder_step_shortlist"]), dynamo=False, opset_version=opset,
                          input_names=base, output_names=outputs,
                          dynamic_axes={**axes, "annotations": per_row, "keys": per_row, "src_mask": per_row})
        torch.onnx.export(SharedShortlistStepGraph(model), (example["prev"], example["state"], *example["memory"],
                                                            *choice, candidates, example["memory_index"]),
                          str(out_dir / files["decoder_step_shared_shortlist"]), dynamo=False, opset_version=opset,
                          input_names=base + ["memory_index"], output_names=outputs,
                          dynamic_axes={**axes, "annotations": per_sentence, "keys": per_sentence,
                                        "src_mask": per_sentence, "memory_index": {0: "rows"}})


def from_corpus(tokenizer: Path, data_dir: Path, src_lang: str, tgt_lang: str, frequent: int = FREQUENT,
                per_source: int = PER_SOURCE) -> tuple[np.ndarray, np.ndarray]:
    """Build the shortlist from a data directory's training split."""
    from attnmt.corpus.splits import corpus_files, read_parallel
    from attnmt.model.tokenizer import Tokenizer
    from attnmt.service.modeldir.vocabulary import never_generated

    tok = Tokenizer(tokenizer)
    pairs = list(read_parallel(*corpus_files(data_dir, "train", src_lang, tgt_lang)))
    return build([tok.encode(s) for s, _ in pairs], [tok.encode(t) for _, t in pairs], len(tok),
                 exclude=never_generated(), frequent=frequent, per_source=per_source)
