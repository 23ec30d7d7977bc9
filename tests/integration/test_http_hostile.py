"""Hostile input over HTTP, as tests/integration/test_invalid_requests.py is for gRPC: bodies
that are not UTF-8 or not JSON, nesting, types a route does not expect, numbers out of range,
lone surrogates, broken forms, unknown paths and methods, slow and idle clients. Each is a 4xx
in the route's documented JSON shape, the keep-alive connection stays usable, the log holds no
traceback, and the server answers health checks throughout."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from conftest import SHORT, RunningServer

KEY = "k-hostile"
HEAD_TIMEOUT = 1.0


class Health(threading.Thread):
    """/healthz every 50 ms on a connection of its own; every answer that is not 200 is kept."""

    def __init__(self, base: str):
        super().__init__(daemon=True)
        self.base, self.stop, self.failures, self.count = base, threading.Event(), [], 0

    def run(self):
        with httpx.Client(base_url=self.base, timeout=5) as client:
            while True:
                try:
                    status = client.get("/healthz").status_code
                except httpx.HTTPError as e:
                    status = repr(e)
                self.count += 1
                if status != 200:
                    self.failures.append(status)
                if self.stop.wait(0.05):
                    return


@pytest.fixture(scope="module")
def hostile(tiny_model, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text(f"{KEY} hostile\n")
    env = {"ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_API_KEYS": str(keys),
           "ATTNMT_HTTP_HEAD_TIMEOUT_SECONDS": str(HEAD_TIMEOUT), "ATTNMT_HTTP_BODY_TIMEOUT_SECONDS": "1"}
    with RunningServer([tiny_model], env) as server:
        yield server


@pytest.fixture
def http(hostile):
    health = Health(hostile.http)
    health.start()
    # one connection for the whole test: a request that broke it would fail the next
    with httpx.Client(base_url=hostile.http, timeout=30, limits=httpx.Limits(max_connections=1)) as client:
        client.server = hostile
        yield client
        assert client.get("/healthz").status_code == 200         # the same connection still answers
    health.stop.set()
    health.join()
    assert health.count > 0 and health.failures == []
    assert not [line for line in hostile.log if "Traceback" in line or "Exception in ASGI" in line]


JSON = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
LT = {"source": "xx", "target": "en", "api_key": KEY}


def native_error(r, status: int, *words: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert set(error) == {"code", "message"} and all(w in error["message"] for w in words), error


def libre_error(r, status: int, *words: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert isinstance(r.json()["error"], str) and all(w in r.json()["error"] for w in words), r.json()


DEEP = b"[" * 100_000


@pytest.mark.parametrize("path, content, words", [
    ("/v1/translate", b"\xff\xfe{}", ["not valid UTF-8"]),
    ("/v1/translate", DEEP, ["depth"]),
    ("/v1/translate", b'{"sentences": ["Hola \\ud800"]}', ["surrogate"]),
    ("/v1/translate", b'{"sentences": ["x"], "options": {"beamSize": 1e400}}', ["infinity"]),
    ("/v1/translate", b'{"sentences": "x"}', ["sentences"]),
    ("/v1/translate", b'{"sentences": [1]}', ["sentences"]),
    ("/v1/translate", b'{"sentences": ["x"], "options": "fast"}', ["options"]),
    ("/v1/translate", b'{"sentences": ["x"], "format": true}', ["format"]),
    ("/v1/translate", b'{"sentences": ["x"], "options": {"beamSize": 2.5}}', ["beam_size"]),
    ("/v1/translate", b'[]', ["JSON object"]),
    # what protobuf's json_format reads and the proto3 JSON mapping does not
    ("/v1/translate", b'{"sentences": ["x"], "options": []}', ["options must be an object"]),
    ("/v1/translate", b'{"sentences": ["x"], "options": {"beamSize": "1_0"}}', ["beam_size must be a number"]),
    ("/v1/translate", '{"sentences": ["x"], "options": {"beamSize": "٣"}}'.encode(), ["beam_size"]),
    ("/v1/translate", b'{"sentences": ["x"], "options": {"lengthPenalty": "1_0"}}', ["length_penalty"]),
    ("/v1/translate", b'{"sentences\\u0000x": ["x"]}', ["NUL"]),
    ("/v1/align", DEEP, ["depth"]),
    ("/v1/align", b'{"source": {"a": 1}, "target": "x"}', ["source"]),
])
def test_native_bodies_are_400_naming_what_is_wrong(http, path, content, words):
    native_error(http.post(path, content=content, headers=JSON), 400, *words)


@pytest.mark.parametrize("path, content, words", [
    ("/translate", b"\xff\xfe{}", ["not valid UTF-8"]),
    ("/detect", b"\xff\xfe{}", ["not valid UTF-8"]),
    ("/translate", DEEP, ["depth"]),
    ("/detect", DEEP, ["depth"]),
    ("/translate", b'{"q": "Hola \\ud800", "source": "xx", "target": "en", "api_key": "k-hostile"}', ["surrogate"]),
    ("/translate", b'{"q": "x", "source": "xx", "target": "en", "api_key": "k-hostile", "alternatives": 1e400}',
     ["infinity"]),
    ("/translate", b'[1]', ["object"]),
])
def test_libretranslate_bodies_are_400_naming_what_is_wrong(http, path, content, words):
    libre_error(http.post(path, content=content, headers={"content-type": "application/json"}), 400, *words)


@pytest.mark.parametrize("fields, words", [
    ({"source": ["es"]}, ["source"]),
    ({"target": {"en": 1}}, ["target"]),
    ({"q": {"a": 1}}, ["q"]),
    ({"q": [1, 2]}, ["q"]),
    ({"format": ["html"]}, ["format"]),
    ({"alternatives": "many"}, ["alternatives"]),
    ({"alternatives": True}, ["alternatives"]),
    ({"alternatives": 1e300}, ["alternatives"]),
    ({"alternatives": "³"}, ["alternatives", "not a number"]),         # str.isdigit() takes it, int() does not
    ({"alternatives": "--1"}, ["alternatives", "not a number"]),
    ({"api_key": ["x"]}, ["api_key"]),          # before the key is checked: any client reaches it
])
def test_libretranslate_fields_of_the_wrong_type(http, fields, words):
    body = {"q": SHORT, **LT, **fields}
    libre_error(http.post("/translate", json=body), 400, *words)
    if "q" in fields or "api_key" in fields:
        libre_error(http.post("/detect", json={"q": SHORT, "api_key": KEY, **fields}), 400, *words)


@pytest.mark.parametrize("value", ["--1", "+-1", "²", "1²", " 1 2", "1" * 21])
def test_alternatives_that_are_not_a_numeral(http, value):
    form = {"q": SHORT, **LT, "alternatives": value}
    libre_error(http.post("/translate", data=form), 400, "alternatives parameter is not a number")
    libre_error(http.post("/translate", json=form), 400, "alternatives parameter is not a number")


DEPTH = 1000        # under orjson's 1,024 levels: only our own bound stops it


@pytest.mark.parametrize("field, value", [
    ("options", "[" * DEPTH + "]" * DEPTH),
    ("glossary", "[" * DEPTH + "]" * DEPTH),
    ("glossary", '[{"source": ' + "[" * DEPTH + "]" * DEPTH + ', "target": "x"}]'),
    ("options", '{"beamSize": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}"),
    ("options", "[" * 32 + "]" * 32),                # 33 levels with the body's own object
])
def test_nesting_inside_a_field_is_a_short_400_naming_it(http, field, value):
    content = f'{{"sentences": ["x"], "{field}": {value}}}'.encode()
    r = http.post("/v1/translate", content=content, headers=JSON)
    native_error(r, 400, field, "32 levels")
    assert len(r.json()["error"]["message"]) < 200


def test_messages_quote_what_was_sent_only_in_part(http):
    nested = "[" * 31 + "]" * 31                   # within the bound: protobuf's parser quotes it
    r = http.post("/v1/translate", content=f'{{"sentences": ["x"], "options": {nested}}}'.encode(), headers=JSON)
    native_error(r, 400, "options")
    long_enum = http.post("/v1/translate", json={"sentences": ["x"], "format": "y" * 5000}, headers=JSON)
    native_error(long_enum, 400, "format")
    assert len(long_enum.json()["error"]["message"]) < 400
    long_format = http.post("/translate", json={"q": SHORT, **LT, "format": "y" * 5000})
    libre_error(long_format, 400, "format is not supported")
    assert len(long_format.json()["error"]) < 200
    native_error(http.get("/" + "z" * 5000), 404, "no route")
    assert len(http.get("/" + "z" * 5000).json()["error"]["message"]) < 400


@pytest.mark.parametrize("value", [b"\xb2S", b"5\xb2S", b"\xb9m"])
def test_a_grpc_timeout_in_digits_that_are_not_ascii_is_a_400(http, value):
    """"²".isdigit() is true and int("²") raises: every route that reads the header."""
    headers = {**JSON, "grpc-timeout": value}
    native_error(http.post("/v1/translate", json={"sentences": [SHORT]}, headers=headers), 400, "grpc-timeout")
    native_error(http.get("/v1/models", headers=headers), 400, "grpc-timeout")
    libre_error(http.post("/translate", json={"q": SHORT, **LT}, headers=headers), 400, "grpc-timeout")
    libre_error(http.post("/detect", json={"q": SHORT, "api_key": KEY}, headers=headers), 400, "grpc-timeout")


def test_a_content_length_in_digits_that_are_not_ascii_is_a_400(hostile, http):
    answer = raw(hostile, b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: \xb2\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 400") and b"application/json" in answer, answer


def test_refusals_written_by_other_layers_are_json(http):
    """Starlette's CORS refusal of a preflight and StaticFiles' Range errors: the route's JSON error
    shape, with their status and headers."""
    preflight = {"Origin": "http://x", "Access-Control-Request-Method": "POST"}
    r = http.options("/v1/translate", headers={**preflight, "Access-Control-Request-Headers": "x-foo"})
    native_error(r, 400, "Disallowed CORS headers")
    assert r.headers["access-control-allow-origin"] == "*"
    r = http.options("/translate", headers={**preflight, "Access-Control-Request-Method": "PUT"})
    libre_error(r, 400, "Disallowed CORS method")
    assert http.options("/v1/translate", headers=preflight).status_code == 200
    native_error(http.get("/static/page.css", headers={"Range": "bytes=5-1"}), 400, "Range")
    native_error(http.get("/static/page.css", headers={"Range": "bytes=abc"}), 400, "Range")
    r = http.get("/static/page.css", headers={"Range": "bytes=99999999-"})
    native_error(r, 416, "Range Not Satisfiable")
    assert r.json()["error"]["code"] == "OUT_OF_RANGE"
    assert r.headers["content-range"].startswith("bytes */")
    assert http.get("/static/page.css", headers={"Range": "bytes=0-9"}).status_code == 206


def test_forms_that_do_not_parse(http):
    boundary_less = {"content-type": "multipart/form-data"}
    libre_error(http.post("/translate", content=b"q=x", headers=boundary_less), 400, "boundary")
    too_many = "&".join(f"f{i}=x" for i in range(1001)).encode()
    form = {"content-type": "application/x-www-form-urlencoded"}
    libre_error(http.post("/translate", content=too_many, headers=form), 400, "Too many fields")
    as_a_file = http.post("/translate", data=LT, files={"q": ("q.txt", b"peru vidas kasa .")})
    libre_error(as_a_file, 400, "q")
    # bytes that are not UTF-8, %-escaped or raw, in the form or the query string: refused, not
    # read as "\ufffd" (Starlette's reading) and translated
    for content in (b"q=%ff%fe&source=xx&target=en", b"q=peru \xff&source=xx&target=en"):
        libre_error(http.post("/translate", content=content, headers=form), 400,
                    "the form is not UTF-8: it holds the byte 0xff (%FF)")
    libre_error(http.post("/translate?q=%C3&source=xx&target=en", headers=form), 400,
                "the query string is not UTF-8: it holds the byte 0xc3 (%C3)")
    assert http.post(f"/translate?q=kasa+%C3%B1&source=xx&target=en&api_key={KEY}").status_code == 200


def test_a_multipart_form_is_read(http):
    r = http.post("/translate", data={"q": SHORT, **LT}, files={"unused": ("a.txt", b"x")})
    assert r.status_code == 200, r.text


def test_routing_errors_are_json(http):
    native_error(http.get("/nowhere"), 404, "/nowhere")
    libre_error(http.post("/suggest"), 404, "/suggest")
    libre_error(http.post("/translate_file"), 403, "API key")          # keys are configured here
    libre_error(http.get("/download_file/..%2F..%2Fetc%2Fpasswd"), 404)
    r = http.get("/v1/translate")
    native_error(r, 405, "GET")
    assert r.headers["allow"] == "POST"
    libre_error(http.get("/translate"), 405, "GET")
    native_error(http.get("/v1/models", headers={"x-request-timeout": "soon", **JSON}), 400, "X-Request-Timeout")
    native_error(http.get("/v1/models/tiny", headers={"x-request-timeout": "-1", **JSON}), 400, "X-Request-Timeout")


def raw(server, data: bytes, wait: float = 5.0) -> bytes:
    """What the server writes back to `data` before it closes the connection."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=wait) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


def test_an_unparseable_request_is_a_json_400(hostile, http):
    answer = raw(hostile, b"NOT HTTP AT ALL\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400") and b"application/json" in answer and b'"error"' in answer


def test_a_slow_client_is_closed_and_a_normal_request_still_succeeds(hostile, http):
    """A head sent a byte at a time past the deadline gets 408 and the close; one that sends
    nothing is closed; a slow body gets 408; meanwhile other requests are answered."""
    head = b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", hostile.http_port), timeout=10) as slow, \
            socket.create_connection(("127.0.0.1", hostile.http_port), timeout=10) as idle:
        start = time.monotonic()
        closed = None
        for byte in head:
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed = time.monotonic() - start
                break
            r = http.post("/v1/translate", json={"sentences": [SHORT]}, headers=JSON)
            assert r.status_code == 200
            time.sleep(0.1)
        got = slow.recv(65536)
        closed = closed or time.monotonic() - start
        assert got.startswith(b"HTTP/1.1 408") and b'"DEADLINE_EXCEEDED"' in got
        assert closed < HEAD_TIMEOUT + 1.5
        assert idle.recv(10) == b""                                           # closed without a word
    with socket.create_connection(("127.0.0.1", hostile.http_port), timeout=10) as slow_body:
        slow_body.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n{")
        got = b""
        while chunk := slow_body.recv(65536):
            got += chunk
        assert got.startswith(b"HTTP/1.1 408") and b"http_body_timeout_seconds" in got
    assert http.get("/healthz").status_code == 200


def test_connections_over_the_limit_get_a_json_503(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_HTTP_MAX_CONNECTIONS": "3", "ATTNMT_HTTP_HEAD_TIMEOUT_SECONDS": "2"}) \
            as server:
        idle = [socket.create_connection(("127.0.0.1", server.http_port)) for _ in range(2)]
        try:
            time.sleep(0.2)
            assert httpx.get(f"{server.http}/healthz").status_code == 200      # the third connection: within
            time.sleep(0.2)
            idle.append(socket.create_connection(("127.0.0.1", server.http_port)))
            time.sleep(0.2)
            r = httpx.get(f"{server.http}/healthz")                             # the fourth: past it
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "UNAVAILABLE"
            time.sleep(2.5)                       # the idle ones are closed at their head deadline
            assert httpx.get(f"{server.http}/healthz").status_code == 200
        finally:
            for s in idle:
                s.close()


@pytest.mark.timeout(120)
def test_the_worst_case_markup_is_answered(http):
    """16,000 `<p>` in one HTML document (service/text/markup.py's worst case): a 200 or a 400
    naming the limit, within a bound, while health checks are answered."""
    start = time.monotonic()
    r = http.post("/translate", json={"q": "<p>" * 16_000, "source": "xx", "target": "en", "format": "html",
                                      "api_key": KEY})
    assert r.status_code in (200, 400), r.text
    assert time.monotonic() - start < 30
