"""Decontamination: no sentence of a test or dev set in any training split.

One rule, used by the corpus builders of general Spanish (Tatoeba, news, names, State of the
Union) and by `attnmt data mix` for every corpus it mixes. Sentences are compared by `key`:
NFKC, case-folded, every punctuation, separator, control and format character removed (Unicode
categories P*, Z*, Cc, Cf: "¿", "’" and a no-break space go as "." and " " do). Exact
comparison misses most of what a corpus shares with a test set: "¿Qué hora es?" in a test set
and "Qué hora es" in training are the same sentence. Accents are letters and stay ("él" is not
"el"), and so are symbols ("5 €" is not "5 $").

A training pair leaves when its Spanish side is a held-out Spanish sentence or its English side
a held-out English sentence (each side against the same side). A synthetic source's leading tag
(`<bt> `) is no part of the sentence.

Held-out sets are named by path (`--exclude PATH ...`):
- a corpus directory: its dev and test splits (`{split}.tsv` or `{split}.es` + `{split}.en`; a
  TSV whose first line names `source` and `target` columns, as tests/data/gold-alignments', is
  read by those columns);
- a folder of public test sets laid out as OPUS-MT-testsets' `testsets/spa-eng/` (NAME.spa,
  NAME.eng): the sets of PUBLIC_TEST_SETS it holds, never the older WMT years beside them,
  which are training data;
- a file: NAME.spa or NAME.es (Spanish), NAME.eng or NAME.en (English), NAME.tsv (both);
- a prefix NAME with NAME.spa and NAME.eng (or NAME.es and NAME.en) beside it.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

REPO = Path(__file__).resolve().parents[2]
# Public test sets, and the dev set, of the general domain: never trained on.
PUBLIC_TEST_SETS = ("flores200-devtest", "newstest2012", "newstest2013", "tatoeba-test-v2021-08-07")
# In the repository, so every checkout has them: the public test sets' copies, the everyday set
# and the gold alignments. Built corpora (data/bible, data/news...) are named with --exclude, and
# `attnmt data mix` adds the dev and test splits of every corpus it mixes.
DEFAULT_EXCLUDE = (REPO / "tests/data/public", REPO / "tests/data/everyday", REPO / "tests/data/gold-alignments")
SIDES = {".spa": "es", ".es": "es", ".eng": "en", ".en": "en"}
# Punctuation, separators, controls and format characters (soft hyphen, zero-width space);
# unassigned, private-use and surrogate code points are no text anyone compares.
_DROPPED_CATEGORIES = frozenset({"Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Zs", "Zl", "Zp", "Cc", "Cf"})
_TAG = re.compile(r"^<[a-z]+> ")


def key(text: str) -> str:
    """The form in which two sentences count as the same: NFKC, case-folded, without punctuation,
    spaces or control characters."""
    return unicodedata.normalize("NFKC", text).casefold().translate(_deletions())


@functools.cache
def _deletions() -> dict[int, None]:
    """str.translate's table deleting every assigned character of the dropped categories (a scan
    of all code points, once: str.translate is what makes keying a million sentences quick)."""
    return {cp: None for cp in range(sys.maxunicode + 1)
            if unicodedata.category(chr(cp)) in _DROPPED_CATEGORIES}


@dataclass
class HeldOut:
    """Keys of held-out sentences, each side apart, each mapped to the set it came from."""
    es: dict[str, str] = field(default_factory=dict)
    en: dict[str, str] = field(default_factory=dict)
    sets: dict[str, dict[str, int]] = field(default_factory=dict)    # name → {side: sentences}

    def add(self, name: str, side: str, sentences: Iterable[str]) -> None:
        """Add one side of a set; a set's side already added (named twice) is not added again."""
        if side in self.sets.get(name, {}):
            return
        keys = getattr(self, side)
        count = 0
        for sentence in sentences:
            k = key(sentence)
            if k:                                   # a letterless line would match every other one
                keys.setdefault(k, name)
                count += 1
        self.sets.setdefault(name, {})[side] = count

    def match(self, source: str, target: str) -> str | None:
        """The held-out set that holds the pair's Spanish or English sentence, or None."""
        return self.es.get(key(_TAG.sub("", source, count=1))) or self.en.get(key(target))

    def describe(self) -> str:
        """'name (es n, en n); ...' for data cards."""
        return "; ".join(f"`{name}` ({', '.join(f'{side} {n}' for side, n in sides.items())})"
                         for name, sides in self.sets.items() if any(sides.values())) or "none"


def remove(rows: list[tuple], held: HeldOut, removed: Counter) -> list[tuple]:
    """Rows (..., Spanish, English) whose sides are not held out; each removal counted under the
    held-out set that caused it."""
    kept = []
    for row in rows:
        name = held.match(row[-2], row[-1])
        if name:
            removed[name] += 1
        else:
            kept.append(row)
    return kept


def load(paths: Iterable[Path] | None) -> HeldOut:
    """The held-out sets at `paths`, or at DEFAULT_EXCLUDE when None. A path given that holds no
    held-out set is an error (a set that silently vanished would leak); a default one that is
    missing (an installed package without tests/) is reported and skipped."""
    held = HeldOut()
    for path in DEFAULT_EXCLUDE if paths is None else paths:
        if not add_path(held, Path(path)):
            if paths is not None:
                raise SystemExit(f"--exclude {path}: no dev or test split, no public test set and no sentence "
                                 "file there (build it first, or leave it out knowingly)")
            print(f"attnmt data: {path} not found: its sentences are not excluded", file=sys.stderr)
    return held


def add_path(held: HeldOut, path: Path) -> bool:
    """Add what `path` holds (see the module doc); False when it holds nothing of the kinds."""
    if path.is_dir():
        found = False
        for split in ("dev", "test"):
            tsv, es, en = path / f"{split}.tsv", path / f"{split}.es", path / f"{split}.en"
            if tsv.exists():
                _add_tsv(held, f"{_shown(path)}/{split}", tsv)
                found = True
            elif es.exists() and en.exists():
                held.add(f"{_shown(path)}/{split}", "es", _lines(es))
                held.add(f"{_shown(path)}/{split}", "en", _lines(en))
                found = True
        for name in PUBLIC_TEST_SETS:
            found = add_path(held, path / name) or found
        return found
    if path.suffix in SIDES and path.exists():
        held.add(path.stem, SIDES[path.suffix], _lines(path))
        return True
    if path.suffix == ".tsv" and path.exists():
        _add_tsv(held, path.stem, path)
        return True
    for es, en in ((".spa", ".eng"), (".es", ".en")):
        if Path(f"{path}{es}").exists() and Path(f"{path}{en}").exists():
            held.add(path.name, "es", _lines(Path(f"{path}{es}")))
            held.add(path.name, "en", _lines(Path(f"{path}{en}")))
            return True
    return False


def _shown(path: Path) -> str:
    """A directory as a card names it: relative to the working directory or the repository."""
    for base in (Path.cwd(), REPO):
        try:
            return str(path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _add_tsv(held: HeldOut, name: str, path: Path) -> None:
    rows = [line.split("\t") for line in _lines(path) if line.strip()]
    columns = (0, 1)
    if rows and "source" in rows[0] and "target" in rows[0]:
        columns = (rows[0].index("source"), rows[0].index("target"))
        rows = rows[1:]
    held.add(name, "es", (row[columns[0]] for row in rows if len(row) > columns[0]))
    held.add(name, "en", (row[columns[1]] for row in rows if len(row) > columns[1]))
