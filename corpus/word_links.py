"""Reading word-link files: a statistical aligner's (`attnmt data links` writes eflomal's,
guided alignment trains on them) and the hand-aligned gold set that measurement scores
against. Making links from α, and writing them, is serving's: service/modeldir/links.py.

A link is (i, j): i a source word, j a target word, 0-based, as Pharaoh's `i-j` (the
format of fast_align, eflomal and Marian; `</s>` is never a word). Gold files mark
Sure links `i-j` and Possible-only links `ipj`; Sure ⊆ Possible. The gold set is one
TSV per split (tests/data/gold-alignments/): id, domain, source, target, links. Its
`languages.txt` names the source and target columns' languages (`es<TAB>en`, the TSV
convention of corpus/splits.py); a model of the other direction reads the pairs
reversed (`gold_reversed`, `read_gold(reverse=True)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnmt.corpus.splits import COLUMNS_FILE, tsv_languages

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


def reversed_links(links: Links) -> Links:
    """The same links read the other way: (i, j) -> (j, i)."""
    return {(j, i) for i, j in links}


def reversed_pair(pair: GoldPair) -> GoldPair:
    """The pair read the other way: its target the source, each Sure and Possible link reversed."""
    return GoldPair(pair.id, pair.domain, pair.target, pair.source, reversed_links(pair.sure),
                    reversed_links(pair.possible), pair.annotated)


def gold_reversed(gold_dir: Path, source_language: str, target_language: str) -> bool:
    """Whether a model translating source_language→target_language reads the gold set in
    `gold_dir` reversed: its languages.txt declares the other order. A directory without one
    is read as it is; one that declares neither order is refused."""
    columns = tsv_languages(Path(gold_dir))
    if columns is None or columns == (source_language, target_language):
        return False
    if columns == (target_language, source_language):
        return True
    raise ValueError(f"{Path(gold_dir) / COLUMNS_FILE} declares the gold set {columns[0]}→{columns[1]}; the model "
                     f"translates {source_language}→{target_language}, neither that order nor its reverse")


def read_gold(path: Path, reverse: bool = False) -> list[GoldPair]:
    """The pairs of one gold TSV, each reversed (`reversed_pair`) if `reverse`."""
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
    return [reversed_pair(pair) for pair in pairs] if reverse else pairs
