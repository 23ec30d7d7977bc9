"""Typed-input variants: training pairs as people type them into a box.

Parallel corpora are written text: almost every Tatoeba pair ends in ".", "!" or "?", and a
Spanish question opens with "¿". People type "hola", "tren" or "buenos dias" into a translation
box, and a model that has seen few such inputs reads a bare capitalised word as a name or a
software label ("Hola" → "Hole", "Tren" → "Three"). On the 472 pairs of four words or fewer of the
Tatoeba dev set, the bundled Spanish→English model (beam 5, 2026-11-30) scored BLEU 51.7 as written,
39.7 without the final marks and 34.0 with a lower-case first letter too. Two variants, each for
a share of the pairs chosen by a hash of the source (so reruns agree, as placeholders.protect_share):

- **unpunctuated**: the sentence-final marks of both sides dropped, with Spanish's opening "¿"
  and "¡"; both sides, so the model answers in the input's register ("Hola" → "Hello");
- **lower-cased**: the source's first letter lower-cased; the target kept, so "hola" → "Hello";
- **unaccented**: the source without its accents, tildes and diaeresis and its opening "¿" "¡", as
  typed on a keyboard without them ("donde esta la estacion"); the target kept. 300 Tatoeba dev
  sentences typed so scored 37.7 BLEU Spanish→English, against 51.7 as written (beam 5, 2026-11-30).

None changes a sentence's number of words (the marks go with the word they are attached to),
so guided alignment's word links stay valid.
"""

from __future__ import annotations

import re
import unicodedata
import zlib

# A sentence's final marks, and Spanish's opening ones, attached to a word: a mark standing alone
# ("Hola !") would take a word with it, and one inside quotes ('Dijo "sí."') would leave them unbalanced.
_FINAL = re.compile(r"(?<=\w)[.!?…]+$")
_OPENING = re.compile(r"^[¡¿]+(?=\w)")
_INNER_OPENING = re.compile(r"(?<!^)[¡¿]")
_ATTACHED_OPENING = re.compile(r"[¡¿]+(?=\w)")


def unpunctuated(source: str, target: str) -> tuple[str, str] | None:
    """Both sides without their final marks (and a leading ¡ or ¿); None when either side lacks
    them as `_FINAL` reads them, or holds an opening mark inside ("Tom, ¿vienes?" would keep a
    dangling "¿")."""
    if _INNER_OPENING.search(source) or _INNER_OPENING.search(target):
        return None
    bare = []
    for side in (source.rstrip(), target.rstrip()):
        stripped = _FINAL.sub("", side)
        if stripped == side:
            return None
        bare.append(_OPENING.sub("", stripped))
    return bare[0], bare[1]


def lowercased(source: str) -> str | None:
    """The source with its first letter lower-cased; None when it has none to lower, or the first
    word is in capitals (an acronym, "NASA", stays as written)."""
    first = source.split(maxsplit=1)[0] if source.strip() else ""
    if not first[:1].isupper() or (len(first) > 1 and first.isupper()):
        return None
    return source[0].lower() + source[1:]


def unaccented(source: str) -> str | None:
    """The source with the combining marks of its Latin letters dropped (á → a, ñ → n, ü → u) and
    no "¿" or "¡" before a word; None when it has none. Other scripts keep their marks: a Devanagari
    vowel sign is a letter of the word, not an accent on it."""
    letters: list[str] = []
    for c in unicodedata.normalize("NFD", source):
        if unicodedata.combining(c) and letters and letters[-1].isascii() and letters[-1].isalpha():
            continue
        letters.append(c)
    bare = _ATTACHED_OPENING.sub("", unicodedata.normalize("NFC", "".join(letters)))
    return None if bare == source else bare


def _chosen(source: str, salt: str, rate: float) -> bool:
    return rate > 0 and zlib.crc32((salt + source).encode()) % 1000 < rate * 1000


def typed_share(pairs: list[tuple[str, str]], unpunctuated_rate: float, lowercased_rate: float,
                unaccented_rate: float = 0.0) -> list[tuple[str, str]]:
    """The pairs, about `unpunctuated_rate` of those with final marks on both sides without them,
    about `lowercased_rate` with the source's first letter lower-cased and about `unaccented_rate`
    with its accents dropped (each chosen independently)."""
    if unpunctuated_rate <= 0 and lowercased_rate <= 0 and unaccented_rate <= 0:
        return pairs
    out = []
    for source, target in pairs:
        if _chosen(source, "unpunctuated:", unpunctuated_rate):
            source, target = unpunctuated(source, target) or (source, target)
        if _chosen(source, "lowercased:", lowercased_rate):
            source = lowercased(source) or source
        if _chosen(source, "unaccented:", unaccented_rate):
            source = unaccented(source) or source
        out.append((source, target))
    return out
