"""OpenDocument text (.odt).

What is translated: each `text:p` and `text:h` of content.xml, and of the master pages'
headers and footers in styles.xml; a paragraph nested in another (a footnote, a text box) is
one of its own. Not translated: comments (`office:annotation`), deleted text of tracked
changes.

A paragraph's text and its `text:span`s' are text, the chain of spans around it its style; a
link (`text:a`) a wrapper; every other element (`text:tab`, `text:line-break`, `text:s`,
`draw:frame`, a note, a field...) an atom. A span style that only makes bold, italic or
underlined (automatic, in the paragraph's own part, or common, in styles.xml) is tagged
`<b>`, `<i>` or `<u>`. Writer's revision ids (`officeooo:rsid`: when a stretch was typed) are
no formatting: they neither keep a bold span from being `<b>` nor make a span of their own; a
span whose automatic style holds nothing else is read as its parent's text and not written
back. Written back: the other spans rebuilt with their original attributes, the paragraph's
own (its style) untouched.
"""

from __future__ import annotations

from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import Check, Limits, go_on, local_name
from attnmt.service.text.files.office.document import OfficeFile
from attnmt.service.text.files.office.package import Package
from attnmt.service.text.files.office.paragraph import Paragraph, Piece, move, shallow

ODT_TYPE = "application/vnd.oasis.opendocument.text"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
# Writer's revision ids: which editing session typed a stretch, for comparing documents; every
# stretch a person types in Writer has one, so most spans of a typed document exist for them
REVISION_IDS = {"{http://openoffice.org/2009/office}rsid", "{http://openoffice.org/2009/office}paragraph-rsid"}


def _t(name: str) -> str:
    return f"{{{TEXT}}}{name}"


def _paragraph(p: etree._Element, looks: dict[str, str], check: Check) -> Paragraph:
    """`looks`: the text styles the paragraph's part sees (`_looks`)."""
    check()
    paragraph = Paragraph(p)

    def walk(node: etree._Element, chain: tuple, link: int | None) -> None:
        style = paragraph.style(chain, chain)
        paragraph.add_text(node.text or "", style, link)
        for child in node:
            check()                                     # one paragraph may hold all the spans
            if child.tag == _t("span") and looks.get(child.get(_t("style-name"))) == "" and len(child.attrib) == 1:
                walk(child, chain, link)        # formats nothing: its text is its parent's
            elif child.tag == _t("span"):
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
            return looks.get(dict(chain[-1]).get(_t("style-name"), "")) or "span"
        return "span"

    paragraph.settle(tag)
    return paragraph


def _looks(root: etree._Element, container: str, check: Check) -> dict[str, str]:
    """The text styles in `root`'s `container` (office:automatic-styles or office:styles) that
    only make bold, italic or underlined: their name -> b, i or u; with
    office:automatic-styles, those that change nothing a reader sees (revision ids, or no
    properties) -> ''. A common style that formats nothing is the user's own, kept."""
    found = {}
    for style in root.iterfind(f"{{{OFFICE}}}{container}/{{{STYLE}}}style"):
        check()
        if style.get(f"{{{STYLE}}}family") != "text":
            continue
        properties = style.find(f"{{{STYLE}}}text-properties")
        kinds = set()
        for key, value in (properties.attrib.items() if properties is not None else ()):
            name = etree.QName(key).localname
            if key in REVISION_IDS:
                continue
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
        elif (not kinds and container == "automatic-styles" and style.get(f"{{{STYLE}}}parent-style-name") is None
              and len(style) == (properties is not None)):
            found[style.get(f"{{{STYLE}}}name")] = ""
    return found


def _rebuild(paragraph: Paragraph, pieces: list[Piece], language: str) -> None:
    p = paragraph.element
    p.text = None
    for child in list(p):
        p.remove(child)
    holder, inner, link, style = p, p, None, None
    for piece in pieces:
        if piece.link != link:
            holder = p if piece.link is None else shallow(paragraph.links[piece.link], p)
            inner, link, style = holder, piece.link, None
        if piece.style != style:
            inner, style = holder, piece.style
            for attributes in paragraph.styles[style]:
                inner = etree.SubElement(inner, _t("span"), dict(attributes))
        if piece.atom is not None:
            move(piece.atom, inner)
        elif len(inner):
            inner[-1].tail = (inner[-1].tail or "") + piece.text
        else:
            inner.text = (inner.text or "") + piece.text


def _translated(root: etree._Element, master_only: bool, check: Check) -> list[etree._Element]:
    """The paragraphs and headings to translate: not a comment's, not deleted text's; in
    styles.xml, only the master pages' (their headers and footers)."""
    skipped = {f"{{{OFFICE}}}annotation", _t("tracked-changes")}
    paragraphs = []
    for p in root.iter(_t("p"), _t("h")):
        check()
        ancestors = {a.tag for a in p.iterancestors()}
        if not ancestors & skipped and (not master_only or f"{{{OFFICE}}}master-styles" in ancestors):
            paragraphs.append(p)
    return paragraphs


def read_odt(data: bytes, limits: Limits, check: Check = go_on) -> OfficeFile:
    """An .odt ready to translate; InvalidInput where it is not one (package.py's refusals,
    no content.xml, an encrypted manifest). `check` is called at each style, span and paragraph."""
    what = "OpenDocument text (.odt)"
    package = Package(data, limits, what)
    if "content.xml" not in package.names:
        raise InvalidInput(f"the file is not an {what}: its zip package has no content.xml")
    if "META-INF/manifest.xml" in package.names and b"encryption-data" in package.read("META-INF/manifest.xml"):
        raise InvalidInput(f"the {what} is encrypted (password-protected): save it without a password")
    trees = {name: package.parse(name) for name in ("content.xml", "styles.xml") if name in package.names}
    # a span's style is automatic, in its own part (content.xml and styles.xml each name theirs
    # T1, T2...), or common, in styles.xml
    common = _looks(trees["styles.xml"].getroot(), "styles", check) if "styles.xml" in trees else {}
    paragraphs = []
    for name, tree in trees.items():
        looks = common | _looks(tree.getroot(), "automatic-styles", check)
        paragraphs += [(name, _paragraph(p, looks, check))
                       for p in _translated(tree.getroot(), name == "styles.xml", check)]
    return OfficeFile("odt", ODT_TYPE, package, trees, paragraphs, _rebuild, check)
