"""Spanish determiners agreeing with the noun after them: "un bomba" → "una bomba", "del oficina"
→ "de la oficina", "la lujo" → "el lujo".

The model chooses a determiner before it writes the noun, and before a noun it rarely saw it often
chooses the other gender ("El economía japonés", "Los ganancias"); the lexicon also writes its
noun over the model's word, after the model chose the determiner for that word ("el concurso" →
"el conquista"). For a model whose target is Spanish and whose lexicon carries a table of Spanish
nouns and their genders (`genders.tsv.gz`, from Apertium's analyser, written by `attnmt
fit-lexicon`), each determiner the model wrote as a word of its own right before such a noun is
written in the noun's gender, in the hypothesis' pieces and text; its row of α and its score stay
the model's. It comes with the lexicon (`use_lexicon`), the other thing the dictionary brings.

A rule on two words, not a parser: only the word right before the noun ("la nueva casa" is left
to the model), and what the table cannot tell is left as written (a noun of both genders,
"artista"; a word that is also an adjective or a name; a feminine noun in a- after "el" or "un",
whose stress decides: "el agua", "la abeja"). Where the noun is also a verb, "la", "las" and
"los" may be its pronoun ("la cambio"): left as written.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from attnmt.service.modeldir.tokenizer import WORD_BOUNDARY
from attnmt.service.text.alignment import EOS_TOKEN
from attnmt.service.text.placeholders import detokenize
from attnmt.service.text.translator import Hypothesis, Translation

# A Spanish determiner and the form it asks for: 0 masculine singular, 1 feminine singular, 2
# masculine plural, 3 feminine plural (the order of a lexicon adjective's forms).
DETERMINERS = {w: k for k, words in enumerate((
    "el un del al este ese aquel otro mucho poco nuestro vuestro algún ningún todo dicho cuyo",
    "la una esta esa aquella otra mucha poca nuestra vuestra alguna ninguna toda dicha cuya",
    "los unos estos esos aquellos otros muchos pocos nuestros vuestros algunos todos dichos cuyos varios",
    "las unas estas esas aquellas otras muchas pocas nuestras vuestras algunas todas dichas cuyas varias"))
    for w in words.split()}
# Determiners that differ by gender only, each to the other ("el" ↔ "la"); "todo" and "toda" are
# left out, as they come before an article more often than before a noun
_GENDER_PAIRS = {a: b for pair in (
    "el la", "un una", "los las", "unos unas", "este esta", "estos estas", "ese esa", "esos esas",
    "aquel aquella", "aquellos aquellas", "otro otra", "otros otras", "nuestro nuestra", "nuestros nuestras",
    "vuestro vuestra", "vuestros vuestras", "algún alguna", "algunos algunas", "ningún ninguna", "varios varias",
    "dicho dicha", "dichos dichas", "mucho mucha", "muchos muchas", "poco poca", "pocos pocas", "cuyo cuya",
    "cuyos cuyas")
    for a, b in (pair.split(), pair.split()[::-1])}
_SINGULAR = frozenset(w for w in _GENDER_PAIRS if DETERMINERS[w] < 2)
_CONTRACTED = ("del", "al")
_ANY = frozenset(_GENDER_PAIRS) | frozenset(_CONTRACTED)
# also a pronoun before a verb ("la cambio", "los conquistas")
_CLITICS = frozenset({"la", "las", "los"})
# a noun's letters, and what may follow them in its word: punctuation only ("casa.", "casa»,")
_NOUN = re.compile(r"([^\W\d_]+)[^\w]*")


def determiner(gender: str, noun: str, before: list[str]) -> tuple[int, list[str]] | None:
    """The determiner right before a Spanish `noun` of `gender` ("m", "f") in that gender: how
    many of the words `before` it (its last one or two) to replace and by which, or None to leave
    them ("la" → "el", "del" → "de la", "de la" → "del"). A feminine noun in a- takes "el" and
    "un" when the a is stressed ("el agua", "la abeja"), which spelling does not say: left."""
    last = before[-1]
    low = last.lower()
    if gender == "f" and (low in _SINGULAR or low in _CONTRACTED) and noun.lower().startswith(("a", "á", "ha", "há")):
        return None
    if gender == "f" and low in _CONTRACTED:
        return 1, [last[:-1], "la"]                                 # "del" → "de la", "Al" → "A la"
    if low not in _GENDER_PAIRS or DETERMINERS[low] % 2 == (gender == "f"):
        return None
    other = _GENDER_PAIRS[low]
    if other == "el" and len(before) == 2 and before[0].lower() in ("de", "a"):
        return 2, [before[0] + "l"]                                 # "de la" → "del", not "de el"
    return 1, [other.capitalize() if last[:1].isupper() else other]


def agree(translation: Translation, genders: dict[str, tuple[str, str]]) -> Translation:
    """`translation` with every hypothesis' determiners agreeing with the nouns after them.
    genders: {Spanish noun in small letters: (its gender "m" or "f", the tags of its other readings,
    a verb's form that a clitic may come before; "" if none)}."""
    return replace(translation, hypotheses=[_agree(h, genders) for h in translation.hypotheses])


def _disagree(text: str, genders: dict[str, tuple[str, str]]) -> bool:
    """Whether `text` has a determiner to write again before the word after it: most translations
    have none, and the words of the text tell so without grouping the pieces into words."""
    words = text.split()
    for last, word in zip(words, words[1:]):
        low = last.lower()
        if low not in _ANY:
            continue
        m = _NOUN.fullmatch(word)
        entry = genders.get(m.group(1).lower()) if m else None
        if entry is not None and not (entry[1] and low in _CLITICS) and determiner(entry[0], m.group(1), [last]):
            return True
    return False


def _agree(hyp: Hypothesis, genders: dict[str, tuple[str, str]]) -> Hypothesis:
    if not _disagree(hyp.text, genders):
        return hyp
    pieces = hyp.target_tokens
    _, groups = hyp.groups

    def alone(k: int) -> str | None:
        """Word k as written, where it is one piece of its own and not a placeholder's."""
        if k < 0 or len(groups[k]) != 1:
            return None
        i = groups[k][0]
        if not pieces[i].startswith(WORD_BOUNDARY) or i in hyp.placeholder_targets:
            return None
        return pieces[i][len(WORD_BOUNDARY):]

    edits: dict[int, tuple[int, list[str]]] = {}                   # first word replaced -> (words, new words)
    for k in range(1, len(groups)):
        last = alone(k - 1)
        if last is None or last.lower() not in _ANY or (k - 1) in edits:
            continue
        m = _NOUN.fullmatch("".join(pieces[i] for i in groups[k]).removeprefix(WORD_BOUNDARY))
        if m is None or any(i in hyp.placeholder_targets for i in groups[k]):
            continue
        noun = m.group(1)
        entry = genders.get(noun.lower())
        if entry is None or (entry[1] and last.lower() in _CLITICS):
            continue
        first = alone(k - 2)
        rewritten = determiner(entry[0], noun, [first, last] if first is not None else [last])
        if rewritten is not None and (k - rewritten[0]) not in edits:
            edits[k - rewritten[0]] = rewritten
    if not edits:
        return hyp

    # The new pieces, each with its row of α and log-probability: a replaced word's, or the mean of
    # the words it merges or splits ("de la" → "del", "del" → "de la")
    new_pieces, rows, log_probs = [], [], []
    k = 0
    while k < len(groups):
        if k not in edits:
            for i in groups[k]:
                new_pieces.append(pieces[i])
                rows.append(hyp.alignment[i])
                log_probs.append(hyp.token_log_probs[i])
            k += 1
            continue
        n, words = edits[k]
        old = [groups[j][0] for j in range(k, k + n)]
        row, lp = hyp.alignment[old].mean(axis=0), float(np.mean([hyp.token_log_probs[i] for i in old]))
        for word in words:
            new_pieces.append(WORD_BOUNDARY + word)
            rows.append(row)
            log_probs.append(lp)
        k += n
    index = {}                                                      # old piece -> new, for the placeholders
    shift = 0
    for k, group in enumerate(groups):
        if k in edits:
            shift += len(edits[k][1]) - edits[k][0]
        for i in group:
            index[i] = i + shift
    text = detokenize([p for p in new_pieces if p != EOS_TOKEN])
    return replace(hyp, text=text, target_tokens=new_pieces, token_log_probs=log_probs,
                   alignment=np.stack(rows), computed_quality=None, rewritten_from=hyp,
                   placeholder_targets=frozenset(index[i] for i in hyp.placeholder_targets))


__all__ = ["DETERMINERS", "agree", "determiner"]
