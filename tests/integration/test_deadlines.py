"""Deadlines and cancellation: sentences whose call expired or was cancelled are never
decoded; the server caps deadlines clients do not set and ends streams that go quiet."""

from __future__ import annotations

import queue as queue_module
import time

import grpc
import pytest

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import LONG, LONG_SENTENCE, SHORT, RunningServer, error_of, slow_align


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
        # each counted once, by its reason, whether the server's deadline check or gRPC's
        # cancellation of the handler sees the expired call first
        assert server.metric("attnmt_rejected_total", reason="deadline_exceeded") == 1
        assert server.metric("attnmt_rejected_total", reason="cancelled") == 1


def test_server_caps_deadlines_and_ends_idle_streams(tiny_model):
    env = {"ATTNMT_MAX_DEADLINE_SECONDS": "0.001", "ATTNMT_STREAM_IDLE_TIMEOUT_SECONDS": "0.5",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_WARMUP": "false"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        # no deadline from the client: the server's cap applies
        error = error_of(lambda: s.Translate(pb.TranslateRequest(sentences=[LONG_SENTENCE] * 8)))
        assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    env["ATTNMT_MAX_DEADLINE_SECONDS"] = "0"
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
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
