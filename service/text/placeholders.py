"""Placeholder protection: `%s`, `{name}`, `$HOME`, `<b>` come out verbatim.

The model directory says which spans are placeholders and how they were
hidden in training (`manifest.placeholders`: a regular expression and the
sentinel format `⦃n⦄`, written by `model/data/placeholders.py`). Before decoding,
each placeholder of the source becomes a numbered sentinel, in source order;
the model learned to carry sentinels to where they belong in the target.
After decoding each sentinel is replaced by its original text (a number, which
is hidden the same way, as the target language writes it: numbers.py). A sentinel the
model dropped is put back through the alignment (after the target word that
attends most to the source sentinel); one it invented or repeated is removed.
So the target always holds exactly the source's placeholders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from attnmt.service.modeldir.tokenizer import WORD_BOUNDARY
from attnmt.service.text.numbers import Numbers


@dataclass(frozen=True)
class Protected:
    text: str                # the source with sentinels
    originals: tuple[str, ...]   # originals[n - 1] is what sentinel n stands for


# Quotation marks around a placeholder ('%s', "$HOME", `%s' in GNU's older style) delimit a value the
# program prints, and a translation keeps them as written: they are hidden with the placeholder, in one
# sentinel. Left to the model, the English->Spanish model writes Spanish guillemets («%s», as most of
# its training catalogs do), where the projects it is measured on (bash and make on dev; git,
# coreutils, tar, wget on test) keep the source's marks: dev BLEU 46.68 -> 49.86 with them kept.
QUOTES = (("'", "'"), ('"', '"'), ("`", "'"), ("\u2018", "\u2019"), ("\u201c", "\u201d"))


def quoted(pattern: str) -> str:
    """`pattern`, with a match in quotation marks (QUOTES) taken whole, marks and all."""
    inner = f"(?:{pattern})"
    return "|".join([re.escape(opening) + inner + re.escape(closing) for opening, closing in QUOTES] + [pattern])


class Protector:
    def __init__(self, spec: dict, numbers: Numbers | None = None):
        """numbers: hide the numbers of this language pair too, after every placeholder."""
        self.pattern = re.compile(quoted(spec["pattern"]))
        self.sentinel = spec["sentinel"]
        self.max = int(spec["max"])
        self.sentinels = {self.sentinel.format(n): n for n in range(1, self.max + 1)}
        self.any_sentinel = re.compile(re.escape(self.sentinel).replace(r"\{\}", r"\d+"))
        # What is hidden: the placeholders, and a sentinel the user typed ("⦃1⦄"), which would
        # otherwise be read as one of ours and come back as another placeholder, or not at all.
        self.numbers = numbers
        self.hidden = re.compile("|".join([self.any_sentinel.pattern, self.pattern.pattern]
                                          + ([numbers.pattern.pattern] if numbers else [])))
        # A '%' or '$' the model wrote right before a sentinel would fuse with the
        # placeholder put there ('%' + '%s' reads as '%%' 's'); before a number it is a percentage
        # or a currency ('$45'), and stays.
        self.fusing = re.compile(r"[%$]+(?=" + re.escape(self.sentinel).replace(r"\{\}", r"(\d+)") + ")")

    def protect(self, text: str) -> Protected:
        """Sentinels, numbered in source order, for the first `max` placeholders; with more than
        that, the program's format directives and tags before its command-line options (a
        usage line lists a dozen options, and a `%s` lost costs more than a `--all`), and those
        before numbers, which the model mostly copies by itself. The rest stay as they are."""
        found = list(self.hidden.finditer(text))
        if len(found) > self.max:
            # a typed sentinel first of all: left in the text, it would pass for one of ours
            ranked = sorted(range(len(found)), key=lambda k: (not self.any_sentinel.fullmatch(found[k].group()),
                                                              self._is_number(found[k].group()),
                                                              _is_option(found[k].group()), k))
            chosen = set(ranked[:self.max])
            found = [m for k, m in enumerate(found) if k in chosen]
        pieces, originals, at = [], [], 0
        for m in found:
            originals.append(m.group())
            pieces += [text[at:m.start()], self.sentinel.format(len(originals))]
            at = m.end()
        return Protected("".join(pieces) + text[at:], tuple(originals))

    def written(self, originals: tuple[str, ...]) -> tuple[str, ...]:
        """What each sentinel stands for in the target: its original, a number as the target
        language writes it."""
        if self.numbers is None:
            return originals
        return tuple(self.numbers.written(o) if self.numbers.is_number(o) else o for o in originals)

    def _is_number(self, original: str) -> bool:
        return self.numbers is not None and self.numbers.is_number(original)

    def restore(self, source_tokens: list[str], target_tokens: list[str], alignment: np.ndarray,
                originals: tuple[str, ...], written: tuple[str, ...] | None = None,
                ) -> tuple[list[str], list[str], np.ndarray, list[int]]:
        """Sentinel pieces -> original text in the source's tokens, `written` (default: the
        originals) in the target's; missing sentinels
        inserted where the alignment points, extra ones removed (with their α rows).
        Also returns, for each target token, its index in `target_tokens` (-1: inserted),
        and the target tokens with the sentinels still in them (for `text`)."""
        source = [self._original(t, originals) for t in source_tokens]
        keep, seen = [], set()
        for i, piece in enumerate(target_tokens):
            n = self.sentinels.get(piece)
            if n is not None and (n > len(originals) or n in seen):
                if keep and target_tokens[keep[-1]] == WORD_BOUNDARY:
                    keep.pop()                      # and the lone word boundary before it
                continue                            # invented or repeated: drop it
            seen.add(n)
            keep.append(i)
        target = [target_tokens[i] for i in keep]
        origin = list(keep)
        alpha = alignment[keep]                                             # T' x S
        for n in range(1, len(originals) + 1):
            if n in seen:
                continue
            column = source_tokens.index(self.sentinel.format(n))
            words = [i for i, t in enumerate(target) if t != "</s>"]
            if words:
                best = words[int(alpha[words, column].argmax())]
                at = best + 1
                while at < len(target) and target[at] != "</s>" and not target[at].startswith(WORD_BOUNDARY):
                    at += 1                        # after the whole word, not inside it
            else:
                at = 0
            row = np.zeros((1, alpha.shape[1]), dtype=alpha.dtype)
            row[0, column] = 1.0                   # it is aligned to its source placeholder by construction
            target.insert(at, WORD_BOUNDARY + self.sentinel.format(n))
            origin.insert(at, -1)
            alpha = np.concatenate([alpha[:at], row, alpha[at:]])
        self._reopen_gaps(source_tokens, target, len(originals))
        restored = [self._original(t, written or originals) for t in target]
        return source, restored, alpha, origin, target

    def _reopen_gaps(self, source_tokens: list[str], target: list[str], count: int) -> None:
        """A word boundary, in place, wherever the model glued a word to a sentinel that the source
        keeps apart from its neighbours: "-n STRING" came back "-nCADENA" and "-V -V" as "-V-V".
        Punctuation stays glued ("%s:"), and nothing the source glues is pulled apart."""
        gap_before, gap_after = set(), set()
        for j, piece in enumerate(source_tokens):
            n = self.sentinels.get(piece.removeprefix(WORD_BOUNDARY))
            if n is None:
                continue
            if j == 0 or piece.startswith(WORD_BOUNDARY) or source_tokens[j - 1] == WORD_BOUNDARY:
                gap_before.add(n)
            if j + 1 < len(source_tokens) and source_tokens[j + 1].startswith(WORD_BOUNDARY):
                gap_after.add(n)
        for i, piece in enumerate(target):
            n = self.sentinels.get(piece.removeprefix(WORD_BOUNDARY))
            if n is None or n > count:
                continue
            if (n in gap_before and i > 0 and not piece.startswith(WORD_BOUNDARY) and target[i - 1] != WORD_BOUNDARY
                    and (target[i - 1][-1:].isalnum() or self.is_sentinel(target[i - 1]))):
                target[i] = WORD_BOUNDARY + piece
            if (n in gap_after and i + 1 < len(target) and target[i + 1] != "</s>"
                    and not target[i + 1].startswith(WORD_BOUNDARY)
                    and (target[i + 1][:1].isalnum() or self.is_sentinel(target[i + 1]))):
                target[i + 1] = WORD_BOUNDARY + target[i + 1]

    def is_sentinel(self, piece: str) -> bool:
        """Whether a piece is a sentinel (with or without its word boundary)."""
        return piece.removeprefix(WORD_BOUNDARY) in self.sentinels

    def text(self, pieces: list[str], originals: tuple[str, ...]) -> str:
        """The translation: placeholders the model wrote itself (not from a sentinel, so
        not in the source) are removed, then each sentinel becomes its original (`originals`:
        what `written` gives, for the target)."""
        def fused(m: re.Match) -> str:
            n = int(m.group(1))
            return m.group() if n <= len(originals) and self._is_number(originals[n - 1]) else ""
        text = self.fusing.sub(fused, self.pattern.sub("", detokenize(pieces)))
        text = re.sub(r"  +", " ", text).strip()
        return self.any_sentinel.sub(lambda m: self._original(m.group(0), originals), text)

    def without_sentinels(self, text: str) -> str:
        """Protection off: a model trained with sentinels may still write one; drop it."""
        return re.sub(r"  +", " ", self.any_sentinel.sub("", text)).strip()

    def _original(self, piece: str, originals: tuple[str, ...]) -> str:
        bare = piece.removeprefix(WORD_BOUNDARY)
        n = self.sentinels.get(bare)
        if n is None or n > len(originals):
            return piece
        return piece[:len(piece) - len(bare)] + originals[n - 1]


def _is_option(placeholder: str) -> bool:
    """A command-line option (`--all`, `'-n'`): the one kind of placeholder opening with a hyphen."""
    return placeholder.lstrip("'\"`\u2018\u201c").startswith("-")


def detokenize(pieces: list[str]) -> str:
    """SentencePiece's decoding for pieces that may hold restored placeholders
    (which are not in the vocabulary, so `decode_pieces` would mangle them)."""
    return "".join("\u2047" if p == "<unk>" else p for p in pieces).replace(WORD_BOUNDARY, " ").strip()
