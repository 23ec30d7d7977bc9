"""Text in, translations with alignments out: tokenisation, input checks, and
turning a finished `Search` (its `FinishedHypothesis` list, target ids) into the
`Translation` and `Hypothesis` objects callers use. Shared by the server,
`attnmt translate` and `attnmt evaluate`."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from attnmt.service.errors import ConfigError, InvalidInput
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.offline import decode_all
from attnmt.service.inference.search import DEFAULT_LENGTH_PENALTY, Search, SearchOptions
from attnmt.service.modeldir.links import DEFAULT_RULE
from attnmt.service.text.alignment import EOS_TOKEN, aggregate_to_words, hard_pairs, shift_att, word_groups
from attnmt.service.text.case import (
    FIRST_WORD_RULES,
    SMALL_WORDS,
    as_typed,
    first_small,
    listed_small,
    sentence_case,
    shouted,
    titled,
    untitled,
)
from attnmt.service.text.numbers import Numbers
from attnmt.service.text.placeholders import Protector
from attnmt.service.text.quality import Quality, QualityModel

# Control characters, and the invisible ones SentencePiece's normaliser (nmt_nfkc) reads as a word break
# (zero-width space and non-joiner, the direction marks, a byte-order mark inside the text) and its own
# marks (U+2581, U+FFFD): as spaces, the words a glossary or the names find by splitting the text are
# the tokenizer's ("La\u200bcasa" is two words to the model, so it must be two to the glossary).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200b\u200c\u200e\u200f\ufeff\u2581\ufffd]")

# An apostrophe typed as an acute accent ("It´s", where a Spanish keyboard's dead key gives one) or a
# backtick between letters ("don`t"): read as the apostrophe the model learnt. Tokenized as written, the
# acute is a word break and an accent on nothing (NFKC: " \u0301"), which no training pair holds: 400
# Tatoeba dev sentences with apostrophes lost 44.9 -> 20.2 BLEU English->Spanish, backticks 34.2. Moses'
# normalize-punctuation.perl maps both; its other rules rewrite quotes and dashes the models learnt as
# written, and a backtick that is not between letters may be GNU's `quoting' of a placeholder: kept.
_APOSTROPHE = re.compile(r"\u00b4|(?<=[^\W\d_])`(?=[^\W\d_])")


@dataclass
class Hypothesis:
    """One translation of a sentence, as clients see it: text, pieces, scores and α."""
    text: str
    target_tokens: list[str]       # pieces, ending with </s> unless the length limit cut the output
    token_log_probs: list[float]
    log_prob: float
    score: float
    alignment: np.ndarray          # α: target pieces x source pieces, rows sum to 1
    source_tokens: list[str]
    glossary: list = field(default_factory=list)   # glossary.Match: terms written into this hypothesis
    # Pieces that are a source placeholder put back (placeholders.py), in the target and in the
    # source: a glossary term or a kept name never replaces them, nor matches inside them.
    placeholder_targets: frozenset[int] = frozenset()
    placeholder_sources: frozenset[int] = frozenset()
    # The model's default hard-link rule and its threshold (manifest `hard_links`; `Translator.result` sets it).
    links_rule: tuple[str, float | None] = (DEFAULT_RULE, None)
    # Quality is computed on first use (a request that never reads it never pays for it).
    quality_model: QualityModel | None = field(default=None, repr=False, compare=False)
    computed_quality: Quality | None = field(default=None, repr=False, compare=False)
    # A hypothesis rewritten from the model's own (a glossary's terms written in) keeps that
    # one's quality, which describes what the model wrote: read from it, when first read.
    rewritten_from: Hypothesis | None = field(default=None, repr=False, compare=False)

    @property
    def quality(self) -> Quality | None:
        if self.computed_quality is None and self.rewritten_from is not None:
            self.computed_quality = self.rewritten_from.quality
        elif self.computed_quality is None and self.quality_model is not None:
            self.computed_quality = self.quality_model.assess(self.token_log_probs, self.alignment,
                                                              self.source_tokens, self.target_tokens,
                                                              groups=self.groups)
        return self.computed_quality

    @cached_property
    def groups(self) -> tuple[list[list[int]], list[list[int]]]:
        """The pieces of each source and each target word (`word_groups`), for the words, the
        quality and a glossary; computed once."""
        return word_groups(self.source_tokens), word_groups(self.target_tokens)

    @cached_property
    def _words(self) -> tuple[list[str], list[str], np.ndarray]:
        src_groups, tgt_groups = self.groups
        # a word's pieces are a run (word_groups), so a slice of the pieces
        join = lambda tokens, g: "".join(tokens[g[0]:g[-1] + 1]).replace("\u2581", "") or "\u2581"  # noqa: E731
        return ([join(self.source_tokens, g) for g in src_groups], [join(self.target_tokens, g) for g in tgt_groups],
                aggregate_to_words(self.alignment, src_groups, tgt_groups))

    @property
    def source_words(self) -> list[str]:
        return self._words[0]

    @property
    def target_words(self) -> list[str]:
        return self._words[1]

    @property
    def word_alignment(self) -> np.ndarray:
        """α aggregated to words (sum over source pieces, mean over target pieces)."""
        return self._words[2]

    def hard_alignment(self, threshold: float | None = None, level: str = "words",
                       rule: str | None = None) -> list[tuple[int, int]]:
        """Hard links: every cell over `threshold` if given, else `rule`'s links, else the
        model's default rule (`links_rule`)."""
        if threshold is None and rule is None:
            rule, threshold = self.links_rule
        rule = rule or DEFAULT_RULE
        if level == "pieces":
            return hard_pairs(self.alignment, self.source_tokens, self.target_tokens, threshold, rule)
        return hard_pairs(self.word_alignment, self.source_words, self.target_words, threshold, rule)


@dataclass
class Translation:
    source: str
    source_tokens: list[str]
    hypotheses: list[Hypothesis] = field(default_factory=list)

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]


def normalise(text: str) -> str:
    """NFC, control characters to spaces, an apostrophe typed as an accent or backtick as one,
    whitespace collapsed."""
    return " ".join(_APOSTROPHE.sub("'", _CONTROL.sub(" ", unicodedata.normalize("NFC", text))).split())


def letterless(text: str, placeholders: re.Pattern | None = None) -> bool:
    """No letter (str.isalpha) in `text` once the spans `placeholders` matches are taken out:
    punctuation, digits, symbols, `%s`, `{name}`."""
    if placeholders is not None:
        text = placeholders.sub("", text)
    return not any(c.isalpha() for c in text)


class Translator:
    """One served model: its engine plus text handling."""

    def __init__(self, engine: Engine, max_tokens: int = 256, protect_placeholders: bool = True,
                 workers: int = 1):
        """workers: offline decoding's batches on as many threads (decode_all)."""
        self.engine = engine
        self.workers = workers
        self.tokenizer = engine.tokenizer
        self.max_tokens = max_tokens
        # A Transformer's position table has max_positions rows: no source and no translation may
        # be longer (the RNNsearch has no such table: None).
        self.max_positions: int | None = engine.manifest.dimensions.get("max_positions")
        # the length penalty a request that names none gets: the one chosen on the model's dev sets
        self.length_penalty = float((engine.manifest.decoding or {}).get("length_penalty", DEFAULT_LENGTH_PENALTY))
        # which lines have their first word read in small letters where the model knows it only so (case.py)
        self.first_word = (engine.manifest.decoding or {}).get("first_word", "unmarked")
        if self.first_word not in FIRST_WORD_RULES:
            raise ConfigError(f"model {engine.manifest.name}: decoding.first_word is {self.first_word!r}; "
                              f"expected one of {', '.join(FIRST_WORD_RULES)}")
        manifest = engine.manifest
        # Only a model trained with sentinels can carry them (manifest.placeholders), numbers too; with
        # protection off, `sentinels` still drops any the model writes by itself.
        self.sentinels = (Protector(manifest.placeholders, Numbers(manifest.source_language, manifest.target_language))
                          if manifest.placeholders else None)
        self.protector = self.sentinels if protect_placeholders else None
        self.quality = QualityModel.from_manifest(engine.manifest, "translation")
        self.greedy_quality = QualityModel.from_manifest(engine.manifest, "translation_greedy")
        self.alignment_quality = QualityModel.from_manifest(engine.manifest, "alignment")
        # Imported here: names.py builds on the glossary, which imports this module.
        from attnmt.service.text.names import Names
        self.names = Names.from_manifest(engine.model_dir, engine.manifest.names)
        from attnmt.service.text.lexicon import Lexicon
        self.lexicon = Lexicon.from_manifest(engine.model_dir, engine.manifest.lexicon)
        # whole lines that are a greeting or a proverb, the dictionary's translation forced (phrases.py)
        from attnmt.service.text.phrases import Phrases
        self.phrases = Phrases.from_manifest(engine.model_dir, engine.manifest.lexicon, manifest.target_language)
        # English's "a" and "an" agree with the word after them, whoever wrote it (articles.py)
        from attnmt.service.text.articles import agree
        self.articles = agree if manifest.target_language == "en" else None
        # the words the model knows in small letters, and the lexicon's, for reading a sentence in Title
        # Case (case.py)
        self._known = self.names.known if self.names is not None else None
        self._dictionary = self.lexicon.entries if self.lexicon is not None else ()
        self._small_words = SMALL_WORDS.get(manifest.source_language, frozenset())
        chosen = engine.manifest.hard_links or {}
        self.links_rule: tuple[str, float | None] = (chosen.get("rule", DEFAULT_RULE), chosen.get("threshold"))
        self.shift_att = bool((engine.manifest.alignment or {}).get("shift_att", False))
        # sentences of more words than this are translated in parts (clauses.py; 0: never), the model's
        # own, chosen on its dev sets by `attnmt fit-split`
        self.split_above = int((engine.manifest.decoding or {}).get("split_above_words", 0))
        from attnmt.service.text.clauses import cut, join
        self._cut, self._join = cut, join

    @property
    def name(self) -> str:
        return self.engine.manifest.name

    def encode(self, text: str, what: str = "text") -> list[int]:
        ids = self.tokenizer.encode(normalise(text))
        if len(ids) + 1 > self.max_tokens:
            raise InvalidInput(f"{what} has {len(ids) + 1} tokens, over the limit of {self.max_tokens} "
                               "(max_tokens_per_sentence)")
        if self.max_positions is not None and len(ids) + 1 > self.max_positions:
            raise InvalidInput(f"{what} has {len(ids) + 1} tokens, over model {self.name}'s "
                               f"{self.max_positions} positions (its max_positions)")
        return ids + [self.engine.eos_id]

    def _for_model(self, options: SearchOptions) -> SearchOptions:
        """`options` with the model's length penalty where they name none, and the translation capped at
        the model's positions, if it has a table."""
        if options.length_penalty is None:
            options = replace(options, length_penalty=self.length_penalty)
        if self.max_positions is None or options.max_target_tokens <= self.max_positions:
            return options
        return replace(options, max_target_tokens=self.max_positions)

    def copies(self, text: str) -> bool:
        """Whether `text` is its own translation, not the model's: it is not empty, and has no
        letter outside the model's placeholders (`!`, `...`, `42`, `%s:`). Given such a piece, a
        model writes words around it (`!` -> `¡!`, `?` -> `¿El?`)."""
        return bool(normalise(text)) and letterless(text, self.sentinels.pattern if self.sentinels else None)

    def copied(self, text: str) -> bool:
        """Whether `copy` answers `text` without the model: it is empty, or its own translation
        (`copies`)."""
        return not normalise(text) or self.copies(text)

    def copy(self, text: str) -> Translation:
        """`text` as its own translation: one hypothesis, the text itself (none when it is
        empty) with its numbers as the target writes them where the model hides numbers ("3,2"
        → "3.2" Spanish→English, as in a sentence), each piece aligned to itself (to the piece
        at the same place where a number's pieces changed), every log-probability 0."""
        copied = normalise(text)
        if not copied:
            return Translation(text, [])
        sources = self.tokenizer.pieces(self.tokenizer.encode(copied) + [self.engine.eos_id])
        localised = self._numbers_written(copied)
        pieces = (sources if localised == copied
                  else self.tokenizer.pieces(self.tokenizer.encode(localised) + [self.engine.eos_id]))
        n, m = len(pieces), len(sources)
        alignment = np.zeros((n, m), dtype=np.float32)
        alignment[np.arange(n), np.arange(n) * (m - 1) // (n - 1)] = 1.0      # n, m >= 2: a piece and </s>
        hypothesis = Hypothesis(text=localised, target_tokens=pieces, token_log_probs=[0.0] * n, log_prob=0.0,
                                score=0.0, alignment=alignment, source_tokens=sources, links_rule=self.links_rule)
        return Translation(text, sources, [hypothesis])

    def _numbers_written(self, text: str) -> str:
        """`text` with each number the protector would hide written as the target writes it
        (numbers.py); placeholders, and text without such a number, as they are."""
        if self.protector is None or self.protector.numbers is None:
            return text
        protected = self.protector.protect(text)
        written = self.protector.written(protected.originals)
        if written == protected.originals:
            return text
        return self.protector.any_sentinel.sub(lambda m: written[self.protector.sentinels[m.group()] - 1],
                                               protected.text)

    def parts(self, text: str, split_above: int | None = None) -> list[str]:
        """What of `text` is translated as a sentence (clauses.py): `[text]`, or past `split_above`
        words (None: the model's `split_above_words`; 0: never) its parts."""
        above = self.split_above if split_above is None else split_above
        if not above:
            return [text]
        parts = self._cut(normalise(text), above, self.sentinels.pattern if self.sentinels else None)
        return [text] if len(parts) == 1 else parts

    def joined(self, text: str, parts: list[str], translations: list[Translation],
               options: SearchOptions) -> Translation:
        """`text`'s translation from those of its `parts` (clauses.py), scored as `options` score."""
        if len(translations) == 1:
            return translations[0]
        penalty = self.length_penalty if options.length_penalty is None else options.length_penalty
        return self._join(text, parts, translations, penalty)

    def search(self, text: str, options: SearchOptions, target: str | None = None) -> Search:
        """A Search ready to join a DecodeBatch; with `target`, forced decoding of that target."""
        options = self._for_model(options)
        if target is not None:
            return Search(self.encode(text, "source"), options, forced=self.encode(target, "target"))
        phrase = self.phrases.match(text) if self.phrases is not None and options.set_phrases else None
        if phrase is not None:
            return Search(self.encode(text, "source"), options, forced=self.encode(phrase, "target"))
        shortlist = self.engine.shortlist
        text = normalise(text)
        pattern = self.protector.pattern if self.protector else None
        capitals = shouted(text, pattern)
        title = not capitals and titled(text, pattern, self._small_words)
        lowered = (first_small(text, self._known, self.first_word, pattern)
                   if self._known is not None and not (capitals or title) else None)
        text = lowered or text
        protected = self.protector.protect(text) if self.protector else None
        # placeholders are sentinels by now, which have no case: theirs is kept
        hidden = protected.text if protected else text
        hidden = (sentence_case(hidden) if capitals
                  else untitled(hidden, self._known, self._dictionary, self._small_words) if title else hidden)
        source = self.encode(hidden, "source")
        candidates = None if shortlist is None else shortlist.candidates(source)
        return Search(source, options, protected=protected.originals if protected else (), candidates=candidates,
                      capitals=capitals, title_case=title, first_small=lowered is not None)

    def result(self, text: str, search: Search, replace_unk: bool = False, glossary=None,
               keep_names: bool | None = None, use_lexicon: bool | None = None) -> Translation:
        """A finished search as a Translation: with `keep_names` (None: when the model has a
        known-words list, names.py) names it never learnt written as in the source, with
        `use_lexicon` (None: when the model has a lexicon, lexicon.py) the other words it never
        learnt translated by its lexicon, then with a `glossary.Glossary` its terms written in."""
        source_tokens = self.tokenizer.pieces(search.source)
        translation = Translation(text, source_tokens)
        eos = self.engine.eos_id
        quality = (self.alignment_quality if search.forced is not None
                   else self.greedy_quality if search.options.beam_size == 1 else self.quality)
        # the source's sentinel pieces, the same for every hypothesis
        placeholder_sources = (frozenset(i for i, p in enumerate(source_tokens) if self.protector.is_sentinel(p))
                               if search.protected else frozenset())
        written = self.protector.written(search.protected) if search.protected else ()
        for finished in search.best():
            if self.shift_att:
                finished = replace(finished, alignment=shift_att(finished.alignment))
            pieces = self.tokenizer.pieces(finished.tokens)
            if replace_unk:
                # Luong et al. (2015): copy the source piece the model attended to most.
                # The last source piece is </s>: never copy it (it would delete the word).
                pieces = [source_tokens[int(finished.alignment[i, :-1].argmax())] if t == self.engine.unk_id else p
                          for i, (t, p) in enumerate(zip(finished.tokens, pieces))]
            if search.protected:
                sources, pieces, alignment, origin, with_sentinels = self.protector.restore(
                    source_tokens, pieces, finished.alignment, search.protected, written)
                translation.source_tokens = sources
                # a removed sentinel takes its log-prob along; an inserted one was not generated: 0
                log_probs = [finished.token_log_probs[i] if i >= 0 else 0.0 for i in origin]
                output = self.protector.text([p for p in with_sentinels if p != EOS_TOKEN], written)
                placeholder_targets = frozenset(i for i, p in enumerate(with_sentinels)
                                                if self.protector.is_sentinel(p))
            else:
                placeholder_targets = frozenset()
                sources, alignment, log_probs = source_tokens, finished.alignment, finished.token_log_probs
                output = self.tokenizer.decode_pieces([p for t, p in zip(finished.tokens, pieces) if t != eos])
                if self.sentinels is not None and search.forced is None:   # a forced target is the caller's text
                    output = self.sentinels.without_sentinels(output)
            translation.hypotheses.append(Hypothesis(
                text=output, target_tokens=pieces, token_log_probs=log_probs, log_prob=finished.log_prob,
                score=finished.score, alignment=alignment, source_tokens=sources, quality_model=quality,
                links_rule=self.links_rule, placeholder_targets=placeholder_targets,
                placeholder_sources=placeholder_sources))
        # Title Case and capitals: names and the lexicon read the lexicon's words in small letters, as the
        # model did (case.py)
        reading = (untitled(normalise(text), self._known, self._dictionary, self._small_words) if search.title_case
                   else listed_small(normalise(text), self._known, self._dictionary)
                   if search.capitals and self.lexicon is not None else None)
        if reading is not None:
            translation = replace(translation, source=reading)
        if self.names is not None and keep_names is not False and search.forced is None:
            translation = self.names.apply(translation)
        if self.lexicon is not None and use_lexicon is not False and search.forced is None:
            translation = self.lexicon.apply(translation, capitals=search.capitals)
        if reading is not None:
            translation = replace(translation, source=text)
        if glossary is not None:
            translation = glossary.apply(translation)
        if self.articles is not None and search.forced is None:
            translation = self.articles(translation)
        if search.capitals:
            translation = self._in_capitals(translation)
        elif search.title_case:
            translation = self._as_typed(translation)
        elif search.first_small:
            translation = self._first_capitalised(translation)
        return translation

    def _in_capitals(self, translation: Translation) -> Translation:
        """A sentence sent in capitals, decoded in sentence case (`shouted`), answered in capitals:
        its text, and its pieces on both sides so that words and their spans read as the text
        does; placeholders and the vocabulary's own symbols as they are. Quality stays that of
        what the model wrote."""
        pattern = self.protector.pattern if self.protector else None

        def pieces(tokens: list[str], kept: frozenset[int]) -> list[str]:
            return [t if i in kept or (t.startswith("<") and t.endswith(">")) else t.upper()
                    for i, t in enumerate(tokens)]

        def text(written: str) -> str:
            if pattern is None:
                return written.upper()
            out, at = [], 0
            for m in pattern.finditer(written):
                out += [written[at:m.start()].upper(), m.group()]
                at = m.end()
            return "".join(out) + written[at:].upper()

        hypotheses = [replace(h, text=text(h.text), target_tokens=pieces(h.target_tokens, h.placeholder_targets),
                              source_tokens=pieces(h.source_tokens, h.placeholder_sources), rewritten_from=h)
                      for h in translation.hypotheses]
        sources = hypotheses[0].source_tokens if hypotheses else translation.source_tokens
        return Translation(translation.source, sources, hypotheses)

    def _as_typed(self, translation: Translation) -> Translation:
        """A sentence decoded with some of its words in small letters (Title Case, `untitled`; a first
        word, `first_small`): its source pieces in the case it was sent in, so that its words read as
        its text does. The translation stays as the model wrote it."""
        text = normalise(translation.source)
        hypotheses = [replace(h, source_tokens=as_typed(h.source_tokens, text), rewritten_from=h)
                      for h in translation.hypotheses]
        return Translation(translation.source, as_typed(translation.source_tokens, text), hypotheses)

    def _first_capitalised(self, translation: Translation) -> Translation:
        """A line decoded with its first word in small letters (`first_small`): as typed (`_as_typed`),
        and the translation's first letter a capital, as the line's was, unless a placeholder comes
        first."""
        typed = self._as_typed(translation)
        return replace(typed, hypotheses=[_capitalised(h) for h in typed.hypotheses])

    def translate(self, texts: list[str], options: SearchOptions = SearchOptions(), max_rows: int | None = None,
                  replace_unk: bool = False, glossary=None, keep_names: bool | None = None,
                  use_lexicon: bool | None = None, split_above: int | None = None) -> list[Translation]:
        """Offline batch translation (the server schedules instead); a text `copies` is copied, a long
        one translated in parts (`parts`); `use_lexicon` False leaves set phrases to the model too."""
        if use_lexicon is False:
            options = replace(options, set_phrases=False)
        plans = [self.plan(t, options, split_above) for t in texts]
        decode_all(self.engine, [s for plan in plans for _, s in plan if s is not None], max_rows, self.workers)
        return [self.finish(t, plan, options, replace_unk, glossary, keep_names, use_lexicon)
                for t, plan in zip(texts, plans)]

    def plan(self, text: str, options: SearchOptions,
             split_above: int | None = None) -> list[tuple[str, Search | None]]:
        """What of `text` is translated as a sentence (`parts`), each with its search, or None where
        it is empty or its own translation (`copies`)."""
        return [(p, None if self.copied(p) else self.search(p, options))
                for p in self.parts(text, split_above)]

    def finish(self, text: str, plan: list[tuple[str, Search | None]], options: SearchOptions,
               replace_unk: bool = False, glossary=None, keep_names: bool | None = None,
               use_lexicon: bool | None = None) -> Translation:
        """`text`'s translation from its plan's finished searches (`result`; a part without one is
        copied), its parts' joined (`joined`)."""
        return self.joined(text, [p for p, _ in plan],
                           [self.result(p, s, replace_unk, glossary, keep_names, use_lexicon) if s else self.copy(p)
                            for p, s in plan], options)

    def align(self, pairs: list[tuple[str, str]], max_rows: int | None = None) -> list[Translation]:
        """Forced alignment: score and align given targets."""
        searches = [self.search(s, SearchOptions(), target=t) for s, t in pairs]
        decode_all(self.engine, searches, max_rows, self.workers)
        return [self.result(s, search) for (s, _), search in zip(pairs, searches)]


def _capitalised(hyp: Hypothesis) -> Hypothesis:
    """`hyp` with the letter that opens its text a capital, in the text and its piece; as it is where
    that letter is not first (after opening marks at most: "¿Dónde", not "3 beers"), is a
    placeholder's or is one already."""
    where = opening_letter(hyp)
    if where is None or not hyp.text[where[1]].islower():
        return hyp
    return with_opening_letter(hyp, where, hyp.text[where[1]].upper())


def opening_letter(hyp: Hypothesis) -> tuple[int, int, int] | None:
    """Where the letter that opens `hyp`'s text is: its piece, its offset in the text and in that
    piece; None where no letter opens it (after opening marks at most), or a placeholder's does."""
    pieces, written = hyp.target_tokens, hyp.text
    first = next((i for i, p in enumerate(pieces) if p != EOS_TOKEN and any(c.isalpha() for c in p)), None)
    at = next((i for i, c in enumerate(written) if c.isalpha()), None)
    if first is None or at is None or any(c.isalnum() for c in written[:at]) or first in hyp.placeholder_targets:
        return None
    letter = next(i for i, c in enumerate(pieces[first]) if c.isalpha())
    return (first, at, letter) if pieces[first][letter] == written[at] else None


def with_opening_letter(hyp: Hypothesis, where: tuple[int, int, int], letter: str) -> Hypothesis:
    """`hyp` with the letter `opening_letter` found written as `letter`, in its text and its piece."""
    first, at, offset = where
    piece, written = hyp.target_tokens[first], hyp.text
    return replace(hyp, text=written[:at] + letter + written[at + 1:], rewritten_from=hyp,
                   target_tokens=[*hyp.target_tokens[:first], piece[:offset] + letter + piece[offset + 1:],
                                  *hyp.target_tokens[first + 1:]])


__all__ = ["Translator", "Translation", "Hypothesis", "EOS_TOKEN", "letterless", "normalise", "opening_letter",
           "shouted", "with_opening_letter"]
