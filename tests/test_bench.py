"""The benchmarks run end to end, the way `make bench` runs them, on the tiny
model with a handful of sentences and one repeat: every figure is there and
positive. (Their numbers mean nothing here; real runs need a quiet machine.)"""

from __future__ import annotations

import json
import shutil

import pytest

from attnmt.model.bench import TimedEngine
from attnmt.service.cli import main
from attnmt.service.decoding import SearchOptions
from attnmt.service.loadtest import spread
from attnmt.service.translator import Translator

from conftest import write_corpus


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("bench") / "data", {"test": 12})


def bench(capsys, tmp_path, *argv: str) -> tuple[dict, str]:
    out = tmp_path / "report.json"
    assert main(["bench", *argv, "--json", str(out)]) == 0
    return json.loads(out.read_text()), capsys.readouterr().out


def positive(*values) -> bool:
    return all(isinstance(v, (int, float)) and v > 0 for v in values)


def test_bench_offline(tiny_model, data, capsys, tmp_path):
    report, table = bench(capsys, tmp_path, "offline", "--model", str(tiny_model), "--data", str(data),
                          "--sentences", "6", "--repeats", "1", "--beam", "3")
    assert report["sentences"] == 6 and report["model"] == "tiny"
    attnmt = report["processes"]["attnmt"]
    assert attnmt["output_lines"] == 6                     # one translation a line, as a user gets them
    assert positive(attnmt["sentences_per_s"], attnmt["cpu_s"], attnmt["empty_input_s"])
    apertium = report["processes"]["apertium"]
    if shutil.which("apertium") is None:
        assert "not installed" in apertium["skipped"] and report["targets"][0]["met"] is None
    else:
        assert positive(apertium["sentences_per_s"], report["processes"]["ratio"])
    for name in ("greedy", "beam3"):
        run = report["in_process"][name]
        assert positive(run["sentences_per_s"], run["steps"], run["mean_rows_per_step"], run["step_share"])
        assert run["encoder_share"] + run["step_share"] + run["host_share"] == pytest.approx(1, abs=0.01)
    assert positive(report["in_process"]["ratio"])
    assert [t["goal"] for t in report["targets"]] == ["≥ 0.5", "≥ 0.3", "≤ 0.1"]
    assert all(isinstance(t["met"], bool) for t in report["targets"][1:])
    assert "| target | measured | goal | met |" in table and "beam 3" in table


def test_bench_offline_without_apertium(tiny_model, data, capsys, tmp_path, monkeypatch):
    which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: None if name == "apertium" else which(name, *a, **k))
    report, table = bench(capsys, tmp_path, "offline", "--model", str(tiny_model), "--data", str(data),
                          "--sentences", "2", "--repeats", "1", "--beam", "2")
    assert report["processes"]["apertium"] == {"skipped": "apertium is not installed "
                                                          "(apt-get install apertium apertium-eng-spa)"}
    assert report["targets"][0]["met"] is None and "skipped: apertium is not installed" in table


def test_bench_serving(tiny_model, data, capsys, tmp_path):
    report, table = bench(capsys, tmp_path, "serving", "--model", str(tiny_model), "--data", str(data),
                          "--sentences", "8", "--repeats", "1", "--concurrency", "4", "--latency-sentences", "3")
    assert report["sentences"] == 8 and report["latency_sentences"] == 3 and report["concurrency"] == 4
    offline, server = report["offline"], report["server"]
    assert positive(offline["sentences_per_s"], offline["cpu_ms_per_sentence"], offline["single_sentence_ms"])
    assert positive(server["sentences_per_s"], server["concurrency_1_p50_ms"], server["mean_rows_per_step"])
    assert server["cpu_ms_per_sentence"] >= 0                # /proc ticks are 10 ms: a tiny run may see none
    assert set(report["server_over_offline"]) == {"throughput", "cpu_per_sentence", "latency"}
    assert [t["goal"] for t in report["targets"]] == ["≥ 0.7", "≤ 1.3", "≤ 1.3"]
    assert "| target | measured | goal | met |" in table


def test_bench_server(tiny_model, data, capsys, tmp_path):
    report, table = bench(capsys, tmp_path, "server", "--model", str(tiny_model), "--data", str(data),
                          "--concurrency", "2", "--requests", "4")
    assert [r["batching"] for r in report["results"]] == ["continuous", "request"]
    assert all(positive(r["sentences_per_s"], r["p50_ms"], r["mean_rows_per_step"]) for r in report["results"])


def test_bench_engine(tiny_model, data, capsys, tmp_path):
    report, table = bench(capsys, tmp_path, "engine", "--model", str(tiny_model), "--data", str(data),
                          "--sentences", "4", "--repeats", "1", "--threads", "1")
    assert report["greedy_agreement"] == "4/4"
    assert [r["batch"] for r in report["results"]] == [1, 64]
    assert all(positive(r["pytorch"]["sentences_per_s"], r["onnxruntime"]["sentences_per_s"])
               for r in report["results"])


def test_timed_engine_changes_nothing_but_counts(engine):
    texts = ["kasa granda vidas peru .", "gato amas libo nova ."]
    timed = TimedEngine(engine)
    for options in (SearchOptions(), SearchOptions(beam_size=3)):
        plain = Translator(engine).translate(texts, options)
        proxied = Translator(timed).translate(texts, options)
        assert [t.best.text for t in proxied] == [t.best.text for t in plain]
    assert timed.steps > 0 and timed.rows >= timed.steps
    assert timed.encode_seconds > 0 and timed.step_seconds > 0


def test_spread_keeps_the_ends_and_the_order():
    assert spread(list(range(10)), 5) == [0, 2, 4, 6, 8]
    assert spread(list(range(3)), 5) == [0, 1, 2] and spread(list(range(3)), None) == [0, 1, 2]
