"""Whole documents: an entry split into sentences, translated as one batch, and put
back together between its original whitespace and line breaks, with every word's
character offsets in the entry as sent and in the text returned.

Splitting is Wikimedia's sentencex (it knows "Sr.", "Dra.", "EE. UU." and ¿…? ¡…!;
pysbd splits "El Sr. | García"). In plain text every line break also ends a sentence, and
when sentences are split so does a column gap inside a line (three spaces or more, a tab, or two
after a clause's mark: a `--help` screen's columns), so the layout comes back as it was; in HTML a line break is only
whitespace (LibreTranslate #288) and block elements end sentences (`markup.py`).

An entry becomes a `Reading` (what to translate, `sentences`); its translations
make a `Document` (`Reading.assemble`). Between the source's sentences lie gaps
(whitespace, and in HTML whatever markup stood there); the target is the gaps
copied with each sentence's translation in its place, so a source position in a
gap maps to the target one to one, and one inside a sentence through the
alignment (`Layout`). A sentence with no letter (`!`, `...`, `%s:`) is copied, not
translated (`Translator.copies`): a model writes words around one.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Callable

import sentencex

from attnmt.service.errors import InvalidInput
from attnmt.service.inference.offline import decode_all
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.alignment import EOS_TOKEN
from attnmt.service.text.markup import Source, parse_html, plain, render
from attnmt.service.text.offsets import Span, shifted, word_spans
from attnmt.service.text.translator import Translation, Translator

LINE_BREAKS = set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
# Three spaces or more, or a tab: two alone are a typo in prose ("This is  a test") unless a mark
# ends the clause before them (GNU's two spaces after a sentence)
_COLUMN_GAP = re.compile(r"(?<=\S)(?: {3,}|[ ]*\t[ \t]*)(?=\S)|(?<=[.!?:;]) {2}(?=\S)")


@dataclass
class SentenceResult:
    source: Span                        # in the entry as sent
    target: Span                        # in Document.text
    translation: Translation
    source_word_spans: list[Span]       # per source word (</s> last), in the entry as sent
    target_word_spans: list[list[Span]] = field(default_factory=list)  # per hypothesis, per target word;
    # the best hypothesis's in Document.text, the others' in their own text


@dataclass
class Document:
    source: str
    text: str
    sentences: list[SentenceResult]


def single(translation: Translation) -> SentenceResult:
    """One plain sentence (TEXT_FORMAT_PLAIN without split_sentences) with its word spans."""
    hypotheses = translation.hypotheses
    source_words = word_spans(translation.source, hypotheses[0].source_words) if hypotheses else []
    return SentenceResult((0, len(translation.source)), (0, len(hypotheses[0].text) if hypotheses else 0),
                          translation, source_words, [word_spans(h.text, h.target_words) for h in hypotheses])


def sentence_spans(text: str, breaks: set[int], language: str, split: bool, line_breaks: bool,
                   check: Callable[[], None] | None = None) -> list[Span]:
    """Sentences of `text`, whitespace trimmed, none crossing a break (or, with
    `line_breaks`, a line break); with `split` sentencex splits between breaks too, and with
    both a column gap inside a line (`_COLUMN_GAP`) ends one.
    `check` is called before each piece between breaks; what it raises stops the split."""
    cuts = {0, len(text), *breaks}
    if line_breaks:
        cuts.update(i for i, c in enumerate(text) if c in LINE_BREAKS)
    if line_breaks and split:
        # a run of spaces or a tab inside a line lays out columns ("  -a, --all     show all"):
        # each column is translated apart and the run kept, so the layout comes back
        cuts.update(m.start() for m in _COLUMN_GAP.finditer(text))
    spans: list[Span] = []
    ordered = sorted(cuts)
    for start, end in zip(ordered, ordered[1:]):
        segment = text[start:end]
        if not segment.strip():
            continue
        if check is not None:
            check()
        # A line break here is only whitespace (HTML, or plain text without line_breaks).
        prepared = " ".join(segment.split("\n"))          # the same length as segment
        bodies = [p.strip() for p in sentencex.segment(language, prepared)] if split else []
        found, at = [], 0
        for body in filter(None, bodies):
            at = prepared.find(body, at)
            if at < 0:                  # the splitter changed the text: keep the segment whole
                found = []
                break
            if found and found[-1][1] == start + at:
                # no space after the cut: the splitter took a `.` inside a token for an end
                # ("%s..%s", "%.*s", "1..SECONDS"), so the two pieces are one sentence
                found[-1] = (found[-1][0], start + at + len(body))
            else:
                found.append((start + at, start + at + len(body)))
            at += len(body)
        if not found:
            body = segment.strip()
            first = start + len(segment) - len(segment.lstrip())
            found = [(first, first + len(body))]
        spans += found
    return spans


class Layout:
    """Source positions (in Source.text) to target positions (in the spliced target)."""

    def __init__(self, source: str, spans: list[Span], translations: list[Translation]):
        self.spans = spans
        self.gaps: list[tuple[int, int, int]] = []     # (source start, target start, length)
        self.targets: list[Span] = []                  # each sentence's translation in the target
        self.source_words: list[list[Span]] = []       # per sentence, per source word, in `source`
        self.target_words: list[list[Span]] = []       # per sentence, best hypothesis, in the target
        self.aligned: list[dict[int, list[int]]] = []  # per sentence: source word -> its target words
        self.strongest: list[dict[int, int]] = []       # per sentence: source word -> its likeliest target word
        parts: list[str] = []
        cursor = size = 0
        for (start, end), translation in zip(spans, translations):
            self.gaps.append((cursor, size, start - cursor))
            parts.append(source[cursor:start])
            size += start - cursor
            best = translation.best if translation.hypotheses else None
            text = best.text if best else ""
            self.targets.append((size, size + len(text)))
            aligned: dict[int, list[int]] = {}
            strongest: dict[int, int] = {}                  # source word -> the target word of highest α
            if best is not None:
                self.source_words.append(shifted(word_spans(source[start:end], best.source_words), start))
                self.target_words.append(shifted(word_spans(text, best.target_words), size))
                for s, t in best.hard_alignment():
                    aligned.setdefault(s, []).append(t)
                # A source word no target word chose still gets the target word that attends
                # to it most, so an element around it is not left empty.
                rows = [t for t, word in enumerate(best.target_words) if word != EOS_TOKEN]
                alpha = best.word_alignment                                    # T_words x S_words
                for s, word in enumerate(best.source_words):
                    if word != EOS_TOKEN and rows:
                        strongest[s] = rows[int(alpha[rows, s].argmax())]
                        aligned.setdefault(s, [strongest[s]])
            else:
                self.source_words.append([])
                self.target_words.append([])
            self.aligned.append(aligned)
            self.strongest.append(strongest)
            parts.append(text)
            size += len(text)
            cursor = end
        self.gaps.append((cursor, size, len(source) - cursor))
        parts.append(source[cursor:])
        self.target = "".join(parts)
        # Gaps and sentences alternate in source order: gap k lies before sentence k.
        self._gap_starts = [start for start, _, _ in self.gaps]
        # Per sentence, for binary searches (words are in order, so their ends are too): the
        # ends of its source words; the words with a target word, and their ends; those of
        # them that are not empty, and their starts. A page of tags inside one long sentence
        # then costs a search per tag, not a pass over the sentence.
        self._word_ends = [[end for _, end in words] for words in self.source_words]
        self._anchored = [[w for w in range(len(words)) if w in strongest]
                          for words, strongest in zip(self.source_words, self.strongest)]
        self._anchored_ends = [[words[w][1] for w in anchored]
                               for words, anchored in zip(self.source_words, self._anchored)]
        self._spanning = [[w for w in anchored if words[w][1] > words[w][0]]
                          for words, anchored in zip(self.source_words, self._anchored)]
        self._spanning_starts = [[words[w][0] for w in spanning]
                                 for words, spanning in zip(self.source_words, self._spanning)]

    def _word_targets(self, k: int, word: int) -> list[Span]:
        return [self.target_words[k][t] for t in self.aligned[k].get(word, ()) if t < len(self.target_words[k])]

    def position(self, at: int, glued_to_next: bool = False) -> int:
        """Where a point between source characters goes in the target: after the target
        words of the source word before it, or (when it is glued to the next word, or
        nothing before it is aligned) before those of the word after it."""
        k = bisect.bisect_right(self._gap_starts, at) - 1          # the last gap starting at or before `at`
        start, target, length = self.gaps[k]
        if at <= start + length:
            return target + at - start
        # otherwise `at` is inside sentence k, which follows gap k
        strongest = self.strongest[k]
        i = bisect.bisect_right(self._anchored_ends[k], at)           # the words with a target ending by `at`
        before = self._anchored[k][i - 1] if i else None
        j = bisect.bisect_left(self._spanning_starts[k], at)          # the first starting at or after it
        after = self._spanning[k][j] if j < len(self._spanning[k]) else None
        if after is not None and (glued_to_next or before is None):
            return self.target_words[k][strongest[after]][0]
        if before is not None:
            return self.target_words[k][strongest[before]][1]
        return self.targets[k][0]

    def coverage(self, start: int, end: int, source: str) -> Span | None:
        """The target range covering what the source range [start, end) holds: gaps one to
        one, whole sentences whole, and the target words aligned to each source word
        whose letters (or, without letters, whose first character) lie in the range."""
        los: list[int] = []
        his: list[int] = []
        first = max(bisect.bisect_right(self._gap_starts, start) - 1, 0)
        last = bisect.bisect_left(self._gap_starts, end)          # gaps and sentences before it may overlap
        for gap_start, target, length in self.gaps[first:last]:
            a, b = max(start, gap_start), min(end, gap_start + length)
            if a < b:
                los.append(target + a - gap_start)
                his.append(target + b - gap_start)
        for k in range(first, min(last, len(self.spans))):
            a, b = self.spans[k]
            if b <= start or a >= end:
                continue
            if start <= a and b <= end:
                if self.targets[k][1] > self.targets[k][0]:
                    los.append(self.targets[k][0])
                    his.append(self.targets[k][1])
                continue
            words = self.source_words[k]
            for w in range(bisect.bisect_right(self._word_ends[k], start), len(words)):   # the first ending after it
                ws, we = words[w]
                if ws >= end:
                    break
                letters = [i for i in range(ws, we) if source[i].isalnum()] or [ws]
                if ws < we and any(start <= i < end for i in letters):
                    # Punctuation glued to the word but outside the element ("<i>luz</i>.")
                    # stays outside in the target too.
                    lead = ws < start and not source[ws].isalnum()
                    trail = we > end and not source[we - 1].isalnum()
                    for ts, te in self._word_targets(k, w):
                        while lead and ts < te - 1 and not self.target[ts].isalnum():
                            ts += 1
                        while trail and te > ts + 1 and not self.target[te - 1].isalnum():
                            te -= 1
                        if te > ts:
                            los.append(ts)
                            his.append(te)
        return (min(los), max(his)) if los else None


@dataclass
class Reading:
    """An entry read as a document: its Source and the sentences to translate."""
    entry: str
    source: Source
    spans: list[Span]

    @property
    def sentences(self) -> list[str]:
        return [self.source.text[a:b] for a, b in self.spans]

    def assemble(self, translations: list[Translation], check: Callable[[], None] | None = None) -> Document:
        """The document the translations make (`check`, called between its steps, may stop it)."""
        layout = Layout(self.source.text, self.spans, translations)
        if check is not None:
            check()
        text, starts, ends = render(self.source, layout, layout.target, check)

        def out_span(a: int, b: int) -> Span:
            if a >= b:              # empty: right after the character before it
                at = ends[a - 1] if a > 0 else (starts[0] if starts else 0)
                return at, at
            return starts[a], ends[b - 1]

        sentences = []
        for k, ((a, b), translation) in enumerate(zip(self.spans, translations)):
            source_words = [self.source.raw_span(s, e) for s, e in layout.source_words[k]]
            target_words = [[out_span(s, e) for s, e in layout.target_words[k]]]
            target_words += [word_spans(h.text, h.target_words) for h in translation.hypotheses[1:]]
            sentences.append(SentenceResult(self.source.raw_span(a, b), out_span(*layout.targets[k]), translation,
                                            source_words, target_words if translation.hypotheses else []))
        return Document(self.entry, text, sentences)


def read(entry: str, html: bool, split: bool, language: str, placeholders: bool = True,
         max_chars: int | None = None, max_sentences: int | None = None, field: str = "text",
         check: Callable[[], None] | None = None) -> Reading:
    """An entry as a document (InvalidInput for markup nested too deep or a document over its limits).
    `placeholders`: in HTML, carry placeholders as atoms (for a model that does not protect them).
    `check` is called as the reading goes (between tokens of the markup, between pieces of
    text); what it raises (a passed deadline) stops it."""
    if max_chars is not None and len(entry) > max_chars:
        raise InvalidInput(f"{field} has {len(entry)} characters, over the limit of {max_chars} "
                           "(max_document_chars)")
    try:
        source = parse_html(entry, placeholders, check) if html else plain(entry)
    except InvalidInput as e:
        raise InvalidInput(f"{field}: {e}") from None
    spans = sentence_spans(source.text, source.breaks, language, split, line_breaks=not html, check=check)
    if max_sentences is not None and len(spans) > max_sentences:
        raise InvalidInput(f"{field} has {len(spans)} sentences, over the limit of {max_sentences} "
                           "(max_document_sentences)")
    return Reading(entry, source, spans)


def translate_documents(translator: Translator, entries: list[str], html: bool, split: bool,
                        options: SearchOptions = SearchOptions(), max_rows: int | None = None,
                        replace_unk: bool = False, keep_names: bool | None = None,
                        use_lexicon: bool | None = None, split_above: int | None = None) -> list[Document]:
    """Offline: every sentence of every entry in one decode (a long one in parts: Translator.plan)."""
    language = translator.engine.manifest.source_language
    readings = [read(e, html, split, language, placeholders=translator.protector is None) for e in entries]
    texts = [s for r in readings for s in r.sentences]
    plans = [translator.plan(t, options, split_above) for t in texts]
    decode_all(translator.engine, [s for plan in plans for _, s in plan if s is not None], max_rows,
               translator.workers)
    done = iter(translator.finish(t, plan, options, replace_unk, keep_names=keep_names, use_lexicon=use_lexicon)
                for t, plan in zip(texts, plans))
    return [r.assemble([next(done) for _ in r.spans]) for r in readings]
