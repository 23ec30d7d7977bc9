"""Office Open XML word-processing documents (.docx, WordprocessingML).

What is translated: each `w:p` of word/document.xml, the headers and footers
(word/header*.xml, word/footer*.xml) and the footnotes and endnotes; a paragraph nested in
another (a text box) is one of its own. Not translated: comments (word/comments.xml), deleted
text of tracked changes, the content of content controls (`w:sdt`) and of other inline
containers, field instructions, charts and SmartArt.

A run's text (`w:t`) is text, its properties (`w:rPr`) its style; a hyperlink, a tracked
insertion, a simple field (`w:fldSimple`) a wrapper; every other child of a run (`w:tab`,
`w:br`, `w:drawing`, `w:fldChar`...) an atom in the run, every other child of the paragraph
(`w:bookmarkStart`, `w:commentRangeEnd`...) an atom beside runs. Written back: the runs
rebuilt with their original `w:rPr`, `w:lang` set to the target where a run names one, the
paragraph's own properties (`w:pPr`) untouched.
"""

from __future__ import annotations

import copy
import re

from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import Check, Limits, go_on, local_name
from attnmt.service.text.files.office.document import OfficeFile
from attnmt.service.text.files.office.package import Package
from attnmt.service.text.files.office.paragraph import Paragraph, Piece, move, shallow

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"

# paragraph children holding runs, carried as a tag around them (one level deep)
DOCX_WRAPPERS = {"hyperlink", "ins", "moveTo", "smartTag", "fldSimple"}
DOCX_BREAKS = {"br", "cr"}
DOCX_TABS = {"tab", "ptab"}
DOCX_MARKERS = {"fldChar", "instrText"}      # in a run; beside runs, every *Start and *End
_SPACE_AROUND = re.compile(r"^\s|\s$")


def _w(name: str) -> str:
    return f"{{{W}}}{name}"


def _paragraph(p: etree._Element, check: Check) -> Paragraph:
    check()
    paragraph = Paragraph(p)

    def walk(container: etree._Element, link: int | None) -> None:
        for child in container:
            check()                                     # one paragraph may hold all the runs
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
    paragraph.settle(lambda n, base: _tag(paragraph.styles[n], paragraph.styles[base]))
    return paragraph


def _tag(rpr, base) -> str:
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


def _rebuild(paragraph: Paragraph, pieces: list[Piece], language: str) -> None:
    p = paragraph.element
    for child in list(p):
        if child.tag != _w("pPr"):
            p.remove(child)
    holder, link, run, style = p, None, None, None
    for piece in pieces:
        if piece.link != link:
            holder = p if piece.link is None else shallow(paragraph.links[piece.link], p)
            link, run = piece.link, None
        if piece.atom is not None and not piece.inline:
            move(piece.atom, holder)
            run = None
            continue
        if run is None or style != piece.style:
            run, style = etree.SubElement(holder, _w("r")), piece.style
            rpr = paragraph.styles[style]
            if rpr is not None:
                run.append(_with_language(copy.deepcopy(rpr), language))
        if piece.atom is not None:
            move(piece.atom, run)
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


def _parts(names: list[str]) -> list[str]:
    """The parts translated, the body first (its texts decide the detected language)."""
    others = sorted(n for n in names if re.fullmatch(r"word/(header|footer)\d*\.xml|word/(foot|end)notes\.xml", n))
    return ["word/document.xml", *others]


def read_docx(data: bytes, limits: Limits, check: Check = go_on) -> OfficeFile:
    """A .docx ready to translate; InvalidInput where it is not one (package.py's refusals,
    no word/document.xml, Strict Open XML). `check` is called at each run and paragraph."""
    what = "Word document (.docx)"
    package = Package(data, limits, what)
    if "word/document.xml" not in package.names:
        raise InvalidInput(f"the file is not a {what}: its zip package has no word/document.xml")
    trees = {name: package.parse(name) for name in _parts(package.names)}
    root = trees["word/document.xml"].getroot()
    if etree.QName(root).namespace != W:
        raise InvalidInput(f"the file is not a {what} this service reads: word/document.xml is in namespace "
                           f"{etree.QName(root).namespace!r} (Strict Open XML?), not {W!r}")
    paragraphs = [(name, _paragraph(p, check))
                  for name, tree in trees.items() for p in tree.getroot().iter(_w("p"))]
    return OfficeFile("docx", DOCX_TYPE, package, trees, paragraphs, _rebuild, check)
