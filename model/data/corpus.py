"""Parallel corpora: the SWORD Bible extractor, the fixed book split, and readers.

The default corpus pairs the Spanish Reina-Valera 1909 (`spaRV1909eb`) with the
World English Bible (`engWEB2015eb`), both public domain and packaged by Debian
(`sword-text-sparv`, `sword-text-web`). `mod2imp` (from `libsword-utils`) exports
a module as OSIS markup, one `$$$Book C:V` header per verse; we strip the
markup ourselves so footnotes, Strong's numbers and pilcrows never reach the
text.

Any other parallel corpus is read from a TSV (`source<TAB>target`) or from two
line-aligned files, the formats every MT toolkit reads.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

SOURCE_MODULE = "spaRV1909eb"
TARGET_MODULE = "engWEB2015eb"
DEBIAN_PACKAGES = "sword-text-sparv sword-text-web libsword-utils"

# Whole books, so that parallel passages (Kings/Chronicles, the synoptic
# gospels) cannot leak between train and test. Names as mod2imp prints them.
TEST_BOOKS = ("Ruth", "Esther", "Jonah", "Joel", "Micah", "Galatians",
              "Philippians", "James", "I Peter", "I John")
DEV_BOOKS = ("Nahum", "Habakkuk", "Zephaniah", "Titus", "Colossians", "Jude")

_HEADER = re.compile(r"^\$\$\$(?P<book>.+) (?P<chapter>\d+):(?P<verse>\d+)\s*$")
_DROP_ELEMENTS = re.compile(
    r"<note\b[^>]*?/>|<note\b.*?</note>"            # footnotes and cross references
    r"|<title\b(?![^>]*canonical=\"true\")[^>]*>.*?</title>",  # editorial headings
    re.S)
_BLOCK_TAGS = re.compile(r"</?(?:l|lg|lb|p|div|chapter|milestone|title)\b[^>]*>")
_ANY_TAG = re.compile(r"<[^>]+>")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?)\]»”’])")
_SPACE_AFTER_OPEN = re.compile(r"([(\[«“¿¡])\s+")
_LEADING_CAPS = re.compile(r"^([^\wÁÉÍÓÚÑÜ]*)((?:[A-ZÁÉÍÓÚÑÜ]\s+)?)([A-ZÁÉÍÓÚÑÜ]{2,})\b")


@dataclass(frozen=True)
class Pair:
    """One aligned sentence pair; `id` is the verse reference for the Bible."""
    id: str
    source: str
    target: str


def clean_osis(markup: str) -> str:
    """Turn one verse of OSIS markup into plain text."""
    text = _DROP_ELEMENTS.sub(" ", markup)
    text = _BLOCK_TAGS.sub(" ", text)
    text = _ANY_TAG.sub("", text)
    text = html.unescape(text).replace("¶", " ").replace("\u00a0", " ")
    text = " ".join(text.split())
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _SPACE_AFTER_OPEN.sub(r"\1", text)
    return text


def fix_chapter_caps(text: str) -> str:
    """Reina-Valera upper-cases the first word of a chapter ('Y ACONTECIÓ en'):
    restore normal case so the model does not learn a second spelling."""
    def fix(m: re.Match) -> str:
        first = m.group(3).lower()
        if not m.group(2):  # the capitalised word opens the verse: keep its initial
            first = first[0].upper() + first[1:]
        return m.group(1) + m.group(2) + first
    return _LEADING_CAPS.sub(fix, text, count=1)


def parse_imp(lines: Iterable[str]) -> dict[str, str]:
    """Parse a `mod2imp` export into {'Book C:V': cleaned text}; chapter and
    book headings (verse 0) are skipped."""
    verses: dict[str, str] = {}
    key, body = None, []

    def flush() -> None:
        if key is not None:
            text = clean_osis("".join(body))
            if text:
                verses[key] = text

    for line in lines:
        m = _HEADER.match(line.rstrip("\n"))
        if m or line.startswith("$$$"):
            flush()
            key = None if not m or m["verse"] == "0" else f"{m['book']} {m['chapter']}:{m['verse']}"
            body = []
        elif key is not None:
            body.append(line)
    flush()
    return verses


def book_of(verse_id: str) -> str:
    return verse_id.rsplit(" ", 1)[0]


def split_of(verse_id: str) -> str:
    book = book_of(verse_id)
    if book in TEST_BOOKS:
        return "test"
    if book in DEV_BOOKS:
        return "dev"
    return "train"


def align_bibles(source: dict[str, str], target: dict[str, str]) -> list[Pair]:
    """Verse pairs present and non-empty on both sides, in canonical order."""
    pairs = []
    for vid, src in source.items():
        tgt = target.get(vid)
        if tgt:
            if vid.endswith(":1"):
                src = fix_chapter_caps(src)
            pairs.append(Pair(vid, src, tgt))
    return pairs


def export_module(module: str) -> list[str]:
    """Run `mod2imp MODULE`; explain what to install when it cannot."""
    if shutil.which("mod2imp") is None:
        raise SystemExit(f"mod2imp not found: run `apt-get install {DEBIAN_PACKAGES}`")
    proc = subprocess.run(["mod2imp", module], capture_output=True, text=True)
    if proc.returncode != 0 or "$$$" not in proc.stdout:
        raise SystemExit(
            f"SWORD module {module} is not installed (mod2imp said: "
            f"{(proc.stderr or proc.stdout).strip()[:200]!r}): run `apt-get install {DEBIAN_PACKAGES}`")
    return proc.stdout.splitlines(keepends=True)


def write_split(pairs: list[Pair], out_dir: Path, src_lang: str = "es", tgt_lang: str = "en") -> dict[str, int]:
    """Write `{split}.{src_lang}`, `{split}.{tgt_lang}` and `{split}.ids`, line-aligned."""
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in ("train", "dev", "test"):
        part = [p for p in pairs if split_of(p.id) == split]
        counts[split] = len(part)
        for suffix, field in ((src_lang, "source"), (tgt_lang, "target"), ("ids", "id")):
            with open(out_dir / f"{split}.{suffix}", "w", encoding="utf-8") as f:
                f.writelines(getattr(p, field) + "\n" for p in part)
    return counts


DATA_CARD = """# Data card: Spanish→English Bible corpus

- **Source side**: Reina-Valera 1909 (`{src}`), Debian package `sword-text-sparv`. Public domain.
- **Target side**: World English Bible (`{tgt}`), Debian package `sword-text-web`. Public domain.
- **Extraction**: `mod2imp MODULE` (Debian `libsword-utils`), OSIS markup stripped by
  `model/data/corpus.py` (footnotes, Strong's tags and editorial headings dropped; canonical
  psalm titles kept); Reina-Valera's upper-cased chapter openings restored to normal case.
- **Pairs**: verses non-empty on both sides, chapter headings (`C:0`) excluded: {total} pairs.
- **Split by whole book**, so parallel passages cannot leak:
  - test ({test} verses): {test_books}
  - dev ({dev} verses): {dev_books}
  - train ({train} verses): every other verse.
- **Files**: `{{split}}.es`, `{{split}}.en`, `{{split}}.ids` (verse reference), one verse per line.
- **Caveats**: archaic 1909 Spanish against modern English; verse boundaries are
  the only alignment (a few verses differ in extent between the two versions).
"""


def extract_bible(out_dir: Path) -> dict[str, int]:
    """`attnmt data bible OUT_DIR`: export, align, split and document the corpus."""
    source = parse_imp(export_module(SOURCE_MODULE))
    target = parse_imp(export_module(TARGET_MODULE))
    pairs = align_bibles(source, target)
    counts = write_split(pairs, out_dir)
    card = DATA_CARD.format(src=SOURCE_MODULE, tgt=TARGET_MODULE, total=len(pairs),
                            test_books=", ".join(TEST_BOOKS), dev_books=", ".join(DEV_BOOKS), **counts)
    (out_dir / "DATA_CARD.md").write_text(card, encoding="utf-8")
    (out_dir / "counts.json").write_text(json.dumps({"pairs": len(pairs), **counts}, indent=2) + "\n")
    return counts


