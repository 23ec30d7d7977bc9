"""Guided alignment: one attention head supervised by a statistical aligner's links
(Garg et al. 2019, "Jointly Learning to Align and Translate with Transformer Models";
Marian's --guided-alignment, weight 0.1).

The links are Pharaoh lines (`i-j`: source word i, target word j, 0-based) parallel
to the training split, over whitespace words (`text.split()`), as `attnmt data links`
writes them to DATA_DIR/train.links. Training needs them over SentencePiece pieces:
each piece belongs to the word it is part of (a piece starting with ▁ opens the
next word), and a word link links every piece of the one word to every piece of
the other. The end-of-sentence tokens are linked to each other.

The loss is the cross-entropy of the head's α against the links normalised per
target piece, -Σ_s G_ts log α_ts, averaged over the target pieces that have a link;
target pieces without one (an unaligned "the") leave the head free. Row t of α is
the attention of the step that predicts target piece t, the α the server returns
with that piece. Optionally a second head is supervised shifted (`shift_head`): its
row t + 1, the step that reads piece t as its input, against piece t's links.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnmt.corpus.word_links import Links, read_links
from attnmt.model.tokenizer import Tokenizer

WORD_BOUNDARY = "\u2581"


@dataclass
class GuidedAlignmentConfig:
    links: str = ""         # Pharaoh file parallel to data_dir's train split ("": off; missing: off, logged)
    weight: float = 0.1     # of the alignment loss beside the translation loss (Marian's default)
    layer: int = -1         # decoder layer of the supervised head (-1: last, CTranslate2's default; -2: penultimate)
    head: int = 0           # the supervised head (CTranslate2 returns head 0 of the alignment layer by default)
    # A second head of `layer` supervised one step later (-1: none): the row of the step whose decoder
    # input is target piece t, against piece t's links (Shift-Att, Chen et al. 2020). That head only has
    # to find the source of a piece it already reads, not of the piece it is about to predict.
    shift_head: int = -1


def links_languages(path: Path) -> tuple[str, str] | None:
    """(source, target) language of a links file, i of `i-j` indexing the source's words, from the card
    `attnmt data links` writes beside it (`train.links.json`: its languages, or in an older card the
    suffixes of the two text files it aligned, source first); None when the card cannot tell."""
    card_path = path.with_name(path.name + ".json")
    if not card_path.exists():
        return None
    card = json.loads(card_path.read_text(encoding="utf-8"))
    if "source_language" in card:
        return card["source_language"], card["target_language"]
    files = list(card.get("text", {}))
    if len(files) == 2:                     # {split}.{src} and {split}.{tgt}; a TSV has one and says nothing
        return Path(files[0]).suffix[1:], Path(files[1]).suffix[1:]
    return None


def word_starts(tok: Tokenizer) -> np.ndarray:
    """For each vocabulary id, whether its piece opens a word."""
    return np.array([tok.sp.id_to_piece(i).startswith(WORD_BOUNDARY) for i in range(len(tok))])


def piece_words(ids: list[int], starts: np.ndarray) -> np.ndarray:
    """The word index of each piece: pieces x int (a leading piece without ▁ joins word 0)."""
    return np.maximum(np.cumsum(starts[np.asarray(ids, dtype=np.int64)]) - 1, 0) if ids else np.zeros(0, np.int64)


def piece_links(word_links: Links, src_words: np.ndarray, tgt_words: np.ndarray) -> np.ndarray:
    """Word links -> piece links, (n, 2) int32 of (source piece, target piece), with </s>-</s>
    (positions len(src_words) and len(tgt_words)) added."""
    linked = np.zeros((int(src_words.max(initial=-1)) + 2, int(tgt_words.max(initial=-1)) + 2), dtype=bool)
    i, j = np.array(sorted(word_links), dtype=np.int64).reshape(-1, 2).T
    linked[i, j] = True                                                    # source words x target words
    src = np.append(src_words, linked.shape[0] - 1)                        # </s> is one more word on each side
    tgt = np.append(tgt_words, linked.shape[1] - 1)
    linked[-1, -1] = True
    s, t = np.nonzero(linked[src][:, tgt])                                 # source pieces x target pieces
    return np.stack([s, t], axis=1).astype(np.int32)


def corpus_piece_links(path: Path, raw: list[tuple[str, str]], used: list[tuple[str, str]],
                       src_ids: list[list[int]], tgt_ids: list[list[int]], tok: Tokenizer
                       ) -> tuple[list[np.ndarray | None], dict]:
    """Piece links for each training pair, None where there are none to use. `raw` is the text
    the aligner saw; `used` is what training reads (placeholders may have become sentinels),
    with its ids. A pair is left out when its words and pieces disagree in number (a placeholder
    with a space became one sentinel; a character SentencePiece normalises to a space), or a
    link points past the sentence (links written for another corpus)."""
    word_links = read_links(path)
    if len(word_links) != len(raw):
        raise ValueError(f"{path} has {len(word_links)} lines, the training split {len(raw)} pairs")
    starts = word_starts(tok)
    out: list[np.ndarray | None] = []
    counts = {"pairs": len(raw), "with_links": 0, "mismatched": 0}
    for k, links in enumerate(word_links):
        if not links:
            out.append(None)
            continue
        src_words, tgt_words = piece_words(src_ids[k], starts), piece_words(tgt_ids[k], starts)
        n_src, n_tgt = len(raw[k][0].split()), len(raw[k][1].split())
        if (len(used[k][0].split()) != n_src or len(used[k][1].split()) != n_tgt
                or (len(src_words) and src_words[-1] + 1 != n_src) or (len(tgt_words) and tgt_words[-1] + 1 != n_tgt)
                or max(i for i, _ in links) >= n_src or max(j for _, j in links) >= n_tgt):
            counts["mismatched"] += 1
            out.append(None)
            continue
        out.append(piece_links(links, src_words, tgt_words))
        counts["with_links"] += 1
    return out, counts


def save_links(path: Path, links: list[np.ndarray | None], source: str) -> None:
    """One flat array and offsets (a pair without links has none), tagged with what they came from."""
    sizes = [0 if lk is None else len(lk) for lk in links]
    flat = np.concatenate([lk for lk in links if lk is not None] or [np.zeros((0, 2), np.int32)])
    np.savez(path, links=flat.astype(np.int16 if flat.size == 0 or flat.max() < 2 ** 15 else np.int32),
             offsets=np.concatenate([[0], np.cumsum(sizes)]), source=np.array(source))


def load_links(path: Path, source: str) -> list[np.ndarray | None] | None:
    """What `save_links` wrote, if it came from `source`; None otherwise."""
    if not path.exists():
        return None
    with np.load(path) as cached:
        if str(cached["source"]) != source:
            return None
        flat, offsets = cached["links"], cached["offsets"]
    return [lk if len(lk) else None for lk in np.split(flat, offsets[1:-1])]


def guide_matrix(links: list[np.ndarray | None], src_len: int, tgt_len: int) -> Tensor | None:
    """G: B x T x S, each target row with links normalised to sum 1, zero elsewhere; None when
    no pair of the batch has links."""
    if all(lk is None for lk in links):
        return None
    guide = torch.zeros(len(links), tgt_len, src_len)
    rows = [np.column_stack([np.full(len(lk), b), lk[:, 1], lk[:, 0]]) for b, lk in enumerate(links) if lk is not None]
    index = torch.from_numpy(np.concatenate(rows)).long()                  # n x (b, t, s)
    guide[index[:, 0], index[:, 1], index[:, 2]] = 1.0
    total = guide.sum(-1, keepdim=True)                                    # B x T x 1
    return guide / total.clamp_min(1.0)


def guided_alignment_loss(alpha: Tensor, guide: Tensor) -> tuple[Tensor, Tensor]:
    """alpha, guide: B x T x S. Returns Σ over linked target pieces of -Σ_s G log α, and their count."""
    linked = guide.sum(-1) > 0                                             # B x T
    cross_entropy = -(guide * torch.log(alpha.clamp_min(1e-9))).sum(-1)    # B x T
    return cross_entropy[linked].sum(), linked.sum()


def shifted_alignment_loss(alpha: Tensor, guide: Tensor, targets: Tensor, eos_id: int) -> tuple[Tensor, Tensor]:
    """The Shift-Att loss: alpha (B x T x S) row t + 1 against guide row t, for every target piece t
    but </s> (targets: B x T, the pieces predicted; no step reads </s> as its input)."""
    guide = guide.masked_fill((targets == eos_id).unsqueeze(-1), 0.0)
    return guided_alignment_loss(alpha[:, 1:], guide[:, :-1])
