"""Words the model never learnt, translated by the lexicon that comes with it.

A subword model translates a word it never saw piece by piece and often invents one: "los
perdedores" comes out "its perdestors", "el estilista" "the stilist". A model directory may
carry `lexicon.tsv.gz` (manifest `lexicon`), written by `attnmt fit-lexicon` from Apertium's
bilingual dictionary: for each noun or adjective form the model does not know, its translation
alone. Each such word of a sentence, written in small letters as a whole token, goes through the
glossary's attention-guided replacement (glossary.py): the target words aligned to it become the
lexicon's translation, capitalised where they start the sentence. This is Luong et al. (2015)'s
rare-word replacement with a dictionary, placed by the alignment every translation carries.

Unlike a request's glossary, a word the model dropped is left dropped (`insert_dropped`): a
lone word inserted where attention points read worse on the dev sets than the gap. A word in
capitals is a name's ("Libia", not "libia"), and names.py keeps those as written.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from attnmt.service.text.glossary import Entry, Glossary
from attnmt.service.text.names import WORD, whole_words
from attnmt.service.text.translator import Translation


def read_lexicon(path: Path) -> dict[str, str]:
    """`source<TAB>target` lines of a gzipped TSV."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)


def write_lexicon(path: Path, entries: dict[str, str]) -> None:
    # mtime 0: the same entries give the same bytes, so the manifest's checksum is reproducible
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write("".join(f"{s}\t{t}\n" for s, t in sorted(entries.items())).encode("utf-8"))


class Lexicon:
    def __init__(self, entries: dict[str, str]):
        self.entries = entries

    @classmethod
    def from_manifest(cls, model_dir: Path, spec: dict | None) -> "Lexicon | None":
        return cls(read_lexicon(Path(model_dir) / spec["file"])) if spec else None

    def find(self, text: str) -> list[str]:
        """The lexicon's words in `text`, each once, in order: whole whitespace-separated tokens
        but for the punctuation around them (not "ASCII/ANSI"'s parts), as written."""
        if self.entries.keys().isdisjoint(WORD.findall(text)):    # most sentences: one pass in C
            return []
        return whole_words(text, lambda _, m: m.group() in self.entries)

    def apply(self, translation: Translation) -> Translation:
        """`translation` with each such word's translation written where the model aligned it;
        quality stays the model's."""
        words = self.find(translation.source)
        if not words or not translation.hypotheses:
            return translation
        glossary = Glossary([Entry(w, self.entries[w]) for w in words], "lexicon", exact_case=True,
                            insert_dropped=False)
        return glossary.apply(translation, record=False)
