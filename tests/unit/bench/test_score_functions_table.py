"""`attnmt bench score-functions` on two tiny RNNsearch models that differ only in the score
function: a row each with its label, BLEU/chrF on a toy test split, AER on a toy gold set
aligned by construction (or "not measured" without one), sentences/s, the JSON report; and a
Transformer refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attnmt.bench.score_functions import alpha_peak, bench_score_functions, format_score_functions, score_function
from attnmt.service.cli import main
from conftest import ADJECTIVES, synthetic_corpus, tiny_config, write_corpus
from unit.model.test_score_functions import widths

SCORES = ("bahdanau", "scaled_dot")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[Path]:
    """Two model directories exported from short training runs (about 3 s each)."""
    from attnmt.model.export.rnnsearch import export
    from attnmt.model.train import train
    root = tmp_path_factory.mktemp("score-table")
    data = write_corpus(root / "data", {"train": 800, "dev": 10})
    parity_sentences = [s for s, _ in synthetic_corpus(8, seed=99)]
    out = []
    for score in SCORES:
        run = root / "runs" / score
        train(tiny_config(data, model=widths(attention=score), max_epochs=4), run)
        out.append(root / "models" / f"tiny-{score}")
        export(run / "best.pt", run / "spm.model", out[-1], f"tiny-{score}", "xx", "en", parity_sentences)
    return out


def gold_links(source: str) -> str:
    """The toy pair's true links, all Sure: word for word, adjective and noun swapped; each `the`
    has no counterpart, so it is unaligned (tests/data/gold-alignments/GUIDELINES.md §2)."""
    words, links, i, j = source.split(), [], 0, 0
    for part in ("phrase", "verb", "phrase", "."):
        if part == "phrase":                                  # target: the [adjective] noun
            if words[i + 1] in ADJECTIVES:
                links += [f"{i}-{j + 2}", f"{i + 1}-{j + 1}"]
                i, j = i + 2, j + 3
            else:
                links.append(f"{i}-{j + 1}")
                i, j = i + 1, j + 2
        else:
            links.append(f"{i}-{j}")
            i, j = i + 1, j + 1
    return " ".join(links)


def write_gold(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for seed, split in enumerate(("dev", "test"), 40):
        rows = [f"{split}{n}\ttoy\t{s}\t{t}\t{gold_links(s)}\n" for n, (s, t) in enumerate(synthetic_corpus(8, seed))]
        (directory / f"{split}.tsv").write_text("id\tdomain\tsource\ttarget\tlinks\n" + "".join(rows))
    return directory


def test_a_row_per_score_function_with_scores_aer_and_speed(models, tmp_path):
    data = write_corpus(tmp_path / "toy", {"test": 12})
    report = bench_score_functions(models, [data], write_gold(tmp_path / "gold"), sentences=8, speed_sentences=10,
                                   repeats=1, samples=100)
    rows = report["models"]
    assert [r["label"] for r in rows] == ["additive (Bahdanau), query s_{i−1}", "scaled dot (dot/√d), query s_{i−1}"]
    assert [r["score_function"] for r in rows] == list(SCORES)
    assert report["test_sets"]["toy"] == {"data": str(data), "sentences": 8, "of": 12, "chosen": "evenly spaced"}
    for row in rows:
        for search in ("greedy", "beam5"):
            assert all(0 <= row["quality"]["toy"][search][metric] <= 100 for metric in ("bleu", "chrf"))
        aer = row["alignment"]
        assert aer["test_pairs"] == aer["dev_pairs"] == 8 and isinstance(aer["rule"], str)
        assert 0 <= aer["test_aer_ci"][0] <= aer["test_aer"] <= aer["test_aer_ci"][1] <= 1
        assert row["speed"]["sentences_per_s"] > 0 and len(row["speed"]["seconds"]) == 1
        assert row["speed"]["target_pieces_per_s"] >= row["speed"]["sentences_per_s"]     # </s> at least
        assert 0 < row["alpha"]["mean_largest_alpha"] <= 1 and 0 <= row["alpha"]["mean_normalised_entropy"] <= 1
    table = format_score_functions(report)
    print(table)
    lines = table.splitlines()
    assert lines[0].startswith("| score function a(s_{i−1}, h_j) | model | toy greedy BLEU / chrF |")
    assert lines[2].startswith("| additive (Bahdanau), query s_{i−1} | tiny-bahdanau |")
    assert lines[3].startswith("| scaled dot (dot/√d), query s_{i−1} | tiny-scaled_dot |")
    assert f"(dev {100 * rows[0]['alignment']['dev_aer']:.1f})" in lines[2]
    assert "toy 8 of 12 (evenly spaced)" in table and "10 toy test sentences" in table
    assert report["machine"]["cpu"] in table and "best of 1 round." in table


def test_the_command_without_a_gold_set_says_aer_is_not_measured(models, tmp_path, capsys):
    data = write_corpus(tmp_path / "toy", {"test": 6})
    out = tmp_path / "score-functions.json"
    assert main(["bench", "score-functions", *[a for m in models for a in ("--model", str(m))], "--data", str(data),
                 "--gold", "", "--speed-sentences", "6", "--repeats", "1", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    print(table)
    report = json.loads(out.read_text())
    assert report["gold"] == {"path": None, "skipped": "no gold set given"}
    assert [r["alignment"] for r in report["models"]] == [None, None]
    assert report["test_sets"]["toy"]["chosen"] == "whole split" and "toy 6 (whole split)" in table
    assert table.count("| not measured | — |") == 2 and "AER not measured (no gold set given)" in table
    # a directory without the gold files: the same, saying where it looked
    report = bench_score_functions(models[:1], [data], tmp_path / "nowhere", speed_sentences=4, repeats=1)
    assert report["gold"]["skipped"] == f"no dev.tsv or test.tsv in {tmp_path / 'nowhere'}"


def test_a_transformer_or_a_manifest_without_the_field_is_refused(models, tiny_transformer, tmp_path, capsys):
    field = r'score_function \(dimensions\["attention"\]\)'
    with pytest.raises(ValueError, match=rf"{tiny_transformer}: a Transformer, not an RNNsearch: .*{field}"):
        score_function(tiny_transformer)
    assert main(["bench", "score-functions", "--model", str(models[0]), "--model", str(tiny_transformer)]) == 2
    assert "tiny-transformer: a Transformer, not an RNNsearch" in capsys.readouterr().err
    unnamed = shutil.copytree(models[0], tmp_path / "unnamed")
    manifest = json.loads((unnamed / "manifest.json").read_text())
    manifest.pop("score_function")
    manifest["dimensions"].pop("attention")
    (unnamed / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=rf"{unnamed}: the manifest's {field} is None"):
        score_function(unnamed)


def test_alpha_peak_tells_a_flat_alpha_from_a_peaked_one():
    flat, peaked = np.full((3, 4), 0.25), np.eye(4)[:3]
    assert alpha_peak([flat]) == {"mean_largest_alpha": 0.25, "mean_normalised_entropy": 1.0, "target_pieces": 3}
    assert alpha_peak([peaked, flat])["mean_largest_alpha"] == 0.625
    assert alpha_peak([peaked])["mean_normalised_entropy"] == 0.0
