"""`attnmt bench gpu` runs its measurements on the CPU provider too (`--device cpu`), so the
command is checked here; the GPU figures themselves come from a lent GPU (docs/gpu.md)."""

from __future__ import annotations

import json

import pytest

from attnmt.bench.gpu import divergence_margins
from attnmt.service.cli import main
from attnmt.service.errors import ModelLoadError
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from conftest import synthetic_corpus, write_corpus


def test_bench_gpu_on_the_cpu_provider(tiny_model, tmp_path, capsys):
    data = write_corpus(tmp_path / "data", {"test": 10})
    out = tmp_path / "gpu.json"
    assert main(["bench", "gpu", "--device", "cpu", "--model", str(tiny_model), "--data", str(data),
                 "--rows", "4", "--rows", "8", "--repeats", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    entry = report["models"]["tiny"]
    assert entry["provider"] == "CPUExecutionProvider"
    # the graphs a greedy and a beam translation open on the device path, each profiled
    graphs = entry["placement"]
    assert {"encoder", "decoder_step", "decoder_step_shared"} <= set(graphs)
    assert any(g.startswith("memory_gather") for g in graphs) and any(g.startswith("rows_gather") for g in graphs)
    assert all(sum(g["runs_by_provider"].values()) > 0 for g in graphs.values())
    # one provider against itself: the same answers to the last digit
    for what in ("cuda_vs_cpu", "device_vs_host_path"):
        for label, a in entry[what].items():
            assert a["max_score_diff"] < 1e-5 and a["max_alpha_diff"] < 1e-5, (what, label)
            if label != "align":
                assert a["same_best"] == a["same_nbest"] == a["sentences"] == 10
    rows = {(r["search"], r["rows"]): r for r in entry["throughput"]}
    assert set(rows) == {("greedy", 4), ("greedy", 8), ("beam5", 4), ("beam5", 8)}
    for r in rows.values():
        assert r["device_path_sentences_per_s"] > 0 and r["host_path_sentences_per_s"] > 0
        # the host path moves the memory every step; the device path only ids, scores and α
        assert 0 < r["device_path_bytes_per_step"] < r["host_path_bytes_per_step"] / 5
    assert "| greedy | 8 |" in capsys.readouterr().out


def test_a_greedy_difference_is_measured_where_the_outputs_part(translator):
    source = synthetic_corpus(1, seed=3)[0][0]
    best = translator.translate([source], SearchOptions())[0].best
    words = best.text.split()
    other = " ".join(words[:1] + ["gato"] + words[2:]) if len(words) > 2 else best.text + " gato"
    [margin] = divergence_margins(translator, [source], [(source, best.text, other)])
    forced = translator.align([(source, other)])[0].best
    i = margin["position"]
    assert best.target_tokens[:i] == forced.target_tokens[:i] and best.target_tokens[i] != forced.target_tokens[i]
    assert margin["pieces"] == [best.target_tokens[i], forced.target_tokens[i]]
    # greedy took the piece with the higher log-probability, so the margin is that gap
    assert margin["margin"] > 0


def test_bench_gpu_without_a_gpu_is_refused_not_run_on_the_cpu(tiny_model, tmp_path, capsys):
    try:
        Engine(tiny_model, EngineOptions(device="cuda"))
        pytest.skip("a usable GPU is here: the refusal is for machines without one")
    except ModelLoadError:
        pass
    data = write_corpus(tmp_path / "data", {"test": 4})
    out = tmp_path / "gpu.json"
    assert main(["bench", "gpu", "--device", "cuda", "--model", str(tiny_model), "--data", str(data),
                 "--repeats", "1", "--json", str(out)]) == 1
    assert "asked for CUDAExecutionProvider but ONNX Runtime gave ['CPUExecutionProvider']" in capsys.readouterr().err
    assert not out.exists()
