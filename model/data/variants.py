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
- **lower-cased**: the source's first letter lower-cased; the target kept, so "hola" → "Hello".

Neither changes a sentence's number of words (the marks go with the word they are attached to),
so guided alignment's word links stay valid.
"""

from __future__ import annotations

import re
import zlib

# A sentence's final marks, and Spanish's opening ones, attached to a word: a mark standing alone
# ("Hola !") would take a word with it, and one inside quotes ('Dijo "sí."') would leave them unbalanced.
_FINAL = re.compile(r"(?<=\w)[.!?…]+$")
_OPENING = re.compile(r"^[¡¿]+(?=\w)")
_INNER_OPENING = re.compile(r"(?<!^)[¡¿]")


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


def _chosen(source: str, salt: str, rate: float) -> bool:
    return rate > 0 and zlib.crc32((salt + source).encode()) % 1000 < rate * 1000


def typed_share(pairs: list[tuple[str, str]], unpunctuated_rate: float,
                lowercased_rate: float) -> list[tuple[str, str]]:
    """The pairs, about `unpunctuated_rate` of those with final marks on both sides without them
    and about `lowercased_rate` with the source's first letter lower-cased (independently chosen)."""
    if unpunctuated_rate <= 0 and lowercased_rate <= 0:
        return pairs
    out = []
    for source, target in pairs:
        if _chosen(source, "unpunctuated:", unpunctuated_rate):
            source, target = unpunctuated(source, target) or (source, target)
        if _chosen(source, "lowercased:", lowercased_rate):
            source = lowercased(source) or source
        out.append((source, target))
    return out
