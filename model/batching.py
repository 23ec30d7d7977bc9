"""Token-budget, length-bucketed batches for training.

Sentences of similar length go together so little compute is spent on padding;
a batch holds as many sentences as fit in `token_budget` padded target tokens.
The order is a pure function of (seed, epoch), which is what lets an
interrupted run resume at the batch where it stopped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.model.tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    src: Tensor       # batch x src_len, ends with </s>, padded with <pad>
    lengths: Tensor   # batch
    tgt_in: Tensor    # batch x tgt_len: <s> y_1 ... y_T
    tgt_out: Tensor   # batch x tgt_len: y_1 ... y_T </s>
    indices: list[int]

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(self.src.to(device), self.lengths.to(device), self.tgt_in.to(device), self.tgt_out.to(device),
                     self.indices)

    @property
    def target_tokens(self) -> int:
        return int((self.tgt_out != PAD_ID).sum())


def pad(rows: list[list[int]]) -> Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD_ID] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(src_ids: list[list[int]], tgt_ids: list[list[int]] | None, indices: list[int]) -> Batch:
    sources = [s + [EOS_ID] for s in src_ids]
    lengths = torch.tensor([len(s) for s in sources], dtype=torch.long)
    if tgt_ids is None:
        empty = torch.zeros(len(sources), 0, dtype=torch.long)
        return Batch(pad(sources), lengths, empty, empty, indices)
    return Batch(pad(sources), lengths, pad([[BOS_ID] + t for t in tgt_ids]),
                 pad([t + [EOS_ID] for t in tgt_ids]), indices)


def bucket_batches(src: list[list[int]], tgt: list[list[int]], token_budget: int,
                   seed: int, epoch: int) -> list[list[int]]:
    """Index lists, one per batch, for one epoch."""
    rng = random.Random(seed * 1000 + epoch)
    order = list(range(len(src)))
    rng.shuffle(order)
    # Sort within large chunks: batches are length-homogeneous, the epoch still varied.
    chunk = 100 * max(1, token_budget // 30)
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: (len(tgt[i]), len(src[i])))
        current: list[int] = []
        longest = 0
        for i in part:
            size = max(len(src[i]), len(tgt[i])) + 1
            if current and max(longest, size) * (len(current) + 1) > token_budget:
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, size)
        if current:
            batches.append(current)
    rng.shuffle(batches)
    return batches


def inference_batches(src: list[list[int]], max_sentences: int) -> list[list[int]]:
    """Length-sorted index lists for decoding a corpus."""
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    return [order[i:i + max_sentences] for i in range(0, len(order), max_sentences)]
