"""Hostile HTML against a real `attnmt serve`: the worst markup an entry may hold (16,000
empty sibling elements, nesting at the depth limit, 2,000 elements with alt and title)
sent over HTTP and gRPC while health checks on both keep answering within 100 ms, and
a call whose deadline passes while its markup is read ending with 504 / DEADLINE_EXCEEDED
within 100 ms of it."""

from __future__ import annotations

import threading
import time

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.html5 import MAX_DEPTH
from conftest import LONG, REPO, RunningServer

pytestmark = pytest.mark.serial     # its latency bounds hold on a machine running nothing else
BUNDLED = REPO / "models" / "rnnsearch-es-en"
PROMPT = 0.1                # seconds: a health answer, and a deadline's end
ATTEMPTS = 3                # a busy machine may stall any one run; the fix never lets one pass by chance

WORST = {
    "siblings": "<p>" * 16_000,                                                 # 48 KB, no text at all
    "depth": ("<b>" * MAX_DEPTH + "x" + "</b>" * MAX_DEPTH) * 60,               # 48 KB
    "alt-title": "<i alt=sí title=yo></i>" * 2_000,                              # 46 KB, 4,000 values
}
ELEMENTS = {"siblings": ("<p>", 16_000), "depth": ("<b>", 60 * MAX_DEPTH)}      # start tags in the answer


@pytest.fixture(scope="module")
def server():
    with RunningServer([BUNDLED], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as running:
        yield running


class Health:
    """/healthz and the gRPC health service, each asked over and over from its own thread
    until `stop`; the time of every answer."""

    def __init__(self, server: RunningServer):
        self.http = httpx.Client(base_url=server.http, timeout=10)
        self.channel = grpc.insecure_channel(server.address)
        self.grpc = health_pb2_grpc.HealthStub(self.channel)
        self.times: dict[str, list[float]] = {"http": [], "grpc": []}
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ask_http(), self._ask_grpc()           # connections open before anything is timed

    def _ask_http(self) -> None:
        assert self.http.get("/healthz").status_code == 200

    def _ask_grpc(self) -> None:
        answer = self.grpc.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING

    def _poll(self, protocol: str, ask) -> None:
        while not self._done.is_set():
            start = time.perf_counter()
            ask()
            self.times[protocol].append(time.perf_counter() - start)
            time.sleep(0.01)

    def __enter__(self) -> "Health":
        self._threads = [threading.Thread(target=self._poll, args=("http", self._ask_http)),
                         threading.Thread(target=self._poll, args=("grpc", self._ask_grpc))]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        for thread in self._threads:
            thread.join()
        self.http.close()
        self.channel.close()

    def slowest(self) -> float:
        return max(max(times) for times in self.times.values())


def while_polled(server: RunningServer, call) -> tuple[object, Health]:
    """`call()` while health is asked on both protocols; until one run keeps every health
    answer within PROMPT (at most ATTEMPTS runs): what the last call answered and its health."""
    for _ in range(ATTEMPTS):
        with Health(server) as health:
            answer = call()
        if health.slowest() <= PROMPT:
            break
    return answer, health


def check_health(health: Health) -> None:
    assert all(len(times) >= 2 for times in health.times.values()), health.times     # asked while it ran
    assert health.slowest() <= PROMPT, {p: f"{max(t) * 1000:.0f} ms" for p, t in health.times.items()}


@pytest.mark.parametrize("case", list(WORST))
def test_the_worst_markup_over_http_leaves_health_prompt(server, case):
    body = {"q": WORST[case], "source": "es", "target": "en", "format": "html"}
    with httpx.Client(base_url=server.http, timeout=60) as client:
        r, health = while_polled(server, lambda: client.post("/translate", json=body))
    check_health(health)
    if case == "alt-title":         # its values are 4,000 sentences
        assert r.status_code == 400 and "max_document_sentences" in r.json()["error"], r.text
    else:
        assert r.status_code == 200, r.text
        tag, count = ELEMENTS[case]
        assert r.json()["translatedText"].count(tag) == count


@pytest.mark.parametrize("case", list(WORST))
def test_the_worst_markup_over_grpc_leaves_health_prompt(server, case):
    request = pb.TranslateRequest(sentences=[WORST[case]], format=pb.TEXT_FORMAT_HTML, split_sentences=True)
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)

        def call():
            try:
                return stub.Translate(request, timeout=60)
            except grpc.RpcError as e:
                return e
        answer, health = while_polled(server, call)
    check_health(health)
    if case == "alt-title":
        assert answer.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_document_sentences" in answer.details()
    else:
        assert not isinstance(answer, grpc.RpcError), answer
        tag, count = ELEMENTS[case]
        assert answer.translations[0].text.count(tag) == count


# Eight entries of empty siblings take well over a second to read on any machine.
LATE = ["<p>" * 16_000] * 8
DEADLINE = 0.3


def best_of(call) -> tuple[object, float]:
    """`call()` ATTEMPTS times: its last answer and its shortest time."""
    times = []
    for _ in range(ATTEMPTS):
        start = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - start)
    return answer, min(times)


def test_a_deadline_passing_while_markup_is_read_ends_the_call_over_http(server):
    body = {"sentences": LATE, "format": "TEXT_FORMAT_HTML", "splitSentences": True}
    with httpx.Client(base_url=server.http, timeout=60) as client:
        with Health(server) as health:
            r, elapsed = best_of(lambda: client.post("/v1/translate", json=body,
                                                     headers={"X-Request-Timeout": str(DEADLINE)}))
    assert r.status_code == 504 and r.json()["error"]["code"] == "DEADLINE_EXCEEDED", r.text
    assert elapsed <= DEADLINE + PROMPT, f"{elapsed:.3f} s"
    check_health(health)


def test_a_deadline_passing_while_markup_is_read_ends_the_call_over_grpc(server):
    request = pb.TranslateRequest(sentences=LATE, format=pb.TEXT_FORMAT_HTML, split_sentences=True)
    labels = {"grpc_method": "Translate", "grpc_code": "DEADLINE_EXCEEDED"}
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        before = server.metric("grpc_server_handled_total", **labels)

        def call():
            with pytest.raises(grpc.RpcError) as info:
                stub.Translate(request, timeout=DEADLINE)
            return info.value
        with Health(server) as health:
            error, elapsed = best_of(call)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert elapsed <= DEADLINE + PROMPT, f"{elapsed:.3f} s"
    check_health(health)
    # The server ended each call too (a handler still reading would not be counted): the client sees
    # its deadline pass on its own clock, so the server's count of the last call may come a moment later.
    waited = time.monotonic() + 1.0
    while server.metric("grpc_server_handled_total", **labels) < before + ATTEMPTS and time.monotonic() < waited:
        time.sleep(0.02)
    assert server.metric("grpc_server_handled_total", **labels) == before + ATTEMPTS


def many_attributes(count: int) -> str:
    return "<p " + " ".join(f"a{i}" for i in range(count)) + ">Hola</p>"


def test_a_tag_with_too_many_attributes_is_refused_in_an_entry_and_in_a_file(server):
    with httpx.Client(base_url=server.http, timeout=60) as client:
        with Health(server) as health:
            # 9,000 attributes, within an entry's 50,000 characters, took 3.9 s of a core
            entry = client.post("/v1/translate", json={"sentences": [many_attributes(6_000)],
                                                       "format": "TEXT_FORMAT_HTML"})
            # 20,000 (129 KB) took 32 s, past any deadline and past the client's going away
            page = client.post("/v1/translate_file", files={"file": ("pagina.html", many_attributes(20_000).encode())},
                               data={"source_language": "es", "target_language": "en"})
    for r in (entry, page):
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_ARGUMENT", r.text
        assert "<p> at offset 0 has more than 256 attributes (the attribute limit)" in r.json()["error"]["message"]
    check_health(health)


def test_a_large_answer_leaves_health_prompt(tiny_model):
    """Its words, links and JSON are written off the event loop: 64 sentences of about 80 words,
    16 hypotheses each with hard links (about 2 MB of JSON), held the loop for seconds."""
    text = " ".join([LONG] * 4)
    body = {"sentences": [text] * 64, "options": {"beamSize": 16, "nBest": 16, "alignment": "ALIGNMENT_HARD"}}
    with RunningServer([tiny_model], {"ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024"}) as server:
        with httpx.Client(base_url=server.http, timeout=120) as client:
            r, health = while_polled(server, lambda: client.post("/v1/translate", json=body))
    assert r.status_code == 200, r.text
    assert len(r.json()["translations"]) == 64 and len(r.json()["translations"][0]["hypotheses"]) == 16
    check_health(health)
