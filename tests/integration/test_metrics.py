"""The Prometheus scrape of a serving process: the counters move with the calls, and
promtool accepts the exposition."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from attnmt.service.stubs import translator_pb2 as pb
from conftest import LONG, SHORT, error_of


def test_metrics_appear_and_move(server, stub):
    labels = dict(grpc_service="attnmt.v1.Translator", grpc_method="Translate", grpc_code="OK")
    before_ok = server.metric("grpc_server_handled_total", **labels)
    before_bad = server.metric("grpc_server_handled_total", grpc_method="Translate", grpc_code="INVALID_ARGUMENT")
    before_sentences = server.metric("attnmt_sentences_total", model="tiny")
    before_idle = server.metric("attnmt_idle_steps_total")
    stub.Translate(pb.TranslateRequest(sentences=[SHORT, LONG]))
    error_of(lambda: stub.Translate(pb.TranslateRequest(sentences=[])))
    assert server.metric("grpc_server_handled_total", **labels) == before_ok + 1
    assert server.metric("grpc_server_handled_total", grpc_method="Translate",
                         grpc_code="INVALID_ARGUMENT") == before_bad + 1
    assert server.metric("attnmt_sentences_total", model="tiny") == before_sentences + 2
    assert server.metric("attnmt_batch_rows_count") > 0
    assert server.metric("attnmt_idle_steps_total") > before_idle     # two sentences alone: idle steps
    assert server.metric("attnmt_model_info", model="tiny", provider="CPUExecutionProvider") == 1
    assert server.metric("attnmt_ready") == 1
    assert server.metric("attnmt_rejected_total", reason="invalid_input") >= 1


def test_promtool_accepts_the_scrape(server, stub):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; `make test` installs it)")
    stub.Translate(pb.TranslateRequest(sentences=[SHORT]))
    result = subprocess.run([promtool, "check", "metrics"], input=server.scrape(), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
