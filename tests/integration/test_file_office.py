"""A .docx through LibreTranslate's `/translate_file` and the native `/v1/translate_file` over
real HTTP, as a user would send it: its paragraphs translated by the bundled es->en
Transformer with their bold and link runs on the translated words, every other part as sent;
a zip bomb answered 400."""

from __future__ import annotations

import io
import zipfile

import httpx
import pytest
from lxml import etree

from conftest import REPO, RunningServer
from unit.text.test_files_office import DOCX, W, runs, zipped

BUNDLED = REPO / "models" / "transformer-es-en"


@pytest.fixture(scope="module")
def office_server():
    with RunningServer([BUNDLED], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server, \
            httpx.Client(base_url=server.http, timeout=120) as client:
        yield client


def test_a_docx_comes_back_translated_with_its_runs(office_server):
    sent = zipped(DOCX)
    answer = office_server.post("/translate_file", files={"file": ("informe.docx", sent)},
                                data={"source": "es", "target": "en", "api_key": ""})
    assert answer.status_code == 200, answer.text
    got = office_server.get(answer.json()["translatedFileUrl"])
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert 'filename="informe_en.docx"' in got.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(got.content)) as package, zipfile.ZipFile(io.BytesIO(sent)) as before:
        assert package.testzip() is None and package.namelist() == before.namelist()
        assert package.read("word/media/image1.png") == before.read("word/media/image1.png")
        body = etree.fromstring(package.read("word/document.xml"))
    second = runs(list(body.iter(f"{W}p"))[1])
    bold = [text for text, is_bold, _, _ in second if is_bold]
    linked = [text for text, _, _, link in second if link == "rId5"]
    assert bold and bold[0].strip() and "Guardar" not in bold[0]
    assert linked and "ayuda" not in linked[0]


def test_a_zip_bomb_is_answered_400(office_server):
    bomb = zipped(DOCX + [("word/media/fondo.bin", bytes(8 * 2**20), zipfile.ZIP_DEFLATED)])
    answer = office_server.post("/v1/translate_file", files={"file": ("bomba.docx", bomb)},
                                data={"source_language": "es", "target_language": "en"})
    assert answer.status_code == 400, answer.text
    assert "inflates" in answer.text and "over the limit of 100:1" in answer.text
    assert office_server.post("/translate", json={"q": "Hola.", "source": "es", "target": "en"}).status_code == 200
