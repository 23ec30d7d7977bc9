""".html (service/text/files/html.py): a page that fits one entry is that entry as sent; a
larger one is cut into entries at its elements' edges, each within the documents' limits,
and written back with every translation in its place and the rest of the markup as sent."""

from __future__ import annotations

import re

import lxml.html
import pytest
from lxml import etree

from attnmt.service.errors import InvalidInput
from attnmt.service.text import documents, files

# the server's defaults: max_file_bytes, max_document_chars, max_document_sentences
LIMITS = files.Limits(max_bytes=5 * 2**20, max_entry_chars=50_000, max_entry_lines=32, max_entry_sentences=256)
PARAGRAPH = ('<p class="texto">Este es el párrafo {i}. Tiene <b>negrita {i}</b> y un '
             '<a href="https://example.com/{i}">enlace</a> al final.</p>\n')
HEAD = ("<!DOCTYPE html>\n<html lang=es><head><meta charset=iso-8859-1><title>Manual de uso</title>\n"
        "<script>if (a < b && c > d) { document.write('<p>no</p>'); }</script>\n"
        "<style>p > b { color: red }</style></head>\n")


def page(body: str) -> str:
    return f"{HEAD}<body>\n<!-- generado por la mano -->\n{body}</body></html>\n"


def paragraphs(n: int) -> str:
    return "".join(PARAGRAPH.format(i=i) for i in range(n))


def sentence_counts(document) -> list[int]:
    """Each entry read as the core reads it before translating (server/files.py): refused over the limits."""
    return [len(documents.read(text, True, True, "es", True, LIMITS.max_entry_chars, LIMITS.max_entry_sentences,
                               f"the file's text {i}").spans) for i, text in enumerate(document.texts)]


def upper(entry: str) -> str:
    """A translation that changes every word and no tag: the text between tags upper-cased."""
    return re.sub(r"(?<=>)[^<]+|^[^<]+", lambda m: m.group().upper(), entry)


def tree(markup: bytes | str) -> str:
    return etree.tostring(lxml.html.document_fromstring(markup), encoding="unicode")


def expected_upper(markup: str) -> str:
    """The page as lxml reads it with its text upper-cased, scripts, styles and comments aside."""
    root = lxml.html.document_fromstring(markup)
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag not in ("script", "style"):
            element.text = element.text and element.text.upper()
        element.tail = element.tail and element.tail.upper()
    return etree.tostring(root, encoding="unicode")


def test_a_large_page_is_cut_at_paragraphs_into_entries_within_the_limits():
    source = page(paragraphs(2000))
    assert len(source) > 200_000
    document = files.read("manual.html", source.encode("latin-1"), LIMITS)
    assert document.html and len(document.texts) > 4
    assert document.texts[0] == "<title>Manual de uso</title>"
    body = document.texts[1:]
    assert all(t.startswith("<p") and t.endswith("</p>") for t in body)
    assert sum(t.count("<p ") for t in body) == 2000 and sum(t.count("</p>") for t in body) == 2000
    assert all(len(t) <= LIMITS.max_entry_chars for t in document.texts)
    assert max(sentence_counts(document)) <= LIMITS.max_entry_sentences
    # what has no text stays between the entries, as sent
    assert not any("<script>" in t or "<!--" in t or "<meta" in t for t in document.texts)


def test_a_page_written_back_unchanged_is_the_page_as_sent_in_utf8():
    source = page(paragraphs(2000))
    document = files.read("manual.html", source.encode("latin-1"), LIMITS)
    out = document.write(list(document.texts), "en")
    assert out == source.replace("charset=iso-8859-1", "charset=utf-8").encode("utf-8")
    assert tree(out) == tree(source.replace("iso-8859-1", "utf-8"))


def test_each_translation_lands_in_its_paragraphs_and_every_tag_comment_and_script_stays():
    source = page(paragraphs(2000))
    document = files.read("manual.html", source.encode("latin-1"), LIMITS)
    out = document.write([upper(t) for t in document.texts], "en").decode("utf-8")
    assert tree(out) == expected_upper(source.replace("iso-8859-1", "utf-8"))
    assert "<title>MANUAL DE USO</title>" in out
    for i in (0, 1, 999, 1999):
        assert (f'<p class="texto">ESTE ES EL PÁRRAFO {i}. TIENE <b>NEGRITA {i}</b> Y UN '
                f'<a href="https://example.com/{i}">ENLACE</a> AL FINAL.</p>') in out
    assert out.count("<b>") == out.count("</b>") == 2000 and out.count('<a href="https://example.com/') == 2000
    assert "<script>if (a < b && c > d) { document.write('<p>no</p>'); }</script>" in out
    assert "<!-- generado por la mano -->" in out and "<style>p > b { color: red }</style>" in out


def test_a_page_that_fits_one_entry_is_that_entry_as_sent():
    source = page(paragraphs(100))                  # 200 sentences, 15,000 characters
    document = files.read("manual.htm", source.encode("latin-1"), LIMITS)
    assert document.texts == [source]
    translated = upper(source)
    assert document.write([translated], "en") == translated.replace("iso-8859-1", "utf-8").encode("utf-8")


def test_a_short_page_of_too_many_sentences_is_cut_too():
    source = page("".join(f"<li>Paso {i}. Pulse el botón.</li>\n" for i in range(400)).join(("<ol>\n", "</ol>\n")))
    assert len(source) < LIMITS.max_entry_chars
    document = files.read("pasos.html", source.encode("latin-1"), LIMITS)
    assert len(document.texts) > 2 and max(sentence_counts(document)) <= LIMITS.max_entry_sentences
    assert all(t.startswith("<li>") and t.endswith("</li>") for t in document.texts[1:])   # the <ol> cut through
    assert document.write(list(document.texts), "en").decode() == source.replace("iso-8859-1", "utf-8")


def test_a_page_wrapped_in_a_form_and_a_table_is_cut_inside_them():
    rows = "".join(f"<tr><td>Fila {i}.</td><td><i>Celda</i> {i}. Otra frase.</td></tr>\n" for i in range(1500))
    source = page(f"<form action=/enviar><div id=todo>\n{paragraphs(500)}<table>\n{rows}</table></div></form>\n")
    assert len(source) > 2 * LIMITS.max_entry_chars
    document = files.read("web.html", source.encode("latin-1"), LIMITS)
    assert max(sentence_counts(document)) <= LIMITS.max_entry_sentences
    # a cell is an entry of its own: parsed alone, <tr> or <td> would not be a table's
    cells = [t for t in document.texts if "Fila" in t or "Celda" in t]
    assert len(cells) == 3000 and not any("<t" in t for t in cells)
    out = document.write([upper(t) for t in document.texts], "en").decode("utf-8")
    assert tree(out) == expected_upper(source.replace("iso-8859-1", "utf-8"))


def test_paragraphs_a_formatting_element_runs_through_stay_in_one_entry():
    # The <b> left open is reopened in the next paragraph: cut between them, the second would
    # lose it. Entries of 300 characters: two paragraphs each.
    limits = files.Limits(max_bytes=2**20, max_entry_chars=300, max_entry_lines=4)
    joined = "<p>Antes <b>abierto.<p>Sigue en negrita.</b> Ya no.</p>"
    source = page(paragraphs(10) + joined + "\n" + paragraphs(10))
    document = files.read("mal.html", source.encode("latin-1"), limits)
    assert len(document.texts) == 12 and any(t.startswith(joined) for t in document.texts)
    assert document.write(list(document.texts), "en").decode() == source.replace("iso-8859-1", "utf-8")


def test_a_text_longer_than_an_entry_without_a_tag_inside_is_refused_by_the_documents_limit():
    source = page("<p>Intro.</p>\n<p>" + "palabra " * 7_500 + "</p>\n<p>Fin.</p>\n")
    document = files.read("largo.html", source.encode("latin-1"), LIMITS)
    assert any(len(t) > LIMITS.max_entry_chars for t in document.texts)
    with pytest.raises(InvalidInput, match=r"the file's text \d+ has \d+ characters, over the limit of 50000 "
                                           r"\(max_document_chars\)"):
        sentence_counts(document)


def test_a_page_over_the_html_cap_is_refused_before_it_is_parsed():
    capped = files.Limits(max_bytes=5 * 2**20, max_entry_chars=50_000, max_entry_lines=32, max_html_bytes=1000)
    page = ("<p>Hola.</p>" * 100).encode()
    with pytest.raises(InvalidInput, match=re.escape("1200 bytes, over the limit of 1000 (max_html_file_bytes)")):
        files.read("a.html", page, capped)
    assert files.read("a.html", page[:990], capped).texts
