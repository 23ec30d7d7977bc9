"""Reading word-link files: a statistical aligner's (`attnmt data links` writes eflomal's,
guided alignment trains on them) and the hand-aligned gold set that measurement scores
against. Making links from α, and writing them, is serving's: service/modeldir/links.py.

A link is (i, j): i a source word, j a target word, 0-based, as Pharaoh's `i-j` (the
format of fast_align, eflomal and Marian; `</s>` is never a word). Gold files mark
Sure links `i-j` and Possible-only links `ipj`; Sure ⊆ Possible. The gold set is one
TSV per split (tests/data/gold-alignments/): id, domain, source, target, links.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

Links = set[tuple[int, int]]        # the same pairs as service/modeldir/links.py's Links

GOLD_HEADER = ["id", "domain", "source", "target", "links"]


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


def read_links(path) -> list[Links]:
    """One Pharaoh line per sentence pair (Possible marks, if any, read as links)."""
    with open(path, encoding="utf-8") as f:
        return [parse_pharaoh(line)[1] for line in f]


@dataclass
class GoldPair:
    id: str
    domain: str
    source: str
    target: str
    sure: Links
    possible: Links
    annotated: bool                 # an empty links field is a pair not yet aligned by hand: not scored


def read_gold(path: Path) -> list[GoldPair]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if lines[0].split("\t") != GOLD_HEADER:
        raise ValueError(f"{path}: the header must be {' '.join(GOLD_HEADER)} (tab-separated)")
    pairs = []
    for n, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        if len(fields) != 5:
            raise ValueError(f"{path}:{n}: expected 5 tab-separated fields, got {len(fields)}")
        sure, possible = parse_pharaoh(fields[4])
        pair = GoldPair(fields[0], fields[1], fields[2], fields[3], sure, possible, bool(fields[4].strip()))
        src, tgt = len(pair.source.split()), len(pair.target.split())
        if any(not (0 <= i < src and 0 <= j < tgt) for i, j in possible):
            raise ValueError(f"{path}:{n} ({pair.id}): a link is outside {src} source x {tgt} target words")
        pairs.append(pair)
    return pairs
