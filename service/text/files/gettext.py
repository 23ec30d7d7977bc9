"""gettext catalogs (.po, .pot) through polib (MIT).

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
"""

from __future__ import annotations

import re
from collections import Counter

import polib

from attnmt.service.errors import InvalidInput
from attnmt.service.text.files.base import FileDocument, Limits
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

    def write(self, translations, target, placeholders=None) -> bytes:
        pattern = placeholders or FORMAT_DIRECTIVES
        rule = PLURAL_FORMS.get(target, DEFAULT_PLURAL_FORMS)
        self.untranslated = 0
        for entry, indices in self.todo:
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
        metadata["Language"] = target
        metadata["Plural-Forms"] = rule
        metadata["Content-Type"] = "text/plain; charset=UTF-8"
        metadata.setdefault("Content-Transfer-Encoding", "8bit")
        metadata.setdefault("MIME-Version", "1.0")
        # a template's header is fuzzy until someone fills it; the fields msgfmt reads are filled now
        self.po.metadata_is_fuzzy = False
        self.po.encoding = "utf-8"
        return str(self.po).encode("utf-8")


def _translated(entry: polib.POEntry) -> bool:
    if entry.msgid_plural:
        return any(entry.msgstr_plural.values())
    return bool(entry.msgstr)


def read(data: bytes, limits: Limits) -> Catalog:
    declared = _CHARSET.search(data[:4096])
    text = decode(data, declared.group(1).decode("ascii") if declared else None)
    # polib.pofile takes a path or a catalog's text, and opens a path it is given: a catalog
    # always has line breaks, which no path sent here could hold
    if "\n" not in text.strip():
        raise InvalidInput("the file is not a gettext catalog (.po, .pot): it has one line")
    try:
        po = polib.pofile(text, encoding="utf-8")
    except (OSError, ValueError) as e:
        raise InvalidInput(f"the file is not a gettext catalog (.po, .pot): {e}") from None
    return Catalog(po, "po")
