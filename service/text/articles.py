"""English's indefinite article agreeing with the word after it: "a agreement" → "an agreement".

The model chooses "a" or "an" before it writes the next word, and before a word it rarely saw it
often chooses wrong: on the newstest2012 dev set one Spanish→English translation in fifty had "a
interview", "a extreme", "an participation". The names, the lexicon and a request's glossary
replace words after the model wrote the article ("a deal" → "a agreement"). For a model whose
target is English, each "a" or "an" the model wrote as a word of its own is written again from the
word that follows it, in the hypothesis' text and pieces alike; the alignment, the scores and the
quality stay the model's.

The rule is by spelling and leaves alone what spelling cannot tell (`article`). The library that
does this, inflect, costs 2.6 s of import on 2 cores (its typeguard instrumentation) and reads
acronyms by letter ("an URL"), which software messages write otherwise, so it is not used.
"""

from __future__ import annotations

import re
from dataclasses import replace

from attnmt.service.modeldir.tokenizer import WORD_BOUNDARY
from attnmt.service.text.translator import Hypothesis, Translation

_ARTICLES = {WORD_BOUNDARY + a: a for a in ("a", "an", "A", "An")}
# the same articles in the text: a word of its own, not "-a" (an option), "a's" or "<a href>"
_TEXT_ARTICLE = re.compile(r"(?<![\w\-'/.<])(?:a|an|A|An)(?=\s)")
_LETTERS = re.compile(r"[^\W\d_]+")
# Words an article never comes before: "a" is then the letter ("point A is", "a of b").
_NOT_AFTER = frozenset("of is and or to in on at by for with from are was were be the as it that than".split())
# "an" although a consonant is written: the h is silent
_SILENT_H = ("hour", "honest", "honor", "honour", "heir")
# "a" although a vowel is written: a "you" or a "w" sound
_CONSONANT_SOUND = ("eu", "ewe", "one", "once", "uni", "use", "usu", "uti", "ura", "uri", "ubiq", "ukul", "utop")


def article(word: str) -> str | None:
    """"a" or "an" before `word` (its letters only, as written), or None where its spelling does not
    say: an acronym read by letters or as a word ("an FBI", "a NASA"), a capitalised word beginning
    with u or y ("an Uber", "a Uruguayan"), an x ("an X-ray"), "un"- before a vowel ("a union",
    "an unusual")."""
    if len(word) < 2 or word.isupper() or word.lower() in _NOT_AFTER:
        return None
    if any(c.isupper() for c in word[1:]):                     # "iPhone", "mRNA"
        return None
    low = word.lower()
    first = low[0]
    if first in "xy" or (first == "u" and word[0].isupper()):
        return None
    if low.startswith(_SILENT_H):
        return "an"
    if low.startswith(_CONSONANT_SOUND):
        return "a"
    if first == "u":
        if len(low) < 3:
            return None
        if low[1] not in "aeiou" and low[2] not in "aeiouy":    # "umbrella", "urgent", "ulcer"
            return "an"
        return None if low[1] == "n" else "a"                   # "unusual" / "union"; "usual"
    return "an" if first in "aeio" else "a"


def agree(translation: Translation) -> Translation:
    """`translation` with every hypothesis' indefinite articles agreeing with the words after them."""
    return replace(translation, hypotheses=[_agree(h) for h in translation.hypotheses])


def _agree(hyp: Hypothesis) -> Hypothesis:
    pieces = hyp.target_tokens
    _, groups = hyp.groups
    articles = [w for w, g in enumerate(groups) if len(g) == 1 and pieces[g[0]] in _ARTICLES
                and g[0] not in hyp.placeholder_targets]
    if not articles:
        return hyp

    def word(w: int) -> str:
        # a word's pieces joined; not hyp.target_words, which also aggregates α to words
        return "".join(pieces[groups[w][0]:groups[w][-1] + 1]).replace(WORD_BOUNDARY, "")
    in_text = list(_TEXT_ARTICLE.finditer(hyp.text))
    if len(in_text) != len(articles):          # text and pieces do not say the same: leave both
        return hyp
    new_pieces, text, shift = list(pieces), hyp.text, 0
    for w, m in zip(articles, in_text):
        written = _ARTICLES[pieces[groups[w][0]]]
        if written[0].isupper() and w > 0 and not word(w - 1).endswith((".", "!", "?", ":", '"', "»")):
            continue                           # "point A is": a letter, not the sentence's article
        if w + 1 >= len(groups) or any(i in hyp.placeholder_targets for i in groups[w + 1]):
            continue
        letters = _LETTERS.match(word(w + 1))
        wanted = article(letters.group()) if letters else None
        if wanted is None or wanted == written.lower():
            continue
        wanted = wanted.capitalize() if written[0].isupper() else wanted
        new_pieces[groups[w][0]] = WORD_BOUNDARY + wanted
        start, end = m.start() + shift, m.end() + shift
        text = text[:start] + wanted + text[end:]
        shift += len(wanted) - len(written)
    if text == hyp.text:
        return hyp
    rewritten = replace(hyp, text=text, target_tokens=new_pieces, computed_quality=None, rewritten_from=hyp)
    rewritten.groups = hyp.groups              # the same pieces a word: the cached_property's value, known here
    return rewritten


__all__ = ["agree", "article"]
