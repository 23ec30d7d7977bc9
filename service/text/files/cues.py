"""Subtitle cues joined into sentences, and each joined entry's translation spread back over its cues.

A subtitler carries a long sentence over consecutive cues ("Le dije que nos" / "veríamos al
mediodía."); translated cue by cue, each half is a fragment. So consecutive cues that read
as one sentence are one entry (`group`). A cue joins the next when its text does not end a
sentence (. ! ? … ♪, closing quotes or brackets after them allowed), the next does not open
one (a dialogue dash, ¿ or ¡, ♪), both have the same WebVTT voice (<v Ann>), the next starts
after this one started and at most MAX_GAP seconds after it ended, and the entry stays
within MAX_CUES cues and the entry's character limit. Punctuation decides; the gap is a
guard, so that cues far apart, or one shown beside another, are never joined. Subtitlers also
mark a sentence carried over with an ellipsis at both ends of the cut ("Le dije que..." /
"...nos veríamos."): such cues join too, the model reads the sentence without those two
ellipses, and `spread` writes them back at the same cut in the translation. A cue wrapped
whole in one element (`<i>…</i>`, the usual italic line) keeps its wrapper around its own part
of the translation: the wrapper stays out of the entry, where the markup transfer would place
its start by the alignment of the cue's first word, inside the part.

Each entry is HTML (`encode`), so that the documents' markup transfer (markup.py) places
what stands between the words by the model's alignment, as it places tags in any HTML:
between two cues an inline void marker (`<wbr data-cue="k">`), put after the target words of
the source word before it; the cue's own tags (SubRip's <i>, <b>, <u>, <font>; WebVTT's
<c.x>, <i>, <lang>, <ruby>, timestamps; ASS codes such as {\\an8}) each a numbered <span>
(a start tag with its end tag) or <wbr> (any other), written back as sent (`spread`); the
text escaped only where HTML would read markup in it (a bare & or `<3` stays text for the
model). The model sees the words alone. `spread` cuts the translation at the markers. The
transfer writes each marker exactly once, but where it puts one may leave a cue nothing (the
last source word of a cue translated at the end of the sentence) or put the markers out of
order (words reordered across the cut): then the translation is cut by proportion instead,
at the word boundaries nearest the source cues' shares of the characters, none of them
empty unless the translation has fewer words than the entry has cues.

Why the markup transfer rather than the sentences' word alignment itself: every file entry
already goes through it (the server translates a file's entries as documents and asks for no
alignment), it carries the cues' tags in the same pass, and it keeps them out of the model's
input, where the bundled model's placeholder protection would carry at most 9 a sentence.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from attnmt.service.text.files.base import Check, go_on
from attnmt.service.text.markup import VOID

MAX_GAP = 1.0           # seconds from a cue's end to the start of the next one it may join
MAX_CUES = 3            # cues in one entry: a sentence on screen rarely runs over more
MARKER = '<wbr data-cue="{}">'

# a word for re-flowing and cutting: what lies between spaces, a tag with spaces inside (<font color="x">) included
WORD = re.compile(r"(?:<[^<>]*>|\S)+")
# a cue's own markup: a tag (not a bare `<`), a WebVTT timestamp, an ASS override code
_TAG = re.compile(r"</?[A-Za-z][^<>]*>|<\d[\d:.]*>|\{\\[^{}]*\}")
_NAME = re.compile(r"</?([A-Za-z][^\s<>./]*)")
_ENDS = re.compile(r"[.!?…。！？♪♫]+[\"'”’»)\]]*$")
_OPENS = re.compile(r"[\"'“‘«(\[]*[-‐–—¿¡♪♫]")
# the continuation mark: an ellipsis ending a cue's text and one opening the next (`visible` texts) ...
_ELLIPSIS_ENDS = re.compile(r"(?:\.\.\.|…)$")
_ELLIPSIS_OPENS = re.compile(r"^(?:\.\.\.|…)")
# ... and in a cue's text as sent, with its tags: the ellipsis before any end tags, after any start tags
_TRAILING = re.compile(r"\s*(\.\.\.|…)((?:\s*</[^<>]*>)*\s*)$")
_LEADING = re.compile(r"^((?:\s*<[A-Za-z][^<>]*>)*\s*)(\.\.\.|…)\s*")
# what the documents mode writes for the markup `encode` made
_WRITTEN = re.compile(r'<span data-t="(\d+)">|(</span>)|<wbr data-t="(\d+)">|<wbr data-cue="(\d+)">')
_AFTER_START = re.compile(r"(<[A-Za-z][^<>]*>)\s+")      # a space inside a tag's start ...
_BEFORE_END = re.compile(r"\s+(</[^<>]*>)")               # ... or end goes outside it


@dataclass
class Timed:
    """A cue as the joining rule reads it."""
    text: str                   # as sent, its lines joined by spaces (tags, entities and all)
    start: float                # seconds
    end: float
    voice: str = ""             # WebVTT's leading voice span, as sent


@dataclass
class Entry:
    """Consecutive cues translated as one text: `markup` is what the documents mode gets."""
    cues: range
    markup: str
    tags: list[str]             # the cues' own tags as sent, by number
    closing: dict[int, str]     # a start tag's number -> its end tag as sent ("" where the cues left it open)
    sizes: list[int]            # each cue's characters of text, for the cut by proportion
    vtt: bool                   # WebVTT: its text holds character references and is written escaped
    # marker k -> the ellipses taken from both sides of that cut (as sent), written back by `spread`
    ellipses: dict[int, tuple[str, str]] = field(default_factory=dict)
    # cue k (in the entry) -> the start and end tag wrapping its whole text (as sent)
    wrappers: dict[int, tuple[str, str]] = field(default_factory=dict)


def visible(text: str) -> str:
    """A cue's text without its tags."""
    return _TAG.sub("", text).strip()


def continues(cue: Timed, next_cue: Timed) -> bool:
    """Whether `next_cue` carries on the sentence `cue` began."""
    first, then = visible(cue.text), visible(next_cue.text)
    open_end = not _ENDS.search(first) and not _OPENS.match(then)
    return (bool(first and then) and (open_end or _ellipsis_cut(first, then))
            and cue.voice == next_cue.voice and cue.start < next_cue.start <= cue.end + MAX_GAP)


def _ellipsis_cut(first: str, then: str) -> bool:
    """The continuation mark between two cues' visible texts; words on both sides of it."""
    return (bool(_ELLIPSIS_ENDS.search(first) and _ELLIPSIS_OPENS.match(then))
            and bool(visible(_ELLIPSIS_ENDS.sub("", first)).strip(" .…")
                     and _ELLIPSIS_OPENS.sub("", then).strip(" .…")))


def group(cues: list[Timed], max_chars: int, vtt: bool, check: Check = go_on) -> list[Entry]:
    """The cues as entries, in order: each a cue alone or cues joined into one sentence
    (`check` called at each cue)."""
    entries: list[Entry] = []
    for i, cue in enumerate(cues):
        check()
        if entries and len(entries[-1].cues) < MAX_CUES and continues(cues[i - 1], cue):
            joined = encode(cues, range(entries[-1].cues.start, i + 1), vtt)
            if len(joined.markup) <= max_chars:
                entries[-1] = joined
                continue
        entries.append(encode(cues, range(i, i + 1), vtt))
    return entries


def encode(cues: list[Timed], span: range, vtt: bool) -> Entry:
    """The cues `span` as one HTML entry, a marker between each two."""
    parts: list[str] = []
    tags: list[str] = []
    closing: dict[int, str] = {}
    open_tags: list[tuple[str, int]] = []       # (name, number) of the spans open, innermost last
    texts = [cues[i].text for i in span]
    wrappers: dict[int, tuple[str, str]] = {}
    if len(texts) > 1:
        for k, text in enumerate(texts):
            whole = _wrapper(text)
            if whole is not None:
                wrappers[k], texts[k] = (whole[0], whole[2]), whole[1]
    ellipses: dict[int, tuple[str, str]] = {}
    for k in range(1, len(texts)):              # the continuation mark leaves the model's text
        before, after = _TRAILING.search(texts[k - 1]), _LEADING.match(texts[k])
        if before and after and _ellipsis_cut(visible(texts[k - 1]), visible(texts[k])):
            ellipses[k] = (before.group(1), after.group(2))
            texts[k - 1] = texts[k - 1][:before.start()] + before.group(2)
            texts[k] = after.group(1) + texts[k][after.end():]
    for k, text in enumerate(texts):
        if k:
            parts.append(MARKER.format(k) + " ")
        at = 0
        for m in _TAG.finditer(text):
            parts.append(_escape(text[at:m.start()], vtt))
            at = m.end()
            n, raw = len(tags), m.group(0)
            tags.append(raw)
            name = _NAME.match(raw)
            name = name.group(1).lower() if name else ""
            if name and not raw.startswith("</") and not raw.endswith("/>") and name not in VOID:
                open_tags.append((name, n))
                closing[n] = ""
                parts.append(f'<span data-t="{n}">')
            elif name and raw.startswith("</") and any(name == opened for opened, _ in open_tags):
                while open_tags:                # an end tag closes what opened inside its element too
                    opened, number = open_tags.pop()
                    parts.append("</span>")
                    if opened == name:
                        closing[number] = raw
                        break
            else:                               # a timestamp, an ASS code, a void or stray tag
                parts.append(f'<wbr data-t="{n}">')
        parts.append(_escape(text[at:], vtt))
    return Entry(span, "".join(parts), tags, closing, [max(1, len(visible(t))) for t in texts], vtt, ellipses,
                 wrappers)


def _wrapper(text: str) -> tuple[str, str, str] | None:
    """(start tag, inner text, end tag) when one element wraps the cue's whole text, else None."""
    m = re.fullmatch(r"\s*(<([A-Za-z][\w.-]*)[^<>]*>)(.*?)(</\2\s*>)\s*", text, re.S | re.I)
    if m is None or re.search(rf"</{re.escape(m.group(2))}\b", m.group(3), re.I):
        return None                 # none, or <i>a</i> b <i>c</i>: two elements, not one around it all
    return m.group(1), m.group(3), m.group(4)


def _escape(text: str, vtt: bool) -> str:
    """Text as HTML text: `&` before what could read as a character reference and `<` before
    what could read as a tag escaped, nothing else (html5lib reads a bare `&` or `<3` as text)."""
    if vtt:
        text = html.unescape(text)
    return re.sub(r"&(?=[A-Za-z0-9#])|<(?=[A-Za-z/!?])", lambda m: "&amp;" if m.group(0) == "&" else "&lt;", text)


def _unescape(text: str, vtt: bool) -> str:
    """Text the documents mode wrote (escaped HTML) as the cue's text."""
    text = html.unescape(text)
    return html.escape(text, quote=False) if vtt else text


def spread(entry: Entry, translation: str) -> tuple[list[str], bool]:
    """The translation of `entry` (HTML, as the documents mode writes it) as one text per cue,
    the cues' tags as sent; and whether the markers cut it (else: cut by proportion)."""
    pieces: list[list[str]] = [[]]
    markers: list[int] = []
    open_spans: list[int] = []
    at = 0
    for m in _WRITTEN.finditer(translation):
        pieces[-1].append(_unescape(translation[at:m.start()], entry.vtt))
        at = m.end()
        start, end, void, marker = m.groups()
        if start is not None and int(start) < len(entry.tags):
            open_spans.append(int(start))
            pieces[-1].append(entry.tags[int(start)])
        elif end is not None and open_spans:
            pieces[-1].append(entry.closing.get(open_spans.pop(), ""))
        elif void is not None and int(void) < len(entry.tags):
            pieces[-1].append(entry.tags[int(void)])
        elif marker is not None:
            markers.append(int(marker))
            pieces.append([])
    pieces[-1].append(_unescape(translation[at:], entry.vtt))
    texts = [_tidy("".join(p)) for p in pieces]
    if markers == list(range(1, len(entry.cues))) and all(visible(t) for t in texts):
        return _restored(entry, texts), True
    return _restored(entry, proportional(_tidy(" ".join(texts)), entry.sizes)), len(entry.cues) == 1


def _restored(entry: Entry, texts: list[str]) -> list[str]:
    """The cues' wrappers and the continuation marks `encode` took out, written back: each
    wrapper around its cue's part, each mark at its cut, after the last word before it (inside
    its end tags), before the first word after it (inside its start tags); a comma or semicolon
    the translation put at the cut gives way to the ellipsis."""
    texts = list(texts)
    for k, (start, end) in entry.wrappers.items():
        if k < len(texts) and visible(texts[k]):
            texts[k] = start + texts[k] + end
    for k, (trailing, leading) in entry.ellipses.items():
        if k < len(texts) and visible(texts[k - 1]) and visible(texts[k]):
            end = re.match(r"^(.*?)[,;:]?((?:</[^<>]*>)*)$", texts[k - 1], re.S)
            texts[k - 1] = end.group(1) + trailing + end.group(2)
            start = re.match(r"^((?:<[A-Za-z][^<>]*>)*)(.*)$", texts[k], re.S)
            texts[k] = start.group(1) + leading + start.group(2)
    return texts


def proportional(text: str, sizes: list[int]) -> list[str]:
    """`text` cut into len(sizes) parts at the word boundaries nearest the shares `sizes` give,
    each part a word at least while there are words enough."""
    words = WORD.findall(text)
    ends, size = [], 0                          # ends[i]: characters up to the end of word i
    for word in words:
        size += len(word) + bool(ends)
        ends.append(size)
    parts, done, share = [], 0, 0
    for k in range(len(sizes) - 1):
        share += sizes[k]
        goal = size * share / sum(sizes)
        lo, hi = done + 1, len(words) - (len(sizes) - 1 - k)
        cut = min(range(lo, hi + 1), key=lambda i: abs(ends[i - 1] - goal)) if lo <= hi else min(lo, len(words))
        parts.append(" ".join(words[done:cut]))
        done = cut
    return parts + [" ".join(words[done:])]


def _tidy(text: str) -> str:
    """Spaces collapsed, none just inside a tag (`<i> at noon.</i>` -> `<i>at noon.</i>`)."""
    text = _BEFORE_END.sub(r"\1 ", _AFTER_START.sub(r" \1", " ".join(text.split())))
    return " ".join(text.split())
