"""attnmt against CTranslate2 on the same Transformer weights: the conversion is exact
(the same greedy translations from both engines), and `attnmt bench ctranslate2` runs end to end.
Its speed figures mean nothing here; real runs need a quiet machine (docs/benchmarks.md)."""

from __future__ import annotations

import pytest
import yaml

from attnmt.bench.ctranslate2 import agreement, bench_ctranslate2, format_ctranslate2
from attnmt.service.cli import main
from attnmt.service.modeldir.corpus import read_split

pytest.importorskip("ctranslate2")


@pytest.fixture(scope="module")
def engines(tiny_transformer_run, tmp_path_factory):
    """The tiny Transformer as an attnmt model directory and as CTranslate2 fp32 and int8 directories."""
    root = tmp_path_factory.mktemp("engines")
    run = ["--run", str(tiny_transformer_run), "--checkpoint", "last.pt"]
    assert main(["export", *run, "--out", str(root / "attnmt"), "--no-shortlist"]) == 0
    assert main(["export", *run, "--format", "ctranslate2", "--out", str(root / "fp32")]) == 0
    assert main(["export", *run, "--format", "ctranslate2", "--quantize", "int8", "--out", str(root / "int8")]) == 0
    return root


@pytest.fixture(scope="module")
def sources(tiny_transformer_run):
    data = yaml.safe_load((tiny_transformer_run / "config.yaml").read_text())["data_dir"]
    return [s for s, _ in read_split(data, "test", "xx", "en")]


def test_both_engines_translate_alike(engines, sources):
    report = agreement(engines / "attnmt", engines / "fp32", sources)
    assert report["sentences"] == len(sources) == 40
    assert report["identical_share"] >= 0.95, report["differences"]


def test_an_rnnsearch_run_does_not_convert(tiny_run, tmp_path, capsys):
    assert main(["export", "--run", str(tiny_run), "--format", "ctranslate2", "--out", str(tmp_path / "x")]) == 2
    assert "CTranslate2 runs no RNNs" in capsys.readouterr().err


def test_bench_ctranslate2_reports_every_engine(engines, sources):
    report = bench_ctranslate2(engines / "attnmt", {"fp32": engines / "fp32", "int8": engines / "int8"},
                               sources[:8], repeats=1, threads=1, batches=(8, 1), beams=(1, 2))
    assert len(report["rows"]) == 4
    for row in report["rows"]:
        assert set(row["sentences_per_s"]) == {"attnmt fp32", "ctranslate2 fp32", "ctranslate2 int8"}
        assert all(rate > 0 for rate in row["sentences_per_s"].values())
    assert "ctranslate2 int8" in format_ctranslate2(report)
