"""`attnmt upgrade-model`: a schema_version 1 directory re-exported from its own checkpoint.pt, a
schema_version 2 Transformer in the head-major layout, from its checkpoint.pt or its graphs' weights,
and a current Transformer exported before the append step."""

import argparse
import json
import shutil

import pytest

from attnmt.model.cli import register
from attnmt.model.export.upgrade import FALLBACK_SENTENCES, UpgradeError, parity_sources, upgrade_model
from attnmt.service.modeldir.manifest import (
    APPEND_GRAPH,
    GRAPHS,
    GROUPED_GRAPH,
    SCHEMA_VERSION,
    TRANSFORMER_GRAPHS_REVISION,
    load_manifest,
)
from conftest import without_append_step, without_grouped_step


@pytest.fixture
def schema_1_model(tiny_model, tiny_run, tmp_path):
    """The tiny model as schema 1 described it: two graphs, a step returning log_probs[R,V].
    Upgrade reads only the manifest, checkpoint.pt and spm.model, so the old step graph is a
    stand-in whose bytes show whether it was replaced."""
    old = tmp_path / "old"
    shutil.copytree(tiny_model, old)
    (old / "decoder_step_shared.onnx").unlink()
    (old / "decoder_step.onnx").write_bytes(b"schema 1 step graph")
    (old / "eval").mkdir()
    (old / "eval" / "report.json").write_text("{}")
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["schema_version"] = 1
    manifest["graphs"] = {"encoder": "encoder.onnx", "decoder_step": "decoder_step.onnx"}
    for key in ("step_state", "placeholders"):
        manifest.pop(key, None)
    del manifest["files"]["decoder_step_shared.onnx"]
    manifest["files"]["decoder_step.onnx"]["bytes"] = len(b"schema 1 step graph")
    manifest["version"] = "2026-01-01"
    manifest["evaluation"] = {"test": {"greedy": {"bleu": 99.0}}}
    # where the run's dev split is, as `attnmt export` records it
    manifest["training"] = {"config": {"data_dir": str(tiny_run.parent / "data"), "src_lang": "xx",
                                       "tgt_lang": "en"}}
    (old / "manifest.json").write_text(json.dumps(manifest))
    return old


def upgrade_cli(*argv):
    parser = argparse.ArgumentParser(prog="attnmt")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["upgrade-model", *map(str, argv)])
    return args.func(args)


def test_upgrade_writes_a_current_directory_with_parity(schema_1_model, tmp_path):
    out = tmp_path / "new"
    assert upgrade_cli(schema_1_model, "--out", out) == 0
    manifest = load_manifest(out)                           # the service's contract, checksums included
    assert manifest.graphs == GRAPHS and set(GRAPHS.values()) <= set(manifest.files)
    raw = json.loads((out / "manifest.json").read_text())
    assert raw["export_parity"]["greedy_identical"] == "40/40"     # the dev split of the tiny run
    assert raw["export_parity"]["shared_vs_direct"] <= 1e-4
    assert manifest.version == "2026-01-01" and manifest.evaluation["test"]["greedy"]["bleu"] == 99.0
    assert raw["upgraded"]["from_schema_version"] == 1
    assert (out / "decoder_step.onnx").read_bytes() != b"schema 1 step graph"
    assert (out / "eval" / "report.json").exists()
    assert json.loads((schema_1_model / "manifest.json").read_text())["schema_version"] == 1  # left alone


def test_upgrade_in_place(schema_1_model):
    upgrade_model(schema_1_model)
    assert load_manifest(schema_1_model).schema_version == SCHEMA_VERSION
    assert (schema_1_model / "eval" / "report.json").exists()
    with pytest.raises(UpgradeError, match=f"already schema_version {SCHEMA_VERSION}"):
        upgrade_model(schema_1_model)


def test_without_checkpoint_the_upgrade_says_why(schema_1_model, tmp_path, capsys):
    (schema_1_model / "checkpoint.pt").unlink()
    with pytest.raises(UpgradeError, match="no checkpoint.pt to re-export from"):
        upgrade_model(schema_1_model, tmp_path / "new")
    assert upgrade_cli(schema_1_model) == 2
    assert "no checkpoint.pt" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_parity_sentences_fall_back_when_the_training_data_is_gone(tmp_path):
    assert parity_sources({}) == FALLBACK_SENTENCES
    gone = {"config": {"data_dir": str(tmp_path / "gone"), "src_lang": "es", "tgt_lang": "en"}}
    assert parity_sources(gone) == FALLBACK_SENTENCES


@pytest.fixture
def schema_2_transformer(tiny_transformer, tiny_transformer_run, tmp_path):
    """The tiny Transformer as schema 2 described it (one self_cache, cross_keys and cross_values
    with the layers and heads side by side), shipped without checkpoint.pt as the bundled one is.
    Its graphs are today's: the upgrade reads their weights by name (recover.py), which both
    layouts keep, and the manifest, whose names are the old ones here."""
    old = tmp_path / "old"
    shutil.copytree(tiny_transformer, old)
    (old / "checkpoint.pt").unlink()
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["position_axes"]
    manifest.update(schema_version=2, memory=["cross_keys", "cross_values", "src_mask"],
                    step_state={"self_cache": "new_self_cache"}, initial_state={"self_cache": "init_self_cache"},
                    version="2026-01-01", hard_links={"rule": "intersection", "threshold": None},
                    # the run's dev split (FALLBACK_SENTENCES would outrun its 64 positions)
                    training={"config": {"data_dir": str(tiny_transformer_run.parent / "data"), "src_lang": "xx",
                                         "tgt_lang": "en"}})
    (old / "manifest.json").write_text(json.dumps(manifest))
    return old


def test_a_schema_2_transformer_is_upgraded_from_its_graphs_weights(schema_2_transformer, tiny_transformer, tmp_path):
    out = tmp_path / "new"
    assert upgrade_cli(schema_2_transformer, "--out", out) == 0
    manifest = load_manifest(out)
    assert manifest.schema_version == SCHEMA_VERSION and manifest.version == "2026-01-01"
    assert manifest.step_state == load_manifest(tiny_transformer).step_state           # head-major, per layer
    assert manifest.position_axes == {"cross_keys_0": 2, "cross_values_0": 2, "self_keys_0": 2, "self_values_0": 2}
    assert manifest.alignment == {"layer": -1, "heads": [1]}                           # the old export's α
    assert manifest.hard_links == {"rule": "intersection", "threshold": None}          # same weights, kept
    raw = json.loads((out / "manifest.json").read_text())
    assert raw["upgraded"]["from_schema_version"] == 2 and raw["export_parity"]["greedy_identical"] == "40/40"
    with pytest.raises(UpgradeError, match="already schema_version"):
        upgrade_model(out)


def test_a_schema_2_rnnsearch_and_an_int8_transformer_are_refused(tiny_model, schema_2_transformer):
    manifest = json.loads((schema_2_transformer / "manifest.json").read_text())
    (schema_2_transformer / "manifest.json").write_text(json.dumps({**manifest, "quantization": {"method": "int8"}}))
    with pytest.raises(UpgradeError, match="no checkpoint.pt to re-export from"):
        upgrade_model(schema_2_transformer)
    rnnsearch = json.loads((tiny_model / "manifest.json").read_text())
    (schema_2_transformer / "manifest.json").write_text(json.dumps({**rnnsearch, "schema_version": 2}))
    with pytest.raises(UpgradeError, match="served as it is"):
        upgrade_model(schema_2_transformer)


def test_a_transformer_without_the_append_step_gains_it_and_keeps_what_was_measured(tiny_transformer,
                                                                                    tiny_transformer_run, tmp_path):
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.translator import Translator
    old = without_append_step(tiny_transformer, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text())
    data = {"data_dir": str(tiny_transformer_run.parent / "data"), "src_lang": "xx", "tgt_lang": "en"}
    (old / "manifest.json").write_text(json.dumps({**manifest, "version": "2026-01-01", "training": {"config": data},
                                                   "evaluation": {"dev": {"greedy": {"bleu": 12.3}}}}))
    assert not Engine(old).append
    upgrade_model(old, tmp_path / "new")
    new = load_manifest(tmp_path / "new")
    assert new.graphs == {**GRAPHS, **APPEND_GRAPH, **GROUPED_GRAPH} and new.version == "2026-01-01"
    raw = json.loads((tmp_path / "new" / "manifest.json").read_text())
    assert raw["evaluation"] == {"dev": {"greedy": {"bleu": 12.3}}}
    assert raw["upgraded"]["added"] == ["decoder_step_append", "decoder_step_grouped"]
    assert raw["export_parity"]["append_vs_direct"] <= 1e-4 and raw["export_parity"]["grouped_vs_direct"] <= 1e-4
    texts = ["peru vidas kasa .", "gato roja havas arbo blanka ."]
    assert Engine(tmp_path / "new").append
    assert [t.best.text for t in Translator(Engine(tmp_path / "new")).translate(texts)] == \
        [t.best.text for t in Translator(Engine(old)).translate(texts)]
    with pytest.raises(UpgradeError, match="already schema_version"):
        upgrade_model(tmp_path / "new")


def test_a_transformer_without_the_grouped_step_gains_it_and_keeps_its_files(tiny_transformer, tiny_transformer_run,
                                                                            tmp_path):
    """A directory exported after the append step and before the grouped one: it gains the grouped
    step, the step it is served with then, and every other file comes out byte-identical, its
    known-words list (`attnmt fit-names`) and lexicon (`attnmt fit-lexicon`) too."""
    from attnmt.service.inference.engine import Engine
    from attnmt.service.modeldir.manifest import file_entries
    from attnmt.service.text.lexicon import write_lexicon
    from attnmt.service.text.names import write_known
    old = without_grouped_step(tiny_transformer, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text())
    data = {"data_dir": str(tiny_transformer_run.parent / "data"), "src_lang": "xx", "tgt_lang": "en"}
    write_known(old / "known_words.txt.gz", ["kasa", "peru"])
    write_lexicon(old / "lexicon.tsv.gz", {"gato": "cat"})
    manifest["files"].update(file_entries(old, ["known_words.txt.gz", "lexicon.tsv.gz"]))
    (old / "manifest.json").write_text(json.dumps({**manifest, "training": {"config": data},
                                                   "names": {"file": "known_words.txt.gz"},
                                                   "lexicon": {"file": "lexicon.tsv.gz"}}))
    assert not Engine(old).grouped
    upgrade_model(old, tmp_path / "new")
    raw = json.loads((tmp_path / "new" / "manifest.json").read_text())
    assert raw["upgraded"]["added"] == ["decoder_step_grouped"] and Engine(tmp_path / "new").grouped
    before = json.loads((old / "manifest.json").read_text())["files"]
    after = raw["files"]
    assert set(after) - set(before) == {"decoder_step_grouped.onnx"}
    assert {f: after[f] for f in before} == before and {"known_words.txt.gz", "lexicon.tsv.gz"} <= set(before)
    from attnmt.service.text.translator import Translator
    upgraded = Translator(Engine(tmp_path / "new"))
    assert upgraded.names.known == frozenset({"kasa", "peru"}) and upgraded.lexicon.entries == {"gato": "cat"}


def test_a_transformer_an_older_export_wrote_gets_the_current_graphs_and_keeps_its_weights(tiny_transformer,
                                                                                         tiny_transformer_run,
                                                                                         tmp_path):
    """A current-schema directory without `graphs_revision` (the first export's step graphs: R x 1 x d
    activations) is exported again: the manifest's revision is the current one, weights.bin comes out
    byte-identical (each Linear is still a MatMul on the same stored weight) and so do the
    translations; then nothing is left to upgrade."""
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.translator import Translator
    old = tmp_path / "old"
    shutil.copytree(tiny_transformer, old)
    manifest = json.loads((old / "manifest.json").read_text())
    assert manifest.pop("graphs_revision") == TRANSFORMER_GRAPHS_REVISION
    data = {"data_dir": str(tiny_transformer_run.parent / "data"), "src_lang": "xx", "tgt_lang": "en"}
    (old / "manifest.json").write_text(json.dumps({**manifest, "training": {"config": data}}))
    upgrade_model(old, tmp_path / "new")
    raw = json.loads((tmp_path / "new" / "manifest.json").read_text())
    assert raw["graphs_revision"] == TRANSFORMER_GRAPHS_REVISION and raw["upgraded"]["from_graphs_revision"] == 1
    assert "added" not in raw["upgraded"]
    assert (tmp_path / "new" / "weights.bin").read_bytes() == (old / "weights.bin").read_bytes()
    texts = ["peru vidas kasa .", "gato roja havas arbo blanka ."]
    assert [t.best.text for t in Translator(Engine(tmp_path / "new")).translate(texts)] == \
        [t.best.text for t in Translator(Engine(old)).translate(texts)]
    with pytest.raises(UpgradeError, match="already schema_version"):
        upgrade_model(tmp_path / "new")
    # an int8 directory of those older graphs holds no float weights to export again
    (old / "manifest.json").write_text(json.dumps({**manifest, "quantization": {"method": "int8"}}))
    (old / "checkpoint.pt").unlink(missing_ok=True)
    with pytest.raises(UpgradeError, match="quantize again"):
        upgrade_model(old)
