"""attnmt against CTranslate2 on the same Transformer weights: the conversion is exact
(the same greedy translations from both engines), and `attnmt bench ctranslate2` runs end to end,
with attnmt's int8, the RNNsearch beside the Transformer, the server against the offline engine
and the profile of where attnmt's time goes.
Its speed figures mean nothing here; real runs need a quiet machine (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from attnmt.bench.ctranslate2 import PARTS, _options, agreement, bench_ctranslate2, format_ctranslate2, profile
from attnmt.corpus.splits import read_split
from attnmt.service.cli import main
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.slots import Memory, RowMemory, Rows
from attnmt.service.text.translator import Translator

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
def attnmt_int8(engines, tiny_transformer_run) -> Path:
    """The same checkpoint as attnmt's own int8 directory (`attnmt export --quantize int8`)."""
    out = engines / "attnmt-int8"
    assert main(["export", "--run", str(tiny_transformer_run), "--checkpoint", "last.pt", "--out", str(out),
                 "--quantize", "int8", "--parity-sentences", "8", "--no-shortlist"]) == 0
    return out


@pytest.fixture(scope="module")
def data(tiny_transformer_run) -> Path:
    return Path(yaml.safe_load((tiny_transformer_run / "config.yaml").read_text())["data_dir"])


@pytest.fixture(scope="module")
def sources(data):
    return [s for s, _ in read_split(data, "test", "xx", "en")]


def ratio(a: float, b: float) -> float:
    """a / b as the report's rounded rates allow (0.1 sentence/s on each)."""
    return pytest.approx(a / b, rel=0.02)


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
        engines_run = {"attnmt fp32", "ctranslate2 fp32", "ctranslate2 int8"}
        if row["beam"] > 1:                  # beams also with OpenNMT-py's stopping rule
            engines_run.add("attnmt fp32 early exit")
            early = row["sentences_per_s"]["attnmt fp32 early exit"]
            assert row["early_exit_over"]["ctranslate2 fp32"] == pytest.approx(
                early / row["sentences_per_s"]["ctranslate2 fp32"], rel=0.01)
        assert set(row["sentences_per_s"]) == engines_run
        assert all(rate > 0 for rate in row["sentences_per_s"].values())
    assert "ctranslate2 int8" in format_ctranslate2(report) and "early exit / each" in format_ctranslate2(report)


def test_attnmt_int8_runs_beside_ctranslate2_int8(engines, attnmt_int8, sources):
    report = bench_ctranslate2(engines / "attnmt", {"fp32": engines / "fp32", "int8": engines / "int8"},
                               sources[:8], repeats=1, threads=1, batches=(8,), beams=(1,), model_int8=attnmt_int8)
    (row,) = report["rows"]
    rates = row["sentences_per_s"]
    assert set(rates) == {"attnmt fp32", "attnmt int8", "ctranslate2 fp32", "ctranslate2 int8"}
    assert all(rate > 0 for rate in rates.values())
    assert row["attnmt_over"]["attnmt int8"] == ratio(rates["attnmt fp32"], rates["attnmt int8"])
    assert set(row["attnmt_int8_over"]) == {"ctranslate2 fp32", "ctranslate2 int8"}
    assert row["attnmt_int8_over"]["ctranslate2 int8"] == ratio(rates["attnmt int8"], rates["ctranslate2 int8"])
    table = format_ctranslate2(report)
    assert "attnmt int8 sent/s" in table and "attnmt int8 / each" in table


def test_the_rnnsearch_runs_at_the_main_batch_beside_the_transformer(engines, tiny_model, sources):
    report = bench_ctranslate2(engines / "attnmt", {"fp32": engines / "fp32"}, sources[:8], repeats=1, threads=1,
                               batches=(8, 1), beams=(1, 2), rnnsearch=tiny_model, main_batch=8)
    for row in report["rows"]:
        rates = row["sentences_per_s"]
        if row["batch"] == 8:
            assert rates["rnnsearch"] > 0
            assert row["attnmt_over"]["rnnsearch"] == ratio(rates["attnmt fp32"], rates["rnnsearch"])
        else:
            assert "rnnsearch" not in rates
    # the profile: every attnmt model at the main batch, each beam
    assert {(p["model"], p["beam"], p["batch"]) for p in report["profile"]} == {
        (model, beam, 8) for model in ("attnmt fp32", "rnnsearch") for beam in (1, 2)}
    table = format_ctranslate2(report)
    assert "against the RNNsearch's: beam 1 batch 8:" in table
    assert "| rnnsearch | 2 | 8 |" in table and "cache moves s (share)" in table


def test_the_profile_attributes_a_runs_time_and_leaves_the_engine_as_it_was(engines, sources):
    translator = Translator(Engine(engines / "attnmt", EngineOptions(intra_op_threads=1)), max_tokens=10_000)
    methods = {(cls, name): cls.__dict__[name] for cls, name in [(Rows, "store_state"), (Rows, "copy"),
                                                                 (Memory, "add"), (RowMemory, "view"),
                                                                 (DecodeBatch, "_advance_beams")]}
    greedy = profile(translator, [sources[:8]], _options(1))
    beam = profile(translator, [sources[:8]], _options(2))
    for p in (greedy, beam):
        assert list(p["seconds"]) == list(PARTS) == list(p["share"])
        assert p["total_s"] > 0 and p["steps"] > 0 and p["encoder_calls"] > 0
        assert all(p["seconds"][part] > 0 for part in ("encoder", "decoder steps", "cache moves", "search", "text"))
        assert sum(p["seconds"].values()) == pytest.approx(p["total_s"], abs=1e-3)
        assert sum(p["share"].values()) == pytest.approx(1, abs=1e-3)
    assert beam["seconds"]["memory copies"] > 0          # beam rows read copies of their sentence's memory
    assert beam["steps"] >= greedy["steps"]
    # the timers are gone: the objects' own methods and the classes' are back
    for obj in (translator, translator.engine.encoder, translator.engine.decoder):
        assert not {"run", "search", "result"} & set(vars(obj))
    assert all(cls.__dict__[name] is method for (cls, name), method in methods.items())


def test_cli_runs_every_part(engines, attnmt_int8, tiny_model, data, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["bench", "ctranslate2", "--model", str(engines / "attnmt"), "--data", str(data), "--sentences", "8",
                 "--ctranslate2", str(engines / "fp32"), "--ctranslate2-int8", str(engines / "int8"),
                 "--model-int8", str(attnmt_int8), "--rnnsearch", str(tiny_model), "--server-clients", "4",
                 "--repeats", "1", "--threads", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["agreement"]["sentences"] == 8
    assert [(r["beam"], r["batch"]) for r in report["rows"]] == [(1, 64), (1, 1), (5, 64), (5, 1)]
    for row in report["rows"]:
        expected = {"attnmt fp32", "attnmt int8", "ctranslate2 fp32", "ctranslate2 int8"}
        expected |= {"rnnsearch"} if row["batch"] == 64 else set()
        assert set(row["sentences_per_s"]) == expected | ({"attnmt fp32 early exit"} if row["beam"] > 1 else set())
    assert {(p["model"], p["beam"]) for p in report["profile"]} == {
        (model, beam) for model in ("attnmt fp32", "attnmt int8", "rnnsearch") for beam in (1, 5)}

    server = report["server"]
    assert (server["clients"], server["batch"], server["threads"]) == (4, 64, 1)
    assert [row["model"] for row in server["rows"]] == ["transformer", "rnnsearch"]
    for row in server["rows"]:
        assert row["offline_sentences_per_s"] > 0 and row["server_sentences_per_s"] > 0
        assert row["server_over_offline"] == ratio(row["server_sentences_per_s"], row["offline_sentences_per_s"])
        assert row["failed_calls"] == {}
    transformer, rnnsearch = (row["server_over_offline"] for row in server["rows"])
    (goal,) = server["targets"]
    assert goal["value"] == transformer and goal["goal"] == f"≥ {rnnsearch}"
    assert goal["met"] == (transformer >= rnnsearch)

    printed = capsys.readouterr().out
    assert "| transformer (" in printed and "| rnnsearch (" in printed and "server / offline" in printed
    assert "| attnmt int8 | 5 | 64 |" in printed


def test_cli_refuses_a_negative_client_count(capsys):
    assert main(["bench", "ctranslate2", "--ctranslate2", "x", "--server-clients", "-1"]) == 2
    assert "--server-clients" in capsys.readouterr().err


def test_bench_ctranslate2_with_two_parallel_decoders_on_each_side(engines, sources):
    """--workers 2: attnmt's two decode workers against CTranslate2's two inter_threads, one
    thread each; no profile (its timers follow one thread)."""
    report = bench_ctranslate2(engines / "attnmt", {"fp32": engines / "fp32"}, sources[:8], repeats=1, threads=2,
                               batches=(8,), beams=(1,), main_batch=8, workers=2)
    (row,) = report["rows"]
    assert report["workers"] == 2 and report["profile"] == []
    assert set(row["sentences_per_s"]) == {"attnmt fp32", "ctranslate2 fp32"}
    assert all(rate > 0 for rate in row["sentences_per_s"].values())
    assert "shared by 2 parallel decoders" in format_ctranslate2(report)


def test_a_directory_with_int8_weights_converts_with_the_numbers_it_serves(engines, sources, tmp_path):
    """Converted from an int8-stored directory, CTranslate2 takes the int8-rounded weights as they
    are (rounding them to float16 as a checkpoint's are would change them): both engines agree."""
    from attnmt.model.export.ctranslate2 import export_ctranslate2_from_model_directory
    assert main(["store-weights", str(engines / "attnmt"), "--out", str(tmp_path / "stored")]) == 0
    export_ctranslate2_from_model_directory(tmp_path / "stored", tmp_path / "ct2")
    report = agreement(tmp_path / "stored", tmp_path / "ct2", sources)
    assert report["identical_share"] >= 0.95, report["differences"]
