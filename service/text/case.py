"""A sentence's case as the models read it: capitals and Title Case.

The models learnt from text in ordinary case. A capitalised word is, to the tokenizer, another
and rarer word than its small-letter form, so a sentence written all in capitals or with every
word capitalised is read as a string of rare pieces. 300 Tatoeba dev sentences, beam 5, BLEU with
case ignored (2026-11-30): in capitals, Spanish->English 0.8 ("ME REY.") against 52.0 as written;
in Title Case, 21.1 against 52.4 Spanish->English and 17.2 against 47.0 English->Spanish
("La Reunión Se Ha Trasladado Al Próximo Lunes" came back "The Reunion Hashrounded To Monesday").
Both are read in sentence case: a sentence in capitals wholly (and answered in capitals), a
sentence in Title Case word by word, each capitalised word the model knows in small letters
lowered and the others (names: "Madrid", "Tom") kept; it is answered as the model writes it, in
sentence case, which is how Spanish writes titles and many English publications do.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container

from attnmt.service.modeldir.tokenizer import WORD_BOUNDARY

# A word of a Title Case sentence: its letters, after any opening marks ("¿Dónde", "(Nota").
_WORD = re.compile(r"(?<!\S)[^\w\s]*([^\W\d_][\w'’-]*)")
# After one of these (spaces aside) a capital starts a sentence or a quotation, not a name (names.py)
OPENERS = frozenset(".!?:¿¡\"«“‘—([")
# and in a title, after a dash or an apostrophe too
_TITLE_OPENERS = OPENERS | {"-", "'"}
# English's "I", "I'm", "I'll": capitalised in any sentence.
_PRONOUN_I = re.compile(r"I(?:['’]\w+)?$")
# Marks of a program's text rather than a headline's: menu paths, signatures, key=value, markup.
_TECHNICAL = re.compile(r"[▸→;()\[\]{}=|\\<>_]|\s[-–]\s")
# A title's small words: articles, prepositions, conjunctions. English titles write them in small
# letters ("The Crisis of the Euro and the Future of Europe"), some Spanish ones capitalised ("Libia Y
# Túnez"); neither is a name's word. Written out because they are a closed class no data set here lists.
SMALL_WORDS = {
    "en": frozenset("a an and as at but by for from in into nor of on onto or over per than the to up upon "
                    "via vs with".split()),
    "es": frozenset("a al con contra de del desde durante e el en entre hacia hasta la las lo los mediante ni o "
                    "para por que se según sin sobre su sus tras u un una unas unos y".split()),
}


def shouted(text: str, placeholders: re.Pattern | None = None) -> bool:
    """Written in capitals (a headline, a button, a warning): two capital letters or more outside its
    placeholders, and fewer than one small letter in ten."""
    if placeholders is not None:
        text = placeholders.sub(" ", text)
    upper = sum(c.isupper() for c in text)
    return upper >= 2 and 10 * sum(c.islower() for c in text) < upper


def sentence_case(text: str) -> str:
    """A sentence in capitals as the models read best: small letters, the first one a capital."""
    text = text.lower()
    first = next((i for i, c in enumerate(text) if c.isalpha()), None)
    return text if first is None else text[:first] + text[first].upper() + text[first + 1:]


def listed_small(text: str, known: frozenset[str] | None, dictionary: Container[str]) -> str:
    """`text` (a sentence in capitals) with each word that `dictionary` (the model's lexicon,
    lexicon.py) holds in small letters, and that the model knows in no case, in small letters: a
    common noun or adjective to translate, where names.py would keep a word in capitals it never
    learnt as written ("EL ESTILISTA" came back "THE ESTILISTA"). The other words stay as sent."""
    def small(m: re.Match) -> str:
        word = m.group(1)
        lower = word.lower()
        if lower not in dictionary or (known is not None and (word[0] + lower[1:] in known or word in known)):
            return m.group()
        return m.group()[:m.start(1) - m.start()] + lower
    return _WORD.sub(small, text)


# A line's last mark: without one it is a label, a heading or words typed into a box
_FINAL_MARKS = ".!?…:;"
_CLOSING = " \"'»”’)]"
_FIRST_WORD = re.compile(r"[^\w\s]*([^\W\d_][\w'’-]*)")
FIRST_WORD_RULES = ("unmarked", "any", "never")


def first_small(text: str, known: Container[str], rule: str = "unmarked",
                placeholders: re.Pattern | None = None) -> str | None:
    """`text` with its first word in small letters where the model knows the word only so ("Tren"
    → "tren", which it translates "train" where it read "Tren" as "Three"), or None where it is read
    as sent. `rule` (a model's `decoding.first_word`): "unmarked" only a line without a final mark
    (a label, a heading, a word typed into a box: a Spanish sentence's first word is often a verb
    whose capitalised form the model reads better, "Empiece a cantar." → "Start singing." where
    "empiece" gives "She starts singing."), "any" every line, "never" none. A word in capitals, one
    inside a placeholder, or one the model knows capitalised stays as sent."""
    if rule == "never" or (rule == "unmarked" and text.rstrip(_CLOSING)[-1:] in _FINAL_MARKS):
        return None
    m = _FIRST_WORD.match(text)
    if m is None:
        return None
    word = m.group(1)
    small = word[0].lower() + word[1:]
    if not word[0].isupper() or word.isupper() or word in known or small not in known:
        return None
    if placeholders is not None and any(p.start() < m.end(1) and m.start(1) < p.end()
                                        for p in placeholders.finditer(text)):
        return None
    return text[:m.start(1)] + small + text[m.end(1):]


def titled(text: str, placeholders: re.Pattern | None = None, small_words: Container[str] = ()) -> bool:
    """In Title Case (a headline, a post's title): four words or more, three capitalised or more
    past a sentence's or a quotation's start (a dialogue's '"Hola." "¿Y tú?"' starts with capitals,
    and "Bienvenido a San Francisco." has two for a name), none of four letters or more in small
    letters, and at most one in four in small letters ("to", "de": as English and Spanish titles
    write them). Not a sentence in capitals, nor one with a placeholder or the marks of a
    program's text (a menu path "Ver ▸ Navegador", a signature "SUMA(Número 1; Número 2)"), whose
    capitalised words are labels the models learnt as written: read in small letters, 39 help
    prose test lines so detected lost 69.8 -> 43.5 BLEU. `small_words` (SMALL_WORDS) count as
    neither: "Oil Pipeline Plan to Be Rerouted After Threat of Delayed Approval" is a title."""
    # a word counted below opens its token: most sentences have fewer, and are answered before any
    # pattern runs
    if sum(w[:1].isupper() for w in text.split()) < 3 or _TECHNICAL.search(text):
        return False
    if placeholders is not None and placeholders.search(text):
        return False
    words, inner = [], 0
    for m in _WORD.finditer(text):
        word = m.group(1)
        words.append(word)
        # inner: after a space and a word, not opening a sentence or a quotation ("dijo «Hola»")
        if (word[0].isupper() and not word.isupper() and not _PRONOUN_I.match(word)
                and m.start(1) == m.start() and before(text, m.start()) not in _TITLE_OPENERS):
            inner += 1
    content = [w for w in words if w.lower() not in small_words]
    small = sum(w[0].islower() for w in content)
    return (len(words) >= 4 and inner >= 3 and 4 * small <= len(content)
            and all(w[0].isupper() for w in content if sum(c.isalpha() for c in w) >= 4))


def untitled(text: str, known: frozenset[str] | None, dictionary: Container[str] = (),
             small_words: Container[str] = ()) -> str:
    """A Title Case sentence as the models read best: past its first word, each capitalised word
    in small letters where the model knows it so (`known`, the model's known-words list, names.py);
    every one without a list. A word in capitals ("USB", "U.S.") stays, so does one that opens a
    sentence or follows a colon ("Asistente: Selección de campo"), and a name the model knows as
    written and the word after it ("LibreOffice Writer", where "writer" is known: read so, it became
    "escritor"; "Steve Jobs"). After a name it never learnt, the next word is read as any other
    ("Voráček Helped" was kept and became "Voráček Ayuda"), and a title's small words (`small_words`,
    SMALL_WORDS) are read in small letters wherever they stand ("Libia Y Túnez" came back "Libya Y
    Tunez"). A word the model knows in neither case but `dictionary` (the model's lexicon,
    lexicon.py) holds in small letters is a common noun or adjective, not a name: in small letters
    too ("El Estilista" came back "The Estilista"; "Libia", which the model knows capitalised,
    stays)."""
    first, after_name = True, False

    def lower(m: re.Match) -> str:
        nonlocal first, after_name
        word, was_first, was_after_name = m.group(1), first, after_name
        first, after_name = False, False
        if (was_first or not word[0].isupper() or _in_capitals(word, text, m.end())
                or before(text, m.start()) in _TITLE_OPENERS):
            return m.group()
        small = word[0].lower() + word[1:]
        if small in small_words:
            return m.group()[:m.start(1) - m.start()] + small
        if known is not None and small not in known and (small not in dictionary or word in known):
            after_name = word in known
            return m.group()
        if was_after_name:
            return m.group()
        return m.group()[:m.start(1) - m.start()] + small

    return _WORD.sub(lower, text)


def _in_capitals(word: str, text: str, end: int) -> bool:
    """An acronym's word: "USB", "U" of "U.S."; a word of one capital alone is not one ("A", "Y")."""
    return word.isupper() and (len(word) > 1 or text[end:end + 1] == ".")


def as_typed(pieces: list[str], text: str) -> list[str]:
    """A source's pieces with each letter in the case `text` has it, where only the case differs
    (the pieces of `untitled(text)`, matched character by character). Left as they are when the
    pieces do not spell the text (a piece the tokenizer mapped to <unk>)."""
    typed = [c for c in unicodedata.normalize("NFKC", text) if not c.isspace()]
    spelt = [c for p in pieces if not _special(p) for c in p.replace(WORD_BOUNDARY, "")]
    if len(spelt) != len(typed) or any(a.lower() != b.lower() for a, b in zip(spelt, typed)):
        return pieces
    letters = iter(typed)
    return [p if _special(p) else "".join(c if c == WORD_BOUNDARY else next(letters) for c in p) for p in pieces]


def before(text: str, at: int) -> str:
    """The last character before `at` that is not a space; "." at the text's start, which opens it."""
    at -= 1
    while at >= 0 and text[at].isspace():
        at -= 1
    return text[at] if at >= 0 else "."


def _special(piece: str) -> bool:
    """A vocabulary's own symbol, not the text's (an <unk> is spelt, and so does not match)."""
    return piece in ("</s>", "<s>", "<pad>")


__all__ = ["FIRST_WORD_RULES", "OPENERS", "SMALL_WORDS", "as_typed", "before", "first_small", "sentence_case",
           "shouted", "titled", "untitled"]
