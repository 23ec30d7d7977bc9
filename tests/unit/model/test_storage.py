"""A model directory's weights stored as int8 (`attnmt store-weights`, model/export/storage.py):
half the file, the same graphs, each weight within half a step of its channel's scale, and
ONNX Runtime computing exactly with the rounded weights."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from attnmt.model.export.directory import INT8_SUFFIX, SCALE_SUFFIX, full_precision, stored_weights
from attnmt.model.tokenizer import Tokenizer
from attnmt.service.modeldir.manifest import load_manifest
from conftest import synthetic_corpus


@pytest.fixture(scope="module")
def stored(tiny_transformer, tmp_path_factory):
    from attnmt.model.export.storage import store_weights
    out = tmp_path_factory.mktemp("stored") / "tiny-transformer-int8"
    store_weights(tiny_transformer, out)
    return out


@pytest.fixture(scope="module")
def stored_rnnsearch(listed_model, tmp_path_factory):
    from attnmt.model.export.storage import store_weights
    out = tmp_path_factory.mktemp("stored") / "listed-int8"
    store_weights(listed_model, out)
    return out


def _stored_bytes(model_dir) -> int:
    stretches = set()
    for graph_file in load_manifest(model_dir).graphs.values():
        for tensor in onnx.load(str(model_dir / graph_file), load_external_data=False).graph.initializer:
            if tensor.data_location == TensorProto.EXTERNAL:
                entry = {e.key: e.value for e in tensor.external_data}
                stretches.add((int(entry["offset"]), int(entry["length"])))
    return sum(length for _, length in stretches)


def _int8_weights(model_dir, graph_file):
    graph = onnx.load(str(model_dir / graph_file)).graph
    return graph, {t.name.removesuffix(INT8_SUFFIX): t for t in graph.initializer if t.name.endswith(INT8_SUFFIX)}


@pytest.mark.parametrize("which", ["stored", "stored_rnnsearch"])
def test_the_weights_file_halves_and_the_manifest_says_how_it_is_stored(which, request, tiny_transformer,
                                                                        listed_model):
    out = request.getfixturevalue(which)
    source = tiny_transformer if which == "stored" else listed_model
    manifest = load_manifest(out)                       # checksums of every file hold
    # the tensors' bytes (the toy's tensors are smaller than the pages each starts on)
    assert _stored_bytes(out) < 0.62 * _stored_bytes(source)
    assert manifest.weights_storage["format"] == "int8"
    assert manifest.weights_storage["bytes"] == (out / "weights.bin").stat().st_size
    assert "checkpoint.pt" not in manifest.files and not (out / "checkpoint.pt").exists()
    assert manifest.graphs == load_manifest(source).graphs
    assert (out / "spm.model").read_bytes() == (source / "spm.model").read_bytes()


@pytest.mark.parametrize("which", ["stored", "stored_rnnsearch"])
def test_every_matrix_is_int8_within_half_a_step_of_its_float16_value(which, request, tiny_transformer,
                                                                      listed_model):
    out = request.getfixturevalue(which)
    source = tiny_transformer if which == "stored" else listed_model
    for graph_file in load_manifest(out).graphs.values():
        graph, int8 = _int8_weights(out, graph_file)
        assert int8, graph_file
        float_graph = onnx.load(str(source / graph_file)).graph
        full_precision(float_graph)
        original = {t.name: numpy_helper.to_array(t) for t in float_graph.initializer}
        scales = {t.name.removesuffix(SCALE_SUFFIX): numpy_helper.to_array(t) for t in graph.initializer
                  if t.name.endswith(SCALE_SUFFIX)}
        rounded = stored_weights(graph)
        for name, tensor in int8.items():
            assert tensor.data_type == TensorProto.INT8
            q, scale = numpy_helper.to_array(tensor), scales[name]
            # one scale per output channel, and each channel's largest weight is its ±127
            assert sum(n > 1 for n in scale.shape) == 1 and scale.size in q.shape
            assert np.abs(q).max(axis=tuple(a for a in range(q.ndim) if scale.shape[a] == 1)).min() == 127
            assert np.all(np.abs(rounded[name] - original[name]) <= scale * (0.5 + 1e-4)), name   # float32 ties


def test_onnx_runtime_folds_the_stored_weights_and_computes_with_them_exactly(stored, tmp_path):
    """The loaded graph has none of the Casts and Muls that read int8 weights, and its outputs equal
    those of the same graph given the rounded weights as float32 initializers."""
    import onnxruntime as ort

    from attnmt.model.export.transformer import onnx_sessions
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(stored / "encoder.onnx"), so, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"), load_external_data=False).graph
    assert not [n for n in optimized.node if any(i.endswith((INT8_SUFFIX, SCALE_SUFFIX)) for i in n.input)]

    plain = tmp_path / "plain.onnx"
    graph = onnx.load(str(stored / "encoder.onnx"))
    full_precision(graph.graph)
    onnx.external_data_helper.convert_model_from_external_data(graph)
    onnx.save(graph, str(plain))
    tok = Tokenizer(stored / "spm.model")
    ids = np.array([tok.encode("kasa granda vidas peru .")], dtype=np.int64)
    feeds = {"src_tokens": ids, "src_lengths": np.array([ids.shape[1]], dtype=np.int64)}
    int8_out = onnx_sessions(stored)["encoder"].run(None, feeds)
    float_out = ort.InferenceSession(str(plain), providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, b in zip(int8_out, float_out):
        np.testing.assert_array_equal(a, b)


def test_the_rounded_weights_read_back_and_pass_the_exports_parity_check(stored):
    from attnmt.model.export.recover import recover_checkpoint
    from attnmt.model.export.transformer import check_parity, onnx_sessions
    from attnmt.model.train import build_model
    graph, int8 = _int8_weights(stored, "encoder.onnx")
    rounded = stored_weights(graph)
    ckpt = recover_checkpoint(stored)
    embedding = ckpt["state_dict"]["encoder.embedding.weight"].numpy()
    assert np.array_equal(embedding, rounded["model.encoder.embedding.weight"])
    model = build_model(ckpt)
    model.load_state_dict(ckpt["state_dict"])
    tok = Tokenizer(stored / "spm.model")
    sources = [tok.encode(s) for s, _ in synthetic_corpus(6, seed=5)]
    assert check_parity(model.eval(), onnx_sessions(stored), sources, 1e-4)["greedy_identical"] == "6/6"


@pytest.mark.parametrize("which", ["stored", "stored_rnnsearch"])
def test_the_serving_engine_translates_with_int8_weights(which, request, tiny_transformer, listed_model):
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.translator import Translator
    out = request.getfixturevalue(which)
    source = tiny_transformer if which == "stored" else listed_model
    sentences = [s for s, _ in synthetic_corpus(20, seed=31)]
    before = [t.best.text for t in Translator(Engine(source)).translate(sentences)]
    after = [t.best.text for t in Translator(Engine(out)).translate(sentences)]
    # the toy model's weights are few and small; most translations stay, and every one is an answer
    assert sum(x == y for x, y in zip(before, after)) >= 16 and all(after)


def test_what_cannot_be_stored_again_is_refused(stored, tiny_transformer, tmp_path):
    from attnmt.model.export.storage import StorageError, store_weights
    with pytest.raises(StorageError, match="stored as int8 already"):
        store_weights(stored, tmp_path / "again")
    with pytest.raises(StorageError, match="another directory"):
        store_weights(tiny_transformer, tiny_transformer)
    manifest = json.loads((stored / "manifest.json").read_text())
    assert not (tmp_path / "again").exists()
    assert manifest["weights_storage"]["from_version"] == load_manifest(tiny_transformer).version
    assert manifest["version"] == load_manifest(tiny_transformer).version + "+int8"


def test_the_command_names_its_refusal(stored, tmp_path):
    done = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "store-weights", str(stored), "--out",
                           str(tmp_path / "x")], capture_output=True, text=True)
    assert done.returncode == 2 and "stored as int8 already" in done.stderr and not done.stdout


def test_an_upgrade_keeps_the_weights_stored_as_int8(stored, tiny_transformer_run, tmp_path):
    """upgrade-model re-exports from the weights read back from the graphs (through float16) and
    stores them as int8 again: the same integers, scales within float16's rounding of a channel's
    largest weight, the same translations."""
    from attnmt.model.export.upgrade import upgrade_model
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.translator import Translator
    from conftest import without_append_step
    old = without_append_step(stored, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text())
    data = {"data_dir": str(tiny_transformer_run.parent / "data"), "src_lang": "xx", "tgt_lang": "en"}
    (old / "manifest.json").write_text(json.dumps({**manifest, "training": {"config": data}}))
    upgrade_model(old, tmp_path / "new")
    manifest = load_manifest(tmp_path / "new")
    assert manifest.weights_storage["format"] == "int8" and "decoder_step_append" in manifest.graphs
    before_upgrade = load_manifest(old)
    assert (manifest.version, manifest.weights_storage) == (before_upgrade.version, before_upgrade.weights_storage)
    before, after = (_int8_weights(d, "encoder.onnx")[0] for d in (old, tmp_path / "new"))
    tensors = [{t.name: numpy_helper.to_array(t) for t in g.initializer} for g in (before, after)]
    for name, value in tensors[0].items():
        if name.endswith(INT8_SUFFIX):
            np.testing.assert_array_equal(tensors[1][name], value)
        elif name.endswith(SCALE_SUFFIX):
            np.testing.assert_allclose(tensors[1][name], value, rtol=2 ** -10)
    texts = [s for s, _ in synthetic_corpus(8, seed=41)]
    assert [t.best.text for t in Translator(Engine(tmp_path / "new")).translate(texts)] == \
        [t.best.text for t in Translator(Engine(old)).translate(texts)]


@pytest.mark.parametrize("which", ["stored", "stored_rnnsearch"])
def test_the_manifest_keeps_what_it_said_and_gains_only_the_storage(which, request, tiny_transformer, listed_model):
    """What a reader defaults for an older schema (an RNNsearch's memory) stays unwritten."""
    out = request.getfixturevalue(which)
    source = tiny_transformer if which == "stored" else listed_model
    before, after = (json.loads((d / "manifest.json").read_text()) for d in (source, out))
    assert set(after) == set(before) | {"weights_storage"}
    assert {k: v for k, v in after.items() if k not in ("files", "version", "weights_storage")} == \
        {k: v for k, v in before.items() if k not in ("files", "version")}
