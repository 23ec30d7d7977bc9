"""Overload: past max_queue the server refuses at once with RESOURCE_EXHAUSTED and a
RetryInfo hint that grows while refusals keep coming; the Python client retries as the
hint says."""

from __future__ import annotations

import threading
import time

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from attnmt.service.client import Client
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import LONG, RunningServer, slow_align


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


def test_the_python_client_retries_overload_as_retry_info_says(tiny_model):
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
