"""Markup through translation: HTML in, well-formed HTML out, every tag placed by
the alignment.

The design is Bergamot's (browsermt/bergamot-translator, `src/translator/html.cpp`):
strip the tags, remembering which elements each character of text was inside;
translate the text; give each target word the elements of the source word it is
hard-aligned to (argmax of α, whole words: a source word is inside an element when
its letters are); write the tags back around the target words. Here each element
becomes one interval of the target (from its first to its last aligned word), the
intervals are made to nest as the source elements did (a child is clamped into its
parent, a later sibling is moved off an earlier one), and the tree is written out
once, so the output is well-formed and holds exactly the source's tags.

Block elements (`<p>`, `<li>`, `<br>`, ...) end sentences; their intervals follow
the sentences they hold, not the alignment. Atoms are copied verbatim to the target
position the alignment gives the source position they stood at: void elements,
comments, declarations, elements with `translate="no"` or `class="notranslate"`,
`script` and `style`, and (for a model that does not protect them itself)
placeholders such as `%1$s` and `{name}`.

Malformed markup is refused (`InvalidInput`, naming the problem and its offset):
a stray or mis-nested end tag, an end tag of a void element, an element never
closed (also `p` and `li`: no implied end tags), a `<` that starts no tag.
Parsing is Python's own `html.parser`; entities are decoded for the model and
written back in the source's spelling.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from .errors import InvalidInput

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
        "track", "wbr"}
BLOCK = {"address", "article", "aside", "blockquote", "body", "br", "button", "caption", "dd", "details",
         "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
         "h4", "h5", "h6", "head", "header", "hr", "html", "iframe", "legend", "li", "main", "nav", "ol",
         "optgroup", "option", "p", "pre", "script", "section", "select", "style", "summary", "table",
         "tbody", "td", "template", "textarea", "tfoot", "th", "thead", "title", "tr", "ul"}
VERBATIM = {"script", "style", "template"}
MAX_DEPTH = 100

# Placeholders a model without its own protection would mangle (printf, Python, braces, shell).
PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsp%]"
    r"|%\([A-Za-z_][A-Za-z0-9_]*\)[-+0#]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|\{\{[^{}\s]+\}\}|\{[A-Za-z0-9_.\-]*\}|\$\{[A-Za-z_][A-Za-z0-9_]*\}")


@dataclass(eq=False)
class Element:
    name: str
    start_tag: str                  # as sent
    start: int                      # [start, end) of the stripped text inside it
    parent: "Element | None"
    order: int                      # position among all nodes, in source order
    offset: int = 0                 # of the start tag in the markup, for messages
    end_tag: str = ""
    end: int = 0
    children: list = field(default_factory=list)
    lo: int = 0                     # its interval of the target, set by `render`
    hi: int = 0


@dataclass(eq=False)
class Atom:
    raw: str                        # copied verbatim
    at: int                         # position in the stripped text
    parent: Element
    order: int
    space_before: bool = False      # whitespace around it in the source, kept in the target
    space_after: bool = False
    lo: int = 0


@dataclass
class Source:
    """What is translated (`text`: tags and atoms removed, entities decoded) and the
    structure around it. `raw_start[i]:raw_end[i]` is where text[i] is in the entry."""
    text: str
    root: Element
    breaks: set[int]                # positions of `text` a sentence may not cross
    raw_start: list[int] | None = None      # None: the entry is `text` itself
    raw_end: list[int] | None = None
    entities: dict[str, str] = field(default_factory=dict)   # character -> spelling in the source
    html: bool = False

    def raw_span(self, start: int, end: int) -> tuple[int, int]:
        if self.raw_start is None:
            return start, end
        if start >= end:            # empty: right after the character before it
            at = self.raw_end[start - 1] if start > 0 else (self.raw_start[0] if self.raw_start else 0)
            return at, at
        return self.raw_start[start], self.raw_end[end - 1]


def plain(text: str) -> Source:
    """Plain text: nothing around it."""
    return Source(text, Element("", "", 0, None, 0, end=len(text)), set())


class _Events(HTMLParser):
    """html.parser's events, each with its offset in the markup."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=False)
        self.line_starts = [0] + [i + 1 for i, c in enumerate(markup) if c == "\n"]
        self.events: list[tuple[str, int, object]] = []

    def _add(self, kind: str, payload: object = None) -> None:
        line, column = self.getpos()
        self.events.append((kind, self.line_starts[line - 1] + column, payload))

    def handle_starttag(self, tag, attrs):
        self._add("start", (tag, attrs, False))

    def handle_startendtag(self, tag, attrs):
        self._add("start", (tag, attrs, True))

    def handle_endtag(self, tag):
        self._add("end", tag)

    def handle_data(self, data):
        self._add("data", data)

    def handle_entityref(self, name):
        self._add("entity")

    def handle_charref(self, name):
        self._add("entity")

    def handle_comment(self, data):
        self._add("atom")

    def handle_decl(self, decl):
        self._add("atom")

    def handle_pi(self, data):
        self._add("atom")

    def unknown_decl(self, data):
        self._add("atom")


def _untranslatable(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    values = dict(attrs)
    return (tag in VERBATIM or (values.get("translate") or "").lower() == "no"
            or "notranslate" in (values.get("class") or "").split())


def parse_html(markup: str, placeholders: bool = True) -> Source:
    """The markup as a Source; InvalidInput when it is malformed (see the module docstring).
    `placeholders`: turn placeholders into atoms (for a model that does not protect them)."""
    events = _Events(markup)
    events.feed(markup)
    events.close()
    chars: list[str] = []
    raw_start: list[int] = []
    raw_end: list[int] = []
    root = Element("", "", 0, None, 0)
    stack = [root]
    breaks: set[int] = set()
    entities: dict[str, str] = {}
    verbatim: list[str] = []                    # open elements inside an untranslatable one
    verbatim_start = 0
    order = 0
    bounds = [offset for _, offset, _ in events.events] + [len(markup)]

    def atom(raw: str) -> None:
        nonlocal order
        order += 1
        stack[-1].children.append(Atom(raw, len(chars), stack[-1], order))

    def text(value: str, start: int, end: int | None = None) -> None:
        for i, c in enumerate(value):
            chars.append(c)
            raw_start.append(start + i if end is None else start)
            raw_end.append(start + i + 1 if end is None else end)

    for (kind, offset, payload), end in zip(events.events, bounds[1:]):
        raw = markup[offset:end]
        if verbatim:
            if kind == "start" and not payload[2] and payload[0] not in VOID:
                verbatim.append(payload[0])
            elif kind == "end":
                if payload != verbatim[-1]:
                    raise InvalidInput(f"markup: </{payload}> at offset {offset} does not close <{verbatim[-1]}>")
                verbatim.pop()
                if not verbatim:
                    atom(markup[verbatim_start:end])
            continue
        if kind == "data":
            if "<" in payload:
                at = offset + payload.index("<")
                raise InvalidInput(f"markup: '<' at offset {at} starts no tag (write &lt; for a literal '<')")
            position = 0
            for m in PLACEHOLDER.finditer(payload) if placeholders else ():
                text(payload[position:m.start()], offset + position)
                atom(m.group(0))
                position = m.end()
            text(payload[position:], offset + position)
        elif kind == "entity":
            # A letter (&aacute;) or a space (&nbsp;) is text for the model; any other
            # character (&amp; &copy; &mdash;) is carried as it was.
            decoded = html.unescape(raw)
            if decoded == raw:              # not an entity ('&a' followed by '$'): a literal '&'
                atom("&amp;" + raw[1:])
            elif not all(c.isalnum() or c.isspace() for c in decoded):
                atom(raw)
            else:
                entities[decoded] = raw
                text(decoded, offset, end)
        elif kind == "atom":
            atom(raw)
        elif kind == "start":
            tag, attrs, closed = payload
            if tag in BLOCK:
                breaks.add(len(chars))
            if _untranslatable(tag, attrs) and not closed and tag not in VOID:
                verbatim, verbatim_start = [tag], offset
            elif closed or tag in VOID:
                atom(raw)
            else:
                if len(stack) > MAX_DEPTH:
                    raise InvalidInput(f"markup: <{tag}> at offset {offset} nests deeper than {MAX_DEPTH} "
                                       "elements")
                order += 1
                element = Element(tag, raw, len(chars), stack[-1], order, offset)
                stack[-1].children.append(element)
                stack.append(element)
        else:   # end tag
            if payload in VOID:
                raise InvalidInput(f"markup: </{payload}> at offset {offset}: {payload} is a void element "
                                   "and has no end tag")
            top = stack[-1]
            if top is root:
                raise InvalidInput(f"markup: </{payload}> at offset {offset} closes nothing that is open")
            if top.name != payload:
                raise InvalidInput(f"markup: </{payload}> at offset {offset} does not close <{top.name}> "
                                   f"opened at offset {top.offset} (tags must nest)")
            top.end_tag, top.end = raw, len(chars)
            stack.pop()
            if payload in BLOCK:
                breaks.add(len(chars))
    if verbatim:
        raise InvalidInput(f"markup: <{verbatim[0]}> at offset {verbatim_start} is never closed")
    if len(stack) > 1:
        raise InvalidInput(f"markup: <{stack[-1].name}> opened at offset {stack[-1].offset} is never closed")
    stripped = "".join(chars)
    root.end = len(stripped)
    _mark_spaces(root, stripped)
    return Source(stripped, root, breaks, raw_start, raw_end, entities, html=True)


def _mark_spaces(element: Element, text: str) -> None:
    for child in element.children:
        if isinstance(child, Atom):
            child.space_before = child.at > 0 and text[child.at - 1].isspace()
            child.space_after = child.at < len(text) and text[child.at].isspace()
        else:
            _mark_spaces(child, text)


# --- back into markup ----------------------------------------------------------

def _place(element: Element, layout, source_text: str) -> None:
    """Intervals for the children of `element` (whose own interval is set)."""
    placed: list[Element] = []
    for child in element.children:
        if isinstance(child, Atom):
            continue
        covered = layout.coverage(child.start, child.end, source_text)
        lo, hi = covered if covered else (layout.position(child.start),) * 2
        lo = min(max(lo, element.lo), element.hi)
        hi = min(max(hi, lo), element.hi)
        for _ in range(2):                  # off the earlier siblings (each move can meet another)
            for sibling in placed:
                overlaps = sibling.lo < hi and lo < sibling.hi
                inside = lo == hi and sibling.lo < lo < sibling.hi
                if overlaps or inside:
                    if lo < sibling.lo:
                        hi = sibling.lo
                    else:
                        lo = sibling.hi
                        hi = max(hi, lo)
        child.lo, child.hi = lo, hi
        placed.append(child)
        _place(child, layout, source_text)
    for child in element.children:
        if isinstance(child, Atom):
            glued = child.at < len(source_text) and source_text[child.at].isalnum()
            at = min(max(layout.position(child.at, glued), element.lo), element.hi)
            for sibling in placed:
                if sibling.lo < at < sibling.hi:
                    at = sibling.hi
            child.lo = at


def render(source: Source, layout, target: str) -> tuple[str, list[int], list[int]]:
    """The target text with the source's markup put back; and for each target character
    where it ended up in the output ([start, end), an entity being several characters).
    `layout` maps source positions and ranges to the target (documents.Layout)."""
    root = source.root
    root.lo, root.hi = 0, len(target)
    _place(root, layout, source.text)
    out: list[str] = []
    size = 0
    starts = [0] * len(target)
    ends = [0] * len(target)

    def write(piece: str) -> None:
        nonlocal size
        out.append(piece)
        size += len(piece)

    def write_text(start: int, end: int) -> None:
        for i in range(start, end):
            c = target[i]
            starts[i] = size
            if source.html:
                write(source.entities.get(c) or html.escape(c, quote=False))
            else:
                write(c)
            ends[i] = size

    def emit(element: Element) -> None:
        write(element.start_tag)
        at = element.lo
        for child in sorted(element.children, key=lambda c: (c.lo, c.hi if isinstance(c, Element) else c.lo,
                                                             c.order)):
            write_text(at, child.lo)
            at = max(at, child.lo)
            if isinstance(child, Atom):
                if child.space_before and at > 0 and not target[at - 1].isspace():
                    write(" ")
                write(child.raw)
                if child.space_after and at < len(target) and not target[at].isspace():
                    write(" ")
            else:
                emit(child)
                at = child.hi
        write_text(at, element.hi)
        write(element.end_tag)

    emit(root)
    return "".join(out), starts, ends
