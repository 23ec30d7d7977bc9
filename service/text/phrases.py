"""Set phrases: a whole line that is a greeting, a courtesy or a proverb, answered with the
dictionary's translation, scored and aligned by the model.

The corpora close nearly every sentence with a mark, and the pairs of the greetings themselves
("Hola.", "¡Adiós!") are Tatoeba test sentences, removed from training; so a greeting typed as
people type it comes back wrong: "Hola" → "Hole", "Adiós" → "Between", "Hi" → "Hielo". Apertium's
bilingual dictionary lists such set phrases as interjections (`<ij>`: "hola" → "hello", "buenos
días" → "good morning", "más vale tarde que nunca" → "better late than never"), and
`attnmt fit-lexicon` writes them beside the lexicon (`phrases.tsv`, manifest `lexicon.phrases`).

A line matches when, without its opening and closing marks, it is one of them, whatever its case and
accents ("buenos dias", "¡hola!"); ñ is a letter of its own ("cono" is not "coño"), and a line in
capitals is left to the model, being more often a program's label or an acronym ("OK") than a
shout. Its translation is then the dictionary's, with the line's first capital and its marks (a
Spanish target opens a question or an exclamation with ¿ or ¡), and the model decodes it forced
(`Search.forced`): the answer carries the model's own α, links and score like any other. A request
with `use_lexicon` false gets the model's translation.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

FILE = "phrases.tsv"
# what may open or close a line around a set phrase
_OPENING = "¡¿\"'“‘«([ "
_CLOSING = ".!?…\"'”’»)] "
_SPANISH_OPENING = {"?": "¿", "!": "¡"}
_TILDE = "\u0303"                  # combining: ñ decomposed is n and this


def key(text: str) -> str:
    """A phrase as lines are matched against it: case folded, accents dropped but ñ's tilde kept,
    spaces collapsed, a comma kept ("ojos que no ven, corazón que no siente")."""
    decomposed = unicodedata.normalize("NFD", text.casefold())
    kept = "".join(c for i, c in enumerate(decomposed)
                   if not unicodedata.combining(c) or (c == _TILDE and decomposed[i - 1:i] == "n"))
    return " ".join(unicodedata.normalize("NFC", kept).split())


def keyed(phrases: dict[str, str]) -> dict[str, str]:
    """{source: translation} as lines are matched: {key(source): translation}."""
    return {key(source): translation for source, translation in phrases.items()}


def read_phrases(path: Path) -> dict[str, str]:
    """`source<TAB>translation` lines, as written."""
    with open(path, encoding="utf-8") as f:
        return {fields[0]: fields[1] for fields in (line.rstrip("\n").split("\t") for line in f)
                if len(fields) == 2 and fields[0] and fields[1]}


def write_phrases(path: Path, phrases: dict[str, str]) -> None:
    """{source: translation}, sorted, so the same phrases give the same bytes (the manifest's checksum)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(f"{s}\t{t}\n" for s, t in sorted(phrases.items())))


class Phrases:
    def __init__(self, phrases: dict[str, str], target_language: str):
        """phrases: {source: translation} as the dictionary writes them."""
        self.phrases = keyed(phrases)     # key(source) -> translation
        self.longest = max(map(len, self.phrases), default=0)
        self.target_language = target_language

    @classmethod
    def from_manifest(cls, model_dir: Path, lexicon: dict | None, target_language: str) -> "Phrases | None":
        spec = (lexicon or {}).get("phrases")
        if not spec:
            return None
        return cls(read_phrases(Path(model_dir) / spec["file"]), target_language)

    def match(self, text: str) -> str | None:
        """The translation of a line that is a set phrase, in its case and with its marks; None
        for any other line."""
        stripped = text.strip()
        core = stripped.lstrip(_OPENING)
        opening = stripped[:len(stripped) - len(core)]
        core = core.rstrip(_CLOSING)
        closing = stripped[len(opening) + len(core):]
        if len(core) > self.longest and len(" ".join(core.split())) > self.longest:
            return None                   # every sentence comes this way: most are longer than any phrase
        translation = self.phrases.get(key(core)) if core else None
        if translation is None:
            return None
        letters = [c for c in core if c.isalpha()]
        if len(letters) > 1 and all(c.isupper() for c in letters):
            return None
        if letters and core[0].isupper():
            translation = translation[0].upper() + translation[1:]
        # the closing marks as typed, less spaces; a Spanish target opens its own ¿ or ¡
        closing = "".join(c for c in closing if not c.isspace())
        kept_opening = "".join(c for c in opening if c in "\"“‘«([")
        if self.target_language == "es" and closing[:1] in _SPANISH_OPENING:
            kept_opening += _SPANISH_OPENING[closing[0]]
        return kept_opening + translation + closing
