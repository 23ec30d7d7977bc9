"""The gRPC service end to end: a real `attnmt serve` on a loopback port, called
the way users call it."""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from attnmt.service.client import Client
from attnmt.service.inference.decoding import SearchOptions
from attnmt.service.modeldir.manifest import SCHEMA_VERSION
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc

from conftest import RunningServer, markov_model

SHORT = "peru vidas kasa ."
LONG_SENTENCE = " ".join(["kasa granda amas libo nova . gato roja havas arbo blanka ."] * 5)
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


# --- Translate ---------------------------------------------------------------

@pytest.mark.parametrize("beam", [1, 3])
def test_translate_matches_the_offline_engine(stub, translator, beam):
    offline = translator.translate([SHORT, LONG], SearchOptions(beam_size=beam, n_best=beam))
    response = stub.Translate(pb.TranslateRequest(sentences=[SHORT, LONG], options=pb.DecodingOptions(
        beam_size=beam, n_best=beam, alignment=pb.ALIGNMENT_SOFT)))
    assert response.model == "tiny"
    for want, got in zip(offline, response.translations):
        assert got.text == want.best.text
        assert list(got.source_tokens) == want.source_tokens
        assert len(got.hypotheses) == beam
        for w, g in zip(want.hypotheses, got.hypotheses):
            assert list(g.target_tokens) == w.target_tokens
            assert g.score == pytest.approx(w.score, abs=1e-5)
            rows = np.array([list(r.weights) for r in g.alignment.rows])
            assert np.abs(rows - w.alignment).max() < 1e-5
            assert g.alignment.pharaoh == " ".join(f"{i}-{j}" for i, j in w.hard_alignment())


def test_alignment_kinds(stub):
    def ask(kind, **extra):
        return stub.Translate(pb.TranslateRequest(sentences=["kasa granda vidas peru ."],
                                                  options=pb.DecodingOptions(alignment=kind, **extra))).translations[0]
    none = ask(pb.ALIGNMENT_NONE)
    assert none.text == "the big house sees the dog ."
    assert not none.hypotheses[0].HasField("alignment") and not none.source_words

    soft = ask(pb.ALIGNMENT_SOFT).hypotheses[0]
    assert soft.alignment.level == pb.Alignment.LEVEL_PIECES
    assert len(soft.alignment.rows) == len(soft.target_tokens)
    assert np.allclose([sum(r.weights) for r in soft.alignment.rows], 1, atol=1e-5)

    words = ask(pb.ALIGNMENT_WORDS)
    hyp = words.hypotheses[0]
    assert hyp.alignment.level == pb.Alignment.LEVEL_WORDS
    assert list(words.source_words) == ["kasa", "granda", "vidas", "peru", ".", "</s>"]
    assert list(hyp.target_words) == ["the", "big", "house", "sees", "the", "dog", ".", "</s>"]
    assert len(hyp.alignment.rows) == 8 and all(len(r.weights) == 6 for r in hyp.alignment.rows)
    assert np.allclose([sum(r.weights) for r in hyp.alignment.rows], 1, atol=1e-5)
    links = {(link.source, link.target) for link in hyp.alignment.links}
    assert (1, 1) in links and (0, 2) in links         # granda-big, kasa-house: crossed

    hard = ask(pb.ALIGNMENT_HARD, alignment_threshold=0.3).hypotheses[0]
    assert not hard.alignment.rows
    assert hard.alignment.pharaoh == " ".join(f"{link.source}-{link.target}" for link in hard.alignment.links)


def test_empty_whitespace_and_control_characters_are_handled(stub):
    response = stub.Translate(pb.TranslateRequest(sentences=["", "   \t ", "peru\x00 vidas\x07 kasa .", SHORT]))
    empty, blank, control, plain = response.translations
    assert empty.text == "" and not empty.hypotheses
    assert blank.text == "" and not blank.hypotheses
    assert control.text == plain.text                  # control characters act as spaces


@pytest.mark.parametrize("request_kwargs, field", [
    (dict(sentences=[]), "sentences is empty"),
    (dict(sentences=["a ."] * 65), "max_sentences_per_request"),
    (dict(sentences=["kasa " * 500]), "max_chars_per_sentence"),
    (dict(sentences=["kasa" * 450]), "max_tokens_per_sentence"),         # one very long word
    (dict(sentences=["a ."], options=pb.DecodingOptions(beam_size=99)), "max_beam_size"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(beam_size=2, n_best=3)), "n_best"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(alignment_threshold=1.5)), "alignment_threshold"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(max_length_ratio=-1)), "max_length_ratio"),
    (dict(sentences=["a ."], options=pb.DecodingOptions(length_penalty=float("nan"))), "length_penalty"),
])
def test_bad_input_is_invalid_argument_naming_the_limit(stub, request_kwargs, field):
    error = code_of(lambda: stub.Translate(pb.TranslateRequest(**request_kwargs)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in error.details()
    assert stub.Translate(pb.TranslateRequest(sentences=[SHORT])).translations[0].text   # still serving


def test_unknown_model_is_not_found(stub):
    error = code_of(lambda: stub.Translate(pb.TranslateRequest(sentences=["a"], model="nope")))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "tiny" in error.details()
    assert code_of(lambda: stub.GetModel(pb.GetModelRequest(name="nope"))).code() == grpc.StatusCode.NOT_FOUND


def test_oversize_message_is_resource_exhausted(server):
    with RunningServer([server_model(server)], {"ATTNMT_MAX_MESSAGE_BYTES": "2048"}) as small:
        with grpc.insecure_channel(small.address) as channel:
            error = code_of(lambda: pb_grpc.TranslatorStub(channel).Translate(
                pb.TranslateRequest(sentences=["kasa vidas peru ."] * 200)))
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def server_model(server) -> str:
    return next(line.split(" from ")[1].split(" on ")[0] for line in server.log if "loaded model" in line)


# --- Align, models, stream ------------------------------------------------------

def test_align_reproduces_the_translation_alignment(stub):
    translation = stub.Translate(pb.TranslateRequest(sentences=[LONG], options=pb.DecodingOptions(
        alignment=pb.ALIGNMENT_WORDS))).translations[0]
    aligned = stub.Align(pb.AlignRequest(source=LONG, target=translation.text))
    hyp, want = aligned.hypothesis, translation.hypotheses[0]
    assert list(hyp.target_tokens) == list(want.target_tokens)
    assert hyp.log_prob == pytest.approx(want.log_prob, abs=1e-4)
    got = np.array([list(r.weights) for r in hyp.alignment.rows])
    expected = np.array([list(r.weights) for r in want.alignment.rows])
    assert np.abs(got - expected).max() < 1e-5
    error = code_of(lambda: stub.Align(pb.AlignRequest(source=LONG, target="")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_list_and_get_model(stub):
    models = stub.ListModels(pb.ListModelsRequest()).models
    assert [m.name for m in models] == ["tiny"]
    info = stub.GetModel(pb.GetModelRequest())
    assert info.is_default and info.source_language == "xx" and info.target_language == "en"
    assert info.provider == "CPUExecutionProvider"
    assert info.limits["max_sentences_per_request"] == 64
    assert f'"schema_version": {SCHEMA_VERSION}' in info.manifest_json


def test_stream_answers_each_sentence_with_its_id(server):
    sentences = {f"s{i}": s for i, s in enumerate([SHORT, LONG, "gato .", "", "kasa" * 450, SHORT])}
    received = server.metric("grpc_server_msg_received_total", grpc_method="TranslateStream")
    sent = server.metric("grpc_server_msg_sent_total", grpc_method="TranslateStream")
    with Client(server.address) as client:
        results = dict(client.stream(sentences.items(), SearchOptions(beam_size=2)))
    assert server.metric("grpc_server_msg_received_total", grpc_method="TranslateStream") == received + 6
    assert server.metric("grpc_server_msg_sent_total", grpc_method="TranslateStream") == sent + 6
    assert server.metric("grpc_server_handled_total", grpc_method="TranslateStream", grpc_type="bidi_stream",
                         grpc_code="OK") >= 1
    assert set(results) == set(sentences)
    assert isinstance(results["s4"], pb.Error) and results["s4"].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert results["s0"].best.text == results["s5"].best.text == "the dog sees the house ."
    assert results["s3"].hypotheses == []


def test_client_and_cli_print_translation_and_alignment(server, tmp_path):
    plot = tmp_path / "alignment.png"
    out = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address,
                          "--alignment", "hard", "--plot", str(plot), "kasa granda vidas peru ."],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().startswith("the big house sees the dog . ||| ")
    assert "1-1" in out and "0-2" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- health, reflection, metrics ----------------------------------------------

def test_health_and_reflection(server):
    with grpc.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "attnmt.v1.Translator"):
            assert health.Check(health_pb2.HealthCheckRequest(service=service)).status == \
                health_pb2.HealthCheckResponse.SERVING
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        answer = next(reflect.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in answer.list_services_response.service}
        assert {"attnmt.v1.Translator", "grpc.health.v1.Health"} <= names


def test_metrics_appear_and_move(server, stub):
    labels = dict(grpc_service="attnmt.v1.Translator", grpc_method="Translate", grpc_code="OK")
    before_ok = server.metric("grpc_server_handled_total", **labels)
    before_bad = server.metric("grpc_server_handled_total", grpc_method="Translate", grpc_code="INVALID_ARGUMENT")
    before_sentences = server.metric("attnmt_sentences_total", model="tiny")
    before_idle = server.metric("attnmt_idle_steps_total")
    stub.Translate(pb.TranslateRequest(sentences=[SHORT, LONG]))
    code_of(lambda: stub.Translate(pb.TranslateRequest(sentences=[])))
    assert server.metric("grpc_server_handled_total", **labels) == before_ok + 1
    assert server.metric("grpc_server_handled_total", grpc_method="Translate", grpc_code="INVALID_ARGUMENT") == before_bad + 1
    assert server.metric("attnmt_sentences_total", model="tiny") == before_sentences + 2
    assert server.metric("attnmt_batch_rows_count") > 0
    assert server.metric("attnmt_idle_steps_total") > before_idle     # two sentences alone: idle steps
    assert server.metric("attnmt_model_info", model="tiny", provider="CPUExecutionProvider") == 1
    assert server.metric("attnmt_ready") == 1
    assert server.metric("attnmt_rejected_total", reason="invalid_input") >= 1


def test_promtool_accepts_the_scrape(server, stub):
    import shutil
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; `make test` installs it)")
    stub.Translate(pb.TranslateRequest(sentences=[SHORT]))
    result = subprocess.run([promtool, "check", "metrics"], input=server.scrape(), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- batching under concurrency ------------------------------------------------

def test_same_answer_alone_and_among_concurrent_requests(stub):
    options = pb.DecodingOptions(beam_size=2, alignment=pb.ALIGNMENT_SOFT)
    alone = stub.Translate(pb.TranslateRequest(sentences=[SHORT], options=options)).translations[0]
    crowd = [LONG, "gato .", LONG + " " + LONG, SHORT, "sola amas luna granda ."] * 4
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda s: stub.Translate(pb.TranslateRequest(sentences=[s], options=options)), crowd))
    for sentence, answer in zip(crowd, answers):
        if sentence == SHORT:
            got = answer.translations[0].hypotheses[0]
            assert got.text == alone.text
            assert got.score == pytest.approx(alone.hypotheses[0].score, abs=1e-5)
            a = np.array([list(r.weights) for r in got.alignment.rows])
            b = np.array([list(r.weights) for r in alone.hypotheses[0].alignment.rows])
            assert np.abs(a - b).max() < 1e-5


def test_request_level_batching_gives_the_same_answers(tiny_model, stub):
    crowd = [LONG, "gato .", SHORT, "sola amas luna granda ."]
    want = [t.text for t in stub.Translate(pb.TranslateRequest(sentences=crowd)).translations]
    with RunningServer([tiny_model], {"ATTNMT_BATCHING": "request", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server:
        with grpc.insecure_channel(server.address) as channel:
            s = pb_grpc.TranslatorStub(channel)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                got = list(pool.map(lambda x: s.Translate(pb.TranslateRequest(sentences=[x])).translations[0].text,
                                    crowd))
    assert got == want


# --- overload, deadlines, cancellation, failures, drain -----------------------

LONG_TARGET = " ".join(["the big house sees the dog ."] * 45)     # forced decoding: ~950 steps


def slow_align(s, **kw):
    return s.Align.future(pb.AlignRequest(source=LONG, target=LONG_TARGET), **kw)


def test_overload_is_refused_fast_with_a_retry_hint(tiny_model):
    env = {"ATTNMT_MAX_QUEUE": "2", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_RETRY_AFTER_SECONDS": "0.25",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        calls = [slow_align(s) for _ in range(12)]
        outcomes = []
        for call in calls:
            try:
                outcomes.append(call.result(timeout=60))
            except grpc.RpcError as e:
                outcomes.append(e)
        refused = [o for o in outcomes if isinstance(o, grpc.RpcError)]
        accepted = [o for o in outcomes if not isinstance(o, grpc.RpcError)]
        assert refused and accepted
        for error in refused:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_queue is 2" in error.details()
            status = rpc_status.from_call(error)
            info = error_details_pb2.RetryInfo()
            assert status.details[0].Unpack(info)
            assert info.retry_delay.ToMilliseconds() == 250
        for answer in accepted:
            assert len(answer.hypothesis.target_tokens) > 800
        assert server.metric("attnmt_rejected_total", reason="queue_full") == len(refused)


def test_the_retry_hint_grows_while_refusals_keep_coming(tiny_model):
    """RetryInfo's delay doubles each second with more refusals than
    overload_refusals_per_second, up to retry_after_max_seconds."""
    env = {"ATTNMT_MAX_QUEUE": "1", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024",
           "FAULTS": "step_delay_ms=10",          # each slow align: ~950 steps, ~10 s
           "ATTNMT_RETRY_AFTER_SECONDS": "0.1", "ATTNMT_RETRY_AFTER_MAX_SECONDS": "0.4",
           "ATTNMT_OVERLOAD_REFUSALS_PER_SECOND": "5"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        give_up = time.monotonic() + 30
        busy = []
        # one decoding, then one waiting: the queue (max_queue 1) is full. The second is sent
        # only once the first has left the queue, or the gate would refuse it too.
        for gauge in ("attnmt_inflight_sentences", "attnmt_queue_depth"):
            busy.append(slow_align(s))
            while server.metric(gauge) < 1:
                assert time.monotonic() < give_up, f"{gauge} never reached 1"
                time.sleep(0.01)
        delays = []
        end = time.monotonic() + 3.5
        while time.monotonic() < end:
            try:
                s.Translate(pb.TranslateRequest(sentences=["the dog"]), timeout=10)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
                info = error_details_pb2.RetryInfo()
                assert rpc_status.from_call(e).details[0].Unpack(info)
                delays.append(info.retry_delay.ToMilliseconds())
                assert f"retry after {delays[-1] / 1000:g}s" in e.details()
            time.sleep(0.02)
        for call in busy:
            call.cancel()
        assert delays[0] == 100 and delays == sorted(delays), delays
        assert delays[-1] == 400, delays                      # 100 -> 200 -> 400, the ceiling
        assert set(delays) == {100, 200, 400}


def test_expired_and_cancelled_sentences_are_not_computed(tiny_model):
    env = {"ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1", "ATTNMT_DEFAULT_BEAM_SIZE": "1",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        base = server.metric("attnmt_sentences_total", model="tiny")
        started = server.metric("grpc_server_started_total", grpc_method="Translate")
        aligns = server.metric("grpc_server_started_total", grpc_method="Align")
        busy = [slow_align(s) for _ in range(12)]                      # keep the single row busy
        give_up = time.monotonic() + 30
        while server.metric("grpc_server_started_total", grpc_method="Align") < aligns + 12:
            assert time.monotonic() < give_up, "the aligns never reached the server"
            time.sleep(0.01)                                           # all queued ahead of what follows
        expiring = s.Translate.future(pb.TranslateRequest(sentences=[SHORT]), timeout=0.05)
        cancelled = s.Translate.future(pb.TranslateRequest(sentences=[LONG]))
        while server.metric("grpc_server_started_total", grpc_method="Translate") < started + 2:
            assert time.monotonic() < give_up, "the translations never reached the server"
            time.sleep(0.01)                                           # both reached the server
        cancelled.cancel()
        with pytest.raises(grpc.RpcError) as info:
            expiring.result()
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        for call in busy:
            call.result(timeout=60)
        after = s.Translate(pb.TranslateRequest(sentences=[SHORT]))
        assert after.translations[0].text
        # the aligns and the last translation were computed; the expired and cancelled ones were not
        assert server.metric("attnmt_sentences_total", model="tiny") == base + 13
        # The expired call is counted as expired when the server's own deadline check sees it
        # first, as cancelled when gRPC's cancellation of the handler does: a race on a busy machine.
        gone = sum(server.metric("attnmt_rejected_total", reason=r) for r in ("deadline_exceeded", "cancelled"))
        assert gone == 2 and server.metric("attnmt_rejected_total", reason="cancelled") >= 1


def test_failing_step_fails_only_its_requests(tiny_model, tmp_path):
    from attnmt.service.inference.engine import Engine
    vocab = Engine(tiny_model).manifest.vocab_size
    table = np.log(np.full((16, vocab), 1.0 / vocab, dtype=np.float32))
    table[:, 3] = 0.0                                     # </s> at once: short outputs
    broken = markov_model(tmp_path, tiny_model, table, vocab=vocab)   # tokens >= 16 crash the step
    with RunningServer([tiny_model, broken]) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        error = code_of(lambda: s.Align(pb.AlignRequest(source="kasa .", target="house sees the dog .",
                                                        model="markov")))
        assert error.code() == grpc.StatusCode.INTERNAL and "decoder step failed" in error.details()
        assert server.metric("attnmt_step_failures_total") == 1
        # the same model and the other one still serve
        assert s.Translate(pb.TranslateRequest(sentences=["kasa ."], model="markov")).translations[0]
        assert s.Translate(pb.TranslateRequest(sentences=[SHORT], model="tiny")).translations[0].text


def test_sigterm_drains_without_losing_in_flight_requests(tiny_model):
    env = {"ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1", "ATTNMT_DEFAULT_BEAM_SIZE": "1",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "ATTNMT_GRACE_PERIOD_SECONDS": "30"}
    server = RunningServer([tiny_model], env)
    try:
        with grpc.insecure_channel(server.address) as channel:
            s = pb_grpc.TranslatorStub(channel)
            in_flight = [slow_align(s) for _ in range(16)]
            give_up = time.monotonic() + 30
            while server.metric("grpc_server_started_total", grpc_method="Align") < 16:
                assert time.monotonic() < give_up, "the aligns never reached the server"
                time.sleep(0.01)                            # all sixteen reached the server
            assert server.metric("grpc_server_handled_total", grpc_method="Align") < 16   # some still running
            server.proc.send_signal(signal.SIGTERM)
            while not any("draining" in line for line in server.log):
                assert time.monotonic() < give_up + 30, "the server never started draining"
                time.sleep(0.01)
            with grpc.insecure_channel(server.address) as late_channel:
                late = code_of(lambda: pb_grpc.TranslatorStub(late_channel).Translate(
                    pb.TranslateRequest(sentences=[SHORT]), timeout=5))
            assert late.code() == grpc.StatusCode.UNAVAILABLE
            for call in in_flight:
                assert len(call.result(timeout=60).hypothesis.target_tokens) > 800
        assert server.proc.wait(60) == 0
        assert any("stopped" in line for line in server.log)
    finally:
        server.terminate()


# --- configuration -----------------------------------------------------------------

def run_serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([sys.executable, "-m", "attnmt.service.cli", "serve", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


def test_invalid_configuration_names_the_field(tiny_model):
    result = run_serve({"ATTNMT_MODELS": str(tiny_model), "ATTNMT_MAX_QUEUE": "0"})
    assert result.returncode == 2 and "max_queue" in result.stderr
    result = run_serve({"ATTNMT_MODELS": str(tiny_model), "ATTNMT_BATCHING": "sometimes"})
    assert result.returncode == 2 and "batching" in result.stderr


def test_port_in_use_is_reported(server, tiny_model):
    result = run_serve({"ATTNMT_MODELS": str(tiny_model), "ATTNMT_HOST": "127.0.0.1", "ATTNMT_PORT": str(server.port),
                        "ATTNMT_METRICS_PORT": "0"})
    assert result.returncode == 2 and f"cannot listen on 127.0.0.1:{server.port}" in result.stderr


def test_missing_model_directory_is_reported(tmp_path):
    result = run_serve({"ATTNMT_MODELS": str(tmp_path / "nothing"), "ATTNMT_METRICS_PORT": "0", "ATTNMT_PORT": "0"})
    assert result.returncode == 2 and "no manifest.json" in result.stderr


# --- arbitrary text never breaks the server ----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=120), min_size=1, max_size=3))
def test_any_text_gets_a_translation_or_a_clear_refusal(stub, texts):
    try:
        response = stub.Translate(pb.TranslateRequest(sentences=texts, options=pb.DecodingOptions(
            alignment=pb.ALIGNMENT_WORDS)), timeout=30)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.details()
        return
    assert len(response.translations) == len(texts)
    for t in response.translations:
        for h in t.hypotheses:
            assert len(h.alignment.rows) == len(h.target_words)


def test_translation_cache_answers_repeats_without_decoding(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_CACHE_SIZE": "2", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server, \
            grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        words = pb.DecodingOptions(alignment=pb.ALIGNMENT_WORDS)
        first = s.Translate(pb.TranslateRequest(sentences=[SHORT], options=words))
        again = s.Translate(pb.TranslateRequest(sentences=[SHORT], options=words))
        assert again == first
        assert server.metric("attnmt_cache_requests_total", result="hit") == 1
        assert server.metric("attnmt_sentences_total", model="tiny") == 1 + 1    # warm-up + one decode
        # another option is another answer: a miss
        s.Translate(pb.TranslateRequest(sentences=[SHORT], options=pb.DecodingOptions(beam_size=2)))
        assert server.metric("attnmt_cache_requests_total", result="miss") == 2
        assert server.metric("attnmt_cache_entries", model="tiny") == 2


def test_cli_through_a_server_on_a_terminal_draws_the_heatmap(server, tmp_path):
    """Issue 9: on a terminal the CLI draws the word alignment even when none was asked
    for; it used to crash because the server was asked for no alignment."""
    import os
    import pty
    leader, follower = pty.openpty()
    plot = tmp_path / "a.png"
    proc = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address,
                           "--plot", str(plot), SHORT], stdout=follower, stderr=subprocess.PIPE, timeout=60)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert proc.returncode == 0, proc.stderr.decode()
    text = output.decode()
    assert "↓ peru" in text and "the" in text
    assert plot.stat().st_size > 1000


def test_a_response_that_could_not_be_sent_is_refused_before_decoding(tiny_model):
    env = {"ATTNMT_MAX_MESSAGE_BYTES": "20000", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        soft = pb.DecodingOptions(beam_size=16, n_best=16, alignment=pb.ALIGNMENT_SOFT)
        error = code_of(lambda: s.Translate(pb.TranslateRequest(sentences=[SHORT] * 8, options=soft)))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_message_bytes (20000)" in error.details()
        assert server.metric("attnmt_sentences_total", model="tiny") == 1          # only the warm-up decoded
        # links only: no up-front bound, but the finished response is still measured before it is sent
        hard = pb.DecodingOptions(beam_size=16, n_best=16, alignment=pb.ALIGNMENT_HARD)
        error = code_of(lambda: s.Translate(pb.TranslateRequest(sentences=[SHORT] * 8, options=hard)))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "over max_message_bytes" in error.details()
        small = pb.DecodingOptions(beam_size=2, n_best=2, alignment=pb.ALIGNMENT_HARD)
        assert len(s.Translate(pb.TranslateRequest(sentences=[SHORT] * 2, options=small)).translations) == 2


@pytest.mark.parametrize("method, payload", [
    ("Translate", b"\x0a\x02\xff\xfe"),          # sentences[0] is not UTF-8
    ("Translate", b"\xff\xff\xff"),              # not a protobuf at all
    ("Align", b"\x0a\x01"),                      # truncated
    ("GetModel", b"\x0a\x02\xc3\x28"),
])
def test_bytes_that_do_not_parse_get_invalid_argument(server, method, payload):
    """Issue 7 #11: they used to end UNKNOWN with a Python exception class in the message."""
    with grpc.insecure_channel(server.address) as channel:
        call = channel.unary_unary(f"/attnmt.v1.Translator/{method}")
        with pytest.raises(grpc.RpcError) as error:
            call(payload, timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "is not a valid attnmt.v1." in error.value.details()
        # and the server keeps serving
        assert pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=[SHORT])).translations


def test_a_malformed_stream_item_ends_the_stream_invalid_argument(server):
    with grpc.insecure_channel(server.address) as channel:
        call = channel.stream_stream("/attnmt.v1.Translator/TranslateStream")
        good = pb.StreamRequest(id="a", sentence=SHORT).SerializeToString()
        with pytest.raises(grpc.RpcError) as error:
            list(call(iter([good, b"\x12\x02\xff\xfe"]), timeout=10))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_stream_client_that_does_not_read_stops_being_read(tiny_model):
    """Issue 7 #3: responses waiting to be sent hold their permits, so the server stops
    reading requests instead of buffering without bound."""
    import threading
    env = {"ATTNMT_MAX_STREAM_IN_FLIGHT": "4", "ATTNMT_DEFAULT_BEAM_SIZE": "1"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        sent = threading.Event()
        count = {"n": 0}

        def requests():
            soft = pb.DecodingOptions(alignment=pb.ALIGNMENT_SOFT)      # large responses: ~15 kB each
            for i in range(1000):
                count["n"] += 1
                yield pb.StreamRequest(id=str(i), sentence=LONG_SENTENCE, options=soft)
            sent.set()
        responses = pb_grpc.TranslatorStub(channel).TranslateStream(requests(), timeout=60)
        received = lambda: server.metric("grpc_server_msg_received_total", grpc_method="TranslateStream")  # noqa: E731
        before, give_up = -1.0, time.monotonic() + 20
        while time.monotonic() < give_up:            # wait until the server stops reading
            time.sleep(0.5)
            now = received()
            if now == before:
                break
            before = now
        # never read a response: the server stopped reading long before the end
        # (what it did read is its bound plus what the transport's flow-control windows hold)
        assert received() < 500
        answered = sum(1 for _ in responses)          # now read everything: all 1000 come back
        assert answered == 1000 and sent.is_set()


def test_server_caps_deadlines_and_ends_idle_streams(tiny_model):
    env = {"ATTNMT_MAX_DEADLINE_SECONDS": "0.001", "ATTNMT_STREAM_IDLE_TIMEOUT_SECONDS": "0.5",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_WARMUP": "false"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        # no deadline from the client: the server's cap applies
        error = code_of(lambda: s.Translate(pb.TranslateRequest(sentences=[LONG_SENTENCE] * 8)))
        assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    env["ATTNMT_MAX_DEADLINE_SECONDS"] = "0"
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        import queue as queue_module
        outbox: queue_module.Queue = queue_module.Queue()
        outbox.put(pb.StreamRequest(id="1", sentence=SHORT))

        def requests():
            while (item := outbox.get()) is not None:
                yield item
        responses = s.TranslateStream(requests(), timeout=30)
        assert next(responses).id == "1"                 # then the client goes quiet
        with pytest.raises(grpc.RpcError) as error:
            next(responses)
        outbox.put(None)
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "stream_idle_timeout_seconds" in error.value.details()


def test_unknown_methods_are_answered_and_counted(server):
    with grpc.insecure_channel(server.address) as channel:
        for method in ("/attnmt.v1.Translator/Nope", "/some.Other/Thing"):
            with pytest.raises(grpc.RpcError) as error:
                channel.unary_unary(method)(b"", timeout=10)
            assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert server.metric("grpc_server_handled_total", grpc_method="unknown", grpc_code="UNIMPLEMENTED") == 2
    assert server.metric("grpc_server_started_total", grpc_service="attnmt.v1.Translator", grpc_method="unknown") == 1


def test_the_python_client_retries_overload_as_retry_info_says(tiny_model):
    import threading
    env = {"ATTNMT_MAX_QUEUE": "2", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_RETRY_AFTER_SECONDS": "0.05",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024"}
    target = " ".join(["the big house sees the dog ."] * 30)     # ~600 forced steps each
    with RunningServer([tiny_model], env) as server:
        def burst(retries: int) -> list:
            outcomes: list = []

            def one():
                with Client(server.address, timeout=60, retries=retries) as client:
                    try:
                        outcomes.append(client.align(LONG, target))
                    except grpc.RpcError as e:
                        outcomes.append(e.code())
            threads = [threading.Thread(target=one) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            return outcomes
        without = burst(0)
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in without      # the server does refuse this burst
        with_retries = burst(100)
        assert len(with_retries) == 8 and all(not isinstance(o, grpc.StatusCode) for o in with_retries)


def test_the_cli_through_a_server_uses_the_servers_default_beam_unless_told(tiny_model):
    """`attnmt translate --server` without --beam asks for the server's default_beam_size
    (here 4: steps of up to 4 rows); --beam 1 is greedy (one row a step)."""
    def rows_per_step_of(*flags: str) -> float:
        rows, steps = server.metric("attnmt_batch_rows_sum"), server.metric("attnmt_batch_rows_count")
        subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address, *flags,
                        "peru vidas kasa ."], capture_output=True, text=True, check=True)
        return (server.metric("attnmt_batch_rows_sum") - rows) / (server.metric("attnmt_batch_rows_count") - steps)

    with RunningServer([tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "4", "ATTNMT_WARMUP": "false"}) as server:
        assert rows_per_step_of() > 1.5
        assert rows_per_step_of("--beam", "1") == 1.0
