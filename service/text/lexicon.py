"""Words the model never learnt, translated by the lexicon that comes with it.

A subword model translates a word it never saw piece by piece and often invents one: "los
perdedores" comes out "its perdestors", "el estilista" "the stilist". A model directory may
carry `lexicon.tsv.gz` (manifest `lexicon`), written by `attnmt fit-lexicon` from Apertium's
bilingual dictionary: for each noun or adjective form the model never learnt or saw rarely (the
threshold is the fit's, bench/lexicon.py), its translation alone, and for each name the other
language spells otherwise ("Camerún" → "Cameroon"), its translation. Each such word of a
sentence, written as the lexicon writes it as a whole token, goes through the glossary's
attention-guided replacement (glossary.py): the target words aligned to it become the lexicon's
translation, capitalised where they start the sentence; a Spanish adjective in the form that
agrees with the words before it (`agreement`). This is Luong et al. (2015)'s
rare-word replacement with a dictionary, placed by the alignment every translation carries.

Unlike a request's glossary, a word the model dropped is left dropped (`insert_dropped`): a
lone word inserted where attention points read worse on the dev sets than the gap. A capitalised
word is a name's ("Libia", not the adjective "libia"), and names.py keeps those as written unless
the lexicon lists the name.

For a Spanish target the lexicon may also carry a table of Spanish nouns and their genders
(`genders.tsv.gz`, manifest `lexicon.genders`): the determiner right before such a noun, the
lexicon's or the model's own, is written in its gender (determiners.py).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from attnmt.service.text import determiners
from attnmt.service.text.determiners import DETERMINERS
from attnmt.service.text.glossary import Entry, Glossary
from attnmt.service.text.names import WORD, whole_words
from attnmt.service.text.translator import Translation

# Endings of Spanish nouns that are mostly feminine ("la protección", "la ciudad")
_FEMININE = ("a", "ión", "dad", "tad", "tud", "umbre")
_FEMININE_PLURAL = ("as", "iones", "dades", "tades", "tudes", "umbres")


def read_lexicon(path: Path) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """`source<TAB>target[<TAB>forms]` lines of a gzipped TSV: the entries, and for a Spanish
    adjective its four forms (agreement)."""
    entries, forms = {}, {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2:
                entries[fields[0]] = fields[1]
            four = tuple(fields[2].split(" ")) if len(fields) == 3 else ()
            if len(four) == 4:                                      # masculine, feminine; singular, plural
                forms[fields[0]] = four
    return entries, forms


def read_genders(path: Path) -> dict[str, tuple[str, str]]:
    """`noun<TAB>gender[<TAB>other readings]` lines of a gzipped TSV: {Spanish noun: (m or f, the
    tags of its other readings, a verb's form; "" if none)} (determiners.py), as write_genders writes them."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return {fields[0]: (fields[1], fields[2] if len(fields) > 2 else "")
                for fields in (line.rstrip("\n").split("\t") for line in f)
                if len(fields) >= 2 and fields[1] in ("m", "f")}


def write_genders(path: Path, genders: dict[str, tuple[str, str]]) -> None:
    """{noun: (gender, its other readings' tags, "" if none)}, reproducibly (write_lexicon)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write("".join(f"{w}\t{g}" + (f"\t{other}" if other else "") + "\n"
                        for w, (g, other) in sorted(genders.items())).encode("utf-8"))


def write_lexicon(path: Path, entries: dict[str, str], forms: dict[str, tuple[str, ...]] | None = None) -> None:
    forms = forms or {}
    # mtime 0: the same entries give the same bytes, so the manifest's checksum is reproducible
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write("".join(f"{s}\t{t}" + (f"\t{' '.join(forms[s])}" if s in forms else "") + "\n"
                        for s, t in sorted(entries.items())).encode("utf-8"))


def _written(acronym: str, text: str) -> bool:
    """Whether `text` has `acronym`'s letters as a word of their own, with or without points: the
    model wrote "U.N." for "ONU", which "UN" written over its letters would leave "UN."."""
    letters = [c for c in acronym if c.isalpha()]
    pattern = r"(?<!\w)" + r"\.?".join(map(re.escape, letters)) + r"\.?(?!\w)"
    return bool(letters) and re.search(pattern, text) is not None


def agreement(before: list[str]) -> int:
    """Which form a Spanish adjective takes after the words `before` it (0–3, as DETERMINERS):
    the nearest determiner's among the last three words ("los niños [obesos]", "la protección
    [desinteresada]"), else the previous word's ending ("-as", "-iones", a plural's "-s", "-a",
    "-ión"), else masculine singular. A rule, not a parser: Spanish has no tagger the service could carry."""
    last = [w.lower().strip(".,;:!?\"'«»()") for w in before[-3:]]
    for word in reversed(last):
        if word in DETERMINERS:
            return DETERMINERS[word]
    word = last[-1] if last else ""
    if word.endswith(_FEMININE_PLURAL):
        return 3
    if word.endswith("s"):
        return 2
    return 1 if word.endswith(_FEMININE) else 0


class Lexicon:
    def __init__(self, entries: dict[str, str], forms: dict[str, tuple[str, ...]] | None = None,
                 genders: dict[str, tuple[str, str]] | None = None):
        """genders: Spanish nouns, for the determiners before them (determiners.py)."""
        self.entries = entries
        self.forms = forms or {}
        self.genders = genders or {}

    @classmethod
    def from_manifest(cls, model_dir: Path, spec: dict | None) -> "Lexicon | None":
        if not spec:
            return None
        genders = read_genders(Path(model_dir) / spec["genders"]["file"]) if spec.get("genders") else None
        return cls(*read_lexicon(Path(model_dir) / spec["file"]), genders)

    def find(self, text: str) -> list[str]:
        """The lexicon's words in `text`, each once, in order: whole whitespace-separated tokens
        but for the punctuation around them (not "ASCII/ANSI"'s parts), as written."""
        if self.entries.keys().isdisjoint(WORD.findall(text)):    # most sentences: one pass in C
            return []
        return whole_words(text, lambda _, m: m.group() in self.entries)

    def apply(self, translation: Translation, capitals: bool = False) -> Translation:
        """`translation` with each such word's translation written where the model aligned it, and
        the determiners before Spanish nouns agreeing with them; quality stays the model's.
        capitals: the sentence was sent in capitals, where an acronym ("WHO", "US") cannot be told
        from a word: the lexicon's acronyms are left out."""
        if not translation.hypotheses:
            return translation
        words = [w for w in self.find(translation.source)
                 if not (w.isupper() and (capitals or _written(self.entries[w], translation.best.text)))]
        if words:
            glossary = Glossary([Entry(w, self.entries[w]) for w in words], "lexicon", exact_case=True,
                                insert_dropped=False, inflect=self._inflect if self.forms else None)
            translation = glossary.apply(translation, record=False)
        return determiners.agree(translation, self.genders) if self.genders else translation

    def _inflect(self, entry: Entry, target: str, before: list[str]) -> str:
        """An adjective's form agreeing with the words before it, in `target`'s case."""
        forms = self.forms.get(entry.source)
        if not forms:
            return target
        form = forms[agreement(before)]
        return form[0].upper() + form[1:] if target[:1].isupper() else form
