"""Where the words of an alignment are in the text: character offsets (Unicode code
points, end exclusive) of each source word in the text as sent and of each target
word in the text returned, so a client can highlight the word under the cursor
without tokenising anything itself.

Words come from SentencePiece pieces, which saw the text after NFC, control
characters turned to spaces, whitespace collapsed (`translator.normalise`) and
SentencePiece's own NFKC. So words are matched against the text's non-space
characters in order, both sides compared after NFKC; what still differs (an
`<unk>` piece, a placeholder the protector dropped) is matched by difflib, and
a word with no character found gets an empty span where the previous word ended.
`</s>` gets an empty span at the end of the text.
"""

from __future__ import annotations

import difflib
import unicodedata

from attnmt.service.text.alignment import EOS_TOKEN

Span = tuple[int, int]


def _compact(text: str) -> tuple[list[str], list[int]]:
    """The non-space characters of `text` after NFKC, each with its index in `text`."""
    chars, origin = [], []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch):
            if not c.isspace() and unicodedata.category(c) != "Cc":
                chars.append(c)
                origin.append(i)
    return chars, origin


def word_spans(text: str, words: list[str]) -> list[Span]:
    """One span of `text` per word (see the module docstring)."""
    chars, origin = _compact(text)
    wanted: list[str] = []      # the words' characters, concatenated
    owner: list[int] = []       # which word each of them belongs to
    for k, word in enumerate(words):
        if word == EOS_TOKEN:
            continue
        for c in _compact(word)[0]:
            wanted.append(c)
            owner.append(k)
    found: list[int | None] = [None] * len(wanted)    # index in `text` of each wanted character
    if wanted == chars[:len(wanted)]:
        found = origin[:len(wanted)]
    else:
        matcher = difflib.SequenceMatcher(None, chars, wanted, autojunk=False)
        for a, b, size in matcher.get_matching_blocks():
            for d in range(size):
                found[b + d] = origin[a + d]
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, at in zip(owner, found):
        if at is not None:
            first.setdefault(k, at)
            last[k] = at
    spans: list[Span] = []
    cursor = 0
    for k, word in enumerate(words):
        if word == EOS_TOKEN:
            spans.append((len(text), len(text)))
        elif k in first:
            start, end = max(first[k], cursor), max(last[k] + 1, cursor)
            spans.append((start, end))
            cursor = end
        else:
            spans.append((cursor, cursor))
    return spans


def shifted(spans: list[Span], offset: int) -> list[Span]:
    return [(a + offset, b + offset) for a, b in spans]
