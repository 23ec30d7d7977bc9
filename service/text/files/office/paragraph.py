"""A paragraph of a word-processor document as one entry of the HTML mode, and back.

The format's reader (docx.py, odt.py) walks a paragraph into `Piece`s and calls `settle`;
`html()` is the entry sent, its inline structure carried by the alignment (`markup.py`) as
xliff.py carries inline codes: consecutive runs with the same formatting are one stretch of
text, and each formatting other than the paragraph's commonest a tag around its stretch
(`<b data-r="N">`, `<i ...>`, `<u ...>` where it adds only that to the commonest, else
`<span data-r="N">`); a wrapper (a hyperlink, a tracked insertion, a simple field) an
`<a data-w="N">` or `<span data-w="N">` around its runs; everything else in the paragraph
(tabs, images, footnote references, bookmarks, the markers of a complex field) an atom,
`<img data-x="N">` (`<br data-x="N">` for a line break, which also ends a sentence), moved
as it is to where the alignment puts it. A tab that alone parts two words is followed by a
space, so that the model reads two words (the space is taken back where the tab still
precedes it). Start and end markers (bookmarks, comment ranges, a field's begin, separator
and end) keep their order among themselves.

`translated(html)` turns a translation's tags back into pieces, each with the style and
wrapper it names, for the format's rebuild to write as runs; where they cannot be mapped back
(an unknown number, an atom lost or repeated) it answers None and `fallback(html)` gives the
translation whole in the formatting of the paragraph's first text, every atom kept in its
place: text is never lost.
"""

from __future__ import annotations

import copy
import html
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from lxml import etree

from attnmt.service.text.files.base import local_name

# what a translation comes back as: our tags, and text between them (entities escaped)
_TAG = re.compile(r'<(a|b|i|u|span) data-([rw])="(\d+)">|</(?:a|b|i|u|span)>|<(?:img|br) data-x="(\d+)">')
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(eq=False)
class Piece:
    """A stretch of a paragraph: text, or an atom (elements moved as they are)."""
    text: str = ""
    atom: list | None = None
    inline: bool = True             # .docx: the atom lives in a run (w:tab), not beside runs (w:bookmarkStart)
    style: int = 0                  # Paragraph.styles
    link: int | None = None         # Paragraph.links: the wrapper around it
    line_break: bool = False
    tab: bool = False
    marker: bool = False            # markers keep their order among themselves
    spaced: bool = False            # a tab between two words: a space after it, for the model


@dataclass(eq=False)
class Paragraph:
    """A paragraph's pieces, the styles and wrappers they name, and the tag of each style."""
    element: etree._Element
    pieces: list[Piece] = field(default_factory=list)
    styles: list = field(default_factory=list)          # .docx: an rPr or None; .odt: the text:span chain
    keys: dict = field(default_factory=dict)            # a style's key -> its index
    links: list[etree._Element] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)       # per style: the tag carrying it
    base: int = 0                                       # the style of untagged text: the commonest

    def style(self, key, value) -> int:
        """The index of the style `key` names, `value` recorded the first time it is seen."""
        if key not in self.keys:
            self.keys[key] = len(self.styles)
            self.styles.append(value)
        return self.keys[key]

    def add_text(self, text: str, style: int, link: int | None) -> None:
        last = self.pieces[-1] if self.pieces else None
        if last is not None and last.atom is None and (last.style, last.link) == (style, link):
            last.text += text
        elif text:
            self.pieces.append(Piece(text, style=style, link=link))

    def text(self) -> str:
        return "".join(p.text for p in self.pieces)

    def wrapped(self, wrapper: etree._Element, walk: Callable[[int], None], empty: Piece) -> None:
        """`wrapper`'s content read by `walk(its link)`; an empty wrapper is the atom `empty`."""
        self.links.append(wrapper)
        n = len(self.links) - 1
        walk(n)
        if not self.pieces or self.pieces[-1].link != n:
            self.links.pop()
            self.pieces.append(empty)

    def settle(self, tag: Callable[[int, int], str]) -> None:
        """Choose the commonest style, name each style's tag (`tag(style, base)`), and space
        the tabs that alone part two words ("Nombre:<tab>Juan" is not one word to the model)."""
        lengths = Counter()
        for before, piece, after in zip([None, *self.pieces], self.pieces, [*self.pieces[1:], None]):
            lengths[piece.style] += len(piece.text)
            piece.spaced = (piece.tab and before is not None and after is not None and before.atom is None
                            and after.atom is None and not before.text[-1:].isspace()
                            and not after.text[:1].isspace())
        self.base = lengths.most_common(1)[0][0] if lengths else 0
        self.tags = [tag(n, self.base) for n in range(len(self.styles))]

    def html(self) -> str:
        """The entry sent to the model."""
        out: list[str] = []
        link = style = None             # the wrapper and the style open in `out`
        for n, piece in enumerate(self.pieces):
            if piece.link != link:
                if style is not None:
                    out.append(f"</{self.tags[style]}>")
                if link is not None:
                    out.append(f"</{_link_tag(self.links[link])}>")
                if piece.link is not None:
                    out.append(f'<{_link_tag(self.links[piece.link])} data-w="{piece.link}">')
                link, style = piece.link, None
            if piece.atom is None or piece.inline:      # an atom beside runs takes whatever is open
                wanted = None if piece.style == self.base else piece.style
                if wanted != style:
                    if style is not None:
                        out.append(f"</{self.tags[style]}>")
                    if wanted is not None:
                        out.append(f'<{self.tags[wanted]} data-r="{wanted}">')
                    style = wanted
            if piece.atom is None:
                out.append(html.escape(piece.text, quote=False))
            else:
                out.append(f'<{"br" if piece.line_break else "img"} data-x="{n}">' + " " * piece.spaced)
        if style is not None:
            out.append(f"</{self.tags[style]}>")
        if link is not None:
            out.append(f"</{_link_tag(self.links[link])}>")
        return "".join(out)

    def translated(self, translation: str) -> list[Piece] | None:
        """The pieces of the HTML translation, each atom moved to where it stands there;
        None where its tags do not map back onto this paragraph."""
        out = Paragraph(self.element)      # collects the pieces
        stack: list[tuple[str, int]] = []
        atoms: list[int] = []
        seen_links: set[int] = set()

        def now() -> tuple[int, int | None]:
            style = next((n for kind, n in reversed(stack) if kind == "r"), self.base)
            return style, next((n for kind, n in stack if kind == "w"), None)

        def text(raw: str) -> None:
            nonlocal unspace
            piece = _xml_text(raw)
            if unspace and piece:       # the space a tab was given, where it still follows it
                piece, unspace = piece[1:] if piece[0].isspace() else piece, False
            out.add_text(piece, *now())

        at, unspace = 0, False
        for m in _TAG.finditer(translation):
            text(translation[at:m.start()])
            at = m.end()
            if m.group(4) is not None:
                n = int(m.group(4))
                if n >= len(self.pieces) or self.pieces[n].atom is None or n in atoms:
                    return None
                atoms.append(n)
                out.pieces.append(replace(self.pieces[n], style=now()[0], link=now()[1]))
                unspace = self.pieces[n].spaced
            elif m.group(2) == "r":
                if int(m.group(3)) >= len(self.styles):
                    return None
                stack.append(("r", int(m.group(3))))
            elif m.group(2) == "w":
                n = int(m.group(3))
                if n >= len(self.links) or n in seen_links or any(kind == "w" for kind, _ in stack):
                    return None
                seen_links.add(n)
                stack.append(("w", n))
            elif not stack:
                return None
            else:
                stack.pop()
        text(translation[at:])
        if stack or len(atoms) != sum(p.atom is not None for p in self.pieces):
            return None
        # the markers where the alignment put markers, in their own order
        slots = [k for k, p in enumerate(out.pieces) if p.atom is not None and p.marker]
        for k, n in zip(slots, sorted(n for n in atoms if self.pieces[n].marker)):
            out.pieces[k] = replace(self.pieces[n], style=out.pieces[k].style, link=out.pieces[k].link)
        return out.pieces

    def fallback(self, translation: str) -> list[Piece]:
        """The translation's text in the first text's formatting, where the first text was;
        every atom as it was, outside any wrapper."""
        text = _xml_text(_TAG.sub("", translation))
        first = next(p for p in self.pieces if p.atom is None)
        return [replace(p, link=None) if p.atom is not None else Piece(text, style=p.style)
                for p in self.pieces if p.atom is not None or p is first]


def _link_tag(wrapper: etree._Element) -> str:
    return "a" if etree.QName(wrapper).localname in ("hyperlink", "a") else "span"


def _xml_text(raw: str) -> str:
    """HTML text as XML text: entities decoded, what XML cannot hold dropped."""
    return _NOT_XML.sub("", html.unescape(raw))


def shallow(wrapper: etree._Element, parent: etree._Element) -> etree._Element:
    """A copy of `wrapper` in `parent`: its attributes and properties (`w:smartTagPr`), no runs."""
    made = etree.SubElement(parent, wrapper.tag, dict(wrapper.attrib))
    made.extend(copy.deepcopy(c) for c in wrapper if local_name(c).endswith("Pr"))
    return made


def move(atom: list, parent: etree._Element) -> None:
    """An atom's elements appended to `parent`, without the text that followed them."""
    for element in atom:
        element.tail = None         # the text after it was read as text
        parent.append(element)
