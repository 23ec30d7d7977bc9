"""An XLIFF 1.2 file through LibreTranslate's `/translate_file` over real HTTP, as a CAT
tool's user would send it: its empty targets filled by the bundled es->en Transformer, the
inline codes carried with their ids, the rest of the file as sent."""

from __future__ import annotations

import httpx
import pytest
from lxml import etree

from conftest import REPO, RunningServer

BUNDLED = REPO / "models" / "transformer-es-en"
NS = "{urn:oasis:names:tc:xliff:document:1.2}"

XLIFF = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="ui.properties" source-language="es" datatype="javaproperties">
    <body>
      <trans-unit id="open">
        <source>No se puede abrir el archivo.</source>
        <note>Título de la ventana</note>
      </trans-unit>
      <trans-unit id="save"><source>Pulse <g id="1">Guardar</g> para <x id="2"/> salir.</source></trans-unit>
      <trans-unit id="brand" translate="no"><source>Okapi</source></trans-unit>
      <trans-unit id="done"><source>Hecho</source><target>Done</target></trans-unit>
    </body>
  </file>
</xliff>
"""


@pytest.fixture(scope="module")
def files_server(tiny_model):
    with RunningServer([BUNDLED, tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server, \
            httpx.Client(base_url=server.http, timeout=120) as client:
        yield client


def test_an_xliff_file_gets_its_empty_targets_with_their_codes(files_server):
    answer = files_server.post("/translate_file", files={"file": ("ui.xlf", XLIFF.encode())},
                               data={"source": "es", "target": "en", "api_key": ""})
    assert answer.status_code == 200, answer.text
    got = files_server.get(answer.json()["translatedFileUrl"])
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("application/xliff+xml")
    assert 'filename="ui_en.xlf"' in got.headers["content-disposition"]
    root = etree.fromstring(got.content)
    assert root.find(f"{NS}file").get("target-language") == "en"
    units = {u.get("id"): u for u in root.iter(f"{NS}trans-unit")}
    assert list(units) == ["open", "save", "brand", "done"]
    opened = units["open"].find(f"{NS}target")
    assert opened.get("state") == "needs-review-translation" and "archivo" not in opened.text
    assert units["open"].find(f"{NS}note").text == "Título de la ventana"
    saved = units["save"].find(f"{NS}target")
    assert [(c.tag, c.get("id")) for c in saved] == [(f"{NS}g", "1"), (f"{NS}x", "2")]
    assert units["brand"].find(f"{NS}target") is None
    assert units["done"].find(f"{NS}target").text == "Done"
