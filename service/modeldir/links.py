"""Word links and the rules that make them, read by the server and written in its
answers: the server makes its hard links from α with them (the manifest's `hard_links`
names one), model/ symmetrises a statistical aligner's two directions with grow_diag
(`attnmt data links`), and bench/ scores every rule against the gold set. Reading link
files and the gold set is attnmt.corpus.word_links. numpy and the standard library only.

A link is (i, j): i a source word, j a target word, 0-based, written as Pharaoh's `i-j`
(the format of fast_align, eflomal and Marian; `</s>` is never a word).

Rules from a soft alignment α (target words x source words): each target word's
argmax (what the server returns by default), each source word's, every cell over a
threshold, and the symmetrisation of two directional alignments: Koehn, Och & Marcu
(2003) and Moses' grow-diag-final(-and), read as fast_align's `atools` does: start from
the intersection of the two directions, grow into neighbouring (diagonals included)
union points that align a word not yet aligned, then (final) add each direction's
points whose source or (final-and) source and target words are still unaligned.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

Links = set[tuple[int, int]]

# Koehn's order: the four sides first, then the diagonals.
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
RULES = ("target-argmax", "source-argmax", "intersection", "union",
         "grow-diag", "grow-diag-final", "grow-diag-final-and")
# What a server may make its hard links with: a rule, or every cell over a threshold.
LINK_RULES = (*RULES, "threshold")
DEFAULT_RULE = "target-argmax"


# --- Pharaoh ------------------------------------------------------------------

def format_pharaoh(links: Iterable[tuple[int, int]]) -> str:
    """`i-j` items in (source, target) order."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


# --- links from a soft alignment ----------------------------------------------

def target_argmax(alpha: np.ndarray) -> Links:
    """alpha: target words x source words (no </s>). Each target word's strongest
    source word: what the server returns by default."""
    return {(int(i), j) for j, i in enumerate(alpha.argmax(axis=1))} if alpha.size else set()


def source_argmax(alpha: np.ndarray) -> Links:
    """Each source word's strongest target word (a column argmax of the same α)."""
    return {(i, int(j)) for i, j in enumerate(alpha.argmax(axis=0))} if alpha.size else set()


def threshold_links(alpha: np.ndarray, threshold: float) -> Links:
    """Every cell with α >= threshold (as the server's `alignment_threshold`)."""
    rows, cols = np.nonzero(alpha >= threshold)                                 # target, source
    return {(int(i), int(j)) for j, i in zip(rows, cols)}


# --- symmetrisation -----------------------------------------------------------

def grow_diag(forward: Links, backward: Links, final: str | None = None) -> Links:
    """forward, backward: two directional alignments of one pair. final: None
    (grow-diag), "final" or "final-and"."""
    union = forward | backward
    links = forward & backward
    source_done = {i for i, _ in links}
    target_done = {j for _, j in links}

    def add(link: tuple[int, int]) -> None:
        links.add(link)
        source_done.add(link[0])
        target_done.add(link[1])

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links, key=lambda link: (link[1], link[0])):        # target words outer, as Koehn
            for di, dj in NEIGHBOURS:
                new = (i + di, j + dj)
                if new in union and new not in links and (new[0] not in source_done or new[1] not in target_done):
                    add(new)
                    grown = True
    if final is not None:
        for directional in (forward, backward):
            for i, j in sorted(directional, key=lambda link: (link[1], link[0])):
                if (i, j) in links:
                    continue
                if final == "final-and":
                    if i not in source_done and j not in target_done:
                        add((i, j))
                elif i not in source_done or j not in target_done:
                    add((i, j))
    return links


def symmetrise(forward: Links, backward: Links, rule: str) -> Links:
    """One of RULES, forward taken as the target-side argmax (each target word's
    link) and backward as the source-side one."""
    if rule == "target-argmax":
        return set(forward)
    if rule == "source-argmax":
        return set(backward)
    if rule == "intersection":
        return forward & backward
    if rule == "union":
        return forward | backward
    if rule == "grow-diag":
        return grow_diag(forward, backward)
    if rule == "grow-diag-final":
        return grow_diag(forward, backward, "final")
    if rule == "grow-diag-final-and":
        return grow_diag(forward, backward, "final-and")
    raise ValueError(f"unknown symmetrisation rule {rule!r}; one of {', '.join(RULES)}")


def links_from_alpha(alpha: np.ndarray, rule: str = DEFAULT_RULE, threshold: float | None = None) -> Links:
    """One rule's links from a word-level α (target x source, no </s>): with a threshold,
    every cell over it (rule "threshold", or any rule a request's threshold overrides)."""
    if threshold is not None:
        return threshold_links(alpha, threshold)
    if rule == "target-argmax":
        return target_argmax(alpha)
    if rule == "source-argmax":
        return source_argmax(alpha)
    if rule == "threshold":
        raise ValueError("rule 'threshold' needs a threshold")
    return symmetrise(target_argmax(alpha), source_argmax(alpha), rule)


def rules_from_alpha(alpha: np.ndarray) -> dict[str, Links]:
    """Every symmetrisation rule read from one word-level α (target x source, no </s>)."""
    forward, backward = target_argmax(alpha), source_argmax(alpha)
    return {rule: symmetrise(forward, backward, rule) for rule in RULES}
