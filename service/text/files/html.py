"""HTML files (.html, .htm): pages through the documents' HTML mode (service/text/markup.py).

A page that fits one entry (`Limits.max_entry_chars` characters and, by a count that errs
high, `Limits.max_entry_sentences` sentences) is that one entry, as sent. A larger page is
read as the HTML mode reads it (html5.py: html5lib, the WHATWG algorithm) and cut where its
tree allows, each entry a stretch of the markup as sent: the children of <body> grouped in
order while a group fits, a child too large on its own cut the same way among its own
children (a table cell by cell), the <title> an entry of its own. What lies between the
entries (the doctype, the rest of <head>, the tags of the elements cut through, scripts,
styles, comments, elements without text) is copied as it is: the page written back is the
markup as sent with each entry's translation in its place, in UTF-8 with its declared
charset saying so.

A cut never parts what the parser joined: siblings whose markup overlaps (a formatting
element left open and reopened in the next paragraph, text moved out of a table) stay in
one piece, and an element whose own tags lie among its children's is not cut through; nor
is foreign content (<svg>, <math>), an element whose content is not parsed as markup
(<title>, <textarea>, <script>, ...) or a <select>. A paragraph is cut only when it is over
the limits alone, at its inline elements, and a sentence across such a cut is translated in
two parts. What cannot be cut small enough (one text node of 60,000 characters, a paragraph
of 300 sentences without a tag inside) stays an entry over the limits, which the core
refuses as it refuses any (documents.read: max_document_chars, max_document_sentences).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from attnmt.service.errors import InvalidInput
from attnmt.service.text import html5
from attnmt.service.text.files.base import Check, FileDocument, Limits, go_on
from attnmt.service.text.files.encoding import decode
from attnmt.service.text.markup import BLOCK, TRANSLATED_ATTRIBUTES, VERBATIM, VOID, untranslatable

_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_CHARSET_VALUE = re.compile(r"""(<meta[^>]*?charset\s*=\s*["']?\s*)([A-Za-z0-9._:-]+)""", re.IGNORECASE)

# Where a sentence may end inside a piece of text: more places than sentencex splits at
# ("Dr. Smith", "ok... then", "a!b"), so that an entry counted within the limit is within it.
_SENTENCE_END = re.compile(r"""[!?؟。！？]+["'”’»)\]]*(?=\s*\S)|[.…।]+["'”’»)\]]*(?:\s+(?=\S)|(?=[^\s0-9a-z]))""")
# Parsed alone (in <body>), a row or a cell is not part of a table: their children are cut one by one.
_TABULAR = {"html", "table", "thead", "tbody", "tfoot", "tr", "colgroup", "frameset"}
# Never cut through: their content is not parsed as it would be in <body>.
_WHOLE = VERBATIM | VOID | {"title", "textarea", "select", "datalist", "optgroup", "option"}

Cut = tuple[int, int]       # [start, end) of the markup


class HtmlFile(FileDocument):
    """A page: `texts` are stretches of its markup (the whole of it when it fits one entry)."""

    def __init__(self, markup: str, cuts: list[Cut]):
        super().__init__("html", "text/html; charset=utf-8", [markup[a:b] for a, b in cuts], html=True)
        ends = [0] + [b for _, b in cuts]
        starts = [a for a, _ in cuts] + [len(markup)]
        self.between = [markup[end:start] for end, start in zip(ends, starts)]    # before each text, after the last

    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        parts = [self.between[0]]
        for translation, after in zip(translations, self.between[1:], strict=True):
            parts += [translation, after]
        return _CHARSET_VALUE.sub(lambda m: m.group(1) + "utf-8", "".join(parts), count=1).encode("utf-8")


def read_html(data: bytes, limits: Limits, check: Check = go_on) -> HtmlFile:
    """The page in `data`, one entry or cut into entries that fit the limits where its tree
    allows (InvalidInput only for nesting deeper than html5.MAX_DEPTH). `check` is called
    between the parser's tokens and the tree's nodes."""
    if len(data) > limits.max_html_bytes:
        raise InvalidInput(f"the HTML file is {len(data)} bytes, over the limit of {limits.max_html_bytes} "
                           "(max_html_file_bytes)")
    declared = _META_CHARSET.search(data[:4096])
    markup = decode(data, declared.group(1).decode("ascii") if declared else None)
    return HtmlFile(markup, cuts(markup, limits, check))


def cuts(markup: str, limits: Limits, check: Check = go_on) -> list[Cut]:
    """The stretches of `markup` to translate, in order: all of it when it fits one entry."""
    page = _Page(markup, check)
    whole = [(0, len(markup))]
    if len(markup) <= limits.max_entry_chars and page.sentences(page.root) <= limits.max_entry_sentences:
        return whole
    cutter = _Cutter(page, limits)
    cutter.descend(page.root, tabular=html5.is_document(markup))
    found = sorted(cutter.cuts)
    if any(b > a for (_, b), (a, _) in zip(found, found[1:])):     # overlapping: not a cut the tree allows
        return whole
    return found


@dataclass(eq=False)
class _Part:
    """A node of the page's tree, with where it stands in the markup and in the page's text."""
    node: html5.Node | html5.Text | html5.Comment
    lo: int | None                  # [lo, hi) of the markup its tokens cover; None: none
    hi: int | None
    first: int                      # [first, last) of _Page.text
    last: int
    children: list[_Part]
    own: list[Cut]                  # an element's start and end tags as sent


@dataclass(eq=False)
class _Unit:
    """Consecutive siblings no cut may part (one, unless their markup overlaps)."""
    parts: list[_Part]
    lo: int
    hi: int
    sentences: int = 0


class _Page:
    """The tree of the page (html5.parse) and its text as the HTML mode reads it: text outside
    untranslated elements, alt and title values, and a break at each block element's edges."""

    def __init__(self, markup: str, check: Check):
        self.pieces: list[str] = []
        self.size = 0
        self.breaks: list[int] = []     # positions of `text`, in order
        self.check = check              # called at each node, here and by the cutter
        self.root = self._part(html5.parse(markup, check), untranslated=False)
        self.text = "".join(self.pieces)

    def sentences(self, part: _Part | _Unit) -> int:
        """The sentences in `part`'s text, counted high."""
        first, last = (part.parts[0].first, part.parts[-1].last) if isinstance(part, _Unit) else (part.first, part.last)
        edges = [first, *self.breaks[bisect.bisect_right(self.breaks, first):bisect.bisect_left(self.breaks, last)],
                 last]
        pieces = (self.text[a:b] for a, b in zip(edges, edges[1:]))
        return sum(1 + len(_SENTENCE_END.findall(piece)) for piece in pieces if piece.strip())

    def units(self, parts: list[_Part]) -> list[_Unit]:
        """`parts` (siblings) as units, those whose markup overlaps joined, in order."""
        units: list[_Unit] = []
        for part in parts:
            self.check()
            if part.lo is None:             # nothing in the markup: an element only the parser implied, empty
                continue
            unit = _Unit([part], part.lo, part.hi)
            while units and unit.lo < units[-1].hi:
                joined = units.pop()
                unit = _Unit(joined.parts + unit.parts, min(joined.lo, unit.lo), max(joined.hi, unit.hi))
            units.append(unit)
        for unit in units:
            unit.sentences = self.sentences(unit)
        return units

    def _add(self, text: str) -> None:
        self.pieces.append(text)
        self.size += len(text)

    def _break(self) -> None:
        if not self.breaks or self.breaks[-1] != self.size:
            self.breaks.append(self.size)

    def _part(self, node, untranslated: bool) -> _Part:
        self.check()
        first = self.size
        if isinstance(node, html5.Text):
            located = [c for c in node.chars if c[2] > c[1]]        # a character the parser made up has no span
            if not untranslated:
                self._add("".join([c[0] for c in node.chars]))
            return _Part(node, min([c[1] for c in located], default=None), max([c[2] for c in located], default=None),
                         first, self.size, [], [])
        if isinstance(node, html5.Comment):
            return _Part(node, *node.span, first, first, [], [])
        is_html = node.namespace is None
        untranslated = untranslated or (is_html and node.name is not None
                                        and untranslatable(node.name, node.attributes))
        block = is_html and node.name in BLOCK
        if block:
            self._break()
        if is_html and node.token is not None and not untranslated:
            for name in TRANSLATED_ATTRIBUTES:      # a sentence of its own (markup.py puts it after the body's)
                value = node.attributes.get(name) or ""
                if any(c.isalpha() for c in value):
                    self._break()
                    self._add(value)
                    self._break()
        children = [self._part(child, untranslated) for child in node.childNodes]
        if block:
            self._break()
        own = [span for span in (node.token["span"] if node.token else None, node.end) if span and span[1] > span[0]]
        los = [a for a, _ in own] + [c.lo for c in children if c.lo is not None]
        his = [b for _, b in own] + [c.hi for c in children if c.hi is not None]
        return _Part(node, min(los, default=None), max(his, default=None), first, self.size, children, own)


class _Cutter:
    """The page cut into entries that fit the limits, from the root down."""

    def __init__(self, page: _Page, limits: Limits):
        self.page = page
        self.limits = limits
        self.cuts: list[Cut] = []

    def fits(self, lo: int, hi: int, sentences: int) -> bool:
        return hi - lo <= self.limits.max_entry_chars and sentences <= self.limits.max_entry_sentences

    def descend(self, part: _Part, tabular: bool) -> None:
        """Entries among `part`'s children: each child apart (`tabular`), or consecutive
        children grouped while they fit."""
        units = self.page.units(part.children)
        if any(lo < unit.hi and unit.lo < hi for lo, hi in part.own for unit in units):
            self.cuts.append((part.lo, part.hi))        # its own tags among its children's: not cut through
            return
        run: list[_Unit] = []
        sentences = 0
        for unit in units:
            if not tabular and run and self.fits(run[0].lo, unit.hi, sentences + unit.sentences):
                run.append(unit)
                sentences += unit.sentences
                continue
            self.close(run)
            run, sentences = [], 0
            if not unit.sentences:                      # nothing to translate: left as it is, between entries
                continue
            if not tabular and self.fits(unit.lo, unit.hi, unit.sentences):
                run, sentences = [unit], unit.sentences
            elif len(unit.parts) == 1 and _cuttable(unit.parts[0].node):
                node = unit.parts[0].node
                self.descend(unit.parts[0], tabular=node.name in _TABULAR)
            else:
                self.cuts.append((unit.lo, unit.hi))    # over the limits if not tabular: the core refuses it
        self.close(run)

    def close(self, run: list[_Unit]) -> None:
        while run and not run[-1].sentences:            # what has no text after the last text stays between entries
            run.pop()
        if run:
            self.cuts.append((run[0].lo, run[-1].hi))


def _cuttable(node) -> bool:
    """Whether an entry may start inside `node`: its children parse alone as they did in it."""
    return isinstance(node, html5.Node) and node.namespace is None and node.name not in _WHOLE
