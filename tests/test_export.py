import json
import shutil

import numpy as np
import pytest
import torch

from attnmt.model.batching import make_batch
from attnmt.model.train import load_model
from attnmt.service.engine import Engine
from attnmt.service.errors import ModelLoadError
from attnmt.service.manifest import SCHEMA_VERSION, load_manifest

from conftest import synthetic_corpus


def test_export_writes_a_checked_model_directory(tiny_model):
    manifest = load_manifest(tiny_model)
    assert manifest.schema_version == SCHEMA_VERSION
    assert manifest.source_language == "xx" and manifest.target_language == "en"
    assert set(manifest.files) == {"encoder.onnx", "decoder_step.onnx", "weights.bin", "spm.model", "checkpoint.pt"}
    parity = json.loads((tiny_model / "manifest.json").read_text())["export_parity"]
    assert parity["log_probs"] <= 1e-4 and parity["alpha"] <= 1e-4
    assert parity["greedy_identical"] == "16/16"


def test_onnx_and_pytorch_agree_on_unseen_sentences(tiny_model, engine):
    """Parity on sentences the export check did not see, through the engine API."""
    model = load_model(tiny_model / "checkpoint.pt")
    sources = [engine.tokenizer.encode(s) for s, _ in synthetic_corpus(8, seed=1234)]
    batch = make_batch(sources, None, list(range(len(sources))))
    encoded = engine.encode([s + [engine.eos_id] for s in sources])
    with torch.no_grad():
        annotations, keys, mask, state = model.encode(batch.src, batch.lengths)
        prev = torch.full((len(sources),), engine.bos_id)
        lp, _, alpha = model.step_log_probs(prev, state, keys, annotations, mask)
    o_lp, _, o_alpha = engine.step(prev.numpy(), encoded.init_state, encoded.annotations, encoded.keys, encoded.mask)
    assert np.abs(encoded.annotations - annotations.numpy()).max() < 1e-5
    assert np.abs(o_lp - lp.numpy()).max() < 1e-4
    assert np.abs(o_alpha - alpha.numpy()).max() < 1e-5


def copy_model(tiny_model, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(tiny_model, target)
    return target


def test_missing_file_is_named(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    (model / "decoder_step.onnx").unlink()
    with pytest.raises(ModelLoadError, match="decoder_step.onnx is listed in the manifest but missing"):
        Engine(model)


def test_corrupt_graph_is_refused(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    (model / "encoder.onnx").write_bytes(b"not a graph")
    with pytest.raises(ModelLoadError, match="encoder.onnx does not match its manifest checksum"):
        Engine(model)
    # Even with checksums skipped, ONNX Runtime's refusal is reported with the file.
    with pytest.raises(ModelLoadError, match="encoder.onnx: ONNX Runtime cannot load it"):
        Engine(model, verify=False)


def test_other_schema_version_is_refused(tiny_model, tmp_path):
    model = copy_model(tiny_model, tmp_path)
    manifest = json.loads((model / "manifest.json").read_text())
    manifest["schema_version"] = SCHEMA_VERSION + 1
    (model / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelLoadError, match=f"schema_version {SCHEMA_VERSION + 1} is not supported"):
        Engine(model)


def test_no_manifest_is_explained(tmp_path):
    with pytest.raises(ModelLoadError, match="no manifest.json"):
        Engine(tmp_path)


def test_cuda_without_a_gpu_is_refused_not_silently_cpu(tiny_model):
    import onnxruntime as ort
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime build has no CUDA provider")
    from attnmt.service.engine import EngineOptions
    try:
        engine = Engine(tiny_model, EngineOptions(device="cuda"))
    except ModelLoadError as e:
        assert "asked for CUDAExecutionProvider" in str(e)
    else:  # a machine with a working GPU
        assert engine.provider == "CUDAExecutionProvider"


def test_int8_quantization_serves_and_records_its_cost(tiny_model, tmp_path):
    from attnmt.model.quantize import quantize_int8
    from attnmt.service.translator import Translator
    pairs = synthetic_corpus(40, seed=77)
    report = quantize_int8(tiny_model, tmp_path / "int8", [s for s, _ in pairs], [t for _, t in pairs])
    assert report["bytes_int8"] < report["bytes_float32"]
    assert report["bleu_int8"] > 50                          # still translates the toy language
    manifest = load_manifest(tmp_path / "int8")             # checksums of the new files hold
    assert manifest.quantization["bleu_change"] == report["bleu_change"]
    text = Translator(Engine(tmp_path / "int8")).translate(["kasa granda vidas peru ."])[0].best.text
    assert text == "the big house sees the dog ."
