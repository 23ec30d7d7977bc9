"""Beam selection for all beam sentences of a step at once, in numpy.

The step graph already returns each row's k best continuations, so a
sentence's next beam is among its (width x k) candidates: one sort over a
padded (sentences x width*k) matrix picks every sentence's beam in one call,
with no Python loop per candidate. Ties keep the lower flat index (rows
first, then the graph's rank), as Marian's beam search does.

Beam semantics (Marian's): a sentence with `open` = beam_size - finished
places keeps its `open` best candidates; one ending in </s> (or any, at the
length limit) finishes and shrinks the beam by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BeamChoice:
    """For B sentences and up to K candidates each (K = the largest beam size)."""
    parent: np.ndarray    # B x K: the row each candidate extends
    token: np.ndarray     # B x K
    log_prob: np.ndarray  # B x K: log p of `token`
    score: np.ndarray     # B x K: the row's score plus log_prob
    keep: np.ndarray      # B x K bool: among the sentence's `open` best (and finite)
    ends: np.ndarray      # B x K bool: kept and finishing (</s> or the length limit)


def select_beams(row_matrix: np.ndarray, row_scores: np.ndarray, topk_ids: np.ndarray,
                 topk_log_probs: np.ndarray, beam_sizes: np.ndarray, open_places: np.ndarray,
                 last_step: np.ndarray, eos: int) -> BeamChoice:
    """row_matrix: B x W row indices (-1 pads a narrower beam); row_scores: R;
    topk_*: R x k from the step; beam_sizes, open_places: B; last_step: B bool."""
    B, W = row_matrix.shape
    K = int(beam_sizes.max())
    valid = row_matrix >= 0                                             # B x W
    rows = np.where(valid, row_matrix, 0)
    scores = np.where(valid, row_scores[rows], -np.inf)                 # B x W: padding rows -inf
    candidates = scores[:, :, None] + topk_log_probs[rows][:, :, :K]    # B x W x K
    if (beam_sizes < K).any():                                          # ranks beyond a narrower beam
        candidates = np.where(np.arange(K)[None, None, :] < beam_sizes[:, None, None], candidates, -np.inf)
    flat = candidates.reshape(B, W * K)                                 # B x W*K
    order = np.argsort(-flat, axis=1, kind="stable")[:, :K]             # B x K, best first
    sentence = np.arange(B)[:, None]                                    # B x 1 (plain indexing: cheaper
    score = flat[sentence, order]                                       # than take_along_axis at these sizes)
    parent = rows[sentence, order // K]                                 # B x K rows
    rank = order % K
    token = topk_ids[parent, rank]
    log_prob = topk_log_probs[parent, rank]
    keep = (np.arange(K)[None, :] < open_places[:, None]) & np.isfinite(score)
    ends = keep & ((token == eos) | last_step[:, None])
    return BeamChoice(parent, token, log_prob.astype(np.float32, copy=False), score, keep, ends)
