"""Glossaries: a source term, wherever it occurs, comes out as its target term.

Mechanism: attention-guided replacement (the choice and its figures are in the
README, "Glossaries"). The sentence is translated as it is; then, for each
occurrence of a term in the source, the target words hard-aligned to it (argmax
of word-level α, as in the Pharaoh links) are its translation: the run of
those words around the most attending one is replaced by the target term,
keeping punctuation the model wrote around it (but the last point of an abbreviation
it replaces, "U.N." → "UN", unless that point also ends the sentence). When no target word is aligned to
the occurrence (the model dropped it), the term is inserted after the target
word attending most to it, as placeholder protection does (placeholders.py). The
term's rows of α are the replaced rows restricted to the occurrence's source
pieces and renormalised, so it is aligned to its source occurrence by
construction; its pieces were not generated and carry log-probability 0.

Why not the alternatives: placeholders (sentinels, placeholders.py) need a model
trained with them and drop the term's own context from the source (a
sentinel has no gender, number or meaning), and constrained decoding needs a
search that tracks constraint states inside the decode loop (several beams per
constraint count, Hokamp & Liu 2017; Post & Vilar 2018), which costs every
request's batch-mates. Replacement works with any model, touches only
sentences that have a term, and is 100 % by construction.

Matching: whole words (no letter, digit or underscore on either side),
case-insensitive, leftmost-longest, never overlapping. Case: when the
occurrence's first letter differs in case from the entry's source term, the
target's first letter changes the same way.

Named glossaries are TSV files (`source<TAB>target`, `#` comments) listed in the
server settings (`glossaries`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attnmt.service.errors import ConfigError, InvalidInput
from attnmt.service.modeldir.tokenizer import WORD_BOUNDARY
from attnmt.service.text.alignment import EOS_TOKEN, word_groups
from attnmt.service.text.placeholders import detokenize
from attnmt.service.text.translator import Hypothesis, Translation, normalise


@dataclass(frozen=True)
class Entry:
    source: str
    target: str


@dataclass(frozen=True)
class Occurrence:
    entry: int           # index into Glossary.entries
    text: str            # as written in the source
    start: int           # source words [start, end) of the normalised sentence
    end: int


@dataclass(frozen=True)
class Match:
    """An applied occurrence: what the hypothesis now says for it, and where."""
    entry: int
    source: str
    target: str
    source_start: int
    source_end: int
    target_start: int    # target words [target_start, target_end)
    target_end: int
    changed: bool        # False: the model had written exactly the target term there


class Glossary:
    def __init__(self, entries: list[Entry], name: str = "glossary", exact_case: bool = False,
                 insert_dropped: bool = True, inflect: Callable[[Entry, str, list[str]], str] | None = None):
        """exact_case: an entry matches only as written (the lexicon's lower-case words are not
        the names "Libia" or "Bolsa"); insert_dropped: a term whose occurrence the model dropped
        is inserted after the word attending most to it, else that occurrence is left alone;
        inflect(entry, target, words before it): the form to write (the lexicon's adjectives agree)."""
        self.exact_case, self.insert_dropped, self.inflect = exact_case, insert_dropped, inflect
        self.entries = [Entry(normalise(e.source), normalise(e.target)) for e in entries]
        for i, e in enumerate(self.entries):
            if not e.source or not e.target:
                raise InvalidInput(f"{name}[{i}]: source and target must both be non-empty")
        # Longest first, so the alternation prefers "rey Assuero" to "Assuero" at the same position.
        order = sorted(range(len(self.entries)), key=lambda i: -len(self.entries[i].source))
        self._by_key = {}
        for i in order:
            self._by_key.setdefault(self._key(self.entries[i].source), i)    # the first of duplicates wins
        terms = sorted(self._by_key, key=len, reverse=True)
        body = "|".join(re.escape(t).replace(r"\ ", r"\s+") for t in terms)
        self._pattern = (re.compile(rf"(?<!\w)(?:{body})(?!\w)", 0 if exact_case else re.IGNORECASE)
                         if terms else None)

    def _key(self, text: str) -> str:
        return text if self.exact_case else text.casefold()

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, text: str) -> list[Occurrence]:
        """Occurrences in the normalised `text`, with their whole-word indices."""
        if self._pattern is None:
            return []
        text = normalise(text)
        starts = [m.start() for m in re.finditer(r"\S+", text)]
        found = []
        for m in self._pattern.finditer(text):
            key = self._key(" ".join(m.group(0).split()))
            first = bisect.bisect_right(starts, m.start()) - 1
            last = bisect.bisect_right(starts, m.end() - 1) - 1
            found.append(Occurrence(self._by_key[key], m.group(0), first, last + 1))
        return found

    def target_for(self, occurrence: Occurrence) -> str:
        entry = self.entries[occurrence.entry]
        target, wanted, given = entry.target, occurrence.text[0], entry.source[0]
        if wanted.isupper() and not given.isupper():
            return target[0].upper() + target[1:]
        if wanted.islower() and not given.islower():
            return target[0].lower() + target[1:]
        return target

    def apply(self, translation: Translation, record: bool = True) -> Translation:
        """The translation with every occurrence's target term in each hypothesis. record:
        list the terms in each hypothesis' `glossary` (names.py writes names without)."""
        occurrences = self.find(translation.source)
        if not occurrences:
            return translation
        return replace(translation, hypotheses=[self._apply(h, occurrences, record) for h in translation.hypotheses])

    # --- one hypothesis ---------------------------------------------------------------

    def _apply(self, hyp: Hypothesis, occurrences: list[Occurrence], record: bool) -> Hypothesis:
        all_src_groups, tgt_groups = hyp.groups
        src_groups = [g for g in all_src_groups if hyp.source_tokens[g[0]] != EOS_TOKEN]
        if len(src_groups) < max(o.end for o in occurrences) or hyp.alignment.shape[0] != len(hyp.target_tokens):
            return hyp                             # no alignment to place terms by (cannot happen for our own)
        # a term inside a placeholder ("name" of "%(name)s", "NMERGE" of "--batch-size=NMERGE") is the
        # program's text, not the sentence's
        occurrences = [o for o in occurrences if not any(p in hyp.placeholder_sources
                                                         for g in src_groups[o.start:o.end] for p in g)]
        if not occurrences:
            return hyp
        edits = self._place(hyp, occurrences, tgt_groups, len(src_groups))
        if not edits:                              # every occurrence dropped, and left so
            return hyp
        columns = {id(occ): [p for g in src_groups[occ.start:occ.end] for p in g] for _, _, occ in edits}

        # The new target, piece by piece: the index of a piece the model wrote, or a term's
        # piece with its row of α.
        written: list[int | tuple[str, np.ndarray]] = []
        terms: list[tuple[int, int, Occurrence, str, bool]] = []   # piece range, occurrence, target, changed
        emit = written.extend
        tokens = hyp.target_tokens

        def emit_term(occ: Occurrence, replaced: list[int], attached: bool) -> None:
            cols = columns[id(occ)]
            target = self.target_for(occ)
            if self.inflect is not None:
                recent = [tokens[w] if isinstance(w, int) else w[0] for w in written[-12:]]
                target = self.inflect(self.entries[occ.entry], target, detokenize(recent).split())
            old = detokenize([hyp.target_tokens[i] for i in replaced]) if replaced else ""
            if old.strip()[:1].isupper() and target[:1].islower() and all(
                    isinstance(w, int) and _bare(hyp.target_tokens[w]) for w in written):
                target = target[0].upper() + target[1:]      # the sentence's first word: "Stylist", not "stylist"
            # α of the term: the replaced rows restricted to the occurrence's source pieces
            row = np.zeros(hyp.alignment.shape[1], dtype=hyp.alignment.dtype)                # S
            restricted = hyp.alignment[replaced][:, cols].sum(axis=0) if replaced else np.zeros(len(cols))
            row[cols] = restricted / restricted.sum() if restricted.sum() > 0 else 1.0 / len(cols)
            start = len(written)
            written.extend((word if attached and n == 0 else WORD_BOUNDARY + word, row)
                           for n, word in enumerate(target.split()))
            terms.append((start, len(written), occ, target, not _same_term(old.strip(), target)))

        by_word: dict[int, list[tuple[int, Occurrence]]] = {}
        for first, last, occ in edits:
            by_word.setdefault(first, []).append((last, occ))
        for _, occ in by_word.get(-1, []):         # no target word at all: the term is the translation
            emit_term(occ, [], attached=False)
        t = 0
        while t < len(tgt_groups):
            group = tgt_groups[t]
            if t not in by_word:                   # most words: no term replaces them or follows them
                emit(group)
                t += 1
                continue
            replacing = [(last, occ) for last, occ in by_word[t] if last != -1]
            inserting = [occ for last, occ in by_word[t] if last == -1]
            if replacing:
                last, occ = replacing[0]
                # an insertion chosen before this span was claimed goes after the term
                inserting += [o for w in range(t + 1, last + 1) for end, o in by_word.get(w, []) if end == -1]
                span = [i for g in tgt_groups[t:last + 1] for i in g]
                lead = _punctuation_prefix([hyp.target_tokens[i] for i in span])
                trail = _punctuation_suffix([hyp.target_tokens[i] for i in span[lead:]])
                emit(span[:lead])
                replaced = span[lead:len(span) - trail]
                emit_term(occ, replaced, attached=lead > 0)
                tail: list[int | tuple[str, np.ndarray]] = list(span[len(span) - trail:])
                ends = all(_bare(tokens[i]) or tokens[i] == EOS_TOKEN for g in tgt_groups[last + 1:] for i in g)
                if tail and _abbreviation_point([tokens[i] for i in replaced], tokens[tail[0]],
                                                self.target_for(occ), ends):
                    rest = tokens[tail[0]].replace(".", "", 1)
                    tail[:1] = [(rest, hyp.alignment[tail[0]])] if rest.removeprefix(WORD_BOUNDARY) else []
                t = last + 1
            else:                                  # an insertion goes before the word's closing punctuation
                trail = _punctuation_suffix([hyp.target_tokens[i] for i in group])
                emit(group[:len(group) - trail])
                tail = group[len(group) - trail:]
                t += 1
            for occ in inserting:
                emit_term(occ, [], attached=False)
            emit(tail)

        own = hyp.token_log_probs
        pieces = [tokens[w] if isinstance(w, int) else w[0] for w in written]
        log_probs = [own[w] if isinstance(w, int) else 0.0 for w in written]   # a term was not generated
        alignment = np.stack([hyp.alignment[w] if isinstance(w, int) else w[1] for w in written])   # T' x S
        new_groups = word_groups(pieces)
        word_of = [0] * (len(pieces) + 1)                 # piece -> its target word
        for w, g in enumerate(new_groups):
            for i in g:
                word_of[i] = w
        matches = sorted((Match(occ.entry, occ.text, target, occ.start, occ.end, word_of[a], word_of[b - 1] + 1,
                                changed) for a, b, occ, target, changed in terms), key=lambda m: m.source_start)
        text = detokenize([p for p in pieces if p != EOS_TOKEN]) if any(m.changed for m in matches) else hyp.text
        fixed = frozenset(k for k, w in enumerate(written) if isinstance(w, int) and w in hyp.placeholder_targets)
        rewritten = replace(hyp, text=text, target_tokens=pieces, token_log_probs=log_probs, alignment=alignment,
                            glossary=matches if record else hyp.glossary, computed_quality=None, rewritten_from=hyp,
                            placeholder_targets=fixed)
        rewritten.groups = (all_src_groups, new_groups)   # the cached_property's value, known here
        return rewritten

    def _place(self, hyp: Hypothesis, occurrences: list[Occurrence], tgt_groups: list[list[int]],
               n_src: int) -> list[tuple[int, int, Occurrence]]:
        """Where each occurrence's term goes: (first, last) target words it replaces, or
        (after, -1) to insert it after a word (-1: at the start)."""
        words = [i for i, g in enumerate(tgt_groups) if hyp.target_tokens[g[0]] != EOS_TOKEN]
        word_alpha = hyp.word_alignment                                     # T_words x S_words
        linked = word_alpha[:, :n_src].argmax(axis=1).tolist()              # target word -> source word

        def ends_clause(t: int) -> bool:
            return _punctuation_suffix([hyp.target_tokens[i] for i in tgt_groups[t]]) > 0

        # a placeholder put back is the program's text: no term replaces it
        claimed = {t for t in words if any(i in hyp.placeholder_targets for i in tgt_groups[t])}
        edits = []                                 # (first word, last word or -1 for an insertion, occurrence)
        for occ in occurrences:
            mass = word_alpha[:, occ.start:occ.end].sum(axis=1).tolist()   # T_words: α on the occurrence
            attention = {t: mass[t] for t in words if t not in claimed}
            aligned = [t for t in attention if occ.start <= linked[t] < occ.end]
            if aligned:
                # The run of aligned words around the most attending one, grown towards the more
                # attending neighbour, no longer than the term or its occurrence, and never across
                # punctuation: attention often lags a word behind a name it could not translate.
                first = last = max(aligned, key=attention.get)
                longest = max(len(self.entries[occ.entry].target.split()), occ.end - occ.start)
                while last - first + 1 < longest:
                    left = first - 1 if first - 1 in aligned and not ends_clause(first - 1) else None
                    right = last + 1 if last + 1 in aligned and not ends_clause(last) else None
                    if left is None and right is None:
                        break
                    if right is None or (left is not None and attention[left] >= attention[right]):
                        first = left
                    else:
                        last = right
                claimed.update(range(first, last + 1))
                edits.append((first, last, occ))
            elif self.insert_dropped:              # dropped by the model: insert after the most attending word
                after = max(attention, key=attention.get) if attention else -1
                edits.append((after, -1, occ))
        return sorted(edits, key=lambda e: e[0])


def _same_term(written: str, term: str) -> bool:
    """Whether the model wrote the term already: exactly, or but for its first letter's case (a
    sentence's first word). "home" is not "HOME", nor "github" "GitHub": those are written over."""
    return written[1:] == term[1:] and written[:1].casefold() == term[:1].casefold()


# letters with points between them, the last point left off: "U.N", "e.g", "Ph.D"
_ABBREVIATION = re.compile(r"(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}")


def _abbreviation_point(replaced: list[str], closing: str, term: str, ends: bool) -> bool:
    """Whether the point that closes the words a term replaces goes with them: the last point of
    an abbreviation ("U.N." → "UN", not "UN."), unless it also ends the sentence, or a point the
    term brings itself ("approx." over "approximately." → "approx.", not "approx..")."""
    if not closing.removeprefix(WORD_BOUNDARY).startswith("."):
        return False
    if term.endswith("."):
        return True
    return not ends and _ABBREVIATION.fullmatch(detokenize(replaced).strip()) is not None


def _bare(piece: str) -> bool:
    """A piece with no word in it: a lone '▁' or punctuation."""
    return piece == WORD_BOUNDARY or _is_punctuation(piece)


def _is_punctuation(piece: str) -> bool:
    bare = piece.removeprefix(WORD_BOUNDARY)
    return bool(bare) and not any(c.isalnum() for c in bare)


def _punctuation_prefix(pieces: list[str]) -> int:
    """Opening punctuation (and a lone '▁' before it) the model wrote at the start of a span."""
    n = 0
    while n < len(pieces) - 1 and (pieces[n] == WORD_BOUNDARY or _is_punctuation(pieces[n])):
        n += 1
    return n


def _punctuation_suffix(pieces: list[str]) -> int:
    n = 0
    while n < len(pieces) and pieces[-1 - n] != EOS_TOKEN and _is_punctuation(pieces[-1 - n]):
        n += 1
    return n if n < len(pieces) else 0


def read_tsv(path: Path) -> list[Entry]:
    """`source<TAB>target` per line; blank lines and lines starting with '#' are skipped."""
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise ValueError(f"{path}:{number}: expected 'source<TAB>target', got {line!r}")
        entries.append(Entry(parts[0].strip(), parts[1].strip()))
    return entries


def load(path: Path) -> Glossary:
    return Glossary(read_tsv(path))


def load_all(files: dict[str, Path]) -> dict[str, Glossary]:
    """The server's named glossaries; a missing or malformed file stops start-up, naming it."""
    glossaries = {}
    for name, path in files.items():
        try:
            glossaries[name] = Glossary(read_tsv(path), f"glossaries.{name}")
        except (OSError, ValueError, InvalidInput) as e:
            raise ConfigError(f"invalid configuration: glossaries.{name}: {e}") from e
    return glossaries
