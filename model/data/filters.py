"""Filters shared by the prose, back-translation and CLDR corpora, and the held-out sets.

Each filter names the reason it drops a pair, so that every corpus reports how
many pairs each rule removed (its `counts.json` and data card). Held-out
sentences (the dev and test splits of the Bible and the software messages, and
the everyday test set in `tests/data/everyday`) leave every training set, the
way `attnmt data gettext` removes its test catalogs' messages: compared
case-folded with whitespace collapsed, on either side of a pair.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Iterable

from attnmt.model.data.gettext import leak_key, normalise

MAX_CHARS = 300          # either side longer than this: a table or a code listing, not a sentence
MAX_RATIO = 2.0          # character-length ratio beyond which a pair is taken as misaligned...
RATIO_MIN_CHARS = 20     # ...once its longer side has more than this many characters

# Function words frequent in one language and absent (as words) from the other: PO-based
# translations fall back to the English text where a segment is untranslated.
ENGLISH_WORDS = frozenset("the of and to is are you your this that with for from be by it an "
                          "can will which was were has have not or as at on if when into".split())
SPANISH_WORDS = frozenset("el la los las de del que y en un una para con por se su sus al es "
                          "son como más o pero si cuando este esta puede lo le".split())
_WORD = re.compile(r"[^\W\d_]+")
_LETTER = re.compile(r"[^\W\d_]")


def looks_english(text: str) -> bool:
    """True when English function words outnumber Spanish ones, two at least."""
    words = [w.lower() for w in _WORD.findall(text)]
    english = sum(w in ENGLISH_WORDS for w in words)
    spanish = sum(w in SPANISH_WORDS for w in words)
    return english >= 2 and english > spanish


def reject_reason(source: str, target: str) -> str | None:
    """Why a (Spanish, English) sentence pair is dropped, or None to keep it."""
    if not source or not target:
        return "empty"
    if not _LETTER.search(source) or not _LETTER.search(target):
        return "letterless"
    if leak_key(source) == leak_key(target):
        return "untranslated"
    if looks_english(source):
        return "spanish_side_english"
    if len(source) > MAX_CHARS or len(target) > MAX_CHARS:
        return "too_long"
    longer, shorter = max(len(source), len(target)), min(len(source), len(target))
    if longer > RATIO_MIN_CHARS and longer > MAX_RATIO * shorter:
        return "length_ratio"
    return None


def filter_pairs(pairs: Iterable[tuple[str, str]], dropped: Counter) -> list[tuple[str, str]]:
    """Whitespace-normalised pairs that pass `reject_reason`; reasons counted in `dropped`."""
    kept = []
    for source, target in pairs:
        source, target = normalise(source), normalise(target)
        reason = reject_reason(source, target)
        if reason:
            dropped[reason] += 1
        else:
            kept.append((source, target))
    return kept


def held_out_keys(data_dirs: Iterable[Path]) -> set[str]:
    """Leak keys of every sentence, either side, of the dev and test splits found in
    each directory (`{split}.tsv` or `{split}.es` + `{split}.en`). A directory with
    neither split is an error: a held-out set that silently vanished would leak."""
    from attnmt.corpus.splits import corpus_files, read_parallel
    keys: set[str] = set()
    for data_dir in data_dirs:
        found = 0
        for split in ("dev", "test"):
            try:
                files = corpus_files(Path(data_dir), split, "es", "en")
            except FileNotFoundError:
                continue
            found += 1
            for source, target in read_parallel(*files):
                keys.add(leak_key(source))
                keys.add(leak_key(target))
        if not found:
            raise SystemExit(f"held-out set {data_dir} has no dev or test split: build it first "
                             "(or leave it out of --held-out knowingly)")
    keys.discard("")
    return keys


def is_held_out(source: str, target: str, keys: set[str]) -> bool:
    return leak_key(source) in keys or leak_key(target) in keys


def describe(counts: dict) -> str:
    """'reason n, reason n' by decreasing count, for data cards."""
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"

