"""From the soft alignment α over subword pieces to what users read: word-level
α and hard `i-j` pairs.

Word aggregation: a word is a piece starting with ▁ and the pieces that follow
it. Source columns of one word are **summed** (the attention a target piece pays
to the word), target rows of one word are **averaged** (each row is a
distribution, so their mean is one too). Both keep every row summing to 1.
The end-of-sentence token stays a word of its own on both sides, `</s>`.

Hard alignments are links (i, j), i a source index and j a target index, both
0-based, `</s>` excluded, made by the rules of attnmt.service.modeldir.links (each
target token's argmax by default; the manifest's `hard_links` names the rule its
gold-set measurement chose; a request's threshold takes every cell over it) and
written in its Pharaoh format (`format_pharaoh`).
"""

from __future__ import annotations

import numpy as np

from attnmt.service.modeldir.links import DEFAULT_RULE, links_from_alpha
from attnmt.service.modeldir.tokenizer import WORD_BOUNDARY

EOS_TOKEN = "</s>"


def shifted_rows(alpha: np.ndarray, steps: int) -> np.ndarray:
    """Row k becomes row k + steps, clipped to the first and last rows."""
    T = len(alpha)
    if not T:
        return alpha
    # Slices and one concatenation, not a clipped index array (a quarter of its time): the
    # server shifts every hypothesis of a Shift-Att model it returns.
    if steps >= 0:
        moved = alpha[steps:]                                        # rows steps.. T-1 move up
        return np.concatenate((moved, *[alpha[T - 1:]] * (T - len(moved))))
    moved = alpha[:max(T + steps, 0)]                                # rows 0 .. T+steps-1 move down
    return np.concatenate((*[alpha[:1]] * (T - len(moved)), moved))


def shift_att(alpha: np.ndarray) -> np.ndarray:
    """Shift-Att (Chen et al. 2020): row k becomes the step that reads piece k as its input,
    step k + 1; the last row (`</s>`'s, or a translation cut at its length limit) keeps its own.
    A head trained on the links that way (`guided_alignment.shift_head`) needs the piece it
    aligns as its input, which the step that predicts the piece has not seen yet."""
    return shifted_rows(alpha, 1)


def word_groups(pieces: list[str]) -> list[list[int]]:
    """Indices of the pieces that make each word; `</s>` is a group of its own."""
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if piece == EOS_TOKEN or piece.startswith(WORD_BOUNDARY) or not groups or pieces[i - 1] == EOS_TOKEN:
            groups.append([i])
        else:
            groups[-1].append(i)
    if WORD_BOUNDARY not in pieces:        # the usual case: no word made only of '▁' to merge
        return groups
    # A word made only of '▁' (SentencePiece splits '▁' from punctuation) joins the next piece.
    # (Before </s>, or at the very end, it joins the previous word, or stands alone.)
    merged: list[list[int]] = []
    carry: list[int] = []
    for group in groups:
        if len(group) == 1 and pieces[group[0]] == WORD_BOUNDARY:
            carry += group
            continue
        if carry and pieces[group[0]] == EOS_TOKEN:
            if merged:
                merged[-1] += carry
            else:
                merged.append(carry)
            carry = []
        merged.append(carry + group)
        carry = []
    if carry:
        if merged:
            merged[-1] += carry
        else:
            merged.append(carry)
    return merged


def aggregate_to_words(alpha: np.ndarray, source_groups: list[list[int]], target_groups: list[list[int]]) -> np.ndarray:
    """alpha: target pieces x source pieces -> target words x source words (sum over a
    word's source pieces, mean over its target pieces). Groups are `word_groups`: runs of
    consecutive pieces covering them all, so one reduceat per axis does it (the server
    builds this for every hypothesis it returns with word alignments)."""
    src, tgt = [g[0] for g in source_groups], [g[0] for g in target_groups]
    sizes = np.array([len(g) for g in target_groups], dtype=alpha.dtype)
    return np.add.reduceat(np.add.reduceat(alpha, src, axis=1), tgt, axis=0) / sizes[:, None]


def hard_pairs(alpha: np.ndarray, source_tokens: list[str], target_tokens: list[str],
               threshold: float | None = None, rule: str = DEFAULT_RULE) -> list[tuple[int, int]]:
    """(source, target) index pairs, `</s>` rows and columns excluded. Without a
    threshold the rule's links (by default every target token links to its argmax
    source token); with one, every cell with α >= threshold is a link."""
    src_keep = [j for j, t in enumerate(source_tokens) if t != EOS_TOKEN]
    tgt_keep = [i for i, t in enumerate(target_tokens) if t != EOS_TOKEN]
    if not src_keep or not tgt_keep:
        return []
    sub = alpha[_kept(tgt_keep)][:, _kept(src_keep)]                                # T x S without </s>
    links = links_from_alpha(sub, rule, threshold)
    return sorted((src_keep[i], tgt_keep[j]) for i, j in links)                    # back to indices with </s>


def _kept(indices: list[int]) -> slice | list[int]:
    """An index taking `indices` (ascending): a slice when they are the first ones (`</s>` only
    at the end, as the server's own output has it), a view instead of a copy."""
    return slice(0, len(indices)) if indices[-1] == len(indices) - 1 else indices
