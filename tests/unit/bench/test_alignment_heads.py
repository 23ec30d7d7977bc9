"""`attnmt evaluate-alignment --run`: every decoder layer and head of a Transformer scored
on a gold file in PyTorch, and checked against what the exported model serves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from attnmt.bench.alignment_heads import DEFAULT_RULE, evaluate_heads, format_heads, head_links, teacher_forced_alphas
from attnmt.bench.evaluate_alignment import SERVED_DEFAULT, model_links
from attnmt.corpus.word_links import read_gold
from attnmt.model.tokenizer import MODEL_FILE, Tokenizer
from attnmt.model.train import load_model
from conftest import REPO, synthetic_corpus


def write_gold(directory: Path, pairs: int = 8) -> Path:
    """The synthetic corpus's pairs, each word linked to the word at the same position (a
    guess, not a truth: the scores only have to be computable and consistent)."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for k, (source, target) in enumerate(synthetic_corpus(pairs, seed=41)):
        n = min(len(source.split()), len(target.split()))
        rows.append(f"p{k}\tsynthetic\t{source}\t{target}\t" + " ".join(f"{i}-{i}" for i in range(n)) + "\n")
    for split in ("dev", "test"):
        (directory / f"{split}.tsv").write_text("id\tdomain\tsource\ttarget\tlinks\n" + "".join(rows),
                                                encoding="utf-8")
    return directory


def test_every_layer_and_head_is_scored(tiny_transformer, tmp_path):
    gold = write_gold(tmp_path / "gold")
    report = evaluate_heads(tiny_transformer, "checkpoint.pt", gold, samples=50)
    assert (report["layers"], report["heads"]) == (1, 2)
    # 2 heads alone and their mean; the guided head's layer has only one other head: no extra row
    variants = {name.split(" · ")[0] for name in report["splits"]["dev"]["rules"]}
    assert variants == {"layer 0 head 0", "layer 0 head 1", "layer 0 heads mean"}
    assert report["guided"] == "layer 0 head 1"
    for split in ("dev", "test"):
        for rule in report["splits"][split]["rules"].values():
            assert 0.0 <= rule["aer"]["low"] <= rule["aer"]["value"] <= rule["aer"]["high"] <= 1.0
    assert report["best_variant_on_dev"] in variants
    table = format_heads(report)
    assert "| layer 0 head 1 (guided)" in table and DEFAULT_RULE in table


def test_pytorch_reading_equals_the_served_links(tiny_transformer, tmp_path):
    """The exported model serves the guided head's α (manifest `alignment`): its default hard
    links through the Align RPC's path are this module's `layer 0 head 1` target-argmax."""
    gold = write_gold(tmp_path / "gold")
    pairs = [p for p in read_gold(gold / "dev.tsv") if p.annotated]
    manifest = json.loads((tiny_transformer / "manifest.json").read_text())
    assert manifest["alignment"] == {"layer": -1, "heads": [1]}
    served, _ = model_links(tiny_transformer, pairs)
    report_links = head_links(
        load_model(tiny_transformer / "checkpoint.pt"), Tokenizer(tiny_transformer / MODEL_FILE), pairs, (-1, 1))[0]
    same = sum(s[SERVED_DEFAULT] == r[f"layer 0 head 1 · {DEFAULT_RULE}"] for s, r in zip(served, report_links))
    assert same == len(pairs)
    # and another head's links are not the same ones (the comparison can tell heads apart)
    assert any(s[SERVED_DEFAULT] != r[f"layer 0 head 0 · {DEFAULT_RULE}"] for s, r in zip(served, report_links))


def test_teacher_forced_alpha_rows_are_distributions(tiny_transformer, tmp_path):
    pairs = [p for p in read_gold(write_gold(tmp_path / "gold", 3) / "dev.tsv")]
    for source, target, layers in teacher_forced_alphas(load_model(tiny_transformer / "checkpoint.pt"),
                                                        Tokenizer(tiny_transformer / MODEL_FILE), pairs):
        assert source[-1] == target[-1] == "</s>"
        (alpha,) = layers
        assert alpha.shape == (2, len(target), len(source))
        np.testing.assert_allclose(alpha.sum(-1), 1.0, atol=1e-5)


def test_cli_refuses_an_rnnsearch_run(tiny_run, tmp_path):
    gold = write_gold(tmp_path / "gold", 2)
    done = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "evaluate-alignment", "--run", str(tiny_run),
                           "--checkpoint", "last.pt", "--gold", str(gold), "--samples", "10"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode != 0 and "is not a Transformer" in done.stderr
