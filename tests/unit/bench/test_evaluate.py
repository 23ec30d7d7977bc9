"""`attnmt evaluate --model` end to end on the tiny model: greedy and beam scores, the files it
writes, and the paired bootstrap against another system's translations and against Apertium."""

from __future__ import annotations

import json
import shutil

import pytest

from attnmt.bench.evaluate import evaluate, paired_bootstrap
from attnmt.service.cli import main
from conftest import write_corpus


def test_paired_bootstrap_is_sacrebleus():
    refs = ["the cat sat on the mat .", "a dog ran in the park .", "we eat bread and cheese ."] * 10
    same = paired_bootstrap(refs, refs, refs, samples=200)
    assert same["bleu"]["difference"] == same["chrf"]["difference"] == 0.0
    worse = ["the cat sat .", "a dog ran .", "we eat ."] * 10
    report = paired_bootstrap(worse, refs, refs, samples=200)
    assert report["bleu"]["difference"] < -30 and report["chrf"]["difference"] < -20
    assert report["bleu"]["p"] < 0.01 and report["samples"] == 200
    with pytest.raises(ValueError, match="2 hypotheses, 30 baseline lines"):
        paired_bootstrap(refs[:2], refs, refs)


def test_evaluate_writes_scores_and_compares_with_a_baseline(tiny_model, paired_models, tmp_path):
    data = write_corpus(tmp_path / "data", {"test": 12})
    out = tmp_path / "out"
    first = evaluate(tiny_model, data, beam=3, heatmaps=1, out=out)
    assert first["sentences"] == 12 and {"greedy", "beam3"} <= set(first)
    assert (out / "test.beam3.en").exists() and (out / "report.json").exists()
    assert "paired" not in first["beam3"]
    assert "apertium" not in first              # Apertium has no pair for the toy source language xx
    # against its own translations: no difference; against a system that writes half of each
    # reference: far ahead of it
    shutil.copy(out / "test.beam3.en", tmp_path / "own.en")
    again = evaluate(tiny_model, data, beam=3, heatmaps=0, out=tmp_path / "again", baseline=tmp_path / "own.en")
    assert again["beam3"]["paired"]["bleu"]["difference"] == 0.0
    halves = tmp_path / "halves.en"
    refs = [line.split("\t")[1].split() for line in (data / "test.tsv").read_text().splitlines()]
    halves.write_text("".join(" ".join(words[:len(words) // 2]) + "\n" for words in refs))
    # the same network labelled es->en: Apertium spa-eng beside it (when installed)
    assert main(["evaluate", "--model", str(paired_models[0]), "--data", str(data), "--beam", "3", "--heatmaps", "0",
                 "--out", str(tmp_path / "cli"), "--baseline", str(halves)]) == 0
    report = json.loads((tmp_path / "cli" / "report.json").read_text())
    paired = report["beam3"]["paired"]
    assert paired["against"] == str(halves) and paired["bleu"]["difference"] > 20 and paired["bleu"]["p"] < 0.05
    if shutil.which("apertium"):
        assert set(report["apertium"]["paired"]) == {"against", "samples", "bleu", "chrf"}
