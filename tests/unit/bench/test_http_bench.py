"""`attnmt bench http` end to end on the tiny model: one server answers gRPC and HTTP,
every call a translation, the same text both ways, every figure in the report and the
table. (Its numbers mean nothing here; real runs need a quiet machine.)"""

from __future__ import annotations

import json

import aiohttp
import httpx
import pytest

from attnmt.bench.http import bench_http, format_http
from attnmt.service.cli import main
from conftest import synthetic_corpus, write_corpus

FIGURES = {"sentences_per_s", "server_cpu_ms_per_sentence", "client_cpu_ms_per_sentence", "p95_ms",
           "concurrency_1_p50_ms", "concurrency_1_p90_ms", "errors"}


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
def test_bench_http(tiny_model, client):
    sentences = [s for s, _ in synthetic_corpus(12, seed=3)]
    report = bench_http(tiny_model, sentences, repeats=1, concurrency=4, requests=16, latency_sentences=4,
                        http_client=client)

    assert (report["sentences"], report["requests"], report["latency_sentences"]) == (12, 16, 4)
    assert report["errors"] == 0 and report["calls"] == {"grpc": 20, "http": 20}
    assert report["same_text"] == {"sentences": 4, "same": 4, "differences": []}
    for protocol in ("grpc", "http"):
        figures = report[protocol]
        assert set(figures) == FIGURES and figures["errors"] == {}
        assert figures["sentences_per_s"] > 0 and figures["concurrency_1_p50_ms"] > 0
        assert figures["server_cpu_ms_per_sentence"] >= 0     # /proc ticks are 10 ms: a tiny run may see none
    assert set(report["http_over_grpc"]) == {"throughput", "server_cpu_per_sentence", "client_cpu_per_sentence",
                                             "latency_p50", "latency_p90"}
    assert [(t["goal"], type(t["met"])) for t in report["targets"]] == [("≥ 0.9", bool), ("≤ 1.2", bool)]
    assert len(report["runs"]) == 1 and set(report["runs"][0]) == {"grpc", "http"}
    version = (aiohttp if client == "aiohttp" else httpx).__version__
    assert report["clients"]["http"].startswith(f"{client} {version} ")

    table = format_http(report)
    assert "| | gRPC | HTTP | HTTP / gRPC |" in table and "| target | measured | goal | met |" in table
    assert "Every call answered 200/OK with a translation (40 measured)" in table
    assert "Same text on both protocols: 4 of 4 verses" in table


def test_bench_http_command(tiny_model, tmp_path, capsys):
    data = write_corpus(tmp_path / "data", {"test": 6})
    out = tmp_path / "report.json"
    assert main(["bench", "http", "--model", str(tiny_model), "--data", str(data), "--repeats", "1",
                 "--concurrency", "4", "--latency-sentences", "2", "--json", str(out)]) == 0
    report, table = json.loads(out.read_text()), capsys.readouterr().out
    assert report["errors"] == 0 and report["requests"] == 6 and report["same_text"]["same"] == 2
    assert report["command"] == (f"attnmt bench http --model {tiny_model} --data {data} --repeats 1 "
                                 "--concurrency 4 --latency-sentences 2 --client aiohttp")
    assert f"Command: `{report['command']}`" in table and "sentences/s at concurrency 4" in table


def test_bench_http_names_its_clients(tiny_model):
    with pytest.raises(ValueError, match="http_client must be one of aiohttp, httpx, not 'requests'"):
        bench_http(tiny_model, ["a"], http_client="requests")
