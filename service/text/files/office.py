"""Word-processor documents: Office Open XML (.docx) and OpenDocument Text (.odt), their zip
package through the standard library's zipfile, their XML through lxml (BSD).

What is translated: .docx, each `w:p` of word/document.xml, the headers and footers
(word/header*.xml, word/footer*.xml) and the footnotes and endnotes; .odt, each `text:p` and
`text:h` of content.xml, and of the master pages' headers and footers in styles.xml. A
paragraph nested in another (a text box, an .odt footnote) is one of its own. Paragraphs
without text are not sent. Not translated: comments (word/comments.xml, `office:annotation`),
deleted text of tracked changes, the content of content controls (`w:sdt`) and of other
inline containers, field instructions, charts and SmartArt.

A paragraph is one entry of the HTML mode, its inline structure carried by the alignment
(`markup.py`) as xliff.py carries inline codes: consecutive runs with the same formatting
are one stretch of text, and each formatting other than the paragraph's commonest a tag
around its stretch (`<b data-r="N">`, `<i ...>`, `<u ...>` where it adds only that to the
commonest, else `<span data-r="N">`); a hyperlink (`w:hyperlink`, `text:a`), a tracked
insertion, a simple field (`w:fldSimple`) an `<a data-w="N">` or `<span data-w="N">` around
its runs; everything else in the paragraph (tabs, images, footnote references, bookmarks,
the markers of a complex field, `text:s`) an atom, `<img data-x="N">` (`<br data-x="N">` for
a line break, which also ends a sentence), moved as it is to where the alignment puts it. A
tab that alone parts two words is followed by a space, so that the model reads two words
(the space is taken back where the tab still precedes it). Start and end markers
(bookmarks, comment ranges, a field's begin, separator and end) keep their order among
themselves. The translation's tags are turned back into runs with the
original run properties (`w:rPr`, the `text:span` styles) and wrappers, the paragraph's own
properties (`w:pPr`, its style) untouched, and the language of a run that names one
(`w:lang`) set to the target. A translation whose tags cannot be mapped back (an unknown
number, an atom lost or repeated) is written whole in the formatting of the paragraph's
first text, every atom kept in its place; text is never lost.

The package is written back entry by entry in its order, each with its name, compression,
date and attributes: the parts translated re-serialised, every other entry's bytes as read
(inflated and deflated again with the same method; the .odt `mimetype` first and stored, as
it came). A file that is not such a package
is refused (InvalidInput): no zip, an encrypted one, no main part, XML that does not parse,
and, before anything is inflated, a zip bomb (too many entries, too much unpacked, an absurd
compression ratio; every read bounded, whatever the sizes declared). The XML is read
without entities, DTDs or the network, and a part with a DTD is refused.
"""

from __future__ import annotations

import copy
import html
import io
import re
import struct
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import FileDocument, Limits, local_name, safe_xml_parser

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT_TYPE = "application/vnd.oasis.opendocument.text"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"

# Zip-bomb limits beside Limits.max_unpacked_bytes: a document with its images has tens to
# hundreds of entries; XML deflates 5-20:1, and Apache POI refuses past 100:1 (ZipSecureFile)
MAX_ENTRIES = 5000
MAX_RATIO = 100
RATIO_FROM = 1 << 20            # smaller entries may deflate better, and inflate to little anyway
ENCRYPTED_ZIP = 0x1             # general purpose flag bit 0
ZIP64_EXTRA = 0x0001            # rewritten by zipfile where needed, never copied
OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"     # a password-protected .docx, or a .doc

# docx: paragraph children holding runs, carried as a tag around them (one level deep)
DOCX_WRAPPERS = {"hyperlink", "ins", "moveTo", "smartTag", "fldSimple"}
DOCX_BREAKS = {"br", "cr"}
DOCX_TABS = {"tab", "ptab"}
DOCX_MARKERS = {"fldChar", "instrText"}     # in a run; beside runs, every *Start and *End
_SPACE_AROUND = re.compile(r"^\s|\s$")
# what a translation comes back as: our tags, and text between them (entities escaped)
_TAG = re.compile(r'<(a|b|i|u|span) data-([rw])="(\d+)">|</(?:a|b|i|u|span)>|<(?:img|br) data-x="(\d+)">')
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


# --- a paragraph as HTML, and back -------------------------------------------------

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
    element: etree._Element
    pieces: list[Piece] = field(default_factory=list)
    styles: list = field(default_factory=list)          # .docx: an rPr or None; .odt: the text:span chain
    keys: dict = field(default_factory=dict)            # a style's key -> its index
    links: list[etree._Element] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)       # per style: the tag carrying it
    base: int = 0                                       # the style of untagged text: the commonest

    def style(self, key, value) -> int:
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


def _shallow(wrapper: etree._Element, parent: etree._Element) -> etree._Element:
    """A copy of `wrapper` in `parent`: its attributes and properties (`w:smartTagPr`), no runs."""
    made = etree.SubElement(parent, wrapper.tag, dict(wrapper.attrib))
    made.extend(copy.deepcopy(c) for c in wrapper if local_name(c).endswith("Pr"))
    return made


def _move(atom: list, parent: etree._Element) -> None:
    for element in atom:
        element.tail = None         # the text after it was read as text
        parent.append(element)


# --- .docx --------------------------------------------------------------------

def _w(name: str) -> str:
    return f"{{{W}}}{name}"


def _docx_paragraph(p: etree._Element) -> Paragraph:
    paragraph = Paragraph(p)

    def walk(container: etree._Element, link: int | None) -> None:
        for child in container:
            name = local_name(child)
            in_w = isinstance(child.tag, str) and etree.QName(child).namespace == W
            if in_w and name.endswith("Pr"):           # w:pPr, w:smartTagPr: kept where they are
                continue
            if in_w and name == "r":
                rpr = child.find(_w("rPr"))
                style = paragraph.style(b"" if rpr is None else etree.tostring(rpr), rpr)
                for part in child:
                    if part.tag == _w("t"):
                        paragraph.add_text(part.text or "", style, link)
                    elif part is not rpr:
                        paragraph.pieces.append(Piece(atom=[part], style=style, link=link,
                                                      line_break=local_name(part) in DOCX_BREAKS,
                                                      tab=local_name(part) in DOCX_TABS,
                                                      marker=local_name(part) in DOCX_MARKERS))
            elif in_w and name in DOCX_WRAPPERS and link is None:
                paragraph.wrapped(child, lambda n, inside=child: walk(inside, n), Piece(atom=[child], inline=False))
            else:
                paragraph.pieces.append(Piece(atom=[child], inline=False, link=link,
                                              marker=name.endswith(("Start", "End"))))

    walk(p, None)
    paragraph.settle(lambda n, base: _docx_tag(paragraph.styles[n], paragraph.styles[base]))
    return paragraph


def _docx_tag(rpr, base) -> str:
    """b, i or u for run properties that add only that to the paragraph's commonest."""
    own = {etree.tostring(c): c for c in (rpr if rpr is not None else ())}
    common = {etree.tostring(c) for c in (base if base is not None else ())}
    if not common <= set(own):
        return "span"
    added = {local_name(c) for key, c in own.items()
             if key not in common and c.get(_w("val")) not in ("0", "false", "none")}      # not w:b w:val="0"
    for tag, names in (("b", {"b", "bCs"}), ("i", {"i", "iCs"}), ("u", {"u"})):
        if added and added <= names and tag in added:
            return tag
    return "span"


def _docx_rebuild(paragraph: Paragraph, pieces: list[Piece], language: str) -> None:
    p = paragraph.element
    for child in list(p):
        if child.tag != _w("pPr"):
            p.remove(child)
    holder, link, run, style = p, None, None, None
    for piece in pieces:
        if piece.link != link:
            holder = p if piece.link is None else _shallow(paragraph.links[piece.link], p)
            link, run = piece.link, None
        if piece.atom is not None and not piece.inline:
            _move(piece.atom, holder)
            run = None
            continue
        if run is None or style != piece.style:
            run, style = etree.SubElement(holder, _w("r")), piece.style
            rpr = paragraph.styles[style]
            if rpr is not None:
                run.append(_with_language(copy.deepcopy(rpr), language))
        if piece.atom is not None:
            _move(piece.atom, run)
        else:
            t = etree.SubElement(run, _w("t"))
            t.text = piece.text
            if _SPACE_AROUND.search(piece.text):
                t.set(XML_SPACE, "preserve")


def _with_language(rpr: etree._Element, language: str) -> etree._Element:
    lang = rpr.find(_w("lang"))
    if lang is not None and lang.get(_w("val")):
        lang.set(_w("val"), language)
    return rpr


def _docx_parts(names: list[str]) -> list[str]:
    """The parts translated, the body first (its texts decide the detected language)."""
    others = sorted(n for n in names if re.fullmatch(r"word/(header|footer)\d*\.xml|word/(foot|end)notes\.xml", n))
    return ["word/document.xml", *others]


def read_docx(data: bytes, limits: Limits) -> OfficeFile:
    what = "Word document (.docx)"
    package = Package(data, limits, what)
    if "word/document.xml" not in package.names:
        raise InvalidInput(f"the file is not a {what}: its zip package has no word/document.xml")
    trees = {name: package.parse(name) for name in _docx_parts(package.names)}
    root = trees["word/document.xml"].getroot()
    if etree.QName(root).namespace != W:
        raise InvalidInput(f"the file is not a {what} this service reads: word/document.xml is in namespace "
                           f"{etree.QName(root).namespace!r} (Strict Open XML?), not {W!r}")
    paragraphs = [(name, _docx_paragraph(p)) for name, tree in trees.items() for p in tree.getroot().iter(_w("p"))]
    return OfficeFile("docx", DOCX_TYPE, package, trees, paragraphs, _docx_rebuild)


# --- .odt ---------------------------------------------------------------------

def _t(name: str) -> str:
    return f"{{{TEXT}}}{name}"


def _odt_paragraph(p: etree._Element, emphasis: dict[str, str]) -> Paragraph:
    paragraph = Paragraph(p)

    def walk(node: etree._Element, chain: tuple, link: int | None) -> None:
        style = paragraph.style(chain, chain)
        paragraph.add_text(node.text or "", style, link)
        for child in node:
            if child.tag == _t("span"):
                walk(child, chain + (tuple(child.attrib.items()),), link)
            elif child.tag == _t("a") and link is None:
                paragraph.wrapped(child, lambda n, inside=child: walk(inside, chain, n),
                                  Piece(atom=[child], style=style))
            else:
                paragraph.pieces.append(Piece(atom=[child], style=style, link=link,
                                              line_break=child.tag == _t("line-break"), tab=child.tag == _t("tab"),
                                              marker=local_name(child).endswith(("-start", "-end"))))
            paragraph.add_text(child.tail or "", style, link)

    walk(p, (), None)

    def tag(n: int, base: int) -> str:
        chain, common = paragraph.styles[n], paragraph.styles[base]
        if len(chain) == len(common) + 1 and chain[:-1] == common:
            return emphasis.get(dict(chain[-1]).get(_t("style-name"), ""), "span")
        return "span"

    paragraph.settle(tag)
    return paragraph


def _odt_emphasis(root: etree._Element) -> dict[str, str]:
    """Text styles that only make bold, italic or underlined: their name -> b, i or u."""
    found = {}
    for style in root.iter(f"{{{STYLE}}}style"):
        properties = style.find(f"{{{STYLE}}}text-properties")
        if style.get(f"{{{STYLE}}}family") != "text" or properties is None:
            continue
        kinds = set()
        for key, value in properties.attrib.items():
            name = etree.QName(key).localname
            if name.startswith("font-weight") and value == "bold":
                kinds.add("b")
            elif name.startswith("font-style") and value == "italic":
                kinds.add("i")
            elif name.startswith("text-underline") and value != "none":
                kinds.add("u")
            else:
                kinds.add("")
        if len(kinds) == 1 and "" not in kinds:
            found[style.get(f"{{{STYLE}}}name")] = kinds.pop()
    return found


def _odt_rebuild(paragraph: Paragraph, pieces: list[Piece], language: str) -> None:
    p = paragraph.element
    p.text = None
    for child in list(p):
        p.remove(child)
    holder, inner, link, style = p, p, None, None
    for piece in pieces:
        if piece.link != link:
            holder = p if piece.link is None else _shallow(paragraph.links[piece.link], p)
            inner, link, style = holder, piece.link, None
        if piece.style != style:
            inner, style = holder, piece.style
            for attributes in paragraph.styles[style]:
                inner = etree.SubElement(inner, _t("span"), dict(attributes))
        if piece.atom is not None:
            _move(piece.atom, inner)
        elif len(inner):
            inner[-1].tail = (inner[-1].tail or "") + piece.text
        else:
            inner.text = (inner.text or "") + piece.text


def _odt_translated(root: etree._Element, master_only: bool) -> list[etree._Element]:
    """The paragraphs and headings to translate: not a comment's, not deleted text's; in
    styles.xml, only the master pages' (their headers and footers)."""
    skipped = {f"{{{OFFICE}}}annotation", _t("tracked-changes")}
    paragraphs = []
    for p in root.iter(_t("p"), _t("h")):
        ancestors = {a.tag for a in p.iterancestors()}
        if not ancestors & skipped and (not master_only or f"{{{OFFICE}}}master-styles" in ancestors):
            paragraphs.append(p)
    return paragraphs


def read_odt(data: bytes, limits: Limits) -> OfficeFile:
    what = "OpenDocument text (.odt)"
    package = Package(data, limits, what)
    if "content.xml" not in package.names:
        raise InvalidInput(f"the file is not an {what}: its zip package has no content.xml")
    if "META-INF/manifest.xml" in package.names and b"encryption-data" in package.read("META-INF/manifest.xml"):
        raise InvalidInput(f"the {what} is encrypted (password-protected): save it without a password")
    trees = {name: package.parse(name) for name in ("content.xml", "styles.xml") if name in package.names}
    # a span's style is automatic (in its own part) or common (in styles.xml); a name both parts
    # define only names the tag wrongly: the span written back is the one read
    emphasis = {k: v for tree in reversed(trees.values()) for k, v in _odt_emphasis(tree.getroot()).items()}
    paragraphs = [(name, _odt_paragraph(p, emphasis)) for name, tree in trees.items()
                  for p in _odt_translated(tree.getroot(), name == "styles.xml")]
    return OfficeFile("odt", ODT_TYPE, package, trees, paragraphs, _odt_rebuild)


# --- the document -------------------------------------------------------------

class OfficeFile(FileDocument):
    def __init__(self, kind: str, media_type: str, package: Package, trees: dict[str, etree._ElementTree],
                 paragraphs: list[tuple[str, Paragraph]], rebuild: Callable[[Paragraph, list[Piece], str], None]):
        self.package, self.trees, self.rebuild = package, trees, rebuild
        # (part, paragraph) for each text, in order
        self.paragraphs = [(name, p) for name, p in paragraphs if p.text().strip()]
        super().__init__(kind, media_type, [p.html() for _, p in self.paragraphs], html=True)

    def write(self, translations, target, placeholders=None) -> bytes:
        self.untranslated = 0
        changed = set()
        for (name, paragraph), translation in zip(self.paragraphs, translations):
            if not translation.strip():
                self.untranslated += 1
                continue
            pieces = paragraph.translated(translation) or paragraph.fallback(translation)
            self.rebuild(paragraph, pieces, target)
            changed.add(name)
        return self.package.repack({name: _serialised(self.trees[name]) for name in changed})


def _serialised(tree: etree._ElementTree) -> bytes:
    return etree.tostring(tree, xml_declaration=True, encoding="UTF-8", standalone=tree.docinfo.standalone)


# --- the zip package ------------------------------------------------------------

class Package:
    """A zip package, checked for bombs before anything is inflated."""

    def __init__(self, data: bytes, limits: Limits, what: str):
        self.what = what
        if data.startswith(OLE):
            raise InvalidInput(f"the file is not a {what}: it is an encrypted (password-protected) document or "
                               "an old binary one (.doc); save it as a document without a password")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, struct.error) as e:
            raise InvalidInput(f"the file is not a {what}: it is not a zip package ({e})") from None
        self.infos = self.zip.infolist()
        self.names = [info.filename for info in self.infos]
        if len(self.infos) > MAX_ENTRIES:
            raise InvalidInput(f"the {what} has {len(self.infos)} zip entries, over the limit of {MAX_ENTRIES}")
        if len(set(self.names)) != len(self.names):
            raise InvalidInput(f"the file is not a {what}: two zip entries share a name")
        unpacked = sum(info.file_size for info in self.infos)
        if unpacked > limits.max_unpacked_bytes:
            raise InvalidInput(f"the {what} unpacks to {unpacked} bytes, over the limit of "
                               f"{limits.max_unpacked_bytes} (max_unpacked_bytes)")
        for info in self.infos:
            if info.flag_bits & ENCRYPTED_ZIP:
                raise InvalidInput(f"the {what} is encrypted (password-protected): save it without a password")
            if info.file_size > RATIO_FROM and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                raise InvalidInput(f"the {what} is refused: its entry {info.filename} inflates "
                                   f"{info.file_size // max(info.compress_size, 1)}:1, over the limit of "
                                   f"{MAX_RATIO}:1 (a zip bomb?)")
        self.limit = limits.max_unpacked_bytes
        self.left = self.limit          # bytes any more reads may inflate

    def read(self, name: str) -> bytes:
        """An entry's bytes, never more than the unpacked limit left, whatever its declared size."""
        try:
            with self.zip.open(name) as entry:
                data = entry.read(self.left + 1)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, ValueError, EOFError, OSError, RuntimeError,
                NotImplementedError) as e:      # a bad CRC or stream, a password asked, an unknown compression
            raise InvalidInput(f"the {self.what} is damaged: its entry {name} cannot be read ({e})") from None
        if len(data) > self.left:
            raise InvalidInput(f"the {self.what} unpacks to more than the limit of {self.left} bytes "
                               f"(max_unpacked_bytes) at its entry {name}")
        self.left -= len(data)
        return data

    def parse(self, name: str) -> etree._ElementTree:
        data = self.read(name)
        refused = InvalidInput(f"the {self.what} is refused: its part {name} declares a DTD, which none has "
                               "(its entities are not read)")
        if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
            raise refused
        parser = safe_xml_parser()
        try:
            tree = etree.fromstring(data, parser).getroottree()
        except etree.XMLSyntaxError as e:
            raise InvalidInput(f"the file is not a {self.what}: its part {name} is not well-formed XML: {e}") from None
        if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
            raise refused           # spelt in an encoding other than UTF-8
        return tree

    def repack(self, replaced: dict[str, bytes]) -> bytes:
        """The package with the entries in `replaced` replaced, every other one as read."""
        self.left = self.limit
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as packed:
            for info in self.infos:
                data = replaced[info.filename] if info.filename in replaced else self.read(info.filename)
                packed.writestr(_entry(info), data)
            packed.comment = self.zip.comment
        return out.getvalue()


def _entry(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A fresh ZipInfo with `info`'s name, date, compression and attributes."""
    made = zipfile.ZipInfo(info.filename, info.date_time)
    made.compress_type, made.comment = info.compress_type, info.comment
    made.create_system, made.external_attr, made.internal_attr = (info.create_system, info.external_attr,
                                                                  info.internal_attr)
    extra, at = [], 0
    while at + 4 <= len(info.extra):
        kind, size = struct.unpack_from("<HH", info.extra, at)
        if kind != ZIP64_EXTRA:
            extra.append(info.extra[at:at + 4 + size])
        at += 4 + size
    made.extra = b"".join(extra)
    return made
