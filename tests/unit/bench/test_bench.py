"""The benchmarks run end to end, the way `make bench` runs them, on the tiny
model with a handful of sentences and one repeat: every figure is there and
positive. (Their numbers mean nothing here; real runs need a quiet machine.)"""

from __future__ import annotations

import json
import shutil

import pytest

from attnmt.bench.loadtest import TimedEngine, spread
from attnmt.service.cli import main
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.translator import Translator
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
        assert 0 <= run["row_memory_share"] <= run["step_share"]
    assert report["in_process"]["beam3"]["row_memory_share"] > 0 == report["in_process"]["greedy"]["row_memory_share"]
    assert positive(report["in_process"]["ratio"])
    assert [t["goal"] for t in report["targets"]] == ["≥ 0.5", "≥ 0.35", "≤ 0.1"]
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
    assert positive(server["sentences_per_s"], server["concurrency_1_p50_ms"], server["mean_rows_per_step"],
                    server["p50_ms"])
    assert server["p50_ms"] <= server["p95_ms"] <= server["p99_ms"]
    assert server["cpu_ms_per_sentence"] >= 0                # /proc ticks are 10 ms: a tiny run may see none
    assert set(report["server_over_offline"]) == {"throughput", "cpu_per_sentence", "latency", "tail",
                                                  "latency_beyond_transport"}
    assert 0 < server["health_check_p50_ms"] < server["concurrency_1_p50_ms"]
    assert report["server_over_offline"]["latency_beyond_transport"] < report["server_over_offline"]["latency"]
    assert [t["goal"] for t in report["targets"]] == ["≥ 0.85", "≤ 3.0", "≤ 1.1", "≤ 1.3"]
    assert "| target | measured | goal | met |" in table


def test_bench_server(tiny_model, data, capsys, tmp_path):
    plot = tmp_path / "server.png"
    report, table = bench(capsys, tmp_path, "server", "--model", str(tiny_model), "--data", str(data),
                          "--concurrency", "1,3", "--loads", "0.5,0.7", "--requests", "6", "--plot", str(plot))
    points = report["points"]
    assert [(p["batching"], p["loop"]) for p in points] == \
        [(mode, loop) for mode in ("request", "continuous") for loop in ("closed", "closed", "open", "open")]
    assert [p["concurrency"] for p in points if p["loop"] == "closed"] == [1, 3, 1, 3]
    capacity = report["request_level_capacity_per_s"]
    assert capacity == max(p["sentences_per_s"] for p in points[:2])
    # the same offered rates (and so the same seeded arrival traces) for both modes
    rates = [p["offered_per_s"] for p in points if p["loop"] == "open"]
    assert rates[:2] == rates[2:] == [round(0.5 * capacity, 2), round(0.7 * capacity, 2)]
    for p in points:
        assert p["calls"] == 6 and p["refused"] == 0 and p["errors"] == 0
        assert positive(p["sentences_per_s"], p["target_tokens_per_s"], p["p50_ms"], p["mean_rows_per_step"])
        assert p["p50_ms"] <= p["p90_ms"] <= p["p99_ms"]
    (goal,) = report["targets"]
    assert goal["goal"] == "≤ 0.6" and positive(goal["value"]) and isinstance(goal["met"], bool)
    assert "| batching | loop |" in table and "| target | measured | goal | met |" in table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_server_takes_the_median_over_traces_and_settings_for_continuous_only(tiny_model, data, capsys,
                                                                                    tmp_path):
    report, table = bench(capsys, tmp_path, "server", "--model", str(tiny_model), "--data", str(data),
                          "--concurrency", "2", "--loads", "0.7", "--requests", "5", "--traces", "3",
                          "--set-continuous", "max_batch_tokens=512")
    opened = [p for p in report["points"] if p["loop"] == "open"]
    assert [(p["batching"], p["trace"]) for p in opened] == [(m, k) for m in ("request", "continuous")
                                                              for k in range(3)]
    assert report["continuous_settings"] == {"max_batch_tokens": "512"} and "max_batch_tokens=512" in table
    (goal,) = report["targets"]
    ratios = [c["p99_ms"] / r["p99_ms"] for r, c in zip(opened[:3], opened[3:])]
    assert goal["per_trace"] == [round(r, 3) for r in ratios]
    assert goal["value"] == round(sorted(ratios)[1], 3) and "median of 3 arrival traces" in goal["what"]


def test_poisson_arrivals_are_seeded_and_have_the_rate():
    from attnmt.bench.batching import poisson_arrivals
    assert poisson_arrivals(50, 10, seed=3) == poisson_arrivals(50, 10, seed=3) != poisson_arrivals(50, 10, seed=4)
    times = poisson_arrivals(200, 4000, seed=0)
    assert times == sorted(times) and 4000 / times[-1] == pytest.approx(200, rel=0.1)


def test_summary_counts_refusals_and_errors_apart():
    from attnmt.bench.batching import Call, summarise
    calls = [Call(0.01 * i, "OK", 10) for i in range(1, 11)] + [Call(0.001, "RESOURCE_EXHAUSTED"),
                                                                   Call(5.0, "DEADLINE_EXCEEDED")]
    s = summarise(calls, seconds=2.0)
    assert (s["calls"], s["refused"], s["errors"]) == (12, 1, 1)
    assert s["sentences_per_s"] == 5.0 and s["target_tokens_per_s"] == 50.0
    assert s["p50_ms"] == pytest.approx(55) and s["p99_ms"] <= 100


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


def test_bench_order(tiny_model, data, capsys, tmp_path):
    report, table = bench(capsys, tmp_path, "order", "--model", str(tiny_model), "--data", str(data),
                          "--sentences", "10", "--repeats", "1", "--rows", "4")
    assert report["sentences"] == 10 and report["joiners"] == 4 and report["rows"] == 4
    for order in ("longest first", "random"):
        run = report["orders"][order]
        assert positive(run["seconds"], run["encode_s"], run["step_s"], run["steps"], run["mean_memory_length"])
        assert 0 < run["mean_rows"] <= 4
    assert positive(*report["random_over_longest_first"].values())
    assert "| CPU seconds |" in table


def test_bench_files(tiny_model, data, capsys, tmp_path):
    report, table = bench(capsys, tmp_path, "files", "--model", str(tiny_model), "--data", str(data),
                          "--catalog-data", str(data), "--entries", "12", "--sentences", "4")
    sources = {line.split("\t")[0] for line in (data / "test.tsv").read_text().splitlines() if line}
    assert report["file_status"] == 200 and report["entries"] == min(12, len(sources))
    assert positive(report["idle_p50_ms"], report["file_seconds"]) and report["untranslated"] >= 0
    assert "single-sentence p50, idle server" in table
