"""gettext catalogs (service/text/files/gettext.py) read as GNU gettext reads them: every escape
po-lex.c knows, msgids written back unchanged, and what msgfmt refuses refused, naming the line."""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess

import pytest

from attnmt.service.errors import InvalidInput
from attnmt.service.text import files

LIMITS = files.Limits(max_bytes=10_000, max_entry_chars=2000, max_entry_lines=4)
HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'      # lines 1-4

# \ooo takes three octal digits at most ("\1011" is "A1"), \x all the hex digits there are;
# a UTF-8 character may be two escapes, in two strings
ESCAPES = HEADER + r'''msgid "campana\a, \x41\1011, tab\t, \"cita\" \\ fin\n"
msgstr ""

#, c-format
msgid "caf\xc3" "\xa9: %s\b\f\v\r"
msgstr ""
'''


def msgids(po: bytes, tmp_path) -> set[str]:
    """The msgids msgfmt compiles `po` into (the keys a program looks its messages up by)."""
    (tmp_path / "a.po").write_bytes(po)
    subprocess.run(["msgfmt", "-o", str(tmp_path / "a.mo"), str(tmp_path / "a.po")], check=True)
    with open(tmp_path / "a.mo", "rb") as mo:
        return set(gettext.GNUTranslations(mo)._catalog)


def test_every_escape_gettext_reads_is_read_and_the_msgids_come_back_unchanged(tmp_path):
    document = files.read("es.po", ESCAPES.encode(), LIMITS)
    assert document.texts == ['campana\a, AA1, tab\t, "cita" \\ fin\n', "café: %s\b\f\v\r"]
    out = document.write(["bell\a, AA1, tab\t, \"quote\" \\ end\n", "coffee: %s\b\f\v\r"], "en")
    assert document.untranslated == 0
    assert 'msgid "campana\\a, AA1, tab\\t, \\"cita\\" \\\\ fin\\n"\nmsgstr "bell\\a, ' in out.decode()
    assert [e.msgid for e in files.read("es_en.po", out, LIMITS).po] == document.texts     # read back
    if shutil.which("msgfmt"):
        assert msgids(out, tmp_path) == msgids(ESCAPES.encode(), tmp_path)


def test_a_catalogs_escaped_bytes_are_in_its_charset():
    latin1 = ESCAPES.replace("UTF-8", "ISO-8859-1").replace(r'"caf\xc3" "\xa9', r'"caf\351').replace("cita", "cité")
    document = files.read("es.po", latin1.encode("latin-1"), LIMITS)
    assert document.texts == ['campana\a, AA1, tab\t, "cité" \\ fin\n', "café: %s\b\f\v\r"]


@pytest.mark.parametrize("entry, line, words", [
    ('msgid "Hola\nmsgstr ""\n', 5, "a string with no closing quote"),
    ('msgid "Hola"\nmsgstr "Hello\n', 6, "a string with no closing quote"),
    ('msgid ""\n"Hola\\"\nmsgstr ""\n', 6, "a string with no closing quote"),          # the quote escaped
    ('msgid "Hola" x\nmsgstr ""\n', 5, "text after a string"),
    ('msgid "Hola\\q"\nmsgstr ""\n', 5, "the escape '\\\\q', which gettext does not know"),
    ('msgid "Hola\\x"\nmsgstr ""\n', 5, "the escape '\\\\x', which gettext does not know"),
    ('msgid "a\\004b"\nmsgstr ""\n', 5, "the context separator EOT"),
    ('msgid "caf\\xe9"\nmsgstr ""\n', 5, "the bytes its escapes give are not utf-8"),
])
def test_a_string_gettext_refuses_is_refused_naming_its_line(entry, line, words):
    with pytest.raises(InvalidInput, match=re.escape(f"not a gettext catalog (.po, .pot): line {line}")) as refused:
        files.read("es.po", (HEADER + entry).encode(), LIMITS)
    assert words in str(refused.value)


@pytest.mark.parametrize("entry, line, words", [
    ('msgid "Hola"\nmsgstr[0] "Hi"\n', 6, "msgstr[0] in an entry without msgid_plural"),
    ('msgid "Hola"\nmsgstr[0] ""\n', 6, "msgstr[0] in an entry without msgid_plural"),
    ('#~ msgid "Hola"\n#~ msgstr[0] "Hi"\n', 6, "msgstr[0] in an entry without msgid_plural"),
    ('msgid "%d archivo"\nmsgid_plural "%d archivos"\nmsgstr "%d file"\n', 7, "msgstr in an entry with msgid_plural"),
])
def test_a_plural_form_out_of_place_is_refused_as_msgfmt_refuses_it(entry, line, words, tmp_path):
    """polib read msgstr[0] with no msgid_plural and dropped its translation when writing; msgfmt
    refuses the catalog ("missing 'msgid_plural' section")."""
    with pytest.raises(InvalidInput, match=re.escape(f"line {line} holds {words}")):
        files.read("es.po", (HEADER + entry).encode(), LIMITS)
    if shutil.which("msgfmt"):
        (tmp_path / "a.po").write_text(HEADER + entry)
        assert subprocess.run(["msgfmt", "-o", "/dev/null", str(tmp_path / "a.po")], capture_output=True).returncode


def test_strings_polib_reads_like_gettext_reach_it_as_written():
    """Several strings on one line (polib refuses them) are joined; CRLF, obsolete entries and
    previous msgids keep working, their escapes read by gettext's rules."""
    source = (HEADER + '#| msgid "vie\\x6ao"\nmsgid "nuevo" "\\a"\nmsgstr ""\n\n#~ msgid "obs\\a"\n#~ msgstr "x\\a"\n')
    document = files.read("es.po", source.replace("\n", "\r\n").encode(), LIMITS)
    assert document.texts == ["nuevo\a"]
    out = document.write(["new\a"], "en").decode()
    assert '#, fuzzy\n#| msgid "viejo"\nmsgid "nuevo\\a"\nmsgstr "new\\a"' in out
    assert '#~ msgid "obs\\a"\n#~ msgstr "x\\a"' in out
