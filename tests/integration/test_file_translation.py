"""Files translated with their formatting kept, over real HTTP: LibreTranslate's
`/translate_file` as its web page sends it (multipart `file`, `source`, `target`, `api_key`)
and the download it answers, and the native `/v1/translate_file`. The default es->en
Transformer (it keeps placeholders) beside the tiny xx->en model."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import httpx
import pytest

from conftest import REPO, SHORT, RunningServer

BUNDLED = REPO / "models" / "transformer-es-en"
MAX_FILE = 64 * 1024

CATALOG = r'''# Catálogo de ejemplo.
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Language: es\n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#. Shown in the title bar
#: src/main.c:10
#, c-format
msgctxt "window"
msgid "No se puede abrir el archivo %s."
msgstr ""

#: src/main.c:20
#, c-format
msgid "Se ha borrado %d archivo."
msgid_plural "Se han borrado %d archivos."
msgstr[0] ""
msgstr[1] ""

#: src/ui.py:3
#, python-brace-format
msgid "Hola, {name}."
msgstr ""

msgid "Guardar"
msgstr "Save"
'''

SUBTITLES = """1
00:00:01,000 --> 00:00:03,500
¿Dónde está la estación
de tren más cercana?

2
00:00:04,000 --> 00:00:06,250
No lo sé.

7
00:01:02,003 --> 00:01:05,000
Gracias por su ayuda,
es usted muy amable
conmigo.

8
00:01:06,000 --> 00:01:08,000
<i>Le dije que nos</i>

9
00:01:08,040 --> 00:01:10,000
<i>veríamos al mediodía.</i>
"""


@pytest.fixture(scope="module")
def files_server(tiny_model):
    with RunningServer([BUNDLED, tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "1",
                                               "ATTNMT_MAX_FILE_BYTES": str(MAX_FILE)}) as server, \
            httpx.Client(base_url=server.http, timeout=120) as client:
        client.server = server
        yield client


def send(client, name: str, data: bytes, source="es", target="en", **extra) -> httpx.Response:
    """As LibreTranslate's page posts it: a multipart form with the file, source, target, api_key."""
    return client.post("/translate_file", files={"file": (name, data)},
                       data={"source": source, "target": target, "api_key": "", **extra})


def fetched(client, answer: httpx.Response) -> httpx.Response:
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.startswith(str(client.base_url).rstrip("/") + "/download_file/")
    got = client.get(url)
    assert got.status_code == 200, got.text
    return got


def still_serving(client) -> None:
    r = client.post("/translate", json={"q": "Hola.", "source": "es", "target": "en"})
    assert r.status_code == 200 and r.json()["translatedText"]


def test_settings_name_the_formats(files_server):
    settings = files_server.get("/frontend/settings").json()
    assert settings["filesTranslation"] is True
    assert settings["supportedFilesFormat"] == [".txt", ".html", ".htm", ".srt", ".vtt", ".po", ".pot", ".xlf",
                                                ".xliff", ".docx", ".odt"]


def test_a_text_file_comes_back_line_for_line_and_once(files_server):
    source = "No se puede abrir el archivo.\nPermiso denegado.\n\nEl disco está lleno. Borre algo.\n"
    answer = send(files_server, "notas.txt", source.encode())
    got = fetched(files_server, answer)
    assert got.headers["content-type"].startswith("text/plain")
    assert 'filename="notas_en.txt"' in got.headers["content-disposition"]
    text = got.text
    assert text.count("\n") == source.count("\n") and "\n\n" in text and text.endswith("\n")
    assert "archivo" not in text and text.strip()
    # fetched once: then it is gone, in LibreTranslate's error shape
    again = files_server.get(answer.json()["translatedFileUrl"])
    assert again.status_code == 404 and set(again.json()) == {"error"}


def test_a_file_named_outside_latin_1_downloads_under_its_name(files_server):
    """A header is Latin-1: the name goes as an ASCII stand-in and percent-encoded (RFC 6266, 5987)."""
    expected = "attachment; filename=\"___en.txt\"; filename*=UTF-8''%E6%96%87%E4%BB%B6_en.txt"
    native = files_server.post("/v1/translate_file", files={"file": ("文件.txt", b"Hola.\n")},
                               data={"source_language": "es", "target_language": "en"})
    assert native.status_code == 200, native.text
    assert native.headers["content-disposition"] == expected
    got = fetched(files_server, send(files_server, "文件.txt", b"Hola.\n"))
    assert got.headers["content-disposition"] == expected and got.text == native.text
    accented = fetched(files_server, send(files_server, "Canción.txt", b"Hola.\n"))
    assert accented.headers["content-disposition"] == \
        "attachment; filename=\"Cancion_en.txt\"; filename*=UTF-8''Canci%C3%B3n_en.txt"


def test_an_html_file_keeps_its_markup(files_server):
    page = ("<!DOCTYPE html><html><head><meta charset='iso-8859-1'><title>Ayuda</title></head>"
            "<body><p>No se puede abrir el <b>archivo</b>.</p></body></html>").encode("latin-1")
    got = fetched(files_server, send(files_server, "ayuda.html", page))
    assert got.headers["content-type"].startswith("text/html")
    assert "<b>" in got.text and "</p>" in got.text and "charset='utf-8'" in got.text
    assert "archivo" not in got.text


def test_a_page_over_the_document_limit_is_translated_in_pieces(files_server):
    """Over max_document_chars (50,000): cut into entries at its paragraphs, each one translated,
    the page put back together with every paragraph, tag, script and comment."""
    paragraphs = "".join(f'<p id="p{i}">{SHORT[:-2]} <b>granda</b> <a href="/n/{i}">luna</a> .</p>\n'
                         for i in range(800))
    page = (f"<!DOCTYPE html><html><head><title>{SHORT}</title><script>var p = '<p>';</script></head>"
            f"<body><!-- generada -->\n{paragraphs}</body></html>\n")
    assert 50_000 < len(page) <= MAX_FILE
    r = files_server.post("/v1/translate_file", files={"file": ("pagina.html", page.encode())}, data={"model": "tiny"})
    assert r.status_code == 200, r.text
    text = r.text
    assert all(f'<p id="p{i}">' in text for i in range(800)) and text.count("</p>") == 800
    assert text.count("<b>") == 800 and text.count('<a href="/n/') == 800
    assert "<script>var p = '<p>';</script>" in text and "<!-- generada -->" in text
    assert f"<title>{SHORT}</title>" not in text and text.endswith("</body></html>\n")


def test_subtitles_keep_their_numbers_timings_and_line_counts(files_server):
    got = fetched(files_server, send(files_server, "pelicula.srt", SUBTITLES.encode("cp1252")))   # no encoding
    blocks = [b.splitlines() for b in got.text.strip().split("\n\n")]
    source = [b.splitlines() for b in SUBTITLES.strip().split("\n\n")]
    assert len(blocks) == len(source)
    for theirs, ours in zip(source, blocks):
        assert ours[:2] == theirs[:2]                 # number and timing, as sent
        assert len(ours) == len(theirs)               # as many text lines
    assert "estación" not in got.text
    # a sentence across two cues: translated whole, spread over both, neither left empty, the italics kept
    split = blocks[3][2:] + blocks[4][2:]
    assert all(re.sub(r"</?i>", "", line).strip() for line in split)
    joined = " ".join(split)
    assert joined.count("<i>") == joined.count("</i>") == 2
    whole = files_server.post("/translate", json={"q": "Le dije que nos veríamos al mediodía.", "source": "es",
                                                  "target": "en"}).json()["translatedText"]
    assert re.sub(r"</?i>", "", joined).split() == whole.split()


def test_a_catalog_gets_its_untranslated_entries(files_server, tmp_path):
    got = fetched(files_server, send(files_server, "demo.po", CATALOG.encode()))
    assert got.headers["content-type"].startswith("text/x-gettext-translation")
    text = got.text
    assert '"Language: en\\n"' in text and '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"' in text
    assert "#. Shown in the title bar" in text and 'msgctxt "window"' in text and "#: src/main.c:20" in text
    assert 'msgstr "Save"' in text                       # translated already: left alone
    entries = text.split("\n\n")
    opened = next(e for e in entries if 'msgid "No se puede' in e)
    assert "#, fuzzy, c-format" in opened and re.search(r'msgstr ".*%s.*"', opened)
    plural = next(e for e in entries if "msgid_plural" in e)
    if 'msgstr[0] ""' not in plural:                     # a form that lost %d is left untranslated
        assert re.search(r'msgstr\[0\] ".*%d.*"', plural) and re.search(r'msgstr\[1\] ".*%d.*"', plural)
    greeting = next(e for e in entries if 'msgid "Hola' in e)
    assert 'msgstr ""' in greeting or "{name}" in greeting.split("msgstr", 1)[1]
    if shutil.which("msgfmt"):
        path = tmp_path / "demo_en.po"
        path.write_bytes(got.content)
        check = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_the_native_route_answers_the_file(files_server):
    r = files_server.post("/v1/translate_file", files={"file": ("frases.txt", f"{SHORT}\n".encode())},
                          data={"model": "tiny"})
    assert r.status_code == 200, r.text
    assert r.headers["x-model"] == "tiny" and r.headers["content-language"] == "en"
    native = files_server.post("/v1/translate", json={"sentences": [SHORT], "model": "tiny",
                                                      "splitSentences": True}).json()
    assert r.text == native["translations"][0]["text"] + "\n"
    pair = files_server.post("/v1/translate_file", files={"file": ("a.vtt", b"WEBVTT\n\n00:01.000 --> 00:02.000\n"
                                                                    b"Hola.\n")},
                             data={"source_language": "es", "target_language": "en"})
    assert pair.status_code == 200 and "00:00:01.000 --> 00:00:02.000" in pair.text


@pytest.mark.parametrize("name, data, message", [
    ("informe.pdf", b"%PDF-1.4", "file format not supported (.pdf); served: .txt, .html"),
    ("sin-extension", b"hola", "file format not supported (no extension)"),
    ("vacio.txt", b"", "the file is empty"),
    ("binario.txt", bytes(range(256)) * 4, "do not decode"),
    ("roto.po", b'msgid "uno"\nmsgid "dos"\n', "not a gettext catalog"),
    ("prosa.po", "Esto no es un catálogo.\nNi esto.\n".encode(), "not a gettext catalog"),
    ("ruta.po", b"/etc/passwd", "not a gettext catalog"),
    ("roto.srt", b"esto no es\nun subtitulo\n", "not SubRip"),
    ("roto.vtt", b"NO ES WEBVTT\n", "not WebVTT"),
    ("grande.txt", b"Hola. " * (MAX_FILE // 6 + 1), "max_file_bytes"),
    ("largo.html", b"<p>" + b"palabra " * 7_000 + b"</p>", "over the limit of 50000 (max_document_chars)"),
])
def test_hostile_files_are_refused_and_the_server_goes_on(files_server, name, data, message):
    r = send(files_server, name, data)
    assert r.status_code == 400 and set(r.json()) == {"error"}, r.text
    assert message in r.json()["error"] and r.json()["error"].startswith("Invalid request")
    native = files_server.post("/v1/translate_file", files={"file": (name, data)},
                               data={"source_language": "es", "target_language": "en"})
    assert native.status_code == 400 and native.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert message in native.json()["error"]["message"]
    still_serving(files_server)


def test_a_sentence_too_long_is_named_by_its_place_in_the_file(files_server):
    # the 71st entry falls in the file's second job (64 entries a job): the error names it by the
    # file's count, not by its place in the job
    entries = "".join(f'msgid "Hola {i}."\nmsgstr ""\n\n' for i in range(70))
    data = (CATALOG.split("#.")[0] + entries + 'msgid "' + "palabra " * 300 + '"\nmsgstr ""\n').encode()
    r = send(files_server, "largo.po", data)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error.startswith("Invalid request: the file's text 71, sentence 0 has ") and "over the limit" in error, error
    still_serving(files_server)


def test_missing_fields_and_bodies_over_the_limit(files_server):
    assert send(files_server, "a.txt", b"Hola.", target="").json() == {
        "error": "Invalid request: missing target parameter"}
    r = files_server.post("/translate_file", data={"source": "es", "target": "en"})
    assert r.status_code == 400 and r.json() == {"error": "Invalid request: missing file parameter"}
    assert send(files_server, "a.txt", b"Hola.", source="fr").json() == {"error": "fr is not supported"}
    huge = send(files_server, "a.txt", b"x" * (MAX_FILE + 128 * 1024))
    assert huge.status_code == 413 and set(huge.json()) == {"error"}
    assert files_server.get("/download_file/no-such-token").status_code == 404
    # a name too long for the multipart parser: LibreTranslate's words, a 400, the server goes on
    long_name = send(files_server, "a" * 5000 + ".txt", b"Hola.")
    assert long_name.status_code == 400 and long_name.json()["error"].startswith("Invalid request: the form "), \
        long_name.text
    still_serving(files_server)


def test_the_cli_translates_a_catalog_offline_as_the_server_does(tmp_path):
    """`attnmt translate --model DIR --file demo.po --out out.po`: the same reading and writing."""
    source = tmp_path / "demo.po"
    source.write_text(CATALOG, encoding="utf-8")
    out = tmp_path / "out.po"
    run = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--model", str(BUNDLED), "--beam",
                          "1", "--file", str(source), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    text = out.read_text(encoding="utf-8")
    assert '"Language: en\\n"' in text and 'msgstr "Save"' in text
    opened = next(e for e in text.split("\n\n") if 'msgid "No se puede' in e)
    assert "fuzzy" in opened and re.search(r'msgstr ".*%s.*"', opened)
    if shutil.which("msgfmt"):
        check = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(out)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_the_cli_translates_subtitles_through_a_server(files_server, tmp_path):
    """`attnmt translate --server ADDR --file x.srt`: written beside it as x_en.srt, numbers and timings kept."""
    source = tmp_path / "pelicula.srt"
    source.write_bytes(SUBTITLES.encode("cp1252"))
    run = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server",
                          files_server.server.address, "--model-name", "transformer-es-en", "--file", str(source)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    got = (tmp_path / "pelicula_en.srt").read_text(encoding="utf-8")
    blocks = [b.splitlines() for b in got.strip().split("\n\n")]
    sent = [b.splitlines() for b in SUBTITLES.strip().split("\n\n")]
    assert [b[:2] for b in blocks] == [b[:2] for b in sent] and [len(b) for b in blocks] == [len(b) for b in sent]
    assert "estación" not in got


def test_the_grpc_call_streams_progress_then_the_file(files_server):
    """TranslateFile: progress from 0 to every text, then the file; a refused file ends INVALID_ARGUMENT."""
    import grpc

    from attnmt.service.stubs import translator_pb2 as pb
    from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
    with grpc.insecure_channel(files_server.server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        events = list(stub.TranslateFile(pb.TranslateFileRequest(name="pelicula.srt", data=SUBTITLES.encode(),
                                                                 source_language="es", target_language="en"),
                                         timeout=120))
        progress = [e.progress for e in events[:-1]]
        assert all(e.WhichOneof("event") == "progress" for e in events[:-1]) and progress
        # five cues, the last two one sentence: four texts
        assert progress[0].texts_done == 0 and progress[-1].texts_done == progress[-1].texts == 4
        file = events[-1].file
        assert file.name == "pelicula_en.srt" and file.model == "transformer-es-en" and file.target_language == "en"
        blocks = [b.splitlines() for b in file.data.decode().strip().split("\n\n")]
        assert [b[:2] for b in blocks] == [b.splitlines()[:2] for b in SUBTITLES.strip().split("\n\n")]
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.TranslateFile(pb.TranslateFileRequest(name="informe.pdf", data=b"%PDF-1.4"), timeout=60))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and ".srt" in refused.value.details()
    still_serving(files_server)


def test_replicas_sharing_the_store_serve_each_other_s_files_once(tiny_model, tmp_path):
    """Two servers on one `file_store_dir`, as replicas on a ReadWriteMany volume behind one
    Service: the download reaches the replica that did not translate, once."""
    shared = {"ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_FILE_STORE_DIR": str(tmp_path)}
    with RunningServer([tiny_model], shared) as first, RunningServer([tiny_model], shared) as second, \
            httpx.Client(base_url=first.http, timeout=120) as one, \
            httpx.Client(base_url=second.http, timeout=120) as other:
        answer = send(one, "notas.txt", f"{SHORT}\n{SHORT}\n".encode(), source="xx")
        assert answer.status_code == 200, answer.text
        path = httpx.URL(answer.json()["translatedFileUrl"]).path
        got = other.get(path)
        assert got.status_code == 200, got.text
        assert 'filename="notas_en.txt"' in got.headers["content-disposition"]
        assert got.text.count("\n") == 2 and SHORT not in got.text
        assert other.get(path).status_code == 404 and one.get(path).status_code == 404
    assert not list(tmp_path.iterdir())         # fetched, so deleted; a named directory outlives the servers
