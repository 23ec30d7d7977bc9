"""Long sentences translated in parts: a sentence of more words than the model's `split_above_words`
is cut after a comma, semicolon or colon, each part is translated as a sentence of its own, and the
parts' translations are joined into the sentence's one translation, α included.

Why: the bundled models learnt from short sentences (two thirds of their training pairs have fewer
than ten words, 1.5 % more than forty) and lose their way in long ones: they drop clauses, repeat
names and lists, and write words that never were ("stitutionstitutioned"). On the newstest2012 dev
set, Spanish→English, Apertium's chrF is below ours up to 30 words and 4–15 points above from 40
(docs/benchmarks.md, "Long sentences"). A part keeps the context of its clause, which is what these
models use: their attention stays within a clause or two.

The cut: after a word that ends with a comma, semicolon or colon, outside brackets, a Spanish
question or exclamation and placeholders, at least `MIN_WORDS` words from either end of
what it cuts; the cut nearest the middle first, again in each half while a half is too long. A
sentence without such a place stays whole.

The join (`join`): the parts' texts with a space between them (a part after the first that was
sent in small letters starts in small letters, as the model wrote it capitalised as a sentence's
start); pieces, log-probabilities and α one after the other, each part's α in its own block (α's
rows of a part on its own end-of-sentence go to the sentence's), the parts' ends of sentence
dropped but the last one's; placeholders and glossary matches moved to their places. The first
hypothesis joins each part's best; the next ones change the parts whose alternatives give up the
least score, summed over the parts (`_best_combinations`), each text once. Quality describes what the model
wrote: it is computed over the parts' own hypotheses joined, before names, lexicon or glossary.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from attnmt.service.text.alignment import EOS_TOKEN, word_groups
from attnmt.service.text.translator import Hypothesis, Translation, opening_letter, with_opening_letter

MIN_WORDS = 4
# choices of the parts' hypotheses looked at for each hypothesis of the sentence (`join`)
LOOK_AT = 16

# brackets and a Spanish question or exclamation: no cut inside (quotes are left out: a straight one
# neither opens nor closes, and cutting inside a long quotation loses nothing measured)
_OPEN = "([{«“¿¡"
_CLOSE = ")]}»”?!"
_CUT_AFTER = (",", ";", ":")


def cut(text: str, above: int, placeholders: re.Pattern | None = None) -> list[str]:
    """`text` in parts of at most `above` words where it can be cut (the module's rule), or
    `[text]`; the parts joined by single spaces are `text` with its whitespace collapsed."""
    words = text.split()
    if not above or len(words) <= above:
        return [text]
    # no cut inside a placeholder ("{0, number}"): the character offsets the placeholders cover
    joined = " ".join(words)
    covered = [m.span() for m in placeholders.finditer(joined)] if placeholders is not None else []
    points, depth, at = [], 0, 0
    for i, word in enumerate(words):
        for c in word:
            if c in _OPEN:
                depth += 1
            elif c in _CLOSE:
                depth = max(0, depth - 1)
        at += len(word)
        if (word.endswith(_CUT_AFTER) and depth == 0 and i + 1 < len(words)
                and not any(a < at < b for a, b in covered)):
            points.append(i + 1)
        at += 1
    spans = _halves(0, len(words), points, above)
    return [text] if len(spans) == 1 else [" ".join(words[a:b]) for a, b in spans]


def _halves(a: int, b: int, points: list[int], above: int) -> list[tuple[int, int]]:
    if b - a <= above:
        return [(a, b)]
    inside = [p for p in points if a + MIN_WORDS <= p <= b - MIN_WORDS]
    if not inside:
        return [(a, b)]
    middle = (a + b) / 2
    p = min(inside, key=lambda p: abs(p - middle))
    return _halves(a, p, points, above) + _halves(p, b, points, above)


def join(text: str, parts: list[str], translations: list[Translation], length_penalty: float) -> Translation:
    """The translation of `text` from its parts' (`parts[i]` translated as `translations[i]`)."""
    if len(translations) == 1:
        return translations[0]
    kept = [(p, t) for p, t in zip(parts, translations) if t.hypotheses]
    if not kept:
        return Translation(text, [])
    texts = [p for p, _ in kept]
    wanted = max(len(t.hypotheses) for _, t in kept)
    hypotheses, chosen_words, written = [], set(), set()
    # parts' alternatives that differ in pieces only write the same words: each text once, looking
    # at a bounded number of choices
    for looked, chosen in enumerate(_best_combinations([t.hypotheses for _, t in kept])):
        if len(hypotheses) == wanted or looked == LOOK_AT * wanted:
            break
        words = tuple(h.text for h in chosen)
        if words in chosen_words:
            continue
        chosen_words.add(words)
        served = _joined(texts, chosen, length_penalty)
        if served.text in written:          # "And it grew." and "and it grew." after a part
            continue
        written.add(served.text)
        own = [_own(h) for h in chosen]
        if any(o is not h for o, h in zip(own, chosen)):
            served.rewritten_from = _joined(texts, own, length_penalty)
        hypotheses.append(served)
    return Translation(text, hypotheses[0].source_tokens, hypotheses)


def _best_combinations(lists: list[list[Hypothesis]]) -> Iterator[list[Hypothesis]]:
    """Choices of one hypothesis a part, the parts' best first, then by how much score the choice
    gives up against each part's best, summed: the second changes the one part whose second is
    nearest its best, and so on. A k-best merge of sorted lists, lazily from a heap (as Huang and
    Chiang 2005's lazy k-best does for a product of lists): no library offers one over a product."""
    def loss(choice: tuple[int, ...]) -> float:
        return sum(hyps[0].score - hyps[k].score for hyps, k in zip(lists, choice))

    start = (0,) * len(lists)
    heap, seen = [(0.0, start)], {start}
    while heap:
        _, choice = heapq.heappop(heap)
        yield [hyps[k] for hyps, k in zip(lists, choice)]
        for i, hyps in enumerate(lists):
            if choice[i] + 1 < len(hyps):
                following = choice[:i] + (choice[i] + 1,) + choice[i + 1:]
                if following not in seen:
                    seen.add(following)
                    heapq.heappush(heap, (loss(following), following))


def _own(hyp: Hypothesis) -> Hypothesis:
    """The model's own hypothesis `hyp` was rewritten from (names, lexicon, glossary, case)."""
    while hyp.rewritten_from is not None:
        hyp = hyp.rewritten_from
    return hyp


def _joined(parts: list[str], hyps: list[Hypothesis], length_penalty: float) -> Hypothesis:
    last = len(hyps) - 1
    sources: list[str] = []
    targets: list[str] = []
    log_probs: list[float] = []
    texts: list[str] = []
    blocks = []                 # (part's α, rows kept, columns kept, first row, first column)
    placeholder_sources: set[int] = set()
    placeholder_targets: set[int] = set()
    matches = []
    log_prob = 0.0
    source_words = target_words = 0
    for i, (part, hyp) in enumerate(zip(parts, hyps)):
        if i:
            hyp = _continued(part, hyp)
        n_src = len(hyp.source_tokens) - (i < last and hyp.source_tokens[-1:] == [EOS_TOKEN])
        n_tgt = len(hyp.target_tokens) - (i < last and hyp.target_tokens[-1:] == [EOS_TOKEN])
        blocks.append((hyp.alignment, n_tgt, n_src, len(targets), len(sources)))
        placeholder_sources.update(len(sources) + j for j in hyp.placeholder_sources if j < n_src)
        placeholder_targets.update(len(targets) + j for j in hyp.placeholder_targets if j < n_tgt)
        matches += [replace(m, source_start=m.source_start + source_words, source_end=m.source_end + source_words,
                            target_start=m.target_start + target_words, target_end=m.target_end + target_words)
                    for m in hyp.glossary]
        source_words += len(word_groups(hyp.source_tokens[:n_src]))
        target_words += len(word_groups(hyp.target_tokens[:n_tgt]))
        sources += hyp.source_tokens[:n_src]
        targets += hyp.target_tokens[:n_tgt]
        log_probs += hyp.token_log_probs[:n_tgt]
        log_prob += hyp.log_prob - sum(hyp.token_log_probs[n_tgt:])   # a dropped end of sentence's too
        if hyp.text:
            texts.append(hyp.text)
    alignment = np.zeros((len(targets), len(sources)), dtype=hyps[0].alignment.dtype)
    for alpha, n_tgt, n_src, row, col in blocks:
        alignment[row:row + n_tgt, col:col + n_src] = alpha[:n_tgt, :n_src]
        if alpha.shape[1] > n_src:             # the part's own end of sentence: the sentence's
            alignment[row:row + n_tgt, -1] += alpha[:n_tgt, n_src:].sum(axis=1)
    score = log_prob / (len(targets) ** length_penalty) if length_penalty and targets else log_prob
    # a part copied as its own translation (`Translator.copy`: "1, 2, 3, 4,") has no quality model
    quality_model = next((h.quality_model for h in hyps if h.quality_model is not None), None)
    return Hypothesis(text=" ".join(texts), target_tokens=targets, token_log_probs=log_probs, log_prob=log_prob,
                      score=score, alignment=alignment, source_tokens=sources, glossary=matches,
                      placeholder_targets=frozenset(placeholder_targets),
                      placeholder_sources=frozenset(placeholder_sources), links_rule=hyps[0].links_rule,
                      quality_model=quality_model)


def _continued(part: str, hyp: Hypothesis) -> Hypothesis:
    """A part after the first, sent starting in small letters ("y el precio subió"): its translation
    starting so too, where the model wrote a capital as a sentence's start ("And the price" → "and
    the price"); a word whose other letters are capitals too ("NATO"), English's "I" and a
    placeholder stay."""
    opening = next((c for c in part if c.isalpha()), "")
    where = opening_letter(hyp)
    if not opening.islower() or where is None or not hyp.text[where[1]].isupper():
        return hyp
    word = re.match(r"[^\W\d_]+(?:'[^\W\d_]+)?", hyp.text[where[1]:])
    letters = word.group() if word else hyp.text[where[1]]
    if letters == "I" or letters.startswith("I'") or any(c.isupper() for c in letters[1:]):
        return hyp
    return with_opening_letter(hyp, where, hyp.text[where[1]].lower())
