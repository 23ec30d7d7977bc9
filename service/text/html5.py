"""HTML read as a browser reads it, each node knowing where it stands in the markup as sent.

The tree is html5lib's (pure Python, the WHATWG parsing algorithm), parsed as a
fragment in the body context (a whole document, one that starts with a doctype or
`<html>`, as a document): implied end tags (`<p>Uno<p>Dos`, `<li>`, `<td>`),
void elements with or without `/`, upper-case and unquoted attributes, a bare `<`
as text, stray end tags dropped, mis-nesting repaired by the adoption agency and
foster parenting. lxml's HTML parser (libxml2) does not build trees the WHATWG
way, and selectolax (lexbor) does but, like html5lib, keeps no source positions;
html5lib is the one whose tokenizer can be made to say where each token came
from, which the tag placement and the word offsets in the markup need.

Positions: html5lib runs its tokenizer one state at a time and hands the parser
the tokens each state emitted before running the next; every character consumed
since the previous token belongs to the token just emitted, so its span is
[end of the previous token, the stream's offset now). The parser inserts text
in the order the tokens came (foster parenting moves it, but in order), so each
inserted character is matched to the next character token's characters.

What a node carries for `markup.py`: an element its start tag token (None when
the parser implied the element: `tbody`, a formatting element reopened, ...)
and the span of the end tag that closed it (None when the end was implied);
text each character with its span (several characters for `&amp;` or a CRLF)
and the entity it was decoded from; a comment (and a document's doctype) its span.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Callable

from html5lib import html5parser
from html5lib._tokenizer import HTMLTokenizer
from html5lib.constants import namespaces, tokenTypes
from html5lib.treebuilders import base

from attnmt.service.errors import InvalidInput
from attnmt.service.text.offsets import Span

MAX_DEPTH = 100          # open elements; deeper nesting is refused (the walks over the tree recurse)
# Attributes of one tag; more are refused. html5lib holds each new attribute name against every
# earlier one of the tag (the duplicate-attribute check), so a tag of k attributes costs k² and
# one tag is one token, which the deadline check between tokens cannot interrupt: 20,000 took
# 32 s. At 256 a page of such tags parses about as fast as ordinary markup (0.45 against 0.39 s
# per 100 kB, AMD EPYC, 2026-11-29); no real element comes near it.
MAX_ATTRIBUTES = 256
LOOKAHEAD = 256          # other characters the parser may have dropped before a match
DROPPED = "\t\n\f \0"     # characters the parser drops: whitespace where it is not text, NUL

CHARACTERS, SPACE, START_TAG, END_TAG, PARSE_ERROR = (
    tokenTypes[k] for k in ("Characters", "SpaceCharacters", "StartTag", "EndTag", "ParseError"))
SPACE = "\t\n\f\r "
DOCUMENT_START = re.compile(r"<(?:!doctype|html[\t\n\f\r />])", re.IGNORECASE)

# A located character: (character, start, end, the entity it was decoded from as written, or None).
Located = tuple[str, int, int, str | None]


def too_deep(name: str, offset: int) -> InvalidInput:
    # Checked while parsing, too: html5lib's scope checks walk the open elements, so
    # unbounded nesting would make parsing quadratic.
    return InvalidInput(f"markup: <{name}> at offset {offset} nests deeper than {MAX_DEPTH} elements "
                        "(the nesting limit)")


class Node(base.Node):
    """An element."""

    def __init__(self, name: str | None, namespace: str | None = None):
        super().__init__(name)
        self.namespace = namespace          # None for HTML (html5lib's namespaceHTMLElements=False)
        self.token: dict | None = None      # the start tag token, with its "span"; None: implied
        self.end: Span | None = None        # the end tag that closed it; None: implied

    @property
    def nameTuple(self):
        return self.namespace or namespaces["html"], self.name

    def appendChild(self, node):
        node.parent = self
        self.childNodes.append(node)

    def insertBefore(self, node, refNode):
        node.parent = self
        self.childNodes.insert(_index(self.childNodes, refNode), node)

    def removeChild(self, node):
        self.childNodes.remove(node)
        node.parent = None

    def insertText(self, data: list[Located], insertBefore=None):
        at = len(self.childNodes) if insertBefore is None else _index(self.childNodes, insertBefore)
        if at and isinstance(self.childNodes[at - 1], Text):
            self.childNodes[at - 1].chars += data
        else:
            text = Text(data)
            text.parent = self
            self.childNodes.insert(at, text)

    def cloneNode(self):
        clone = Node(self.name, self.namespace)
        clone.attributes = dict(self.attributes)
        clone.token = self.token            # a repaired element is written with its source's start tag
        return clone

    def hasContent(self):
        return bool(self.childNodes)


def _index(nodes: list, node) -> int:
    """Where `node` is in `nodes`, looked for from the end: the parser inserts before a node
    only when foster parenting, before the table, which is its parent's last child (list.index
    would make a page of foster-parented nodes quadratic)."""
    for i in range(len(nodes) - 1, -1, -1):
        if nodes[i] is node:
            return i
    raise ValueError("not a child")


class _Fragment(Node):
    def __init__(self):
        super().__init__(None)


class Text:
    def __init__(self, chars: list[Located]):
        self.chars = chars
        self.parent = None


class Comment:
    def __init__(self, span: Span):
        self.span = span
        self.parent = None


class _Builder(base.TreeBuilder):
    documentClass = fragmentClass = _Fragment
    elementClass = Node
    tokenizer: "_Tokenizer"
    created: list[Node]                     # the elements inserted for the token being parsed

    def createElement(self, token):
        element = super().createElement(token)
        element.token = token if "span" in token else None     # <html> as sent
        return element

    def insertDoctype(self, token):
        self.document.appendChild(Comment(token["span"]))

    def insertElementNormal(self, token):
        return self._inserted(super().insertElementNormal(token), token)

    def insertElementTable(self, token):
        return self._inserted(super().insertElementTable(token), token)

    def _inserted(self, element: Node, token: dict) -> Node:
        element.token = token if "span" in token else None
        self.created.append(element)
        if len(self.openElements) > MAX_DEPTH + 1:       # + the fragment's own root
            raise too_deep(token["name"], token["span"][0] if "span" in token else self.tokenizer.last_offset)
        return element

    def reconstructActiveFormattingElements(self):
        # html5lib reopens a formatting element from a token it makes up; keep the source's.
        before = list(self.activeFormattingElements)
        super().reconstructActiveFormattingElements()
        for old, new in zip(before, self.activeFormattingElements):
            if new is not old and new is not base.Marker:
                new.token = old.token

    def insertComment(self, token, parent=None):
        (parent or self.openElements[-1]).appendChild(Comment(token["span"]))

    def insertText(self, data, parent=None):
        located = self.tokenizer.take(data)
        if parent is None:
            parent = self.openElements[-1]
        if self.insertFromTable and self.openElements[-1].name in base.tableInsertModeElements:
            parent, before = self.getTableMisnestedNodePosition()       # foster parenting
            parent.insertText(located, before)
        else:
            parent.insertText(located)


class _Tokenizer(HTMLTokenizer):
    """html5lib's tokenizer, each token with its "span" in the markup as sent."""

    def __init__(self, markup: str, parser, check: Callable[[], None] | None = None):
        # The stream turns CR LF and CR into LF; do it here, keeping where each character was.
        text = re.sub(r"[\ud800-\udfff]", "\ufffd", markup.replace("\r\n", "\n").replace("\r", "\n"))
        super().__init__(text, parser=parser)
        self.stream._defaultChunkSize = len(text) + 1       # one chunk: offsets are positions in it
        self.text = text
        self.source: list[int] | None = None                # offset in `text` -> offset in `markup`
        if len(text) != len(markup):
            self.source = [i for i, c in enumerate(markup) if not (c == "\n" and i and markup[i - 1] == "\r")]
            self.source.append(len(markup))
        self.chars: list[str] = []                  # the characters of every character token, in order
        self.located: list[Located] = []
        self.cursor = 0                             # the first of them no inserted text has taken
        self.last_offset = 0                        # where the last token emitted starts
        self.next_offset = 0                        # where the token being read starts (in `text`)
        self.html_start: dict | None = None         # the first <html> start tag
        self.check = check                          # called before each token is parsed; raises to stop

    def attributeNameState(self):
        # every attribute name passes through here once it has a first character
        if len(self.currentToken["data"]) > MAX_ATTRIBUTES:
            raise InvalidInput(f"markup: <{self.currentToken['name']}> at offset {self._source(self.next_offset)} "
                               f"has more than {MAX_ATTRIBUTES} attributes (the attribute limit)")
        return super().attributeNameState()

    def _source(self, offset: int) -> int:
        return offset if self.source is None else self.source[offset]

    def _offset(self) -> int:
        stream = self.stream
        return len(self.text) - (stream.chunkSize - stream.chunkOffset)

    def __iter__(self):
        self.tokenQueue = deque()
        tree = self.parser.tree
        start = 0
        while self.state():
            if not self.tokenQueue:
                continue
            if self.check is not None:
                self.check()
            self.stream.errors.clear()          # parse errors change nothing in the tree
            end = self._offset()
            while self.tokenQueue:
                token = self.tokenQueue.popleft()
                kind = token["type"]
                if kind == PARSE_ERROR:
                    continue
                while self.text.startswith("</>", start) and start + 3 < end:   # `</>` is dropped unseen
                    start += 3
                token["span"] = (self._source(start), self._source(end))
                self.last_offset = token["span"][0]
                if kind in (CHARACTERS, SPACE):
                    self._locate(token["data"], start, end)
                elif kind == START_TAG and token["name"] == "html" and self.html_start is None:
                    self.html_start = token
                start = self.next_offset = end
                before, tree.created = list(tree.openElements) if kind == END_TAG else None, []
                yield token
                if kind == END_TAG:
                    self._closed(token, before + tree.created)

    def _closed(self, token: dict, elements: list[Node]) -> None:
        """The end tag goes to the innermost element of its name it closed (or made and closed:
        a stray </p> is an empty p)."""
        still_open = {id(e) for e in self.parser.tree.openElements}
        closed = [e for e in elements if id(e) not in still_open and e.name.lower() == token["name"]]
        if closed:
            closed[-1].end = token["span"]

    def _locate(self, data: str, start: int, end: int) -> None:
        raw = self.text[start:end]
        if raw == data:
            self.chars += data
            if self.source is None:
                self.located += [(c, i, i + 1, None) for i, c in enumerate(data, start)]
            else:
                self.located += [(c, self.source[i], self.source[i + 1], None) for i, c in enumerate(data, start)]
            return
        # An entity (and what follows it unread, `&noti` being &not; and "i"), or a CDATA section.
        kept = 0
        while kept < min(len(raw), len(data)) and raw[-1 - kept] == data[-1 - kept]:
            kept += 1
        decoded, spelled_end = data[:len(data) - kept], end - kept
        entity = self.text[start:spelled_end] if raw.startswith("&") else None
        for c in decoded:
            self._add(c, self._source(start), self._source(spelled_end), entity)
        for i in range(spelled_end, end):
            self._add(self.text[i], self._source(i), self._source(i + 1), None)

    def _add(self, c: str, start: int, end: int, entity: str | None) -> None:
        self.chars.append(c)
        self.located.append((c, start, end, entity))

    def take(self, data: str) -> list[Located]:
        """The located characters the parser inserts as `data`."""
        chars, at = self.chars, self.cursor
        if chars[at:at + len(data)] == list(data):      # as it nearly always is
            self.cursor = at + len(data)
            return self.located[at:self.cursor]
        out = []
        for c in data:
            # Passed over: what the parser dropped (whitespace before <head>, the newline after
            # <pre>, NULs); a NUL it kept is U+FFFD.
            at = self.cursor
            while at < len(chars) and chars[at] != c and chars[at] in DROPPED:
                at += 1
            if not (at < len(chars) and (chars[at] == c or (c == "\ufffd" and chars[at] == "\0"))):
                at = next((j for j in range(self.cursor, min(self.cursor + LOOKAHEAD, len(chars)))
                           if chars[j] == c), None)
            if at is None:      # text the parser made up (html5lib's <isindex> prompt): no place
                where = self.located[self.cursor - 1][2] if self.cursor else 0
                out.append((c, where, where, None))
            else:
                out.append(self.located[at])
                self.cursor = at + 1
        return out


class _Parser(html5parser.HTMLParser):
    def __init__(self, check: Callable[[], None] | None):
        super().__init__(tree=_Builder, namespaceHTMLElements=False)
        self.check = check

    def _parse(self, stream, innerHTML=False, container="div", scripting=False, **kwargs):
        # html5lib's own _parse with the located tokenizer
        self.innerHTMLMode = innerHTML
        self.container = container
        self.scripting = scripting
        self.tokenizer = _Tokenizer(stream, parser=self, check=self.check)
        self.tree.tokenizer, self.tree.created = self.tokenizer, []
        self.reset()
        self.mainLoop()

    def parseError(self, errorcode="XXX-undefined-error", datavars=None):
        # Parse errors change nothing in the tree; html5lib would record each with its line
        # and column, counted from the start of the markup every time (quadratic in the errors).
        pass


def is_document(markup: str) -> bool:
    """Whether the markup is a whole document, not a fragment: a doctype or <html> first,
    whitespace and comments aside."""
    # A scan, not one regular expression: `(?:<!--.*?-->\s*)*` backtracks through every way
    # of grouping the comments when no doctype follows, which takes time exponential in
    # their number (and the GIL all along).
    at = 0
    while True:
        while at < len(markup) and markup[at] in SPACE:
            at += 1
        if not markup.startswith("<!--", at):
            return DOCUMENT_START.match(markup, at) is not None
        end = markup.find("-->", at + 4)
        if end < 0:
            return False
        at = end + 3


def parse(markup: str, check: Callable[[], None] | None = None) -> Node:
    """The markup's tree: a document's, else a fragment's in <body> (InvalidInput only when
    it nests deeper than MAX_DEPTH). `check` is called between tokens: what it raises (a
    passed deadline) stops the parse."""
    parser = _Parser(check)
    if not is_document(markup):
        return parser.parseFragment(markup, container="body")
    document = parser.parse(markup)
    # html5lib makes the root before it reads <html> (whose attributes it then adds): it is that tag's
    root = next(node for node in document.childNodes if isinstance(node, Node))
    root.token = root.token or parser.tokenizer.html_start
    return document
