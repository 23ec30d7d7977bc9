"""The bundled models on an NVIDIA GPU: every graph's work on the CUDA provider,
CUDA's answers equal to the CPU's, the device path's to the host path's.

These run only where ONNX Runtime really has a GPU: the development machine and CI have none,
so they skip there with the reason. They ran on an H200 on 2026-11-26 (docs/benchmarks.md).

Tolerance: scores within 1e-3 and α within 2e-3 where the texts agree (on an H200 the largest
differences were 3.5e-4 and 1.0e-3: cuBLAS sums in another order than MLAS). Texts may differ
where rounding flips a near-tie: a greedy output that differs parts from the other at a piece
whose log-probability margin is under 1e-3 (on the H200, 3.1e-4 and 5.0e-4 on 64 Bible verses);
a beam may then keep other hypotheses, so at most 1 best and 3 n-best lists in 48 may differ
(seen there: 1 of 64 bests, 2 to 4 of 64 n-best lists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.bench.gpu import agreement, placement
from attnmt.service.errors import ModelLoadError
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.text.translator import Translator

REPO = Path(__file__).resolve().parents[3]
MODELS = [REPO / "models" / "rnnsearch-es-en", REPO / "models" / "transformer-es-en"]
TOLERANCE, ALPHA_TOLERANCE = 1e-3, 2e-3


def sentences() -> list[str]:
    """Everyday sentences and the gold set's Bible verses and software messages (tracked, so
    they travel to the GPU machine): 48 of them, short and long."""
    data = REPO / "tests" / "data"
    everyday = [line.split("\t")[0] for line in (data / "everyday" / "test.tsv").read_text("utf-8").splitlines()]
    gold = [line.split("\t")[2] for line in (data / "gold-alignments" / "test.tsv").read_text("utf-8").splitlines()[1:]]
    return everyday[:24] + gold[:24]


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: p.name)
def on_cuda(request) -> Path:
    try:
        engine = Engine(request.param, EngineOptions(device="cuda"))
    except ModelLoadError as e:
        pytest.skip(f"no usable GPU here: {str(e)[:100]}")
    assert engine.provider == "CUDAExecutionProvider"
    return request.param


def test_every_graph_runs_its_tensors_on_the_gpu(on_cuda):
    """ONNX Runtime's profile of a greedy and a beam translation: no node with an output over
    1 KiB runs on the CPU provider (the CUDA provider keeps a few shape computations on the CPU
    on purpose; a fallback of real work would show here, the source mask's bool Pad say)."""
    graphs = placement(on_cuda, "cuda", sentences()[:8])
    assert {"encoder", "decoder_step", "decoder_step_shared"} <= set(graphs)
    assert any(name.startswith("memory_gather") for name in graphs), sorted(graphs)
    assert any(name.startswith("rows_gather") for name in graphs), sorted(graphs)
    for graph, seen in graphs.items():
        assert seen["runs_by_provider"].get("CUDAExecutionProvider", 0) > 0, (graph, seen["runs_by_provider"])
        assert seen["large_on_cpu"] == [], (graph, {n: seen["on_cpu"][n] for n in seen["large_on_cpu"]})


def _within_tolerance(report: dict) -> None:
    for label, a in report.items():
        if label == "greedy":       # every greedy text that differs parted at a near-tie
            assert all(d["margin"] < TOLERANCE for d in a["divergence_margins"]), a["divergence_margins"]
        if label != "align":        # and flips are rare: a beam prunes at near-ties too, and on the
            # H100 2 of 48 long verses (Transformer) and 2 of 64 (RNNsearch) took another beam
            flips = a["sentences"] // 16
            assert a["same_best"] >= a["sentences"] - flips, (label, a["max_score_gap_where_texts_differ"],
                                                               a["differences"])
            assert a["same_nbest"] >= a["sentences"] - 2 * flips, (label, a["differences"])
        assert a["max_score_diff"] < TOLERANCE, (label, a)
        assert a["max_alpha_diff"] < ALPHA_TOLERANCE, (label, a)


def test_cuda_answers_equal_the_cpus(on_cuda):
    cpu = Translator(Engine(on_cuda, EngineOptions(device="cpu")))
    gpu = Translator(Engine(on_cuda, EngineOptions(device="cuda")))
    _within_tolerance(agreement(cpu, gpu, sentences()))


def test_the_device_path_equals_the_host_path_on_the_gpu(on_cuda):
    host = Translator(Engine(on_cuda, EngineOptions(device="cuda", io_binding=False)))
    device = Translator(Engine(on_cuda, EngineOptions(device="cuda", io_binding=True)))
    assert device.engine.io_binding and not host.engine.io_binding
    _within_tolerance(agreement(host, device, sentences()))


def test_offline_decoding_takes_256_rows_a_step_on_the_gpu(on_cuda, monkeypatch):
    """On a GPU a step costs about the same at 64 rows as at 256 (docs/benchmarks.md), so offline
    decoding fills 256 rows there, greedy and beam alike."""
    from attnmt.service.inference.offline import GPU_ROWS
    from attnmt.service.inference.search import SearchOptions
    data = REPO / "tests" / "data"
    texts = [line.split("\t")[0] for name in ("dev.tsv", "test.tsv")                  # 216 sentences
             for line in (data / "everyday" / name).read_text("utf-8").splitlines()]
    texts += [line.split("\t")[2] for name in ("dev.tsv", "test.tsv")                 # and 150
              for line in (data / "gold-alignments" / name).read_text("utf-8").splitlines()[1:]]
    translator = Translator(Engine(on_cuda, EngineOptions(device="cuda")))
    seen: list[int] = []
    original = Engine.step
    monkeypatch.setattr(Engine, "step",
                        lambda self, prev, *a, **k: seen.append(len(prev)) or original(self, prev, *a, **k))
    translator.translate(texts, SearchOptions(beam_size=1))
    assert max(seen) == GPU_ROWS == 256
    seen.clear()
    translator.translate(texts[:80], SearchOptions(beam_size=5))
    assert GPU_ROWS - 5 < max(seen) <= GPU_ROWS
