"""manifest.json's `memory` and `alignment`: a model declares the encoder outputs every step
reads (RNNsearch's by default, so directories written before the field load unchanged), and
a declaration the decode batch cannot serve is refused when the manifest is read."""

import json
from pathlib import Path

import pytest

from attnmt.service.errors import ModelLoadError
from attnmt.service.modeldir.manifest import (
    MEMORY,
    decoder_inputs,
    decoder_outputs,
    encoder_outputs,
    load_manifest,
)

BUNDLED = Path(__file__).resolve().parents[3] / "models" / "rnnsearch-es-en"


def test_a_manifest_without_memory_declares_rnnsearchs():
    raw = json.loads((BUNDLED / "manifest.json").read_text())
    assert "memory" not in raw and "alignment" not in raw
    manifest = load_manifest(BUNDLED, verify=False)
    assert manifest.memory == ["annotations", "keys", "src_mask"] == list(MEMORY)
    assert manifest.alignment is None


def test_the_graphs_signatures_follow_the_declaration():
    memory, state = ["cross_keys", "cross_values", "src_mask"], {"self_cache": "new_self_cache"}
    assert encoder_outputs(memory, {"self_cache": "init_self_cache"}.values()) == \
        ("cross_keys", "cross_values", "src_mask", "init_self_cache")
    assert decoder_inputs(memory, state, shared=True, positions=True) == \
        ("prev_tokens", "self_cache", "cross_keys", "cross_values", "src_mask", "vocab_bias", "k", "forced_tokens",
         "memory_index", "positions")
    assert decoder_inputs(memory, state, shared=True, shortlist=True)[-2:] == ("candidates", "memory_index")
    assert set(decoder_outputs(state.values())) == {"topk_log_probs", "topk_ids", "forced_log_probs", "alpha",
                                                    "new_self_cache"}


def _directory(tmp_path: Path, **fields) -> Path:
    """A model directory whose files are placeholders (load_manifest(verify=False) reads no graph)."""
    files = ["spm.model", "encoder.onnx", "decoder_step.onnx", "decoder_step_shared.onnx"]
    for name in files:
        (tmp_path / name).write_bytes(b"")
    manifest = {"schema_version": 2, "name": "t", "version": "1", "source_language": "es",
                "target_language": "en", "vocab_size": 8, "files": {n: {"sha256": "", "bytes": 0} for n in files},
                **fields}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_a_transformers_declaration_is_read(tmp_path):
    manifest = load_manifest(_directory(tmp_path, memory=["cross_keys", "cross_values", "src_mask"],
                                        alignment={"layer": -1, "heads": [0]},
                                        step_state={"self_cache": "new_self_cache"},
                                        initial_state={"self_cache": "init_self_cache"}), verify=False)
    assert manifest.memory == ["cross_keys", "cross_values", "src_mask"]
    assert manifest.alignment == {"layer": -1, "heads": [0]}


@pytest.mark.parametrize("memory,message", [
    (["cross_keys", "cross_values"], "lacks 'src_mask'"),
    (["keys", "keys", "src_mask"], "names a tensor twice"),
    (["state", "src_mask"], r"\['state'\] are step inputs of their own"),
    (["vocab_bias", "src_mask"], r"\['vocab_bias'\] are step inputs of their own"),
])
def test_a_memory_the_batch_cannot_serve_is_refused(tmp_path, memory, message):
    with pytest.raises(ModelLoadError, match=message):
        load_manifest(_directory(tmp_path, memory=memory), verify=False)


def test_the_measured_hard_link_rule_is_read(tmp_path):
    chosen = {"rule": "grow-diag-final-and", "threshold": None, "dev_aer": 0.387, "test_aer": 0.358}
    assert load_manifest(_directory(tmp_path, hard_links=chosen), verify=False).hard_links == chosen
    threshold = {"rule": "threshold", "threshold": 0.3}
    assert load_manifest(_directory(tmp_path, hard_links=threshold), verify=False).hard_links == threshold


@pytest.mark.parametrize("hard_links,message", [
    ({"rule": "closest"}, "hard_links.rule 'closest' is not one of target-argmax, "),
    ({"rule": "threshold"}, "hard_links.threshold: a number in"),
    ({"rule": "threshold", "threshold": 1.5}, "hard_links.threshold: a number in"),
    ({"rule": "union", "threshold": 0.3}, "and only for it"),
])
def test_a_hard_link_rule_the_server_cannot_apply_is_refused(tmp_path, hard_links, message):
    with pytest.raises(ModelLoadError, match=message):
        load_manifest(_directory(tmp_path, hard_links=hard_links), verify=False)


def test_a_serving_copy_may_leave_out_what_serving_never_reads(tiny_model, tmp_path):
    import json
    import shutil

    from attnmt.service.errors import ModelLoadError
    from attnmt.service.modeldir.manifest import MANIFEST, load_manifest

    files = json.loads((tiny_model / MANIFEST).read_text())["files"]
    assert files["checkpoint.pt"]["serving"] is False                  # the export marks it
    assert all(entry.get("serving", True) for name, entry in files.items() if name != "checkpoint.pt")
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model, copy)
    (copy / "checkpoint.pt").unlink()
    load_manifest(copy)                                                # complete without it
    (copy / "checkpoint.pt").write_bytes(b"not the checkpoint")
    with pytest.raises(ModelLoadError, match="checkpoint.pt does not match"):
        load_manifest(copy)                                            # but checked when present
