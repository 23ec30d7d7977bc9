"""A .docx and an .odt that LibreOffice Writer made (tests/data/office/, rebuilt by
make_fixtures.sh) through the native `/v1/translate_file` of a real server with the bundled
es->en Transformer, as a user would send them. What comes back is read by other readers than
ours, python-docx and odfpy: every paragraph, table cell and the page header in English; the
bold, italic and link runs around the English words aligned to theirs; the table as it was;
every zip entry without text byte for byte as LibreOffice wrote it, in its order."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

import docx
import httpx
import pytest
from odf import opendocument, style, table, teletype, text

from architecture.test_layout import imports, sources
from attnmt.service.text.language import detect
from conftest import REPO, RunningServer

BUNDLED = REPO / "models" / "transformer-es-en"
FIXTURES = REPO / "tests" / "data" / "office"
# the zip entries holding text (the body, the page header); every other one comes back as sent
TEXT_PARTS = {"docx": {"word/document.xml", "word/header1.xml"}, "odt": {"content.xml", "styles.xml"}}
MEDIA_TYPES = {"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
               "odt": "application/vnd.oasis.opendocument.text"}


@dataclass
class Seen:
    """A document as a third-party reader sees it."""
    paragraphs: list[str]               # the body's outside the table, and the page header's
    cells: list[list[str]]              # the table's, row by row
    bold: list[str]                     # the text of each bold run
    italic: list[str]
    links: list[tuple[str, str]]        # (target, text)


def seen_docx(data: bytes) -> Seen:
    document = docx.Document(io.BytesIO(data))
    body = document.paragraphs
    runs = [run for p in body for run in p.runs]
    return Seen([p.text for p in body] + [p.text for p in document.sections[0].header.paragraphs],
                [[cell.text for cell in row.cells] for row in document.tables[0].rows],
                [r.text for r in runs if r.bold], [r.text for r in runs if r.italic],
                [(link.url, link.text) for p in body for link in p.hyperlinks])


def seen_odt(data: bytes) -> Seen:
    document = opendocument.load(io.BytesIO(data))
    looks = {}                          # automatic text style -> its text properties
    for s in document.automaticstyles.getElementsByType(style.Style):
        looks[s.getAttribute("name")] = {k[1]: v for p in s.getElementsByType(style.TextProperties)
                                         for k, v in p.attributes.items()}
    [grid] = document.text.getElementsByType(table.Table)
    in_grid = {id(p) for p in grid.getElementsByType(text.P)}
    body = [p for p in document.text.getElementsByType(text.H) + document.text.getElementsByType(text.P)
            if id(p) not in in_grid]
    spans = document.text.getElementsByType(text.Span)

    def formatted(key: str, value: str) -> list[str]:
        return [teletype.extractText(s) for s in spans if looks.get(s.getAttribute("stylename"), {}).get(key) == value]

    return Seen([teletype.extractText(p) for p in body + document.masterstyles.getElementsByType(text.P)],
                [[teletype.extractText(c) for c in row.getElementsByType(table.TableCell)]
                 for row in grid.getElementsByType(table.TableRow)],
                formatted("font-weight", "bold"), formatted("font-style", "italic"),
                [(a.getAttribute("href"), teletype.extractText(a)) for a in document.text.getElementsByType(text.A)])


SEEN = {"docx": seen_docx, "odt": seen_odt}


@pytest.fixture(scope="module")
def translated() -> dict[str, tuple[bytes, bytes]]:
    """Each format: (the file LibreOffice made, the file the server answered)."""
    done = {}
    with RunningServer([BUNDLED], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server, \
            httpx.Client(base_url=server.http, timeout=120) as client:
        for kind in SEEN:
            sent = (FIXTURES / f"libreoffice.{kind}").read_bytes()
            answer = client.post("/v1/translate_file", files={"file": (f"informe.{kind}", sent)},
                                 data={"source_language": "es", "target_language": "en"})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == MEDIA_TYPES[kind]
            done[kind] = sent, answer.content
    return done


@pytest.mark.parametrize("kind", SEEN)
def test_every_paragraph_and_the_header_come_back_in_english(translated, kind):
    sent, got = translated[kind]
    before, after = SEEN[kind](sent), SEEN[kind](got)          # it opens in another reader
    assert len(after.paragraphs) == len(before.paragraphs) == 7
    for source, target in zip(before.paragraphs, after.paragraphs):
        assert target.strip() and target != source
        assert detect(target)[0][0] == "en", (source, target)
    assert "Report of the meeting" in after.paragraphs and "Internal Document" in after.paragraphs


@pytest.mark.parametrize("kind", SEEN)
def test_bold_italic_and_link_runs_hold_the_english_words_aligned_to_theirs(translated, kind):
    sent, got = translated[kind]
    before, after = SEEN[kind](sent), SEEN[kind](got)
    assert (before.bold, before.italic) == (["grande"], ["puerta"])
    # "La casa es **grande**" -> "The house is **big**"; "cierre la *puerta*" -> "shut the *door*"
    assert (after.bold, after.italic) == (["big"], ["door"])
    assert before.links == [("https://example.org/ayuda", "las instrucciones")]
    assert after.links == [("https://example.org/ayuda", "the instructions")]


@pytest.mark.parametrize("kind", SEEN)
def test_the_table_keeps_its_shape_with_its_cells_translated(translated, kind):
    sent, got = translated[kind]
    before, after = SEEN[kind](sent).cells, SEEN[kind](got).cells
    assert [len(row) for row in after] == [len(row) for row in before] == [2, 2]
    for source, target in zip(sum(before, []), sum(after, [])):
        assert target.strip() and target != source
        assert detect(target)[0][0] == "en", (source, target)
    assert after[0] == ["Name", "City"]


@pytest.mark.parametrize("kind", SEEN)
def test_every_entry_without_text_comes_back_as_libreoffice_wrote_it(translated, kind):
    sent, got = translated[kind]
    with zipfile.ZipFile(io.BytesIO(sent)) as before, zipfile.ZipFile(io.BytesIO(got)) as after:
        assert after.testzip() is None
        assert after.namelist() == before.namelist()
        for old, new in zip(before.infolist(), after.infolist()):
            assert (new.compress_type, new.date_time) == (old.compress_type, old.date_time), old.filename
            if old.filename in TEXT_PARTS[kind]:
                assert after.read(new) != before.read(old), old.filename
            else:
                assert after.read(new) == before.read(old), old.filename


def test_the_checkers_are_the_tests_own():
    """python-docx and odfpy are development dependencies: service/ never imports them."""
    assert not [(path.name, module) for path in sources("service") for module in imports(path)
                if module.split(".")[0] in ("docx", "odf")]
