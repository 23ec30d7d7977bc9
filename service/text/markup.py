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
once, so the output is well-formed and holds the source's elements.

The markup is read as a browser reads it (`html5.py`: html5lib, the WHATWG
algorithm, as a fragment in <body>; as a document when it starts with a doctype or
`<html>`): end tags HTML5 lets one omit are implied (`<p>Uno<p>Dos`, `<li>`, `<td>`),
a void element may end in `/>` or not, a bare `<` is text, a stray end tag is
dropped, mis-nesting is repaired as the HTML5 tree builder repairs it (`<b>1<p>2</b>3`
is `<b>1</b><p><b>2</b>3</p>`). Each element is written with its start tag as sent
and its end tag as sent or, where the source left it implied, written out; an element
only the parser implied (`tbody`) is not written, reading the output implies it again.

Block elements (`<p>`, `<li>`, `<br>`, ...) end sentences; their intervals follow
the sentences they hold, not the alignment. Atoms are copied verbatim to the target
position the alignment gives the source position they stood at: void elements,
comments, declarations, elements with `translate="no"` or `class="notranslate"`,
`script`, `style` and the other raw-text elements, and (for a model that does not
protect them itself) placeholders such as `%1$s` and `{name}`. Entities are decoded
for the model and written back in the source's spelling.

`alt` and `title` values are translated as sentences of their own: their text
follows the body's in `Source.text`, each after a break, so they go into the same
batch as the body's sentences, and their translations are written back into the
start tags they came from.

Nothing is refused but nesting deeper than `html5.MAX_DEPTH` elements; the size caps
are the documents' (`documents.read`).
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass, field
from typing import Callable

from attnmt.service.text import html5
from attnmt.service.text.html5 import MAX_DEPTH, too_deep

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
        "track", "wbr"}
BLOCK = {"address", "article", "aside", "blockquote", "body", "br", "button", "caption", "dd", "details",
         "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
         "h4", "h5", "h6", "head", "header", "hr", "html", "iframe", "legend", "li", "main", "nav", "ol",
         "optgroup", "option", "p", "pre", "script", "section", "select", "style", "summary", "table",
         "tbody", "td", "template", "textarea", "tfoot", "th", "thead", "title", "tr", "ul"}
RAW_TEXT = {"script", "style", "xmp", "iframe", "noembed", "noframes", "plaintext"}   # their text is not markup
VERBATIM = RAW_TEXT | {"template"}
TRANSLATED_ATTRIBUTES = ("alt", "title")

# Placeholders a model without its own protection would mangle (printf, Python, braces, shell).
PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsp%]"
    r"|%\([A-Za-z_][A-Za-z0-9_]*\)[-+0#]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|\{\{[^{}\s]+\}\}|\{[A-Za-z0-9_.\-]*\}|\$\{[A-Za-z_][A-Za-z0-9_]*\}")

# An attribute in a start tag as the HTML5 tokenizer reads one: a name up to
# whitespace, `/`, `>` or `=`; a value in quotes, or up to whitespace or `>`.
_ATTRIBUTE = re.compile(r"""[\t\n\f\r /]*(?P<name>[^\t\n\f\r />][^\t\n\f\r />=]*)"""
                        r"""(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<uq>[^\t\n\f\r >]+)))?""")


@dataclass(eq=False)
class Attribute:
    """An alt or title value translated as a sentence of its own."""
    value_start: int                # [value_start, value_end) of the start tag as written
    value_end: int
    quoted: bool
    start: int = 0                  # [start, end) of Source.text
    end: int = 0


@dataclass(eq=False)
class Element:
    name: str
    start_tag: str                  # as sent (`<b>` for `<b/>`, which opens a b)
    start: int                      # [start, end) of the stripped text inside it
    parent: "Element | None"
    order: int                      # position among all nodes, in source order
    offset: int = 0                 # of the start tag in the markup, for messages
    end_tag: str = ""               # as sent, or written out where the source left it implied
    end: int = 0
    children: list = field(default_factory=list)
    attributes: list[Attribute] = field(default_factory=list)     # in the start tag, in order
    lo: int = 0                     # its interval of the target, set by `render`
    hi: int = 0


@dataclass(eq=False)
class Atom:
    raw: str                        # copied verbatim (but for `attributes`)
    at: int                         # position in the stripped text
    parent: Element
    order: int
    space_before: bool = False      # whitespace around it in the source, kept in the target
    space_after: bool = False
    attributes: list[Attribute] = field(default_factory=list)
    lo: int = 0


@dataclass
class Source:
    """What is translated (`text`: tags and atoms removed, entities decoded; then the
    alt and title values) and the structure around it. `raw_start[i]:raw_end[i]` is
    where text[i] is in the entry."""
    text: str
    root: Element
    breaks: set[int]                # positions of `text` a sentence may not cross
    raw_start: list[int] | None = None      # None: the entry is `text` itself
    raw_end: list[int] | None = None
    entities: dict[str, str] = field(default_factory=dict)   # character -> spelling in the source
    html: bool = False
    body_end: int | None = None     # where the attribute values begin in `text`; None: none

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


def parse_html(markup: str, placeholders: bool = True, check: Callable[[], None] | None = None) -> Source:
    """The markup as a Source, read as a browser reads it (InvalidInput only for nesting
    deeper than MAX_DEPTH). `placeholders`: turn placeholders into atoms (for a model
    that does not protect them). `check` is called as the parse goes; what it raises stops it."""
    reader = _Reader(markup, placeholders, check or _go_on)
    root = Element("", "", 0, None, 0)
    reader.children(html5.parse(markup, check), root, 0)
    root.end = body = len(reader.chars)
    reader.attribute_texts()
    text = "".join(reader.chars)
    _mark_spaces(root, text[:body])
    return Source(text, root, reader.breaks, reader.raw_start, reader.raw_end, reader.entities, html=True,
                  body_end=body if body < len(text) else None)


def _go_on() -> None:
    """A check that never stops the work."""


def untranslatable(tag: str, attributes: dict) -> bool:
    """An element whose content stays as sent: verbatim (script, style, ...), `translate="no"` or
    class `notranslate`; the HTML mode and the HTML file reader both ask."""
    return (tag in VERBATIM or (attributes.get("translate") or "").lower() == "no"
            or "notranslate" in (attributes.get("class") or "").split())


class _Reader:
    """html5lib's tree (`html5.parse`) as the stripped text, its elements and atoms."""

    def __init__(self, markup: str, placeholders: bool, check: Callable[[], None]):
        self.markup = markup
        self.placeholders = placeholders
        self.check = check                  # called at each element; raises to stop
        self.chars: list[str] = []
        self.raw_start: list[int] = []
        self.raw_end: list[int] = []
        self.breaks: set[int] = set()
        self.entities: dict[str, str] = {}
        self.order = 0
        # per start tag (by offset; an element repaired into several shares it): its
        # translated attributes, each with the value to translate and where it stands
        self.attributes: dict[int, list[tuple[Attribute, str, int]]] = {}

    def children(self, node: html5.Node, parent: Element, depth: int) -> None:
        for child in node.childNodes:
            if isinstance(child, html5.Text):
                self.text(child.chars, parent)
            elif isinstance(child, html5.Comment):
                self.atom(self.comment(child), parent)
            else:
                self.element(child, parent, depth + 1)

    def element(self, node: html5.Node, parent: Element, depth: int) -> None:
        self.check()
        offset = node.token["span"][0] if node.token else node.end[0] if node.end else 0
        if depth > MAX_DEPTH:
            raise too_deep(node.name, offset)
        name, is_html = node.name, node.namespace is None
        block = is_html and name in BLOCK
        if block:
            self.breaks.add(len(self.chars))
        start_tag = self.start_tag(node)
        if is_html and untranslatable(name, node.attributes):
            self.atom(self.verbatim(node), parent)
        elif (is_html and name in VOID) or (node.token and node.token.get("selfClosingAcknowledged")):
            self.atom(start_tag or f"<{name}>", parent, self.translated(node))
        elif start_tag is None and node.end is None:         # implied by the parser: only what it holds
            self.children(node, parent, depth)
        else:
            self.order += 1
            element = Element(name, start_tag or f"<{name}>", len(self.chars), parent, self.order, offset,
                              attributes=self.translated(node))
            parent.children.append(element)
            self.children(node, element, depth)
            element.end_tag = self.end_tag(node)
            element.end = len(self.chars)
        if block:
            self.breaks.add(len(self.chars))

    def start_tag(self, node: html5.Node) -> str | None:
        """As sent; None where the parser implied the element."""
        if node.token is None:
            return None
        raw = self.markup[node.token["span"][0]:node.token["span"][1]]
        if node.token["selfClosing"] and not node.token.get("selfClosingAcknowledged"):
            raw = raw[:-2] + ">"            # `<b/>` opens a b (HTML has no empty-element tags)
        return raw

    def comment(self, node: html5.Comment) -> str:
        """As written, closed where the markup ended inside it."""
        raw = self.markup[node.span[0]:node.span[1]]
        if raw.startswith("<!--"):
            return raw if raw.endswith(("-->", "--!>")) or raw in ("<!-->", "<!--->") else raw + "-->"
        return raw if raw.endswith(">") else raw + ">"        # <?...>, <!...>, </ ...>, a doctype

    def end_tag(self, node: html5.Node) -> str:
        return self.markup[node.end[0]:node.end[1]] if node.end else f"</{node.name}>"

    def text(self, chars: list[html5.Located], parent: Element) -> None:
        i = 0
        while i < len(chars):
            _, start, end, entity = chars[i]
            j = i + 1
            if entity is None:
                while j < len(chars) and chars[j][3] is None:
                    j += 1
                self.literal(chars[i:j], parent)
            else:
                while j < len(chars) and chars[j][1:] == (start, end, entity):
                    j += 1
                decoded = "".join(c for c, *_ in chars[i:j])
                # A letter (&aacute;) or a space (&nbsp;) is text for the model; any other
                # character (&amp; &copy; &mdash;) is carried as it was.
                if all(c.isalnum() or c.isspace() for c in decoded):
                    self.entities[decoded] = entity
                    self.add(chars[i:j])
                else:
                    self.atom(self.markup[start:end], parent)
            i = j

    def literal(self, chars: list[html5.Located], parent: Element) -> None:
        text = "".join(c for c, *_ in chars)
        position = 0
        for m in PLACEHOLDER.finditer(text) if self.placeholders else ():
            self.add(chars[position:m.start()])
            self.atom(self.markup[chars[m.start()][1]:chars[m.end() - 1][2]], parent)
            position = m.end()
        self.add(chars[position:])

    def add(self, chars: list[html5.Located]) -> None:
        self.chars += [c for c, _, _, _ in chars]
        self.raw_start += [start for _, start, _, _ in chars]
        self.raw_end += [end for _, _, end, _ in chars]

    def atom(self, raw: str, parent: Element, attributes: list[Attribute] = ()) -> None:
        self.order += 1
        parent.children.append(Atom(raw, len(self.chars), parent, self.order, attributes=list(attributes)))

    def verbatim(self, node, raw_text: bool = False) -> str:
        """An untranslatable element as written (as repaired, where the parser repaired it)."""
        if isinstance(node, html5.Comment):
            return self.comment(node)
        if isinstance(node, html5.Text):
            out, last = [], None
            for c, start, end, entity in node.chars:
                if entity is None:
                    written = self.markup[start:end] if end > start else c
                    out.append(written if raw_text or c not in "<&" else html.escape(c, quote=False))
                elif (start, end) != last:
                    out.append(self.markup[start:end])
                last = start, end
            return "".join(out)
        start_tag = self.start_tag(node)
        is_html = node.namespace is None
        inside = "".join(self.verbatim(child, is_html and node.name in RAW_TEXT) for child in node.childNodes)
        if start_tag is None and node.end is None:
            return inside
        if (is_html and node.name in VOID) or (node.token and node.token.get("selfClosingAcknowledged")):
            return start_tag or f"<{node.name}>"
        end_tag = "" if node.name == "plaintext" else self.end_tag(node)    # nothing ends a <plaintext>
        return (start_tag or f"<{node.name}>") + inside + end_tag

    def translated(self, node: html5.Node) -> list[Attribute]:
        """The start tag's alt and title values worth translating."""
        if node.token is None or node.namespace is not None:
            return []
        start, end = node.token["span"]
        if start not in self.attributes:
            tag = self.markup[start:end]
            self.attributes[start] = [(Attribute(*span, quoted), value, start)
                                      for value, *span, quoted in _attribute_values(tag, node.token["data"])
                                      if any(c.isalpha() for c in value)
                                      and not (self.placeholders and PLACEHOLDER.search(value))]
        return [attribute for attribute, _, _ in self.attributes[start]]

    def attribute_texts(self) -> None:
        """The values to translate after the body's text, each a sentence of its own."""
        for attributes in self.attributes.values():
            for attribute, value, tag_start in attributes:
                self.breaks.add(len(self.chars))
                attribute.start = len(self.chars)
                a, b = tag_start + attribute.value_start, tag_start + attribute.value_end
                spelled = self.markup[a:b] == value        # else (entities): each character is all of it
                for i, c in enumerate(value):
                    self.chars.append(c)
                    self.raw_start.append(a + i if spelled else a)
                    self.raw_end.append(a + i + 1 if spelled else b)
                attribute.end = len(self.chars)


def _attribute_values(tag: str, parsed: dict) -> list[tuple[str, int, int, bool]]:
    """(value, start, end, quoted) of the tag's alt and title, where the parser read the
    same value (the first of a name counts, as for the parser)."""
    found: dict[str, tuple[str, int, int, bool]] = {}
    at = re.match(r"<[^\t\n\f\r />]*", tag).end()
    while (m := _ATTRIBUTE.match(tag, at)) and m.end() > at:
        name, at = m["name"].lower(), m.end()
        if name not in TRANSLATED_ATTRIBUTES or name in found:
            continue
        group = next((g for g in ("dq", "sq", "uq") if m[g] is not None), None)
        if group is None or _newlines(html.unescape(m[group])) != parsed.get(name):
            found[name] = None
            continue
        found[name] = (parsed[name], m.start(group), m.end(group), group != "uq")
    return sorted((v for v in found.values() if v is not None), key=lambda v: v[1])


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")     # as the parser reads them


def _mark_spaces(element: Element, text: str) -> None:
    for child in element.children:
        if isinstance(child, Atom):
            child.space_before = child.at > 0 and text[child.at - 1].isspace()
            child.space_after = child.at < len(text) and text[child.at].isspace()
        else:
            _mark_spaces(child, text)


# --- back into markup ----------------------------------------------------------

class _Placed:
    """The intervals of the children of one element placed so far. They never overlap (an
    empty one is a point not inside any other), so they are kept in position order and each
    new one is moved off them with a few binary searches (a scan of every earlier sibling
    would make a page of siblings quadratic)."""

    def __init__(self):
        self.starts: list[int] = []             # the non-empty intervals, in position order
        self.ends: list[int] = []
        self.points: list[int] = []             # the empty ones, in position order
        self.covered: dict[int, int] = {}       # start -> a point up to which all is covered

    def _covered_until(self, at: int) -> int:
        """The first point from `at` on that no interval covers, across touching intervals."""
        path = []
        while at in self.covered:
            path.append(at)
            at = self.covered[at]
        for start in path:                      # path compression: the next walk jumps
            self.covered[start] = at
        return at

    def settle(self, lo: int, hi: int) -> tuple[int, int]:
        """[lo, hi) moved off the intervals placed: out past the ones it starts inside (or,
        unless it is empty, at the start of) to the first end at or after `hi` (an empty
        interval there), or to where they stop touching; then ended where the next one begins."""
        k = bisect.bisect_right(self.starts, lo) - 1            # the last one starting at or before lo
        if k >= 0 and lo < self.ends[k] and (lo < hi or self.starts[k] < lo):
            free = self._covered_until(self.ends[k])
            if hi >= free:
                lo = free
            else:           # it ends inside the run of touching intervals: empty, at the end of that one
                lo = hi = self.ends[bisect.bisect_right(self.starts, hi - 1) - 1]
        k = bisect.bisect_right(self.starts, lo)
        if k < len(self.starts):
            hi = min(hi, self.starts[k])
        k = bisect.bisect_right(self.points, lo)
        if k < len(self.points):
            hi = min(hi, self.points[k])
        return lo, hi

    def add(self, lo: int, hi: int) -> None:
        if lo == hi:
            bisect.insort(self.points, lo)
            return
        k = bisect.bisect_right(self.starts, lo)
        self.starts.insert(k, lo)
        self.ends.insert(k, hi)
        self.covered[lo] = hi

    def outside(self, at: int) -> int:
        """A point inside an interval moved to its end."""
        k = bisect.bisect_right(self.starts, at) - 1
        return self.ends[k] if k >= 0 and self.starts[k] < at < self.ends[k] else at


def _place(element: Element, layout, source_text: str, check: Callable[[], None] = _go_on) -> None:
    """Intervals for the children of `element` (whose own interval is set): each element
    where the alignment puts what it holds, clamped into its parent and moved off the
    siblings before it; each atom where the alignment puts its position, out of them."""
    placed = _Placed()
    for child in element.children:
        if isinstance(child, Atom):
            continue
        covered = layout.coverage(child.start, child.end, source_text)
        lo, hi = covered if covered else (layout.position(child.start),) * 2
        lo = min(max(lo, element.lo), element.hi)
        hi = min(max(hi, lo), element.hi)
        child.lo, child.hi = placed.settle(lo, hi)
        placed.add(child.lo, child.hi)
        check()
        _place(child, layout, source_text, check)
    for child in element.children:
        if isinstance(child, Atom):
            glued = child.at < len(source_text) and source_text[child.at].isalnum()
            child.lo = placed.outside(min(max(layout.position(child.at, glued), element.lo), element.hi))


def render(source: Source, layout, target: str,
           check: Callable[[], None] | None = None) -> tuple[str, list[int], list[int]]:
    """The target text with the source's markup put back; and for each target character
    where it ended up in the output ([start, end), an entity being several characters).
    `layout` maps source positions and ranges to the target (documents.Layout). `check` is
    called at each element; what it raises stops the work."""
    check = check or _go_on
    root = source.root
    # the body's translation; the alt and title values' follow it
    root.lo, root.hi = 0, len(target) if source.body_end is None else layout.position(source.body_end)
    _place(root, layout, source.text, check)
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

    def write_tag(tag: str, attributes: list[Attribute]) -> None:
        """A start tag, its alt and title values translated."""
        at = 0
        for attribute in attributes:
            write(tag[at:attribute.value_start])
            quote = "" if attribute.quoted else '"'
            write(quote)
            covered = layout.coverage(attribute.start, attribute.end, source.text)
            for i in range(*covered) if covered else ():
                starts[i] = size
                write(html.escape(target[i]))
                ends[i] = size
            write(quote)
            at = attribute.value_end
        write(tag[at:])

    def emit(element: Element) -> None:
        check()
        write_tag(element.start_tag, element.attributes)
        at = element.lo
        for child in sorted(element.children, key=lambda c: (c.lo, c.hi if isinstance(c, Element) else c.lo,
                                                             c.order)):
            write_text(at, child.lo)
            at = max(at, child.lo)
            if isinstance(child, Atom):
                if child.space_before and at > 0 and not target[at - 1].isspace():
                    write(" ")
                write_tag(child.raw, child.attributes)
                if child.space_after and at < len(target) and not target[at].isspace():
                    write(" ")
            else:
                emit(child)
                at = child.hi
        write_text(at, element.hi)
        write(element.end_tag)

    emit(root)
    return "".join(out), starts, ends
