"""Beam search over a decode batch's rows, in numpy: the choice of every beam
sentence's next beam at once (`select_beams`), and the row bookkeeping that
follows it (`advance_beams`).

The step graph already returns each row's k best continuations, so a
sentence's next beam is among its (width x k) candidates: one sort over a
padded (sentences x width*k) matrix picks every sentence's beam in one call,
with no Python loop per candidate. Ties keep the lower flat index (rows
first, then the graph's rank), as Marian's beam search does.

Beam semantics (Marian's): a sentence with `open` = beam_size - finished
places keeps its `open` best candidates; one ending in </s> (or any, at the
length limit) finishes and shrinks the beam by one. A sentence whose beam is
empty is done. With `early_exit` (OpenNMT-py's rule) a sentence is
also done at the step where its best candidate ends, once n_best hypotheses have
finished.

Each continuing candidate then needs a row holding its parent's history: the
first child of a parent takes over the parent's own row, so in the usual step
nothing is copied; a parent's other children copy it into rows no candidate
continues from, or into new rows while the beam opens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnmt.service.inference.search import Search
from attnmt.service.inference.slots import Rows


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


@dataclass
class BeamStep:
    """What a step did to the batch's rows besides writing them."""
    finished: list[Search]              # sentences whose beam emptied (done)
    opened: list[tuple[int, Search]]    # rows added to a widening beam, with their sentence
    freed: list[int]                    # rows a narrowing beam gave up (no longer in search.rows)


def advance_beams(rows: Rows, beams: list[Search], topk_ids: np.ndarray, topk_log_probs: np.ndarray,
                  t: np.ndarray, eos: int) -> BeamStep:
    """Advance the beam sentences by this step's top k (R x k): finish the hypotheses that
    end, give each continuing candidate a row and write its token there. t: R, where this
    step wrote each row's history (its α is there already)."""
    choice = _choose(rows, beams, topk_ids, topk_log_probs, eos)
    _finish_ending(rows, beams, choice)
    going = choice.keep & ~choice.ends                   # B x K: candidates that continue
    for i, search in enumerate(beams):                   # early exit: the best candidate ended (OpenNMT's rule)
        if search.options.early_exit and choice.ends[i, 0] and len(search.finished) >= search.options.n_best:
            going[i] = False
    b, c = np.nonzero(going)                             # by sentence, best first
    parents = choice.parent[b, c]
    step, destinations = _place_children(rows, beams, parents, going.sum(axis=1).tolist(), b)
    if destinations:
        _write_children(rows, beams, choice, b, c, parents, t, destinations)
    return step


def _choose(rows: Rows, beams: list[Search], topk_ids: np.ndarray, topk_log_probs: np.ndarray,
            eos: int) -> BeamChoice:
    width = max(len(s.rows) for s in beams)
    matrix = np.array([s.rows + [-1] * (width - len(s.rows)) for s in beams], dtype=np.int64)   # B x W
    sizes, open_places, last = np.array([(s.options.beam_size, s.options.beam_size - len(s.finished),
                                          s.steps >= s.max_length) for s in beams], dtype=np.int64).T
    return select_beams(matrix, rows.score, topk_ids, topk_log_probs, sizes, open_places, last.astype(bool), eos)


def _finish_ending(rows: Rows, beams: list[Search], choice: BeamChoice) -> None:
    """The hypotheses that end here (few): the parent's history and this step's choice."""
    for i, c in zip(*np.nonzero(choice.ends)):
        search, p = beams[i], choice.parent[i, c]
        n = search.steps                                 # tokens including this step's
        tokens, log_probs = rows.tokens[p, :n].copy(), rows.log_probs[p, :n].copy()
        tokens[-1], log_probs[-1] = choice.token[i, c], choice.log_prob[i, c]
        search.finish(tokens, log_probs, rows.alpha[p, :n, :search.src_len].copy())


def _place_children(rows: Rows, beams: list[Search], parents: np.ndarray, counts: list[int],
                    b: np.ndarray) -> tuple[BeamStep, list[int]]:
    """A row for each continuing candidate, in (b, c) order; the sentences' row lists follow."""
    parent_list = parents.tolist()
    # Rows belong to one sentence each, so a parent chosen twice is a sentence's own
    # (a parent with two children); a sentence without one that keeps its width keeps
    # its rows, each child in its parent's row (the usual step), with no _assign.
    shared = np.bincount(b[(np.bincount(parents, minlength=rows.n) > 1)[parents]], minlength=len(beams))
    result = BeamStep([], [], [])
    destinations: list[int] = []
    start = 0
    for i, search in enumerate(beams):
        width, old = counts[i], search.rows
        if width == len(old) and not shared[i]:
            mine, spare = parent_list[start:start + width], ()
        else:
            if width > len(old):                         # the beam opens: new rows
                rows.reserve(rows.n + width - len(old), rows.max_steps, rows.length)
                new = rows.add(width - len(old)).tolist()
                result.opened += [(r, search) for r in new]
                old = old + new
            mine, spare = _assign(parent_list[start:start + width], old)
        start += width
        search.rows = mine
        result.freed += spare
        destinations += mine
        if not width:
            search.done = True
            search.finished.sort(key=lambda h: -h.score)
            result.finished.append(search)
    return result, destinations


def _write_children(rows: Rows, beams: list[Search], choice: BeamChoice, b: np.ndarray, c: np.ndarray,
                    parents: np.ndarray, t: np.ndarray, destinations: list[int]) -> None:
    """Each continuing candidate's row: its parent's state and history, and this step's token."""
    d, s = np.array(destinations), parents
    moved = d != s                                       # a child in its parent's own row copies nothing
    if moved.any():                                      # others take state and history
        lengths = np.array([search.src_len for search in beams])[b]
        rows.copy(d[moved], s[moved], t[s[moved]] + 1, lengths[moved])
    at = t[s]
    rows.tokens[d, at] = choice.token[b, c]
    rows.log_probs[d, at] = choice.log_prob[b, c]
    rows.prev[d] = choice.token[b, c]
    rows.score[d] = choice.score[b, c]
    rows.steps[d] = at + 1


def _assign(parents: list[int], rows: list[int]) -> tuple[list[int], list[int]]:
    """A row for each continuing candidate (in rank order), and the rows left over:
    the first child of a parent takes over the parent's own row (parents are always
    among the sentence's rows), so only the other children copy a history; they take
    the rows no candidate continues from, in order."""
    taken = set(parents)
    spare = [r for r in rows if r not in taken]
    if len(taken) == len(parents):      # every candidate extends a different row (the usual case)
        return parents, spare
    mine: list[int] = []
    seen: set[int] = set()
    free = iter(spare)
    for parent in parents:
        if parent in seen:
            mine.append(next(free))
        else:
            seen.add(parent)
            mine.append(parent)
    return mine, spare[len(parents) - len(taken):]
