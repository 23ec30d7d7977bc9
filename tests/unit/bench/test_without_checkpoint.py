"""The benchmarks on model directories as a clone has them, without `checkpoint.pt`: `bench engine`
and `bench ctranslate2` read a Transformer's PyTorch weights back from its graphs, an RNNsearch
without its checkpoint is refused with what makes one, and `bench offline` decodes a Transformer
(its step graphs take each row's position). Speed figures mean nothing here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attnmt.service.cli import main
from conftest import write_corpus


def without_checkpoint(model_dir: Path, root: Path) -> Path:
    out = root / model_dir.name
    shutil.copytree(model_dir, out, ignore=shutil.ignore_patterns("checkpoint.pt"))
    return out


@pytest.fixture(scope="module")
def transformer(tiny_transformer, tmp_path_factory) -> Path:
    return without_checkpoint(tiny_transformer, tmp_path_factory.mktemp("clone"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("bench") / "data", {"test": 12})


def report_of(tmp_path: Path, *argv: str) -> dict:
    out = tmp_path / "report.json"
    assert main(["bench", *argv, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_bench_engine_reads_a_transformer_back_from_its_graphs(transformer, data, tmp_path):
    report = report_of(tmp_path, "engine", "--model", str(transformer), "--data", str(data), "--sentences", "8",
                       "--repeats", "1", "--threads", "1")
    assert report["greedy_agreement"] == "8/8"         # the same weights in PyTorch and ONNX Runtime


def test_bench_engine_refuses_an_rnnsearch_without_its_checkpoint(tiny_model, data, tmp_path, capsys):
    rnnsearch = without_checkpoint(tiny_model, tmp_path)
    assert main(["bench", "engine", "--model", str(rnnsearch), "--data", str(data)]) == 2
    error = capsys.readouterr().err
    assert "no checkpoint.pt" in error and "make export" in error


def test_bench_offline_decodes_a_transformer(transformer, data, tmp_path):
    report = report_of(tmp_path, "offline", "--model", str(transformer), "--data", str(data), "--sentences", "4",
                       "--repeats", "1", "--beam", "2")
    assert report["sentences"] == 4


def test_bench_ctranslate2_converts_the_model_directory_itself(transformer, data, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    report = report_of(tmp_path, "ctranslate2", "--model", str(transformer), "--data", str(data), "--sentences", "8",
                       "--repeats", "1", "--threads", "1", "--server-clients", "0")
    assert report["agreement"]["sentences"] == 8 and report["agreement"]["identical_share"] >= 0.95
    assert {"ctranslate2 fp32", "ctranslate2 int8"} <= set(report["rows"][0]["sentences_per_s"])
    assert "converted from" in capsys.readouterr().err
