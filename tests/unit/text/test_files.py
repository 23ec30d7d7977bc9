"""The file formats (service/text/files/): what each reads as texts, what it writes back,
and what it refuses."""

from __future__ import annotations

import re

import pytest

from attnmt.service.errors import InvalidInput
from attnmt.service.text import files
from attnmt.service.text.files.subtitles import reflow

LIMITS = files.Limits(max_bytes=10_000, max_entry_chars=200, max_entry_lines=4)


def test_a_text_file_is_cut_into_paragraphs_that_join_back():
    text = "Uno.\nDos.\n\nTres.\r\n" + "\n".join(f"Línea {i}." for i in range(10)) + "\n" + "palabra " * 60
    document = files.read("notas.txt", text.encode(), LIMITS)
    assert "".join(document.texts) == text
    assert document.texts[0] == "Uno.\nDos.\n\n"
    assert all(len(t) <= LIMITS.max_entry_chars and t.count("\n") <= LIMITS.max_entry_lines for t in document.texts)
    assert document.write([t.upper() for t in document.texts], "en") == text.upper().encode()


def test_the_encoding_is_detected_when_not_utf8():
    text = "¿Dónde está la estación? Está allí, señor, junto al río.\n" * 3
    for encoding in ("latin-1", "utf-16", "utf-8-sig"):
        assert "".join(files.read("a.txt", text.encode(encoding), LIMITS).texts) == text


def test_html_is_one_entry_written_as_utf8():
    page = "<html><head><meta charset=iso-8859-1></head><body><p>Camión</p></body></html>"
    document = files.read("a.HTM", page.encode("latin-1"), LIMITS)
    assert document.html and document.texts == [page]
    assert document.write([page.replace("Camión", "Truck")], "en").decode() == page.replace(
        "Camión", "Truck").replace("iso-8859-1", "utf-8")


def test_reflow_spreads_words_over_the_lines():
    assert reflow("aaa bbb ccc ddd", 2) == ["aaa bbb", "ccc ddd"]
    assert reflow("one", 3) == ["one"]
    assert reflow("a b c", 3) == ["a", "b", "c"]
    assert reflow('<font color="red">Hola</font> mundo', 2) == ['<font color="red">Hola</font>', "mundo"]
    assert reflow("Tom & Jerry <3", 1) == ["Tom & Jerry <3"]            # a bare `<` stays with its word


def test_subrip_keeps_numbers_timings_and_line_ends():
    source = ("1\r\n00:00:01,000 --> 00:00:02,500\r\nHola\r\nmundo.\r\n\r\n"
              "5\r\n00:00:03,000 --> 00:00:04,000\r\nAdiós\r\n")
    document = files.read("a.srt", source.encode("cp1252"), LIMITS)
    assert document.texts == ["Hola mundo.", "Adiós"] and document.html
    out = document.write(["Hello there world.", "Bye"], "en").decode()
    assert out == "1\r\n00:00:01,000 --> 00:00:02,500\r\nHello there\r\nworld.\r\n\r\n5\r\n00:00:03,000 --> " \
                  "00:00:04,000\r\nBye\r\n"


def test_webvtt_keeps_its_blocks_and_voices():
    source = ("WEBVTT\n\nNOTE nota\n\nuno\n00:01.000 --> 00:04.000 line:0\n<v Ana>Hola, ¿cómo\nestás?\n\n"
              "00:04.500 --> 00:06.000\nAdiós.\n")
    document = files.read("a.vtt", source.encode(), LIMITS)
    assert document.texts == ["Hola, ¿cómo estás?", "Adiós."]
    out = document.write(["Hello, how are you?", "Bye."], "en").decode()
    assert "NOTE nota" in out and "uno\n00:00:01.000 --> 00:00:04.000 line:0\n<v Ana>Hello, how\nare you?" in out


CATALOG = r'''msgid ""
msgstr ""
"Language: es\n"
"Content-Type: text/plain; charset=ISO-8859-1\n"

#: a.c:1
#, c-format
msgctxt "menu"
msgid "Abrir %s"
msgstr ""

#, c-format
msgid "%d archivo"
msgid_plural "%d archivos"
msgstr[0] ""
msgstr[1] ""

msgid "Hola {name}"
msgstr ""

msgid "Guardar"
msgstr "Save"

#~ msgid "Viejo"
#~ msgstr ""
'''


def test_a_catalog_fills_its_untranslated_entries():
    document = files.read("es.po", CATALOG.encode("latin-1"), LIMITS)
    assert document.texts == ["Abrir %s", "%d archivo", "%d archivos", "Hola {name}"]
    out = document.write(["Open %s", "%d file", "%d files", "Hello"], "fr").decode()
    assert document.untranslated == 1                     # "Hello" lost {name}: left untranslated
    assert '"Language: fr\\n"' in out and '"Plural-Forms: nplurals=2; plural=(n > 1);\\n"' in out
    assert '"Content-Type: text/plain; charset=UTF-8\\n"' in out
    assert re.search(r'#, fuzzy, c-format\nmsgctxt "menu"\nmsgid "Abrir %s"\nmsgstr "Open %s"', out)
    assert 'msgstr[0] "%d file"\nmsgstr[1] "%d files"' in out
    assert 'msgid "Hola {name}"\nmsgstr ""' in out and 'msgstr "Save"' in out and '#~ msgid "Viejo"' in out


FORMATS = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#, c-format
msgid "%s: 93%% of %d files"
msgstr ""

#, c-format
msgid "ARG1 %% ARG2"
msgstr ""

#, c-format
msgid "%s, %d"
msgstr ""

msgid "\\n"
msgstr ""
"""


def test_a_catalog_keeps_what_msgfmt_checks():
    """`msgfmt --check` reads a c-format entry by gettext's grammar: "93% of" in a translation
    would be the directive `% o`; the directives keep their order; a newline alone is copied."""
    document = files.read("en.po", FORMATS.encode(), LIMITS)
    assert document.texts == ["%s: 93%% of %d files", "ARG1 %% ARG2", "%s, %d", "\n"]
    out = document.write(["%s: 93% de %d archivos", "ARG1 %%ARG2", "%d, %s", ""], "es").decode()
    assert document.untranslated == 2          # "% d" where "%% o" was; the order of %s and %d swapped
    assert 'msgid "ARG1 %% ARG2"\nmsgstr "ARG1 %%ARG2"' in out
    assert 'msgid "\\n"\nmsgstr "\\n"' in out
    good = files.read("en.po", FORMATS.encode(), LIMITS)
    good.write(["%s: 93%% de %d archivos", "ARG1 %% ARG2", "%s, %d", "\n"], "es")
    assert good.untranslated == 0


@pytest.mark.parametrize("name, data, words", [
    ("a.pdf", b"%PDF", "file format not supported (.pdf); served: .txt, .html, .htm, .srt, .vtt, .po, .pot"),
    ("a.txt", b"", "empty"),
    ("a.txt", b" \n\n", "empty"),
    ("a.txt", b"x" * 10_001, "max_file_bytes"),
    ("a.txt", b"\x00\x01\x02\x03binary\x00" * 40, "do not decode"),
    ("a.po", b"/etc/passwd", "one line"),
    ("a.po", b"no\nes un catalogo\n", "not a gettext catalog"),
    ("a.srt", b"1\nno timing\n", "not SubRip"),
    ("a.vtt", b"00:01.000 --> 00:02.000\nno header\n", "not WebVTT"),
])
def test_what_is_refused(name, data, words):
    with pytest.raises(InvalidInput, match=re.escape(words)):
        files.read(name, data, LIMITS)


def test_translated_names():
    assert files.translated_name("guía.po", "en") == "guía_en.po"
    assert files.translated_name("../../etc/x y.TXT", "en") == "xy_en.txt"
    assert files.translated_name('a"b.srt', "es") == "ab_es.srt"
