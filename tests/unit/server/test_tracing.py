"""Traces and the request log of a real server (in this process, so that the
OpenTelemetry SDK's in-memory exporter sees its spans), called over loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

import grpc
import pytest

from attnmt.service.errors import ConfigError
from attnmt.service.server import tracing
from attnmt.service.server.app import Server
from attnmt.service.server.logs import JsonFormatter
from attnmt.service.server.settings import Settings
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SHORT, OTHER = "peru vidas kasa .", "gato amas libo nova ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."
LONG_TARGET = " ".join(["the big house sees the dog ."] * 45)     # forced decoding: ~950 steps


def settings(model, **values) -> Settings:
    return Settings(models=[model], host="127.0.0.1", port=0, metrics_enabled=False, intra_op_threads=1,
                    default_beam_size=1, max_tokens_per_sentence=1024, **values)


def serve(config: Settings, calls) -> Server:
    """Start a server, run `calls(stub, channel, server)` against it, stop it; returns the server."""
    async def main() -> Server:
        server = Server(config)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                await calls(pb_grpc.TranslatorStub(channel), channel, server)
        finally:
            await server.stop(0)
        return server
    return asyncio.run(main())


@pytest.fixture
def exporter(monkeypatch) -> InMemorySpanExporter:
    from opentelemetry.sdk.trace import TracerProvider
    memory = InMemorySpanExporter()

    def provider():
        p = TracerProvider()
        p.add_span_processor(SimpleSpanProcessor(memory))
        return p
    monkeypatch.setattr(tracing, "make_provider", provider)
    return memory


def test_a_call_continues_the_callers_trace_with_a_span_per_phase(tiny_model, exporter):
    async def calls(stub, channel, server):
        await stub.Translate(pb.TranslateRequest(sentences=[SHORT, OTHER]), metadata=(("traceparent", TRACEPARENT),),
                             timeout=60)

    serve(settings(tiny_model, tracing=True), calls)
    spans = exporter.get_finished_spans()
    (rpc,) = [s for s in spans if s.kind == SpanKind.SERVER]
    assert rpc.name == "attnmt.v1.Translator/Translate"
    assert format(rpc.context.trace_id, "032x") == TRACE_ID and format(rpc.parent.span_id, "016x") == PARENT_ID
    assert rpc.attributes["attnmt.sentences"] == 2 and rpc.attributes["attnmt.decoded_sentences"] == 2
    assert rpc.attributes["rpc.grpc.status_code"] == 0 and rpc.attributes["attnmt.model"] == "tiny"
    assert rpc.status.status_code == StatusCode.UNSET
    children = [s for s in spans if s is not rpc]
    assert all(s.parent.span_id == rpc.context.span_id and s.context.trace_id == rpc.context.trace_id
               for s in children)
    for sentence in (0, 1):
        phases = {s.name: s for s in children if s.attributes["attnmt.sentence"] == sentence}
        assert list(phases) == ["attnmt.queue", "attnmt.encode", "attnmt.decode"]
        queue, encode, decode = phases.values()
        # back to back, in order, within the call
        assert rpc.start_time <= queue.start_time <= queue.end_time <= encode.start_time
        assert encode.start_time <= encode.end_time <= decode.start_time <= decode.end_time <= rpc.end_time
        assert decode.attributes["attnmt.steps"] >= 1
        assert decode.attributes["attnmt.rows"] >= decode.attributes["attnmt.steps"]


def test_server_errors_are_recorded_on_the_span(tiny_model, exporter):
    async def calls(stub, channel, server):
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await channel.unary_unary("/attnmt.v1.Translator/Nope")(b"", timeout=60)
        assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.aio.AioRpcError) as empty:
            await stub.Translate(pb.TranslateRequest(), timeout=60)
        assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # One row: two long aligns hold it and the queue, so a short deadline expires there.
        busy = [asyncio.ensure_future(stub.Align(pb.AlignRequest(source=LONG, target=LONG_TARGET), timeout=60))
                for _ in range(2)]
        worker = server.models["tiny"].scheduler.workers[0]
        give_up = time.monotonic() + 60
        while worker.waiting < 1:
            assert time.monotonic() < give_up, "the long aligns never queued"
            await asyncio.sleep(0.005)
        with pytest.raises(grpc.aio.AioRpcError) as late:
            await stub.Translate(pb.TranslateRequest(sentences=[SHORT]), timeout=0.05)
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.gather(*busy)

    serve(settings(tiny_model, tracing=True, max_batch_rows=1, max_beam_size=1), calls)
    servers = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]
    (unimplemented,) = [s for s in servers if s.name.endswith("/Nope")]
    invalid, deadline = [s for s in servers if s.name.endswith("/Translate")]
    assert unimplemented.status.status_code == StatusCode.ERROR
    assert unimplemented.attributes["rpc.grpc.status_code"] == grpc.StatusCode.UNIMPLEMENTED.value[0]
    # the caller's mistake: the code is there, the span is not a server failure
    assert invalid.status.status_code == StatusCode.UNSET
    assert invalid.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "sentences is empty" in invalid.attributes["attnmt.error"]
    assert deadline.status.status_code == StatusCode.ERROR, dict(deadline.attributes)
    assert deadline.attributes["rpc.grpc.status_code"] == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    queued = [s for s in exporter.get_finished_spans() if s.parent and s.parent.span_id == deadline.context.span_id]
    assert [s.name for s in queued] == ["attnmt.queue"], "it never left the queue"


def test_nothing_records_calls_when_tracing_and_the_request_log_are_off(tiny_model):
    assert Server(settings(tiny_model))._recorders() == []
    assert len(Server(settings(tiny_model, log_level="debug"))._recorders()) == 1


def test_tracing_without_the_extra_stops_start_up_with_the_install_command(tiny_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)       # import opentelemetry raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'attnmt\[otel\]'"):
        Server(settings(tiny_model, tracing=True))._recorders()


def test_request_log_has_one_line_per_call_with_trace_id_model_status_and_timings(tiny_model, caplog):
    async def calls(stub, channel, server):
        await stub.Translate(pb.TranslateRequest(sentences=[SHORT]), metadata=(("traceparent", TRACEPARENT),),
                             timeout=60)
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.Translate(pb.TranslateRequest(model="nope", sentences=[SHORT]), timeout=60)

    with caplog.at_level(logging.DEBUG, logger="attnmt.requests"):
        serve(settings(tiny_model, log_level="debug"), calls)
    lines = [r for r in caplog.records if r.name == "attnmt.requests"]
    assert len(lines) == 2
    ok, missing = (r.fields for r in lines)
    assert ok["trace_id"] == TRACE_ID and ok["model"] == "tiny" and ok["status"] == "OK"
    assert ok["sentences"] == 1 and ok["decoded"] == 1 and ok["steps"] >= 1
    assert all(ok[k] >= 0 for k in ("duration_ms", "queue_ms", "encode_ms", "decode_ms"))
    assert missing["status"] == "NOT_FOUND" and missing["model"] == "nope" and "not served" in missing["details"]

    line = json.loads(JsonFormatter().format(lines[0]))
    assert line["level"] == "debug" and line["logger"] == "attnmt.requests" and line["time"].endswith("Z")
    assert line["trace_id"] == TRACE_ID and line["status"] == "OK" and line["decode_ms"] >= 0
    assert "Translate" in line["message"]


def test_attnmt_serve_writes_json_lines_with_a_request_line_per_call(tiny_model):
    from conftest import RunningServer
    with RunningServer([tiny_model], {"ATTNMT_LOG_FORMAT": "json", "ATTNMT_LOG_LEVEL": "debug"}) as server:
        with grpc.insecure_channel(server.address) as channel:
            pb_grpc.TranslatorStub(channel).Translate(pb.TranslateRequest(sentences=[SHORT]),
                                                      metadata=(("traceparent", TRACEPARENT),), timeout=60)
        give_up = time.monotonic() + 60
        while not any('"attnmt.requests"' in line for line in server.log):
            assert time.monotonic() < give_up, "no request line in the log:\n" + "".join(server.log[-20:])
            time.sleep(0.05)
    lines = [json.loads(line) for line in server.log if line.startswith("{")]
    assert len(lines) == len([line for line in server.log if line.strip()]), "every line is one JSON object"
    (request,) = [line for line in lines if line["logger"] == "attnmt.requests"]
    assert request["trace_id"] == TRACE_ID and request["model"] == "tiny" and request["status"] == "OK"
    assert any(line["message"].startswith("serving ") for line in lines)
