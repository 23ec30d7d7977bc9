"""HTTP beside gRPC: the native JSON API of a real `attnmt serve`, called as a user would,
and held against the same server's gRPC answers."""

from __future__ import annotations

import signal
import threading
import time

import grpc
import httpx
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from conftest import LONG, LONG_TARGET, SHORT, RunningServer, at_once, error_of

SLOW_ALIGN = {"source": LONG, "target": LONG_TARGET}      # forced decoding, ~950 steps


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.http, timeout=60) as client:
        yield client


def test_a_translation_over_http_is_the_one_over_grpc(server, stub, http):
    before = {p: server.metric("attnmt_sentences_total", protocol=p) for p in ("grpc", "http")}
    over_grpc = stub.Translate(pb.TranslateRequest(sentences=[SHORT, LONG],
                                                   options=pb.DecodingOptions(alignment=pb.ALIGNMENT_HARD)))
    r = http.post("/v1/translate", json={"sentences": [SHORT, LONG], "options": {"alignment": "ALIGNMENT_HARD"}})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert [t["text"] for t in body["translations"]] == [t.text for t in over_grpc.translations]
    assert [t["hypotheses"][0]["alignment"]["pharaoh"] for t in body["translations"]] == \
        [t.hypotheses[0].alignment.pharaoh for t in over_grpc.translations]
    assert body["model"] == over_grpc.model
    # the worker counts the sentences whichever protocol they came by, labelled with it
    assert {p: server.metric("attnmt_sentences_total", protocol=p) - before[p] for p in before} == \
        {"grpc": 2, "http": 2}


def test_fields_in_either_spelling_and_enums_by_name(http):
    r = http.post("/v1/translate", json={"sentences": [SHORT],
                                         "options": {"beam_size": 3, "nBest": 2, "alignment": "ALIGNMENT_SOFT"}})
    assert r.status_code == 200, r.text
    (translation,) = r.json()["translations"]
    assert {"sourceTokens", "sourceWords", "hypotheses"} <= set(translation)      # lowerCamelCase out
    hyps = translation["hypotheses"]
    assert len(hyps) == 2 and hyps[0]["score"] >= hyps[1]["score"]
    rows = hyps[0]["alignment"]["rows"]
    assert hyps[0]["alignment"]["level"] == "LEVEL_PIECES"
    assert len(rows) == len(hyps[0]["targetTokens"]) and len(rows[0]["weights"]) == len(translation["sourceTokens"])
    assert abs(sum(rows[0]["weights"]) - 1) < 1e-3
    assert hyps[0]["suspect"] in (True, False)          # present even when false


def test_align_and_the_models(http):
    r = http.post("/v1/align", json={"source": SHORT, "target": "the dog sees the house ."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hypothesis"]["text"] == "the dog sees the house ." and body["hypothesis"]["alignment"]["links"]
    models = http.get("/v1/models").json()["models"]
    assert [m["name"] for m in models] == ["tiny"] and models[0]["isDefault"] is True
    one = http.get("/v1/models/tiny").json()
    assert one["name"] == "tiny" and one["sourceLanguage"] == "xx"
    assert int(one["limits"]["max_beam_size"]) > 0        # map keys as they are; int64 a string in JSON


@pytest.mark.parametrize("call, status, code, words", [
    (("POST", "/v1/translate", {"sentences": []}), 400, "INVALID_ARGUMENT", "sentences is empty"),
    (("POST", "/v1/translate", {"sentences": [SHORT], "model": "nope"}), 404, "NOT_FOUND", "'nope' is not served"),
    (("GET", "/v1/models/nope", None), 404, "NOT_FOUND", "'nope' is not served"),
    (("POST", "/v1/translate", {"sentencs": [SHORT]}), 400, "INVALID_ARGUMENT", 'no field named "sentencs"'),
    (("POST", "/v1/translate", {"sentences": [SHORT], "options": {"alignment": "ALIGNMENT_SOMETIMES"}}), 400,
     "INVALID_ARGUMENT", "ALIGNMENT_SOMETIMES"),
    (("POST", "/v1/translate", {"sentences": [SHORT], "options": {"beamSize": 99}}), 400, "INVALID_ARGUMENT",
     "max_beam_size"),
    (("POST", "/v1/align", {"source": SHORT}), 400, "INVALID_ARGUMENT", "must both be non-empty"),
])
def test_errors_name_the_field_with_the_grpc_code(http, stub, call, status, code, words):
    method, path, body = call
    r = http.request(method, path, json=body)
    assert r.status_code == status
    assert r.json()["error"]["code"] == code and words in r.json()["error"]["message"], r.text


def test_the_same_message_as_grpc(http, stub):
    e = error_of(lambda: stub.Translate(pb.TranslateRequest(sentences=["x" * 2001])))
    r = http.post("/v1/translate", json={"sentences": ["x" * 2001]})
    assert r.status_code == 400 and r.json()["error"]["message"] == e.details()


def test_bodies_that_are_not_requests(http):
    r = http.post("/v1/translate", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not a valid attnmt.v1.TranslateRequest" in r.json()["error"]["message"]
    r = http.post("/v1/translate", content=b"x" * (4 * 1024 * 1024 + 1))
    assert r.status_code == 413 and "max_message_bytes" in r.json()["error"]["message"]
    r = http.get("/v1/translate")
    assert r.status_code == 405
    r = http.post("/v1/translate", json={"sentences": [SHORT]}, headers={"x-request-timeout": "soon"})
    assert r.status_code == 400 and "X-Request-Timeout" in r.json()["error"]["message"]
    assert http.get("/nowhere").status_code == 404


def test_health_readiness_and_the_http_metrics(server, http):
    assert http.get("/healthz").json() == {"status": "ok"}
    r = http.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "SERVING"}
    before = server.metric("http_server_requests_total", route="/v1/models/{name}", code="404")
    http.get("/v1/models/nope-at-all")
    assert server.metric("http_server_requests_total", route="/v1/models/{name}", code="404") == before + 1
    assert server.metric("http_server_request_duration_seconds_count", route="/v1/models/{name}") >= 1


def test_cors_as_browsers_need_it(http):
    r = http.options("/v1/translate", headers={"Origin": "https://example.org", "Access-Control-Request-Method":
                                               "POST", "Access-Control-Request-Headers": "content-type"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    r = http.post("/v1/translate", json={"sentences": [SHORT]}, headers={"Origin": "https://example.org"})
    assert r.headers["access-control-allow-origin"] == "*"


def test_a_deadline_from_either_header(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "ATTNMT_MAX_BEAM_SIZE": "1",
                                      "ATTNMT_DEFAULT_BEAM_SIZE": "1", "FAULTS": "step_delay_ms=10"}) as server:
        for header in ({"grpc-timeout": "300m"}, {"X-Request-Timeout": "0.3"}):
            r = httpx.post(server.http + "/v1/align", json=SLOW_ALIGN, headers=header, timeout=30)
            assert r.status_code == 504 and r.json()["error"]["code"] == "DEADLINE_EXCEEDED", (header, r.text)
            assert "deadline" in r.json()["error"]["message"].lower(), r.text


def test_a_client_that_goes_away_frees_its_rows(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "ATTNMT_MAX_BEAM_SIZE": "1",
                                      "ATTNMT_DEFAULT_BEAM_SIZE": "1", "FAULTS": "step_delay_ms=10"}) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.http + "/v1/align", json=SLOW_ALIGN, timeout=0.5)
        # The event loop counts the cancellation when the client goes (Scheduler.cancel); the
        # decode worker frees the rows at its next step boundary and only then sets the gauge:
        # wait for both, since the counter shows first.
        give_up = time.monotonic() + 10
        while ((server.metric("attnmt_rejected_total", reason="cancelled") < 1
                or server.metric("attnmt_inflight_sentences") != 0) and time.monotonic() < give_up):
            time.sleep(0.05)
        assert server.metric("attnmt_rejected_total", reason="cancelled") == 1
        assert server.metric("attnmt_inflight_sentences") == 0


def test_overload_is_429_with_retry_after(tiny_model):
    env = {"ATTNMT_MAX_QUEUE": "2", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_RETRY_AFTER_SECONDS": "0.25",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "FAULTS": "step_delay_ms=2"}
    # a third of SLOW_ALIGN (some 320 steps, 0.6 s or more each): the eight calls arrive while the
    # first is decoded, and the three admitted take a few seconds in turn, not ten
    align = {**SLOW_ALIGN, "target": " ".join(["the big house sees the dog ."] * 15)}
    with RunningServer([tiny_model], env) as server:
        answers = at_once(lambda: httpx.post(server.http + "/v1/align", json=align, timeout=60), 8)
        refused = [r for r in answers if r.status_code == 429]
        assert refused and any(r.status_code == 200 for r in answers)
        assert {r.status_code for r in answers} <= {200, 429}
        for r in refused:
            assert r.headers["retry-after"] == "1"            # 0.25 s, in the whole seconds HTTP allows
            assert r.json()["error"]["code"] == "RESOURCE_EXHAUSTED" and "max_queue" in r.json()["error"]["message"]
        assert server.metric("attnmt_rejected_total", reason="queue_full", protocol="http") == len(refused)
        assert server.metric("attnmt_rejected_total", protocol="grpc") == 0


def test_api_keys_when_configured(tiny_model, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# who may call\nsecret-1 weblate\nsecret-2\n")
    with RunningServer([tiny_model], {"ATTNMT_API_KEYS": str(keys)}) as server:
        url = server.http + "/v1/translate"
        body = {"sentences": [SHORT]}
        r = httpx.post(url, json=body)
        assert r.status_code == 403 and "API key is required" in r.json()["error"]["message"]
        assert httpx.post(url, json=body, headers={"authorization": "Bearer nope"}).status_code == 403
        assert httpx.post(url, json=body, headers={"authorization": "Bearer secret-1"}).status_code == 200
        assert httpx.post(url, json=body, headers={"x-api-key": "secret-2"}).status_code == 200
        assert httpx.get(server.http + "/healthz").status_code == 200       # probes need no key
        # gRPC is not behind the keys (its callers are identified by mTLS)
        with grpc.insecure_channel(server.address) as channel:
            from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
            assert pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=[SHORT])).translations


def test_sigterm_drains_http_calls_in_flight(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "ATTNMT_MAX_BEAM_SIZE": "1",
                                      "ATTNMT_DEFAULT_BEAM_SIZE": "1", "FAULTS": "step_delay_ms=2"}) as server:
        answers: list[httpx.Response] = []
        caller = threading.Thread(target=lambda: answers.append(
            httpx.post(server.http + "/v1/align", json=SLOW_ALIGN, timeout=60)))
        caller.start()
        give_up = time.monotonic() + 10
        while server.metric("attnmt_inflight_sentences") < 1 and time.monotonic() < give_up:
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        try:
            late = httpx.post(server.http + "/v1/translate", json={"sentences": [SHORT]}, timeout=10)
            assert late.status_code == 503 and late.json()["error"]["code"] == "UNAVAILABLE"
            assert late.headers["retry-after"]
        except httpx.ConnectError:              # already closed to new callers: also a refusal,
            assert caller.is_alive()            # but only while the call in flight is still drained
        caller.join(60)
        assert answers and answers[0].status_code == 200, answers and answers[0].text
        assert len(answers[0].json()["hypothesis"]["targetTokens"]) > 800
        assert server.proc.wait(30) == 0


def test_a_failing_sentence_is_500_in_each_shape_and_recorded(tiny_model):
    """A decoder step that breaks on one sentence (INTERNAL): 500 on both APIs, the server keeps
    serving, and with the request log on, HTTP calls are logged like gRPC ones (protocol=http)."""
    env = {"FAULTS": "poison=gato", "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_LOG_LEVEL": "debug"}
    with RunningServer([tiny_model], env) as server:
        r = httpx.post(server.http + "/v1/translate", json={"sentences": ["gato ."]}, timeout=30)
        assert r.status_code == 500 and r.json()["error"]["code"] == "INTERNAL"
        lt = httpx.post(server.http + "/translate", json={"q": "gato .", "source": "xx", "target": "en"}, timeout=30)
        assert lt.status_code == 500 and lt.json()["error"].startswith("Cannot translate text: ")
        ok = httpx.post(server.http + "/v1/translate", json={"sentences": [SHORT]},
                        headers={"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"}, timeout=30)
        assert ok.status_code == 200
        give_up = time.monotonic() + 5
        while not any("trace_id=" + "ab" * 16 in line for line in server.log) and time.monotonic() < give_up:
            time.sleep(0.05)
        (line,) = [line for line in server.log if "trace_id=" + "ab" * 16 in line]
        assert "/attnmt.v1.Translator/Translate" in line and "protocol=http" in line and "status=OK" in line
        assert any("protocol=http" in line and "status=INTERNAL" in line for line in server.log)
