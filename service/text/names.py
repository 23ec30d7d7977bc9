"""Names the model never learnt, carried into the translation as written.

A subword model translates a name it never saw piece by piece and often mangles it:
"Gaziantep" comes out "Gaziantp", "Erdoğan" "Erdo ⁇ an". A capitalised source word that is
not a sentence's first word, is rare in the model's training source and whose lower-case
form is rare too, is a name to keep: it goes through the glossary's attention-guided
replacement (glossary.py) as a term translated as itself, so the target words aligned to it
become the word as written. This is Luong et al. (2015)'s rare-word copy at the word level,
placed by the alignment every translation carries.

What the model knows comes with it: `known_words.txt.gz` in the model directory (manifest
`names`), the source words seen at least `capitalised_min` times in the training source, and
the lower-case ones seen at least `lowercase_min` times, written by `attnmt fit-names` with
the dev sets' change. A word in that list ("Estados", and "Geológico" through "geológico")
is left to the model. A model without the list translates as before.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path
from typing import Callable

from attnmt.service.text.case import OPENERS, before
from attnmt.service.text.glossary import Entry, Glossary
from attnmt.service.text.translator import Translation

# A word: letters and digits, with inner hyphens and apostrophes ("Super-G", "O'Brien").
WORD = re.compile(r"\w+(?:[-'’]\w+)*")
# What may surround a name in a whitespace-separated token ("(Gaziantep),").
AROUND = ".,;:!?\"'()[]{}«»“”‘’¿¡—-"


def whole_words(text: str, candidate: Callable[[int, re.Match], bool]) -> list[str]:
    """The words of `text` (the i-th word's match) that `candidate` takes and that are a whole
    whitespace-separated token but for the punctuation around it ("Gaziantep" of "(Gaziantep),",
    not "ASCII" of "ASCII/ANSI"), each once, in order."""
    found: dict[str, None] = {}
    tokens: set[str] | None = None            # made only for a sentence with a candidate
    for i, m in enumerate(WORD.finditer(text)):
        word = m.group()
        if word in found or not candidate(i, m):
            continue
        if tokens is None:
            tokens = {token.strip(AROUND) for token in text.split()}
        if word in tokens:
            found[word] = None
    return list(found)


def read_known(path: Path) -> frozenset[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return frozenset(line.rstrip("\n") for line in f if line.strip())


class Names:
    def __init__(self, known: frozenset[str]):
        self.known = known

    @classmethod
    def from_manifest(cls, model_dir: Path, spec: dict | None) -> "Names | None":
        return cls(read_known(Path(model_dir) / spec["file"])) if spec else None

    def find(self, text: str) -> list[str]:
        """The words of `text` to keep as written, each once, in order. Not a name: a word with a
        digit or an underscore (a cell "F3", a key "F11", an identifier "Estilo1"), and a word
        that is only part of its whitespace-separated token ("ASCII/ANSI", "CR+LF",
        "(NúmeroX|NúmeroY)"): the model copies those itself, and the target word that would be
        replaced holds the rest of the token."""
        def candidate(i: int, m: re.Match) -> bool:
            word = m.group()
            return not (i == 0 or not word[0].isupper() or before(text, m.start()) in OPENERS
                        or any(c.isdigit() or c == "_" for c in word) or word in self.known
                        or word.lower() in self.known)
        return whole_words(text, candidate)

    def apply(self, translation: Translation) -> Translation:
        """`translation` with each name of its source written into every hypothesis where the
        model aligned it (or inserted, where the model dropped it); quality stays the model's."""
        words = self.find(translation.source)
        if not words or not translation.hypotheses:
            return translation
        # The matches are not a request glossary's: Hypothesis.glossary stays for those.
        return Glossary([Entry(w, w) for w in words], "names").apply(translation, record=False)


def count_words(lines) -> Counter[str]:
    """How often each word (WORD) occurs in `lines`, as written."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(WORD.findall(line))
    return counts


def build_known(lines, capitalised_min: int, lowercase_min: int) -> list[str]:
    """The known-words list of a training source: every word seen `capitalised_min` times or
    more, and every lower-case word seen `lowercase_min` times or more; sorted."""
    counts = count_words(lines)
    return sorted(w for w, n in counts.items()
                  if n >= capitalised_min or (n >= lowercase_min and w == w.lower()))


def write_known(path: Path, words: list[str]) -> None:
    # mtime 0: the same list gives the same bytes, so its manifest checksum is reproducible
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write("".join(w + "\n" for w in words).encode("utf-8"))
