"""A server's start and stop: it refuses to start with a message naming the cause (a bad
setting, a port in use, no model), and SIGTERM drains the calls in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import grpc

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import SHORT, RunningServer, error_of, slow_align


def run_serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
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
                late = error_of(lambda: pb_grpc.TranslatorStub(late_channel).Translate(
                    pb.TranslateRequest(sentences=[SHORT]), timeout=5))
            assert late.code() == grpc.StatusCode.UNAVAILABLE
            for call in in_flight:
                assert len(call.result(timeout=60).hypothesis.target_tokens) > 800
        assert server.proc.wait(60) == 0
        assert any("stopped" in line for line in server.log)
    finally:
        server.terminate()
