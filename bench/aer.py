"""Word alignments against hand-made links (AER, precision, recall, bootstrap
intervals) and the rules that turn soft α or two directional alignments into
links. numpy and the standard library only, so both worlds can use it: the
evaluation in model/ and, should a rule win on dev, the server.

A link is (i, j): i a source word, j a target word, 0-based, as Pharaoh's `i-j`.
Gold files mark Sure links `i-j` and Possible-only links `ipj`; Sure ⊆ Possible.

Och & Ney (2003), "A systematic comparison of various statistical alignment
models", micro-averaged over a corpus of predicted links A:
    precision = |A∩P| / |A|    recall = |A∩S| / |S|
    AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|)

Symmetrisation: Koehn, Och & Marcu (2003) and Moses' grow-diag-final(-and), read
as fast_align's `atools` does: start from the intersection of the two directions,
grow into neighbouring (diagonals included) union points that align a word not
yet aligned, then (final) add each direction's points whose source or (final-and)
source and target words are still unaligned.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

Links = set[tuple[int, int]]

# Koehn's order: the four sides first, then the diagonals.
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
RULES = ("target-argmax", "source-argmax", "intersection", "union",
         "grow-diag", "grow-diag-final", "grow-diag-final-and")


# --- Pharaoh ------------------------------------------------------------------

def parse_pharaoh(text: str) -> tuple[Links, Links]:
    """`0-0 1p2 ...` -> (sure, possible), possible ⊇ sure. A file of predicted links
    has only `i-j`, so both sets are the same."""
    sure: Links = set()
    possible: Links = set()
    for item in text.split():
        sep = "p" if "p" in item else "-"
        i, j = item.split(sep)
        link = (int(i), int(j))
        possible.add(link)
        if sep == "-":
            sure.add(link)
    return sure, possible


def format_pharaoh(links: Iterable[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def read_links(path) -> list[Links]:
    """One Pharaoh line per sentence pair (Possible marks, if any, read as links)."""
    with open(path, encoding="utf-8") as f:
        return [parse_pharaoh(line)[1] for line in f]


# --- scores -------------------------------------------------------------------

def pair_counts(predicted: Links, sure: Links, possible: Links) -> np.ndarray:
    """[|A|, |S|, |A∩S|, |A∩P|] for one sentence pair: what micro averages add up."""
    return np.array([len(predicted), len(sure), len(predicted & sure), len(predicted & (possible | sure))])


def scores(counts: np.ndarray) -> dict[str, float]:
    """counts: pairs x 4 (`pair_counts` rows), or samples x pairs x 4 -> arrays of samples."""
    a, s, a_s, a_p = np.moveaxis(counts.sum(axis=-2), -1, 0)                    # each: () or samples
    aer = np.where(a + s > 0, 1 - (a_s + a_p) / np.maximum(a + s, 1), 0.0)
    precision = np.where(a > 0, a_p / np.maximum(a, 1), 0.0)                   # undefined without links:
    recall = np.where(s > 0, a_s / np.maximum(s, 1), 0.0)                      # reported as 0
    return {"aer": aer, "precision": precision, "recall": recall}


def resamples(pairs: int, samples: int = 1000, seed: int = 25) -> np.ndarray:
    """samples x pairs indices of pairs drawn with replacement. The same for every rule
    scored on the same pairs, so intervals of two rules (and their ratio) are paired."""
    return np.random.default_rng(seed).integers(0, pairs, size=(samples, pairs))


def _interval(value: float, resampled: np.ndarray, level: float) -> dict[str, float]:
    tail = (1 - level) / 2 * 100
    return {"value": float(value), "low": float(np.percentile(resampled, tail)),
            "high": float(np.percentile(resampled, 100 - tail))}


def score_with_intervals(counts: np.ndarray, samples: int = 1000, seed: int = 25,
                         level: float = 0.95) -> dict[str, dict[str, float]]:
    """Micro AER, precision and recall with percentile bootstrap intervals over
    `samples` resamples of the sentence pairs (one fixed seed: two runs agree)."""
    counts = np.asarray(counts).reshape(-1, 4)
    point, resampled = scores(counts), scores(counts[resamples(len(counts), samples, seed)])
    return {name: _interval(point[name], resampled[name], level) for name in point}


def aer_ratio(counts: np.ndarray, reference: np.ndarray, samples: int = 1000, seed: int = 25,
              level: float = 0.95) -> dict[str, float]:
    """AER of one rule over a reference's on the same pairs (e.g. the served links over a
    statistical aligner's), with a paired bootstrap interval."""
    index = resamples(len(counts), samples, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = scores(counts)["aer"] / scores(reference)["aer"]
        resampled = scores(counts[index])["aer"] / scores(reference[index])["aer"]
    finite = resampled[np.isfinite(resampled)]
    return _interval(value, finite if finite.size else np.array([value]), level)


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


def diagonal(source_words: int, target_words: int) -> Links:
    """No model at all: target word j links to the source word at the same relative
    position (a floor for every rule)."""
    if not source_words:
        return set()
    return {(min(source_words - 1, int(j * source_words / target_words)), j) for j in range(target_words)}


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


def rules_from_alpha(alpha: np.ndarray) -> dict[str, Links]:
    """Every symmetrisation rule read from one word-level α (target x source, no </s>)."""
    forward, backward = target_argmax(alpha), source_argmax(alpha)
    return {rule: symmetrise(forward, backward, rule) for rule in RULES}
