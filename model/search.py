"""Decoding in PyTorch, for either architecture: greedy search for dev BLEU during
training and as the eager baseline of `attnmt bench engine` and the export's parity
check; greedy and beam search with α for `attnmt evaluate --run` (a run's checkpoint,
before any export). Users run the serving engine's search (`service/inference/batch.py`);
`beam_search` follows its semantics (Marian's beam, length-normalised scores,
<pad> and <s> never chosen) so the two can be compared.

Both architectures are driven through the same small interface, `decoder_steps`:
`step(prev_tokens) -> (log p, α)` and `select(rows)` to reorder or drop rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnmt.model.architectures.rnnsearch import RNNsearch
from attnmt.model.architectures.transformer import Transformer
from attnmt.model.batching import inference_batches, make_batch
from attnmt.model.tokenizer import BOS_ID, EOS_ID, PAD_ID
from attnmt.service.modeldir.vocabulary import never_generated

MAX_TARGET_TOKENS = 512     # the server's cap on a translation (service/server/settings.py max_target_tokens)


class RNNsearchSteps:
    """RNNsearch's decoder one step at a time: state s_i, keys, annotations and mask per row."""

    def __init__(self, model: RNNsearch, src: Tensor, lengths: Tensor):
        self.model = model
        self.annotations, self.keys, self.mask, self.state = model.encode(src, lengths)

    def step(self, prev: Tensor) -> tuple[Tensor, Tensor]:
        """prev: R -> log p (R x V), α (R x S)."""
        log_probs, self.state, alpha = self.model.step_log_probs(prev, self.state, self.keys, self.annotations,
                                                                 self.mask)
        return log_probs, alpha

    def select(self, rows: Tensor, memory_too: bool = True) -> None:
        self.state = self.state[rows]
        if memory_too:
            self.keys, self.annotations, self.mask = self.keys[rows], self.annotations[rows], self.mask[rows]


class TransformerSteps:
    """The Transformer's incremental decoder: self-attention caches grow a position a step."""

    def __init__(self, model: Transformer, src: Tensor, lengths: Tensor):
        self.model = model
        self.state = model.start(*model.encode(src, lengths))

    def step(self, prev: Tensor) -> tuple[Tensor, Tensor]:
        """prev: R -> log p (R x V), the alignment head's α (R x S)."""
        logits, self.state, alphas = self.model.step_logits(prev, self.state)
        return torch.log_softmax(logits, dim=-1), self.model.alignment(alphas)

    def select(self, rows: Tensor, memory_too: bool = True) -> None:
        self.state = self.state.select(rows, memory_too)


def decoder_steps(model: RNNsearch | Transformer, src: Tensor, lengths: Tensor) -> RNNsearchSteps | TransformerSteps:
    steps = TransformerSteps if isinstance(model, Transformer) else RNNsearchSteps
    return steps(model, src, lengths)


def length_limits(lengths: Tensor, max_ratio: float, max_extra: int) -> Tensor:
    """Target tokens each sentence may reach; lengths count </s>."""
    return ((lengths - 1).float() * max_ratio).long() + max_extra


@torch.no_grad()
def greedy_decode(model: RNNsearch | Transformer, src: Tensor, lengths: Tensor, max_ratio: float = 1.5,
                  max_extra: int = 10) -> list[list[int]]:
    """Batched greedy search; finished rows leave the batch. Returns token ids (no </s>)."""
    steps = decoder_steps(model, src, lengths)
    batch = src.size(0)
    limit = length_limits(lengths, max_ratio, max_extra).tolist()          # batch
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    alive = torch.arange(batch, device=src.device)                         # rows still decoding
    outputs: list[list[int]] = [[] for _ in range(batch)]
    step = 0
    while alive.numel():
        log_probs, _ = steps.step(prev)
        tokens = log_probs.argmax(-1)                                      # alive
        step += 1
        keep = []
        for k, (row, tok) in enumerate(zip(alive.tolist(), tokens.tolist())):
            if tok == EOS_ID:
                continue
            outputs[row].append(tok)
            if step < limit[row]:
                keep.append(k)
        keep_t = torch.tensor(keep, dtype=torch.long, device=src.device)
        alive, prev = alive[keep_t], tokens[keep_t]
        steps.select(keep_t)
    return outputs


def translate_ids(model: RNNsearch | Transformer, sources: list[list[int]], batch_size: int = 64) -> list[list[int]]:
    model.eval()
    device = next(model.parameters()).device
    results: list[list[int]] = [[] for _ in sources]
    for indices in inference_batches(sources, batch_size):
        batch = make_batch([sources[i] for i in indices], None, indices).to(device)
        for i, out in zip(indices, greedy_decode(model, batch.src, batch.lengths)):
            results[i] = out
    return results


@dataclass
class FinishedHypothesis:
    tokens: list[int]             # target ids, ending with </s> unless the length limit cut it
    token_log_probs: list[float]
    alignment: np.ndarray         # α: len(tokens) x source length (with </s>)
    log_prob: float
    score: float                  # log_prob / len(tokens) ** length_penalty


@torch.no_grad()
def beam_search(model: RNNsearch | Transformer, src: Tensor, lengths: Tensor, beam_size: int = 5,
                length_penalty: float = 1.0, max_ratio: float = 1.5, max_extra: int = 10,
                n_best: int = 1) -> list[list[FinishedHypothesis]]:
    """Batched beam search (beam_size 1: greedy). Each sentence keeps K = beam_size rows;
    of a step's candidates it keeps its `open` best (K less its finished hypotheses), and a
    kept candidate that ends in </s> (or reaches the length limit) finishes and narrows the
    beam. A sentence leaves the batch when its beam is empty. Returns each sentence's
    n-best, best first."""
    B, K = src.size(0), beam_size
    steps = decoder_steps(model, src, lengths)
    steps.select(torch.arange(B).repeat_interleave(K))                      # rows: B*K, sentence-major
    limit = length_limits(lengths, max_ratio, max_extra).clamp(1, MAX_TARGET_TOKENS).tolist()
    src_len = lengths.tolist()
    finished: list[list[FinishedHypothesis]] = [[] for _ in range(B)]
    alive = list(range(B))                                                  # sentences still in the batch
    scores = torch.full((B, K), float("-inf"))
    scores[:, 0] = 0.0                                                      # one live row per sentence at first
    scores = scores.view(-1)                                                # R
    prev = torch.full((B * K,), BOS_ID, dtype=torch.long)
    history = torch.zeros(B * K, 0, dtype=torch.long)                       # R x t
    history_lp = torch.zeros(B * K, 0)                                      # R x t
    history_alpha = torch.zeros(B * K, 0, src.size(1))                      # R x t x S
    t = 0
    while alive:
        log_probs, alpha = steps.step(prev)                                 # R x V, R x S
        # Renormalised without <pad> and <s>, as the step graph's vocabulary bias does.
        log_probs[:, never_generated()] = float("-inf")
        log_probs = log_probs - log_probs.logsumexp(-1, keepdim=True)
        n, V = len(alive), log_probs.size(1)
        candidates = (scores.unsqueeze(1) + log_probs).view(n, K * V)       # n x K*V
        top_scores, top = candidates.topk(K, dim=1)                         # n x K, best first
        parent = torch.arange(n).unsqueeze(1) * K + top // V                # n x K rows
        token = top % V
        token_lp = log_probs[parent, token]                                 # n x K
        t += 1
        rows, new_scores, parents, tokens = [], [], [], []
        still = []
        for i, sentence in enumerate(alive):
            open_places = K - len(finished[sentence])
            continuing = []
            for c in range(open_places):
                score = top_scores[i, c].item()
                if score == float("-inf"):
                    break
                p, tok = parent[i, c].item(), token[i, c].item()
                if tok == EOS_ID or t >= limit[sentence]:
                    hyp_tokens = history[p].tolist() + [tok]
                    hyp_lps = history_lp[p].tolist() + [token_lp[i, c].item()]
                    hyp_alpha = torch.cat([history_alpha[p], alpha[p].unsqueeze(0)])[:, :src_len[sentence]]
                    norm = len(hyp_tokens) ** length_penalty if length_penalty else 1.0
                    finished[sentence].append(FinishedHypothesis(hyp_tokens, hyp_lps, hyp_alpha.numpy(), score,
                                                                 score / norm))
                else:
                    continuing.append((p, tok, score))
            if continuing and len(finished[sentence]) < K:
                still.append((i, sentence, continuing))
        if not still:
            break
        # Rows of the sentences that go on: K each, the continuing candidates first, dead rows after.
        for _slot, (i, _sentence, continuing) in enumerate(still):
            for c in range(K):
                p, tok, score = continuing[c] if c < len(continuing) else (i * K, PAD_ID, float("-inf"))
                parents.append(p)
                tokens.append(tok)
                new_scores.append(score)
            rows.append(i)
        parents_t = torch.tensor(parents, dtype=torch.long)
        token_t = torch.tensor(tokens, dtype=torch.long)
        lp = log_probs[parents_t, token_t]
        history = torch.cat([history[parents_t], token_t.unsqueeze(1)], dim=1)
        history_lp = torch.cat([history_lp[parents_t], lp.unsqueeze(1)], dim=1)
        history_alpha = torch.cat([history_alpha[parents_t], alpha[parents_t].unsqueeze(1)], dim=1)
        # A parent is in its own sentence, so when no sentence leaves only the caches move.
        steps.select(parents_t, memory_too=len(still) < n)
        scores = torch.tensor(new_scores)
        prev = token_t
        alive = [sentence for _, sentence, _ in still]
    return [sorted(f, key=lambda h: -h.score)[:n_best] for f in finished]
