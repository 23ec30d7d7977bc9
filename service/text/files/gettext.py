r"""gettext catalogs (.po, .pot) through polib (MIT).

The entries without a translation are translated, from their msgid (the catalog's source
language) into the target: a singular entry's msgid fills msgstr; a plural entry's msgid
fills msgstr[0] and its msgid_plural the other forms, as many as the target's Plural-Forms
has. Every translated entry is flagged `fuzzy` (machine output, for a translator to review;
msgfmt leaves fuzzy entries out of the .mo). Comments, contexts, references, flags, previous
msgids and obsolete entries stay as read; entries already translated are not touched.

A translation must hold the placeholders its msgid holds (`%s`, `%(name)s`, `{0}`, ... each
as often), or `msgfmt --check` fails and the program crashes at run time: one that does not
is left untranslated and counted (`FileDocument.untranslated`). The header names the target
(`Language`, `Plural-Forms`) and the catalog is written in UTF-8.

polib reads a string's escapes only in part (\\ \" \n \t \r \v \b \f) and takes an unterminated
string's last character for its quote, so the strings are read here first, as GNU gettext's
po-lex.c reads them (\a, octal \ooo and hex \xhh too, and a backslash ending a line, which joins
it to the next): a msgid is the program's lookup key, and one read otherwise would be written back
changed. A string polib would read otherwise reaches polib written in the escapes it knows, on
one line; what gettext refuses (a string with no closing quote, an escape it does not know,
msgstr[n] without msgid_plural or msgstr with it) is refused, naming the line. polib takes the
one character after `msgstr[` for the index (msgstr[10] and msgstr[11] overwrite msgstr[1]), so
the forms from msgstr[10] on reach it inside the form before them and are put back in their place
(a catalog may have more than 10 forms: nplurals is any number). Control characters in the
strings written are escaped (polib writes them raw).
"""

from __future__ import annotations

import bisect
import codecs
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field

import polib

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import Check, FileDocument, Limits, go_on
from attnmt.service.text.files.encoding import decode

# Plural-Forms of the languages served (the 9 the language identifier knows), from CLDR as
# gettext's own table (gettext-tools/src/plural-table.c) gives them
PLURAL_FORMS = {
    "en": "nplurals=2; plural=(n != 1);", "es": "nplurals=2; plural=(n != 1);",
    "de": "nplurals=2; plural=(n != 1);", "it": "nplurals=2; plural=(n != 1);",
    "nl": "nplurals=2; plural=(n != 1);", "ca": "nplurals=2; plural=(n != 1);",
    "gl": "nplurals=2; plural=(n != 1);", "pt": "nplurals=2; plural=(n != 1);",
    "fr": "nplurals=2; plural=(n > 1);",
}
DEFAULT_PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
# What a translation must keep when the model names no pattern of its own: printf conversions
# (with positions, flags, width, precision, length), Python's %(name)s, brace fields
FORMAT_DIRECTIVES = re.compile(
    r"%(?:\d+\$)?[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspn%]"
    r"|%\([A-Za-z_][A-Za-z0-9_]*\)[-+ 0#]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|\{[A-Za-z0-9_.]*(?:![rsa])?(?::[^{}]*)?\}")
_CHARSET = re.compile(rb"charset\s*=\s*([A-Za-z0-9._-]+)", re.IGNORECASE)
_NOT_PO = "the file is not a gettext catalog (.po, .pot)"

# A line holding strings: its prefixes (obsolete #~, previous #|) and keyword, none on a continuation line
# gettext's lexer reads `msgstr`, `[`, the number and `]` as tokens, spaces allowed between them
# ("msgstr [0]"); polib reads only "msgstr[0]", so such a keyword reaches it written so
_STRING_LINE = re.compile(r'^(\s*(?:#~\s*)?(#\|\s*)?(?:(msgctxt|msgid_plural|msgid|msgstr(?:\s*\[\s*\d+\s*\])?)\s*)?)"')
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"[ \t\r\f\v]*')
# gettext's escapes (po-lex.c, control_sequence): one character, or a byte of up to three octal
# digits or of \x and any hex digits (its low 8 bits); anything else after a backslash is refused
_ESCAPE = re.compile(r"\\(?:([abfnrtv\\\"])|([0-7]{1,3})|x([0-9A-Fa-f]+)|(.))")
_CHAR_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}
# what marks, in a string polib reads, a plural form folded into the one before it: EOT, which no
# string read here holds (gettext refuses it), then the form's index, EOT and its text
_FOLD = "\x04"
# what str.splitlines (so polib) breaks a line at and polib has no escape for
_BREAKS = re.compile("[\x1c\x1d\x1e\x85\u2028\u2029]")
# in what polib writes: a string line, and the control characters it leaves raw in one
_STRING_OUT = re.compile(r'^((?:#~ )?(?:#\| )?(?:msg\w+(?:\[\d+\])? )?)"(.*)"$', re.M)
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f]")


def nplurals(rule: str) -> int:
    found = re.search(r"nplurals\s*=\s*(\d+)", rule)
    return int(found.group(1)) if found else 2


def same_placeholders(source: str, translation: str, pattern: re.Pattern) -> bool:
    return Counter(pattern.findall(source)) == Counter(pattern.findall(translation))


def format_valid(entry: polib.POEntry, source: str, translation: str) -> bool:
    """What `msgfmt --check` asks of an entry flagged c-format or python-format: the same
    directives by gettext's grammar (a space is a flag: "93% of" holds `% o`), in the same order
    unless they are numbered (`%1$s`). The served pattern may be looser (the model's own)."""
    if not any(flag in entry.flags for flag in ("c-format", "python-format")):
        return True
    want, got = FORMAT_DIRECTIVES.findall(source), FORMAT_DIRECTIVES.findall(translation)
    return want == got or (any("$" in d for d in want) and Counter(want) == Counter(got))


class Catalog(FileDocument):
    def __init__(self, po: polib.POFile, kind: str):
        self.po = po
        # entries to translate, each with its texts' indices in `texts`: (entry, [msgid, msgid_plural?])
        self.todo: list[tuple[polib.POEntry, list[int]]] = []
        texts: list[str] = []
        for entry in po:
            if entry.obsolete or not entry.msgid or _translated(entry):
                continue
            sources = [entry.msgid] + ([entry.msgid_plural] if entry.msgid_plural else [])
            self.todo.append((entry, list(range(len(texts), len(texts) + len(sources)))))
            texts += sources
        super().__init__(kind, "text/x-gettext-translation; charset=utf-8", texts)

    def plural_forms(self, target: str) -> str:
        """The catalog's own Plural-Forms when its Language is the target, else the target's from the
        table. A catalog partly translated keeps its rule, which its translated entries follow: the
        CLDR rule that translation platforms write for Spanish, French or Portuguese has a third form
        for millions, where gettext's table has two."""
        own = self.po.metadata.get("Plural-Forms", "")
        if self.language() == target and re.search(r"nplurals\s*=\s*\d+\s*;\s*plural\s*=", own):
            return own
        return PLURAL_FORMS.get(target, DEFAULT_PLURAL_FORMS)

    def language(self) -> str:
        """The primary subtag of the header's Language ("es" of "es_ES", "sr@latin"), or ""."""
        return re.split(r"[-_@.]", self.po.metadata.get("Language", "").strip())[0].lower()

    def write(self, translations, target, placeholders=None, check=go_on) -> bytes:
        pattern = placeholders or FORMAT_DIRECTIVES
        rule = self.plural_forms(target)
        self.untranslated = 0
        for entry, indices in self.todo:
            check()
            # a msgid of whitespace alone ("\n") is its own translation
            pairs = [(self.texts[i], translations[i] if self.texts[i].strip() else self.texts[i]) for i in indices]
            if not all((t.strip() or not s.strip()) and same_placeholders(s, t, pattern) and format_valid(entry, s, t)
                       for s, t in pairs):
                self.untranslated += 1
                continue
            if entry.msgid_plural:
                singular, plural = (t for _, t in pairs)
                entry.msgstr_plural = {k: singular if k == 0 else plural for k in range(nplurals(rule))}
            else:
                entry.msgstr = pairs[0][1]
            if "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")          # first, as msgmerge writes it
        metadata = self.po.metadata
        if self.language() != target:               # a region the catalog names ("es_MX") stays
            metadata["Language"] = target
        metadata["Plural-Forms"] = rule
        metadata["Content-Type"] = "text/plain; charset=UTF-8"
        metadata.setdefault("Content-Transfer-Encoding", "8bit")
        metadata.setdefault("MIME-Version", "1.0")
        # a template's header is fuzzy until someone fills it; the fields msgfmt reads are filled now
        self.po.metadata_is_fuzzy = False
        self.po.encoding = "utf-8"
        return _escape_controls(str(self.po)).encode("utf-8")


def _translated(entry: polib.POEntry) -> bool:
    if entry.msgid_plural:
        return any(entry.msgstr_plural.values())
    return bool(entry.msgstr)


@dataclass
class _Line:
    """A line as gettext's lexer reads it: one of the catalog's, or, where a line holding strings
    ends in a backslash, that line and the next joined (po-lex.c's lex_getc drops a backslash and
    the newline after it wherever they are, in a string or an escape too: `msgid "Hola \\` on one
    line and `mundo"` on the next is msgid "Hola mundo")."""
    first: int                      # its first line's index in the catalog
    text: str                       # without the backslashes and newlines dropped, nor its line break
    end: str                        # its line break (str.splitlines', as polib reads it)
    joins: list[int] = field(default_factory=list)     # where in `text` each line after the first starts
    spliced: bool = False           # whether a backslash and newline were dropped (polib keeps them)

    @property
    def indices(self) -> range:
        return range(self.first, self.first + len(self.joins) + 1)

    def number(self, at: int) -> int:
        """The number of the catalog's line that `text[at]` is on."""
        return self.first + 1 + bisect.bisect_right(self.joins, at)


def _lines(lines: list[str]) -> list[_Line]:
    """The catalog's lines (split, ends kept) as gettext reads them; those holding no string are
    left as they are, comments among them (gettext would join a comment to the next line too)."""
    read: list[_Line] = []
    i = 0
    while i < len(lines):
        body = lines[i].splitlines()[0]
        line = _Line(i, body, lines[i][len(body):])
        if _STRING_LINE.match(body):
            while line.end == "\n" and line.text.endswith("\\"):
                line.text, line.spliced = line.text[:-1], True
                i += 1
                if i == len(lines):
                    line.end = ""   # the catalog's end
                    break
                body = lines[i].splitlines()[0]
                line.joins.append(len(line.text))
                line.text, line.end = line.text + body, lines[i][len(body):]
        read.append(line)
        i += 1
    return read


@dataclass
class _Field:
    """A keyword's strings (msgid "a" "b" and the lines continuing it) as read."""
    lines: list[int]                # its lines' indices, the keyword's first
    head: str                       # the keyword's line up to its first quote, as read
    keyword: str                    # msgid, msgstr[2]...
    pieces: list[str | bytes] = field(default_factory=list)    # text, and bytes from \ooo and \xhh
    polib_reads: str = ""           # what polib makes of it
    one_per_line: bool = True       # one string on each line, no line joined (polib reads no other)
    folded: int | None = None       # msgstr[n] whose n polib misreads (msgstr[10] as msgstr[1]): n
    respaced: bool = False          # its keyword written with spaces ("msgstr [0]"), which polib refuses


def _literals(line: _Line, at: int) -> list[re.Match]:
    """The strings `line` holds from its quote at `at` to its end (group 1: the content, escapes
    as written)."""
    found = []
    while at < len(line.text):
        literal = _LITERAL.match(line.text, at)
        if literal is None:
            what = "text after a string"
            if line.text[at] == '"':
                what = ("a string with no closing quote" if line.end in ("", "\n", "\r\n", "\r") else
                        f"a string cut by {line.end!r}, a line break to the catalog reader (polib)")
                at = len(line.text)     # the line it is cut on
            raise InvalidInput(f"{_NOT_PO}: line {line.number(at)} holds {what}: {line.text[:80]!r}")
        found.append(literal)
        at = literal.end()
    return found


def _pieces(line: _Line, literal: re.Match) -> list[str | bytes]:
    """A string's content as gettext reads it: text, and the bytes of its octal and hex escapes."""
    pieces: list[str | bytes] = []
    at = literal.start(1)
    for escape in _ESCAPE.finditer(line.text, at, literal.end(1)):
        pieces.append(line.text[at:escape.start()])
        char, octal, hexadecimal, unknown = escape.groups()
        if unknown is not None:
            raise InvalidInput(f"{_NOT_PO}: line {line.number(escape.start())} holds the escape "
                               f"{escape.group(0)!r}, which gettext does not know")
        if char is not None:
            pieces.append(_CHAR_ESCAPES[char])
        else:
            pieces.append(bytes([int(octal or hexadecimal, 8 if octal else 16) & 0xFF]))
        at = escape.end()
    pieces.append(line.text[at:literal.end(1)])
    return [p for p in pieces if p]


def _value(strings: _Field, charset: str) -> str:
    """A field's text: its escaped bytes, consecutive ones together (one UTF-8 character may be
    two escapes), in the catalog's charset."""
    number = strings.lines[0] + 1
    parts = []
    for is_bytes, run in itertools.groupby(strings.pieces, key=lambda p: isinstance(p, bytes)):
        run = list(run)
        try:
            parts.append(b"".join(run).decode(charset) if is_bytes else "".join(run))
        except UnicodeDecodeError:
            raise InvalidInput(f"{_NOT_PO}: line {number}: the bytes its escapes give are not {charset}") from None
    value = "".join(parts)
    if "\x04" in value:
        raise InvalidInput(f"{_NOT_PO}: line {number} holds the context separator EOT (\\004)")
    if _BREAKS.search(value):
        raise InvalidInput(f"{_NOT_PO}: line {number} holds {_BREAKS.search(value).group(0)!r}, a line break to "
                           f"the catalog reader (polib)")
    return value


def _as_polib_reads(text: str, charset: str, check: Check = go_on) -> str:
    """`text` with each string gettext reads otherwise than polib rewritten in the escapes polib
    knows (its lines but the first left blank, so that polib's line numbers stay); InvalidInput,
    naming the line, for what gettext refuses."""
    lines = text.splitlines(keepends=True)
    fields: list[_Field] = []
    current: _Field | None = None
    plural: bool | None = None      # whether the entry read has a msgid_plural (None: no msgid yet)
    for line in _lines(lines):
        check()
        found = _STRING_LINE.match(line.text)
        if found is None:
            if line.text.strip():
                current = None      # a comment or a keyword polib refuses: no string continues past it
            continue
        head, previous, keyword = found.groups()
        literals = _literals(line, found.end() - 1)
        if keyword:
            spaced, keyword = keyword, re.sub(r"\s+", "", keyword)
            head = head.replace(spaced, keyword)
            number = line.first + 1
            # polib reads msgstr[n]'s first digit alone (int(keyword[7])): that form is folded into the one before
            form = int(keyword[7:-1]) if keyword.startswith("msgstr[") and not previous else None
            folded = form if form is not None and form != int(keyword[7]) else None
            if not previous:
                if keyword == "msgid":
                    plural = False
                elif keyword == "msgid_plural":
                    plural = True
                elif keyword.startswith("msgstr[") and plural is False:
                    raise InvalidInput(f"{_NOT_PO}: line {number} holds {keyword} in an entry without msgid_plural")
                elif keyword == "msgstr" and plural:
                    raise InvalidInput(f"{_NOT_PO}: line {number} holds msgstr in an entry with msgid_plural, "
                                       f"where msgstr[0], msgstr[1]... belong")
            if folded is not None and not (current and current.keyword.startswith("msgstr[")):
                raise InvalidInput(f"{_NOT_PO}: line {number} holds {keyword} not after the entry's other forms "
                                   f"(msgstr[0], msgstr[1]...)")
            current = _Field([], head, keyword, folded=folded, respaced=keyword != spaced)
            fields.append(current)
        elif current is None:
            continue                # a string continuing nothing: polib refuses it
        current.lines += line.indices
        current.one_per_line &= len(literals) == 1 and not line.spliced
        current.polib_reads += "".join(polib.unescape(literal.group(1)) for literal in literals)
        current.pieces += [p for literal in literals for p in _pieces(line, literal)]
    out = [line.splitlines()[0] for line in lines]
    for f in fields:
        value = _value(f, charset)
        if f.folded is not None:
            # a string continuing the form before (polib appends it there), which _unfold takes out
            prefix = f.head[:f.head.index(f.keyword)]
            out[f.lines[0]] = f'{prefix}"{_FOLD}{f.folded}{_FOLD}{polib.escape(value)}"'
        elif f.one_per_line and f.polib_reads == value and not f.respaced:
            continue
        else:
            out[f.lines[0]] = f'{f.head}"{polib.escape(value)}"'
        for i in f.lines[1:]:
            out[i] = ""
    return "\n".join(out)


def _unfold(po: polib.POFile) -> None:
    """The plural forms `_as_polib_reads` folded into the form before them, each put in its place."""
    for entry in po:
        for index, text in list(entry.msgstr_plural.items()):
            text, *folded = text.split(_FOLD)
            entry.msgstr_plural[index] = text
            for form, form_text in zip(folded[::2], folded[1::2]):
                entry.msgstr_plural[int(form)] = form_text


def _escape_controls(po: str) -> str:
    r"""polib's catalog with the control characters it leaves raw in strings escaped (\a, \ooo):
    the same strings, in a text that reads as text."""
    if not _CONTROL.search(po):
        return po

    def escaped(string: re.Match) -> str:
        body = _CONTROL.sub(lambda c: "\\a" if c.group(0) == "\a" else f"\\{ord(c.group(0)):03o}", string.group(2))
        return f'{string.group(1)}"{body}"'
    return _STRING_OUT.sub(escaped, po)


def _charset(data: bytes, declared: str | None) -> str:
    """The encoding `decode` read the catalog's text in, which its escaped bytes are in too."""
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return codecs.lookup(declared).name if declared else "utf-8"
    except LookupError:
        return "utf-8"


def read(data: bytes, limits: Limits, check: Check = go_on) -> Catalog:
    """The catalog; `check` is called at each line read here and each entry written (polib's own
    parse and writing, a second or so for a catalog of 5 MB, are not stopped)."""
    declared = _CHARSET.search(data[:4096])
    declared = declared.group(1).decode("ascii") if declared else None
    text = decode(data, declared)
    # polib.pofile takes a path or a catalog's text, and opens a path it is given: a catalog
    # always has line breaks, which no path sent here could hold
    if "\n" not in text.strip():
        raise InvalidInput(f"{_NOT_PO}: it has one line")
    text = _as_polib_reads(text, _charset(data, declared), check)
    try:
        po = polib.pofile(text, encoding="utf-8")
    except (OSError, ValueError) as e:
        raise InvalidInput(f"{_NOT_PO}: {e}") from None
    _unfold(po)
    return Catalog(po, "po")
