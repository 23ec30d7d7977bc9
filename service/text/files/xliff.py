"""XLIFF 1.2 and 2.0 (.xlf, .xliff), the CAT tools' exchange format, through lxml (BSD).

XLIFF 1.2: each `<trans-unit>` whose `<target>` is missing, empty, or in state `new` or
`needs-translation` has its `<source>` translated into that target (one is added after the
source where there was none), marked `state="needs-review-translation"`: machine output, for
a translator to review, as a .po's `fuzzy`. Each `<file>` gets `target-language`. XLIFF 2.0:
each `<segment>` of a `<unit>` whose `<target>` is missing or empty is filled and marked
`state="translated"` (2.0's states: initial, translated, reviewed, final); `<xliff>` gets
`trgLang`. A unit with `translate="no"` (on itself or the nearest group or file saying so)
is not touched, nor is a target that holds a translation. Everything else (notes, context
groups, other attributes, comments, namespaces) is written back as lxml read it: the same
tree, UTF-8, line ends as the parser normalised them.

Inline codes are carried by the HTML mode's alignment (`markup.py`): a unit's source becomes
HTML in which each paired code (1.2's `<g>`, `<mrk>`; 2.0's `<pc>`, `<mrk>`) is a
`<span data-x="N">` around its content, and every other code (1.2's `<x/>`, `<bx/>`, `<ex/>`,
`<ph>`, `<bpt>`, `<ept>`, `<it>`; 2.0's `<ph/>`, `<sc/>`, `<ec/>`, `<sm/>`, `<em/>`, `<cp/>`)
an `<img data-x="N">`, a void inline element, copied to where the alignment puts it. The
translation's spans and images are turned back into copies of the codes they stand for, with
their attributes and (for a standalone code) their native content. A translation that loses
a code, repeats one, or puts the end of a spanning pair (`<ept>`, `<ex>`, `<ec>`) before its
start is left untranslated and counted (`FileDocument.untranslated`), as is one that loses a
placeholder (`%s`, `{0}`) of its source's text. When no unit to translate has a code, the
texts go as plain text.

The file is read without expanding entities, loading a DTD or reaching the network, and a
file with a DTD at all is refused (XLIFF declares none): a "billion laughs" or an external
entity never gets past reading.
"""

from __future__ import annotations

import copy
import html
import re

from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import Check, FileDocument, Limits, go_on, local_name, safe_xml_parser
from attnmt.service.text.files.gettext import FORMAT_DIRECTIVES, same_placeholders

XLIFF_1 = "urn:oasis:names:tc:xliff:document:1.2"
XLIFF_2 = "urn:oasis:names:tc:xliff:document:2.0"       # 2.1 and 2.2 keep 2.0's namespace
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# inline codes with translatable content, written as a span around it; the others are atoms
PAIRED = {"g", "mrk", "pc"}
# the end of a spanning pair -> (its start, the attribute naming the start)
PAIR_ENDS = {"ept": ("bpt", "id"), "ex": ("bx", "id"), "ec": ("sc", "startRef")}
STARTS = {start for start, _ in PAIR_ENDS.values()}
UNTRANSLATED_STATES = {"new", "needs-translation"}      # 1.2 targets still to fill
REVIEW_STATE = "needs-review-translation"               # 1.2: machine output to review
TRANSLATED_STATE = "translated"                         # 2.0

# The placeholders standing for codes in the HTML the translation comes back as: only these
# tags are there (the text's own `<` and `&` come back as entities)
_CODE_TAG = re.compile(r'<span data-x="(\d+)">|</span>|<img data-x="(\d+)">')
# what may come before the root: a declaration, comments, processing instructions, space
_PROLOG_DTD = re.compile(r"^(?:\ufeff|\xef\xbb\xbf)?(?:\s+|<\?.*?\?>|<!--.*?-->)*<!DOCTYPE", re.S)
_DTD_REFUSED = ("the file is not XLIFF (.xlf, .xliff): it declares a DTD, which XLIFF has none of (its "
                "entities are not read)")
_DECLARATION = re.compile(rb"""^(?:\xef\xbb\xbf)?\s*(<\?xml[^>]*?\?>)""")
_ENCODING = re.compile(r"""(\sencoding\s*=\s*)(["'])[^"']*\2""")


def _parser() -> etree.XMLParser:
    # lxml, not ElementTree (or defusedxml's wrapping of it): ElementTree renames namespace
    # prefixes (ns0:) and drops comments and processing instructions on the way back out
    return safe_xml_parser(dtd_validation=False, remove_comments=False, remove_pis=False, strip_cdata=False,
                           collect_ids=False)


class XliffFile(FileDocument):
    def __init__(self, tree: etree._ElementTree, version: int, declaration: str, check: Check = go_on):
        self.tree, self.version, self.declaration = tree, version, declaration
        self.ns = etree.QName(tree.getroot()).namespace       # None: a 1.x file without one
        # what to fill: (the element holding the source, the source); a 1.2 unit or a 2.0 segment
        self.todo: list[tuple[etree._Element, etree._Element]] = []
        for holder in self._holders(check):
            check()
            source = holder.find(self._tag("source"))
            target = holder.find(self._tag("target"))
            if source is None or not _has_text(source) or _translated(target, version):
                continue
            self.todo.append((holder, source))
        coded = any(len(source) for _, source in self.todo)
        self.codes: list[list[etree._Element]] = []     # per text: the inline codes its data-x numbers
        texts = []
        for _, source in self.todo:
            check()
            codes: list[etree._Element] = []
            texts.append(_to_html(source, codes) if coded else source.text or "")
            self.codes.append(codes)
        super().__init__("xliff", "application/xliff+xml", texts, html=coded)

    def _tag(self, name: str) -> str:
        return f"{{{self.ns}}}{name}" if self.ns else name

    def _holders(self, check: Check) -> list[etree._Element]:
        """1.2's trans-units, or 2.0's segments, in document order, less those marked not to translate."""
        holders = []
        for unit in self.tree.getroot().iter(self._tag("trans-unit" if self.version == 1 else "unit")):
            check()
            if _translatable(unit):
                holders += [unit] if self.version == 1 else unit.iter(self._tag("segment"))
        return holders

    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        pattern = placeholders or FORMAT_DIRECTIVES
        self.untranslated = 0
        for (holder, source), text, translation, codes in zip(self.todo, self.texts, translations, self.codes):
            check()
            content = _from_html(translation, codes) if self.html else (translation, [])
            if (content is None or not translation.strip() or not same_placeholders(text, translation, pattern)
                    or not _pairs_in_order(content[1])):
                self.untranslated += 1
                continue
            self._fill(holder, source, content, target)
        root = self.tree.getroot()
        if self.version == 1:
            for file in root.iter(self._tag("file")):
                file.set("target-language", target)
        else:
            root.set("trgLang", target)
        # the root, and the comments and processing instructions around it, each on its own line
        # (lxml keeps no whitespace outside the root)
        nodes = [*reversed(list(root.itersiblings(preceding=True))), root, *root.itersiblings()]
        lines = ([self.declaration.encode()] if self.declaration else []) + [
            etree.tostring(node, encoding="UTF-8", with_tail=False) for node in nodes]
        return b"\n".join(lines) + b"\n"

    def _fill(self, holder, source, content, language: str) -> None:
        element = holder.find(self._tag("target"))
        if element is None:
            element = etree.Element(self._tag("target"))
            before = holder.find(self._tag("seg-source")) if self.version == 1 else None
            before = source if before is None else before
            before.addnext(element)
            element.tail, before.tail = before.tail, before.tail       # the indentation, again after the target
            if self.version == 1 and source.get(XML_LANG):
                element.set(XML_LANG, language)
        for child in list(element):
            element.remove(child)
        element.text, children = content
        for child in children:
            element.append(child)
        (element if self.version == 1 else holder).set(
            "state", REVIEW_STATE if self.version == 1 else TRANSLATED_STATE)


def _has_text(element: etree._Element) -> bool:
    return bool("".join(element.itertext()).strip())


def _translated(target: etree._Element | None, version: int) -> bool:
    if target is None or not (len(target) or (target.text or "").strip()):
        return False
    return not (version == 1 and target.get("state") in UNTRANSLATED_STATES)


def _translatable(unit: etree._Element) -> bool:
    """The nearest `translate` on the unit or around it says yes (the default)."""
    for element in (unit, *unit.iterancestors()):
        if element.get("translate") is not None:
            return element.get("translate") != "no"
    return True


def _to_html(element: etree._Element, codes: list) -> str:
    """`element`'s content as HTML: its text escaped, each inline code a numbered placeholder
    (the number its index in `codes`)."""
    out = [html.escape(element.text or "", quote=False)]
    for child in element:
        n = len(codes)
        codes.append(child)
        if local_name(child) in PAIRED:
            out.append(f'<span data-x="{n}">{_to_html(child, codes)}</span>')
        else:
            out.append(f'<img data-x="{n}">')
        out.append(html.escape(child.tail or "", quote=False))
    return "".join(out)


def _from_html(translation: str, codes: list) -> tuple[str, list] | None:
    """(text, children) for a target, built from the HTML translation with each placeholder
    back as a copy of its code; None if a code is missing, repeated or misplaced."""
    root = etree.Element("root")
    stack = [root]
    seen: set[int] = set()
    at = 0

    def text(piece: str) -> None:
        piece = html.unescape(piece)
        parent = stack[-1]
        if len(parent):
            parent[-1].tail = (parent[-1].tail or "") + piece
        else:
            parent.text = (parent.text or "") + piece

    for m in _CODE_TAG.finditer(translation):
        text(translation[at:m.start()])
        at = m.end()
        if m.group(0) == "</span>":
            if len(stack) == 1:
                return None
            stack.pop()
            continue
        n = int(m.group(1) or m.group(2))
        paired = m.group(1) is not None
        if n >= len(codes) or n in seen or paired != (local_name(codes[n]) in PAIRED):
            return None
        seen.add(n)
        if paired:
            code = etree.SubElement(stack[-1], codes[n].tag, dict(codes[n].attrib))
            stack.append(code)
        else:
            code = copy.deepcopy(codes[n])
            code.tail = None
            stack[-1].append(code)
    text(translation[at:])
    if len(stack) != 1 or len(seen) != len(codes):
        return None
    children = list(root)
    for child in children:
        root.remove(child)      # lxml keeps the tail with the element it moves
    return root.text or "", children


def _pairs_in_order(children: list) -> bool:
    """Each end of a spanning pair after its start, where both are in the text."""
    codes = [code for top in children for code in top.iter()]
    starts = {_pair(code) for code in codes if local_name(code) in STARTS}
    seen: set = set()
    for code in codes:
        if local_name(code) in STARTS:
            seen.add(_pair(code))
        elif local_name(code) in PAIR_ENDS and _pair(code) in starts and _pair(code) not in seen:
            return False
    return True


def _pair(code: etree._Element) -> tuple[str, str]:
    """The start of the pair a code begins or ends, and the id joining them."""
    name = local_name(code)
    start, attribute = PAIR_ENDS.get(name, (name, "id"))
    return start, code.get("rid") or code.get(attribute) or ""


def read(data: bytes, limits: Limits, check: Check = go_on) -> XliffFile:
    """The XLIFF file in `data`; `check` is called at each unit (libxml2's parse takes none:
    4 MB in 0.13 s)."""
    # refused before libxml2 reads the DTD's declarations, and again after, from what it read
    # (a file in an encoding that does not spell `<!DOCTYPE` in ASCII or UTF-16)
    if _PROLOG_DTD.match(_prolog_text(data)):
        raise InvalidInput(_DTD_REFUSED)
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as e:
        raise InvalidInput(f"the file is not XLIFF (.xlf, .xliff): it is not well-formed XML: {e}") from None
    tree = root.getroottree()
    info = tree.docinfo
    if info.doctype or info.internalDTD is not None or info.externalDTD is not None:
        raise InvalidInput(_DTD_REFUSED)
    name = etree.QName(root)
    if name.localname != "xliff":
        raise InvalidInput(f"the file is not XLIFF (.xlf, .xliff): its root is <{name.localname}>, not <xliff>")
    version = str(root.get("version", ""))
    if name.namespace == XLIFF_2:
        number = 2
    elif name.namespace == XLIFF_1 or (name.namespace is None and version.startswith("1.")):
        number = 1
    else:
        raise InvalidInput(f"the file is not XLIFF 1.2 or 2.0: namespace {name.namespace!r}, version {version!r}")
    declared = _DECLARATION.match(data)
    declaration = ""
    if declared:
        declaration = _ENCODING.sub(r"\1\2UTF-8\2", declared.group(1).decode("ascii", "replace"))
    return XliffFile(tree, number, declaration, check)


def _prolog_text(data: bytes) -> str:
    """The start of the file as text, enough to find a doctype in: UTF-16 by its byte-order
    mark, else bytes as Latin-1 (ASCII's letters in any encoding that keeps them)."""
    head = data[:65536]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return head.decode("utf-16", "replace")
    return head.decode("latin-1")
