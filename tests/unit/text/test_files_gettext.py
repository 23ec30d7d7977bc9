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


# a backslash ending a line joins it to the next, in a string, in an escape (\2 then 63 on the next
# line is \263, the second byte of "ó") or after a string: gettext drops the backslash and the newline
CONTINUED = HEADER + r'''msgid "Hola \
mundo"
msgstr "Hello \
world"

#, c-format
msgid "Adi\303\2\
63s, %s" \
"."
msgstr ""
'''

# a language of 12 plural forms (nplurals may be any number): msgstr[0] to msgstr[11]
TWELVE = HEADER[:-1] + '"Plural-Forms: nplurals=12; plural=n%12;\\n"\n\n'
FORMS = {k: f"%d form{k}" for k in range(12)}
EMPTY = dict.fromkeys(range(12), "")


def plural(msgid: str, forms: dict[int, str], obsolete: bool = False) -> str:
    lines = [f'msgid "{msgid}"', f'msgid_plural "{msgid}s"'] + [f'msgstr[{k}] "{t}"' for k, t in forms.items()]
    return "".join(("#~ " if obsolete else "") + line + "\n" for line in lines) + "\n"


def compiled(po: bytes, tmp_path, *options: str) -> dict:
    """What msgfmt compiles `po` into: each msgid (msgid and form, for a plural one) to its text."""
    (tmp_path / "a.po").write_bytes(po)
    subprocess.run(["msgfmt", *options, "-o", str(tmp_path / "a.mo"), str(tmp_path / "a.po")], check=True)
    with open(tmp_path / "a.mo", "rb") as mo:
        return gettext.GNUTranslations(mo)._catalog


def msgids(po: bytes, tmp_path) -> set[str]:
    """The msgids msgfmt compiles `po` into (the keys a program looks its messages up by)."""
    return set(compiled(po, tmp_path))


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
    # a backslash ending a line joins it to the next: the line named is the one the fault is on
    ('msgid "Hola \\\nmun\\qdo"\nmsgstr ""\n', 6, "the escape '\\\\q', which gettext does not know"),
    ('msgid "Hola \\\nmundo\nmsgstr ""\n', 6, "a string with no closing quote"),
    ('msgid "Hola \\\nmundo"\nmsgstr ""\n\nmsgid "x\\q"\nmsgstr ""\n', 9, "the escape '\\\\q'"),
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
    ('msgid "%d archivo"\nmsgid_plural "%d archivos"\nmsgstr[10] "%d file"\n', 7,
     "msgstr[10] not after the entry's other forms"),
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


def test_a_backslash_ending_a_line_joins_it_to_the_next_as_gettext_reads_it(tmp_path):
    """polib refused it; gettext drops the backslash and the newline."""
    document = files.read("es.po", CONTINUED.encode(), LIMITS)
    assert document.texts == ["Adiós, %s."]
    out = document.write(["Goodbye, %s."], "en")
    assert 'msgid "Hola mundo"\nmsgstr "Hello world"' in out.decode()
    assert '#, fuzzy, c-format\nmsgid "Adiós, %s."\nmsgstr "Goodbye, %s."' in out.decode()
    if shutil.which("msgfmt"):
        # the msgids msgfmt reads in the catalog, its last entry translated (it compiles no other)
        translated = CONTINUED.removesuffix('msgstr ""\n') + 'msgstr "Goodbye, %s."\n'
        assert set(compiled(out, tmp_path, "--check", "--use-fuzzy")) == msgids(translated.encode(), tmp_path)
        assert compiled(out, tmp_path, "--check")["Hola mundo"] == "Hello world"


def test_plural_forms_from_msgstr_10_on_keep_their_own_translations(tmp_path):
    """polib reads msgstr[10] and msgstr[11] as msgstr[1] (the one character after `msgstr[`): the
    last of them overwrote msgstr[1], and neither was written back."""
    source = TWELVE + plural("%d gato", EMPTY) + plural("%d perro", FORMS, obsolete=True)
    document = files.read("xx.po", source.encode(), LIMITS)
    assert document.texts == ["%d gato", "%d gatos"]
    assert [e.msgstr_plural for e in document.po] == [EMPTY, FORMS]
    out = document.write(["%d cat", "%d cats"], "en")
    assert '#~ msgstr[9] "%d form9"\n#~ msgstr[10] "%d form10"\n#~ msgstr[11] "%d form11"\n' in out.decode()
    assert [e.msgstr_plural for e in files.read("xx_en.po", out, LIMITS).po] == [{0: "%d cat", 1: "%d cats"}, FORMS]
    if shutil.which("msgfmt"):
        compiled(source.encode(), tmp_path, "--check")
        compiled(out, tmp_path, "--check")


def test_a_plural_form_keyword_with_spaces_is_read_as_msgfmt_reads_it(tmp_path):
    """msgfmt reads `msgstr [0]` (its lexer takes `[`, the number and `]` as tokens); polib refused
    the catalog ("unescaped double quote found")."""
    source = (HEADER + 'msgid "%d gato"\nmsgid_plural "%d gatos"\nmsgstr [0] ""\nmsgstr [ 1 ] ""\n\n'
              'msgid "%d perro"\nmsgid_plural "%d perros"\nmsgstr [0] "%d dog"\nmsgstr[1] "%d dogs"\n')
    document = files.read("es.po", source.encode(), LIMITS)
    assert document.texts == ["%d gato", "%d gatos"]
    assert document.po[1].msgstr_plural == {0: "%d dog", 1: "%d dogs"}
    out = document.write(["%d cat", "%d cats"], "en")
    assert 'msgstr[0] "%d cat"\nmsgstr[1] "%d cats"' in out.decode()
    if shutil.which("msgfmt"):
        assert compiled(source.encode(), tmp_path)[("%d perro", 1)] == "%d dogs"
        assert compiled(out, tmp_path, "--use-fuzzy")[("%d gato", 1)] == "%d cats"


def test_a_translated_entry_of_more_than_ten_forms_is_compiled_with_each_form(tmp_path):
    source = TWELVE + plural("%d archivo", FORMS) + plural("%d gato", EMPTY)
    document = files.read("xx.po", source.encode(), LIMITS)
    assert document.po[0].msgstr_plural == FORMS
    out = document.write(["%d cat", "%d cats"], "en")
    if shutil.which("msgfmt"):
        # not --check: the header written is the target's, of 2 forms, and the entry keeps its 12
        forms = {("%d archivo", k): text for k, text in FORMS.items()}
        assert forms.items() <= compiled(source.encode(), tmp_path).items()
        assert forms.items() <= compiled(out, tmp_path).items()


# a Spanish catalog partly translated on a platform that writes CLDR's rule (a form for millions)
MILLIONS = ('msgid ""\nmsgstr ""\n"Language: es_ES\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
            '"Plural-Forms: nplurals=3; plural=n == 1 ? 0 : n != 0 && n % 1000000 == 0 ? 1 : 2;\\n"\n\n')


def test_a_catalog_in_the_target_language_keeps_its_plural_forms(tmp_path):
    translated = {0: "%d archivo", 1: "%d de archivos", 2: "%d archivos"}
    source = MILLIONS + plural("%d file", translated) + plural("%d cat", {0: "", 1: "", 2: ""})
    document = files.read("es.po", source.encode(), LIMITS)
    out = document.write(["%d gato", "%d gatos"], "es")
    assert "nplurals=3; plural=n == 1 ? 0 : n != 0 && n % 1000000 == 0 ? 1 : 2;" in out.decode()
    assert '"Language: es_ES\\n"' in out.decode()
    assert files.read("es.po", out, LIMITS).po[1].msgstr_plural == {0: "%d gato", 1: "%d gatos", 2: "%d gatos"}
    if shutil.which("msgfmt"):
        compiled(out, tmp_path, "--check")
    # a catalog of another language, or a template, gets the target's rule
    english = source.replace("es_ES", "en")
    out = files.read("en.po", english.encode(), LIMITS).write(["a", "b"], "es").decode()
    assert "nplurals=2; plural=(n != 1);" in out
