"""Hostile files through a real server, as an attacker would send them: zip bombs, XML entity
expansion ("billion laughs"), an external entity, XML nested past the parser's depth, truncated
packages, a wrong extension, no bytes, too many bytes, bytes that are not text. Each goes to the
native `POST /v1/translate_file` and to LibreTranslate's `/translate_file`; each is refused with
a deliberate 4xx whose JSON names the problem (no traceback), and the server translates the next
request as if nothing happened. A page of the largest size sent with a short deadline ends at
that deadline (504, DEADLINE_EXCEEDED), its reading stopped with it."""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import grpc
import httpx
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer
from integration.test_file_translation import send

MAX_FILE = 16 * 1024                # max_file_bytes, small so that the files over it stay small
BODY_LIMIT = MAX_FILE + 64 * 1024   # and the form's room (service/http/front.py): past it, 413

WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
OPEN_DOCUMENT = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
                 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"')
# Ten entities of ten references each, nine deep: 10^9 "lol"s from under a kilobyte
LAUGHS = ('<!DOCTYPE lolz [<!ENTITY lol0 "lol">'
          + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)) + "]>")


def zipped(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as package:
        for name, data in entries.items():
            package.writestr(name, data)
    return out.getvalue()


def docx(document: str) -> bytes:
    return zipped({"[Content_Types].xml": b'<?xml version="1.0"?><Types/>', "word/document.xml": document.encode()})


def odt(content: str) -> bytes:
    return zipped({"mimetype": b"application/vnd.oasis.opendocument.text", "content.xml": content.encode()})


def word_document(text: str, prolog: str = "") -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<w:document xmlns:w="{WORD}"><w:body><w:p><w:r>'
            f"<w:t>{text}</w:t></w:r></w:p></w:body></w:document>")


def inflating(size: int, compression: int) -> bytes:
    """A .docx whose document inflates to `size` zero bytes, written a MiB at a time."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as package:
        package.writestr("[Content_Types].xml", b"<Types/>")
        with package.open("word/document.xml", "w") as entry:
            for _ in range(size // 2**20):
                entry.write(bytes(2**20))
    return out.getvalue()


def lying(size: int) -> bytes:
    """A zip bomb that hides: its document inflates to `size` bytes, but both of the zip's
    headers say it holds 1,000 (what a check of the declared ratio reads)."""
    data = bytearray(inflating(size, zipfile.ZIP_DEFLATED))
    name = b"word/document.xml"
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):   # local, central
        at = data.find(signature)
        while data[at + name_at:at + name_at + len(name)] != name:
            at = data.find(signature, at + 1)
        data[at + size_at:at + size_at + 4] = (1000).to_bytes(4, "little")
    return bytes(data)


def truncated() -> bytes:
    whole = docx(word_document("Hola. " * 200))
    return whole[:len(whole) // 2]


# name, the file's bytes (built when the case runs), the status, what the message names
CASES = {
    "zip bomb past the ratio": ("informe.docx", lambda: inflating(2 * 2**20, zipfile.ZIP_DEFLATED), 400,
                                "over the limit of 100:1 (a zip bomb?)"),
    "zip bomb past the cap": ("informe.docx", lambda: inflating(65 * 2**20, zipfile.ZIP_BZIP2), 400,
                              "over the limit of 67108864 (max_unpacked_bytes)"),
    "zip bomb lying about its size": ("informe.docx", lambda: lying(2 * 2**20), 400, "is damaged"),
    "billion laughs in a .docx": ("informe.docx", lambda: docx(word_document("&lol9;", LAUGHS)), 400,
                                  "declares a DTD"),
    "billion laughs in an .odt": ("informe.odt", lambda: odt(
        f'<?xml version="1.0"?>{LAUGHS}<office:document-content {OPEN_DOCUMENT}><office:body><office:text>'
        "<text:p>&lol9;</text:p></office:text></office:body></office:document-content>"), 400, "declares a DTD"),
    "billion laughs in an XLIFF": ("ui.xlf", lambda: (
        f'<?xml version="1.0"?>{LAUGHS}<xliff version="1.2"><file><body><trans-unit id="1"><source>&lol9;'
        "</source></trans-unit></body></file></xliff>").encode(), 400, "declares a DTD"),
    "an external entity in an XLIFF": ("ui.xlf", lambda: (
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><xliff version="1.2"><file>'
        "<body><trans-unit id=\"1\"><source>&e;</source></trans-unit></body></file></xliff>").encode(), 400,
        "declares a DTD"),
    "a .docx nested 5,000 deep": ("informe.docx", lambda: docx(word_document("<w:t>" * 5000 + "</w:t>" * 5000)), 400,
                                  "is not well-formed XML: Excessive depth"),
    "a .docx cut in half": ("informe.docx", truncated, 400, "it is not a zip package"),
    "a program": ("setup.exe", lambda: b"MZ\x90\x00" + bytes(200), 400, "file format not supported (.exe)"),
    "a PDF": ("informe.pdf", lambda: b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", 400, "file format not supported (.pdf)"),
    "a PDF named .docx": ("informe.docx", lambda: b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", 400, "it is not a zip package"),
    "no bytes": ("vacio.srt", lambda: b"", 400, "the file is empty"),
    "over max_file_bytes": ("grande.txt", lambda: b"Hola. " * (MAX_FILE // 6 + 1), 400,
                            f"over the limit of {MAX_FILE} (max_file_bytes)"),
    "past the body limit": ("enorme.txt", lambda: b"Hola. " * (BODY_LIMIT // 6 + 1), 413, "max_file_bytes"),
    "binary .srt": ("pelicula.srt", lambda: b"1\n00:00:01,000 --> 00:00:02,000\n\x00\x01\x02\xff\xfe" * 20, 400,
                    "do not decode as text"),
    "binary .txt": ("notas.txt", lambda: bytes(range(256)) * 8, 400, "do not decode as text"),
}


@pytest.fixture(scope="module")
def hostile_server(paired_models):
    """One server for the module: the tiny model as es->en (the default), en->es and xx->en."""
    with RunningServer(paired_models, {"ATTNMT_DEFAULT_BEAM_SIZE": "1",
                                       "ATTNMT_MAX_FILE_BYTES": str(MAX_FILE)}) as server, \
            httpx.Client(base_url=server.http, timeout=60) as client:     # a hang fails the test
        client.server = server
        yield client


def native(client, name: str, data: bytes) -> httpx.Response:
    return client.post("/v1/translate_file", files={"file": (name, data)},
                       data={"source_language": "es", "target_language": "en"})


def message_of(route: str, answer: httpx.Response) -> str:
    """The error's message, in the route's shape: LibreTranslate's `{"error": "..."}`, the native
    `{"error": {"code": ..., "message": ...}}`."""
    body = answer.json()
    assert set(body) == {"error"}, answer.text
    if route == "libretranslate":
        return body["error"]
    assert set(body["error"]) >= {"code", "message"}, answer.text
    return body["error"]["message"]


def serves(client) -> None:
    r = client.post("/v1/translate", json={"sentences": [SHORT], "model": "tiny"})
    assert r.status_code == 200, r.text
    assert r.json()["translations"][0]["text"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("route", ["native", "libretranslate"])
def test_a_hostile_file_is_refused_by_name_and_the_server_goes_on(hostile_server, route, case):
    name, build, status, message = CASES[case]
    data = build()
    answer = native(hostile_server, name, data) if route == "native" else send(hostile_server, name, data)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert message in message_of(route, answer)
    assert "Traceback" not in answer.text and 'File "' not in answer.text
    serves(hostile_server)


def test_the_server_outlived_them_all(hostile_server):
    server = hostile_server.server
    assert server.proc.poll() is None
    assert hostile_server.get("/healthz").json() == {"status": "ok"}
    serves(hostile_server)
    assert not any("Traceback" in line for line in server.log), "".join(server.log)


# A page of nearly the largest size (max_html_file_bytes, 1 MiB) of ordinary markup: reading it
# and counting its sentences took about 6 s of a core (2 cores, 2026-11-29), and a call whose
# deadline passed meanwhile was answered only then, its thread reading on after a gRPC caller left.
PARAGRAPH = '<p>Esta es una frase <b>corriente</b> con un <a href="/x">enlace</a>. Y otra frase más.</p>\n'
PAGE = ("<!DOCTYPE html><html><head><title>Libro</title></head><body>\n"
        + "".join(f"<section><h2>Capítulo {i}</h2>{PARAGRAPH * 8}</section>\n" for i in range(1300))
        + "</body></html>\n").encode()
DEADLINE = 0.5
LATE = 2.0              # past the deadline an answer may take on a slow, busy machine (0.01 s when idle)
IDLE = 0.5              # seconds the server's CPU time is watched after the answer
BUSY = 0.15             # CPU seconds in them that would say a thread still reads (it took ~0.5)


@pytest.fixture(scope="module")
def page_server(paired_models):
    """A server with the default file limits (max_file_bytes 5 MiB, max_html_file_bytes 1 MiB)."""
    with RunningServer(paired_models, {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server:
        yield server


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has taken so far (user and system), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()     # from field 3, the state
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")          # utime, stime


def cpu_after(server: RunningServer) -> float:
    """The server's CPU seconds over IDLE seconds from now: about 0 once nothing runs."""
    before = cpu_seconds(server.proc.pid)
    time.sleep(IDLE)
    return cpu_seconds(server.proc.pid) - before


def test_the_page_is_of_the_largest_size():
    assert 0.95 * 2**20 < len(PAGE) <= 2**20


@pytest.mark.parametrize("route", ["native", "libretranslate"])
def test_a_large_page_past_its_deadline_ends_at_it_and_its_reading_stops(page_server, route):
    path = "/v1/translate_file" if route == "native" else "/translate_file"
    with httpx.Client(base_url=page_server.http, timeout=60) as client:
        before = page_server.metric("http_server_requests_total", route=path, code="504")
        headers = {"X-Request-Timeout": str(DEADLINE)}
        start = time.perf_counter()
        if route == "native":
            answer = client.post(path, files={"file": ("libro.html", PAGE)}, headers=headers,
                                 data={"source_language": "es", "target_language": "en"})
        else:
            answer = client.post(path, files={"file": ("libro.html", PAGE)}, headers=headers,
                                 data={"source": "es", "target": "en", "api_key": ""})
        elapsed = time.perf_counter() - start
        busy = cpu_after(page_server)
        assert answer.status_code == 504, answer.text
        assert message_of(route, answer)
        if route == "native":
            assert answer.json()["error"]["code"] == "DEADLINE_EXCEEDED"
        assert elapsed < DEADLINE + LATE, f"{elapsed:.2f} s"
        assert busy < BUSY, f"{busy:.2f} CPU seconds in the {IDLE} s after the answer"
        assert page_server.metric("http_server_requests_total", route=path, code="504") == before + 1
        serves(client)
        small = native(client, "pagina.html", b"<p>peru vidas kasa .</p>")
        assert small.status_code == 200, small.text


def test_a_large_page_past_its_deadline_over_grpc_stops_being_read(page_server):
    labels = {"grpc_method": "TranslateFile", "grpc_code": "DEADLINE_EXCEEDED"}
    before = page_server.metric("grpc_server_handled_total", **labels)
    with grpc.insecure_channel(page_server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            list(stub.TranslateFile(pb.TranslateFileRequest(name="libro.html", data=PAGE, source_language="es",
                                                            target_language="en"), timeout=DEADLINE))
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        busy = cpu_after(page_server)       # the caller gave up at its deadline; the server must too
        assert busy < BUSY, f"{busy:.2f} CPU seconds in the {IDLE} s after the deadline"
        assert page_server.metric("grpc_server_handled_total", **labels) == before + 1
        reply = stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny"), timeout=60)
        assert reply.translations[0].text
