import json
import shutil

import numpy as np
import onnx
import pytest
import torch

from attnmt.model.batching import make_batch
from attnmt.model.data import placeholders
from attnmt.model.export.rnnsearch import onnx_greedy, onnx_sessions, onnx_step, placeholder_contract
from attnmt.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from attnmt.model.train import load_model
from attnmt.service.errors import ModelLoadError
from attnmt.service.modeldir.manifest import GRAPHS, SCHEMA_VERSION, load_manifest
from attnmt.service.modeldir.vocabulary import no_specials_bias
from conftest import synthetic_corpus


def open_engine(model, **kwargs):
    # Imported here: a failure of the serving engine should fail the tests that use it, not this file.
    from attnmt.service.inference.engine import Engine
    return Engine(model, **kwargs)


def test_export_writes_a_checked_model_directory(tiny_model):
    manifest = load_manifest(tiny_model)
    assert manifest.schema_version == SCHEMA_VERSION
    assert manifest.source_language == "xx" and manifest.target_language == "en"
    assert manifest.graphs == GRAPHS and manifest.step_state == {"state": "new_state"}
    assert manifest.placeholders is None                    # the tiny run has no placeholder sentinels
    assert set(manifest.files) == {"encoder.onnx", "decoder_step.onnx", "decoder_step_shared.onnx",
                                   "weights.bin", "spm.model", "checkpoint.pt"}
    parity = json.loads((tiny_model / "manifest.json").read_text())["export_parity"]
    for key in ("annotations", "log_probs", "forced_log_probs", "alpha", "shared_vs_direct"):
        assert parity[key] <= 1e-4, key
    assert parity["greedy_identical"] == "16/16"


def test_graphs_share_one_weights_file(tiny_model):
    """The three graphs read their large initializers from weights.bin, each distinct tensor
    stored once; the tied embedding (source, target, output layer) is one stretch all three read."""
    data = (tiny_model / "weights.bin").read_bytes()
    readers: dict[tuple[int, int], set[str]] = {}           # (offset, length) -> graphs
    for graph in GRAPHS.values():
        for tensor in onnx.load(str(tiny_model / graph), load_external_data=False).graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                entry = {e.key: e.value for e in tensor.external_data}
                assert entry["location"] == "weights.bin"
                readers.setdefault((int(entry["offset"]), int(entry["length"])), set()).add(graph)
    contents = [data[offset:offset + length] for offset, length in readers]
    assert len(set(contents)) == len(contents)
    # stored as float16: exactly the checkpoint's numbers (export rounds the weights to float16 first)
    embedding = load_model(tiny_model / "checkpoint.pt").encoder.embedding.weight.detach().half().numpy().tobytes()
    assert [graphs for graphs, c in zip(readers.values(), contents) if c == embedding] == [set(GRAPHS.values())]


def test_float16_weights_are_folded_to_float32_when_loaded(tiny_model, tmp_path):
    """weights.bin holds float16 read through Casts; ONNX Runtime folds them into float32
    initializers at load time, so no step pays a Cast, and the int8 quantizer's
    full_precision() recovers the float32 graph exactly."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper

    from attnmt.model.export.rnnsearch import HALF_SUFFIX, full_precision
    graph = onnx.load(str(tiny_model / "decoder_step.onnx")).graph
    halves = [t for t in graph.initializer if t.name.endswith(HALF_SUFFIX)]
    assert halves and all(t.data_type == TensorProto.FLOAT16 for t in halves)
    assert sum(n.op_type == "Cast" and n.input[0].endswith(HALF_SUFFIX) for n in graph.node) == len(halves)
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(tiny_model / "decoder_step.onnx"), so, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx")).graph
    assert not [n for n in optimized.node if n.op_type == "Cast" and n.input[0].endswith(HALF_SUFFIX)]
    stored = {t.name[:-len(HALF_SUFFIX)]: numpy_helper.to_array(t) for t in halves}
    full_precision(graph)
    assert not [t for t in graph.initializer if t.name.endswith(HALF_SUFFIX)]
    restored = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for name, values in stored.items():
        assert restored[name].dtype == np.float32
        np.testing.assert_array_equal(restored[name], values.astype(np.float32))


def test_placeholders_are_announced_when_the_run_used_them():
    assert placeholder_contract({"config": {"placeholder_rate": 0.0}}) is None
    assert placeholder_contract({}) is None
    assert placeholder_contract({"config": {"placeholder_rate": 0.3}}) == {
        "pattern": placeholders.PATTERN, "sentinel": placeholders.SENTINEL, "max": placeholders.MAX_SENTINELS}


def test_step_graphs_choose_what_pytorch_would(tiny_model):
    """On sentences the export check did not see, ONNX Runtime's top k are numpy's top k of
    PyTorch's full log-probabilities without <pad> and <s>, forced_log_probs reads the forced
    token, and the shared graph gives the direct graph's rows."""
    model = load_model(tiny_model / "checkpoint.pt")
    sessions = onnx_sessions(tiny_model)
    tok = Tokenizer(tiny_model / "spm.model")
    sources = [tok.encode(s) for s, _ in synthetic_corpus(8, seed=1234)]
    n = len(sources)
    batch = make_batch(sources, None, list(range(n)))
    annotations, keys, mask, init_state = sessions["encoder"].run(
        None, {"src_tokens": batch.src.numpy(), "src_lengths": batch.lengths.numpy()})
    with torch.no_grad():
        t_annotations, t_keys, t_mask, t_state = model.encode(batch.src, batch.lengths)
        prev = torch.full((n,), BOS_ID)
        full, _, alpha = model.step_log_probs(prev, t_state, t_keys, t_annotations, t_mask)
    assert np.abs(annotations - t_annotations.numpy()).max() < 1e-5
    # Without <pad> and <s>, renormalised over the rest: rows x V
    log_probs = full.numpy().astype(np.float64)
    log_probs[:, [PAD_ID, BOS_ID]] = -np.inf
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    k = 4
    expected = -np.sort(-log_probs, axis=1)[:, :k]                      # rows x k, best first
    forced = np.arange(n) + EOS_ID                                       # some real token per row
    bias = no_specials_bias(model.cfg.vocab_size)
    memory = (annotations, keys, mask)
    direct = onnx_step(sessions["decoder_step"], prev.numpy(), init_state, memory, bias, k, forced)
    assert direct["topk_log_probs"].shape == direct["topk_ids"].shape == (n, k)
    assert np.abs(direct["topk_log_probs"] - expected).max() < 1e-4
    # ids through their log-probs, so tied tokens may come in either order
    assert np.abs(np.take_along_axis(log_probs, direct["topk_ids"], 1) - expected).max() < 1e-4
    assert np.abs(direct["forced_log_probs"] - log_probs[np.arange(n), forced]).max() < 1e-4
    assert np.abs(direct["alpha"] - alpha.numpy()).max() < 1e-5

    # The rows of a beam share their sentence's memory: memory_index [0, 1, 1, 2, 2, 2, 3, ...]
    rows = np.repeat(np.arange(n), 1 + np.arange(n) % 3)
    for row_bias in (bias, np.repeat(bias, len(rows), axis=0)):        # vocab_bias 1 x V or R x V
        shared = onnx_step(sessions["decoder_step_shared"], prev.numpy()[rows], init_state[rows], memory,
                           row_bias, k, forced[rows], rows)
        for name, value in shared.items():
            assert np.abs(value - direct[name][rows]).max() < 1e-5, name


def test_k_is_chosen_at_run_time(tiny_model):
    sessions = onnx_sessions(tiny_model)
    src = np.array([[5, 6, 7, EOS_ID]], dtype=np.int64)
    annotations, keys, mask, state = sessions["encoder"].run(None, {"src_tokens": src,
                                                                     "src_lengths": np.array([4])})
    bias = no_specials_bias(load_manifest(tiny_model).vocab_size)
    best = {}
    for k in (1, 5):
        out = onnx_step(sessions["decoder_step"], np.array([BOS_ID]), state, (annotations, keys, mask), bias, k,
                        np.array([EOS_ID]))
        assert out["topk_ids"].shape == out["topk_log_probs"].shape == (1, k)
        assert (np.diff(out["topk_log_probs"][0]) <= 0).all()            # best first
        best[k] = out["topk_ids"][0]
    assert best[5][0] == best[1][0]


def copy_model(tiny_model, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(tiny_model, target)
    return target


def test_missing_file_is_named(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    (model / "decoder_step_shared.onnx").unlink()
    with pytest.raises(ModelLoadError, match="decoder_step_shared.onnx is listed in the manifest but missing"):
        open_engine(model)


def test_corrupt_graph_is_refused(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    (model / "encoder.onnx").write_bytes(b"not a graph")
    with pytest.raises(ModelLoadError, match="encoder.onnx does not match its manifest checksum"):
        open_engine(model)
    # Even with checksums skipped, ONNX Runtime's refusal is reported with the file.
    with pytest.raises(ModelLoadError, match="encoder.onnx: ONNX Runtime cannot load it"):
        open_engine(model, verify=False)


def set_schema_version(model, version):
    manifest = json.loads((model / "manifest.json").read_text())
    manifest["schema_version"] = version
    (model / "manifest.json").write_text(json.dumps(manifest))


def test_other_schema_version_is_refused(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    set_schema_version(model, SCHEMA_VERSION + 1)
    with pytest.raises(ModelLoadError, match=f"schema_version {SCHEMA_VERSION + 1} is not supported"):
        open_engine(model)


def test_schema_1_is_refused_with_the_upgrade_command(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    set_schema_version(model, 1)
    with pytest.raises(ModelLoadError, match=f"run `attnmt upgrade-model {model}`"):
        open_engine(model)


def test_no_manifest_is_explained(tmp_path):
    with pytest.raises(ModelLoadError, match="no manifest.json"):
        open_engine(tmp_path)


def test_cuda_without_a_gpu_is_refused_not_silently_cpu(tiny_model):
    import onnxruntime as ort
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime build has no CUDA provider")
    from attnmt.service.inference.engine import EngineOptions
    try:
        engine = open_engine(tiny_model, options=EngineOptions(device="cuda"))
    except ModelLoadError as e:
        assert "asked for CUDAExecutionProvider" in str(e)
    else:  # a machine with a working GPU
        assert engine.provider == "CUDAExecutionProvider"


def test_int8_quantization_translates_and_records_its_cost(tiny_model, tmp_path):
    from attnmt.model.export.quantize import quantize_int8
    pairs = synthetic_corpus(40, seed=77)
    report = quantize_int8(tiny_model, tmp_path / "int8", [s for s, _ in pairs], [t for _, t in pairs])
    graphs = [*load_manifest(tmp_path / "int8").graphs.values(), "weights.bin"]
    assert report["bytes_int8"] == sum((tmp_path / "int8" / name).stat().st_size for name in graphs)
    assert report["bytes_float"] == sum((tiny_model / name).stat().st_size for name in graphs)
    assert report["bleu_int8"] > 50                          # still translates the toy language
    manifest = load_manifest(tmp_path / "int8")             # checksums of the new files hold
    assert manifest.quantization["bleu_change"] == report["bleu_change"]
    assert report["batch_invariance"]["batch_mates"] <= 1e-5       # nothing, through the quantization
    assert set(GRAPHS.values()) <= set(manifest.files)
    tok = Tokenizer(tmp_path / "int8" / "spm.model")
    out = onnx_greedy(onnx_sessions(tmp_path / "int8"), [tok.encode("kasa granda vidas peru .")], len(tok))
    assert tok.decode(out[0]) == "the big house sees the dog ."


def test_nothing_is_written_unless_parity_holds(tiny_run, tmp_path):
    from attnmt.model.export.rnnsearch import export
    out = tmp_path / "model"
    with pytest.raises(RuntimeError, match="differ beyond"):
        export(tiny_run / "best.pt", tiny_run / "spm.model", out, "tiny", "xx", "en", ["kasa vidas peru ."],
               tolerance=-1.0)                              # no difference passes
    assert not out.exists()
