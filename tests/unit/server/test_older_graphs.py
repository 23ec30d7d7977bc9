"""A server loading a Transformer whose step graphs an older export wrote says so, and how to
re-export them (the manifest's `graphs_revision`)."""

import json
import logging
import shutil

from attnmt.service.modeldir.manifest import TRANSFORMER_GRAPHS_REVISION, load_manifest
from attnmt.service.server.app import Server
from attnmt.service.server.settings import Settings


def load(model, caplog) -> str:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="attnmt"):
        Server(Settings(models=[model], host="127.0.0.1", port=0, metrics_enabled=False,
                        intra_op_threads=1))._load_models()
    return caplog.text


def test_a_current_export_loads_quietly_and_an_older_one_names_the_upgrade(tiny_transformer, tmp_path, caplog):
    assert load_manifest(tiny_transformer).graphs_revision == TRANSFORMER_GRAPHS_REVISION
    assert not load_manifest(tiny_transformer).older_graphs
    assert "older export" not in load(tiny_transformer, caplog)
    old = tmp_path / "old"
    shutil.copytree(tiny_transformer, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["graphs_revision"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert load_manifest(old).older_graphs
    text = load(old, caplog)
    assert f"revision 1 of {TRANSFORMER_GRAPHS_REVISION}" in text and f"attnmt upgrade-model {old}" in text
    (old / "manifest.json").write_text(json.dumps({**manifest, "quantization": {"method": "int8"}}))
    assert "then quantize it again" in load(old, caplog)


def test_an_rnnsearch_has_no_graphs_revision_to_be_behind(tiny_model):
    assert not load_manifest(tiny_model).older_graphs
