"""Greedy decoding in PyTorch, for dev BLEU during training and as the eager
baseline of `attnmt bench engine`. Beam search lives in the serving engine
(`service/decoding.py`), which is what users run."""

from __future__ import annotations

import torch
from torch import Tensor

from .batching import inference_batches, make_batch
from .network import RNNsearch
from .tokenizer import BOS_ID, EOS_ID


@torch.no_grad()
def greedy_decode(model: RNNsearch, src: Tensor, lengths: Tensor, max_ratio: float = 1.5,
                  max_extra: int = 10) -> list[list[int]]:
    """Batched greedy search; finished rows leave the batch. Returns token ids (no </s>)."""
    annotations, keys, mask, state = model.encode(src, lengths)
    batch = src.size(0)
    limit = ((lengths - 1).float() * max_ratio).long() + max_extra          # batch; lengths count </s>
    prev = torch.full((batch,), BOS_ID, dtype=torch.long)
    alive = torch.arange(batch)                                            # rows still decoding
    outputs: list[list[int]] = [[] for _ in range(batch)]
    step = 0
    while alive.numel():
        log_probs, state, _ = model.step_log_probs(prev, state, keys, annotations, mask)
        tokens = log_probs.argmax(-1)                                      # alive
        step += 1
        keep = []
        for k, (row, tok) in enumerate(zip(alive.tolist(), tokens.tolist())):
            if tok == EOS_ID:
                continue
            outputs[row].append(tok)
            if step < limit[row]:
                keep.append(k)
        keep_t = torch.tensor(keep, dtype=torch.long)
        alive, prev, state = alive[keep_t], tokens[keep_t], state[keep_t]
        keys, annotations, mask = keys[keep_t], annotations[keep_t], mask[keep_t]
    return outputs


def translate_ids(model: RNNsearch, sources: list[list[int]], batch_size: int = 64) -> list[list[int]]:
    model.eval()
    results: list[list[int]] = [[] for _ in sources]
    for indices in inference_batches(sources, batch_size):
        batch = make_batch([sources[i] for i in indices], None, indices)
        for i, out in zip(indices, greedy_decode(model, batch.src, batch.lengths)):
            results[i] = out
    return results
