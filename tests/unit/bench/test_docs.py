"""The generated blocks in README.md, docs/ and the model cards: up to date with the manifests,
docs/measured.json and the settings; a stale block is found and rewritten, and only inside its markers."""

from __future__ import annotations

import json
import shutil

from attnmt.bench import docs
from attnmt.service.server.settings import Settings
from conftest import REPO


def test_every_marked_block_is_up_to_date():
    stale = docs.update(REPO, check=True)
    assert not stale, "stale generated blocks (run `make docs-figures`): " + ", ".join(stale)


def test_every_marked_block_has_a_generator_and_the_docs_use_the_main_ones():
    names = {m.group("name") for path in docs.documents(REPO) if path.exists()
             for m in docs.BLOCK.finditer(path.read_text(encoding="utf-8"))}
    assert names <= set(docs.generators())
    assert {"quality", "config", "public-baseline", "speed-gpu"} <= names
    assert {f"evaluation-{name}" for name in docs.MODELS} <= names


def test_a_stale_block_is_found_and_rewritten_inside_its_markers_only(tmp_path):
    repo = tmp_path / "repo"
    for name in docs.MODELS:
        (repo / "models" / name).mkdir(parents=True)
        shutil.copy(REPO / "models" / name / "manifest.json", repo / "models" / name / "manifest.json")
    (repo / "docs").mkdir()
    shutil.copy(REPO / docs.MEASURED, repo / docs.MEASURED)
    readme = repo / "README.md"
    readme.write_text("before\n<!-- figures:quality -->\nold table\n<!-- /figures:quality -->\nafter\n")

    assert docs.update(repo, check=True) == ["README.md: quality"]
    assert "old table" in readme.read_text()                        # --check writes nothing
    assert docs.update(repo) == ["README.md: quality"]
    text = readme.read_text()
    assert text.startswith("before\n<!-- figures:quality -->\n| BLEU / chrF |")
    assert text.endswith("<!-- /figures:quality -->\nafter\n")
    bible = json.loads((repo / "models" / docs.MODELS[0] / "manifest.json").read_text())["evaluation"]["bible/test"]
    assert f"{bible['beam5']['bleu']:.2f} / {bible['beam5']['chrf']:.2f}" in text  # the default's
    assert docs.update(repo, check=True) == []


def test_a_changed_figure_makes_its_block_stale(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "models" / "rnnsearch-es-en", repo / "models" / "rnnsearch-es-en",
                    ignore=shutil.ignore_patterns("*.onnx", "*.bin", "*.pt", "*.npz", "*.model"))
    (repo / "docs").mkdir()
    shutil.copy(REPO / docs.MEASURED, repo / docs.MEASURED)
    card = repo / "models" / "rnnsearch-es-en" / "MODEL_CARD.md"
    card.write_text("<!-- figures:evaluation-rnnsearch-es-en -->\n<!-- /figures:evaluation-rnnsearch-es-en -->\n")
    docs.update(repo)
    assert docs.update(repo, check=True) == []
    manifest = repo / "models" / "rnnsearch-es-en" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["evaluation"]["bible/test"]["beam5"]["bleu"] += 1.0          # a figure the card shows
    manifest.write_text(json.dumps(data))
    assert docs.update(repo, check=True) == ["models/rnnsearch-es-en/MODEL_CARD.md: evaluation-rnnsearch-es-en"]


def test_the_public_table_comes_from_the_benchmark_json_when_there_is_one(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    shutil.copy(REPO / docs.MEASURED, repo / docs.MEASURED)
    assert "10.3" in docs.public(repo)                               # the recorded figures
    (repo / "bench-results").mkdir()
    (repo / docs.PUBLIC).write_text(
        '{"date": "2030-01-01", "beam": 5, "machine": {"cpu": "Some CPU", "cores": 2}, "testsets": [{"name": '
        '"flores200-devtest", "sentences": 1012, "scored": 1012, "systems": {"transformer-es-en": {"bleu": 12.34, '
        '"chrf": 43.21}}, "published": [{"system": "OPUS-MT", "bleu": 27.6, "chrf": null}]}]}')
    text = docs.public(repo)
    assert "12.3" in text and "43.2" in text and "2030-01-01" in text and "Some CPU" in text and "10.3" not in text


def test_the_configuration_reference_lists_every_setting_with_its_variable():
    text = docs.config(REPO)
    for name in Settings.model_fields:
        assert f"| `{name}` | `ATTNMT_{name.upper()}` |" in text
    # repository-relative, the default first
    assert "`models/transformer-es-en,models/rnnsearch-es-en,models/transformer-en-es`" in text
