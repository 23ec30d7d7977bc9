"""`attnmt export`: a trained checkpoint to a served model directory.

Two graphs, the layout Hugging Face Optimum and pytorch/translate use for
autoregressive models: `encoder.onnx` runs once per sentence, `decoder_step.onnx`
once per output token (see `service/manifest.py` for their signatures).

Weights are rounded to float16 and back before export, and the same rounded
weights are stored as `checkpoint.pt` (float16, about half the size), so the
ONNX graphs and the PyTorch checkpoint hold identical numbers: parity tests and
`attnmt bench engine` compare like with like.

Nothing is written to the output directory unless parity holds: ONNX Runtime
and PyTorch agree on log-probabilities and α within `tolerance` on real
sentences, and give the same greedy translations.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnmt.service.decoding import Search, decode_all
from attnmt.service.engine import Engine
from attnmt.service.manifest import (DECODER_INPUTS, DECODER_OUTPUTS, ENCODER_INPUTS, ENCODER_OUTPUTS,
                                     SCHEMA_VERSION, file_entries, write_manifest)

from .batching import make_batch
from .network import RNNsearch
from .search import translate_ids
from .tokenizer import BOS_ID, EOS_ID, MODEL_FILE, PAD_ID, UNK_ID, Tokenizer
from .train import load_model

OPSET = 17


class EncoderGraph(nn.Module):
    def __init__(self, model: RNNsearch):
        super().__init__()
        self.model = model

    def forward(self, src_tokens: Tensor, src_lengths: Tensor):
        return self.model.encode(src_tokens, src_lengths)


class DecoderStepGraph(nn.Module):
    def __init__(self, model: RNNsearch):
        super().__init__()
        self.model = model

    def forward(self, prev_tokens: Tensor, state: Tensor, annotations: Tensor, keys: Tensor, src_mask: Tensor):
        return self.model.step_log_probs(prev_tokens, state, keys, annotations, src_mask)


def share_weights(out_dir: Path, graphs: list[str], data_file: str = "weights.bin") -> None:
    """Move the initializers of all graphs into one external-data file, each
    distinct tensor stored once: the tied embedding matrix, which the encoder and
    the decoder step both hold, is the largest part of the model."""
    import hashlib

    import onnx
    from onnx import TensorProto

    offsets: dict[str, tuple[int, int]] = {}
    with open(out_dir / data_file, "wb") as f:
        for graph in graphs:
            model = onnx.load(str(out_dir / graph))
            for tensor in model.graph.initializer:
                raw = tensor.raw_data
                if len(raw) < 1024:
                    continue  # small tensors stay inline
                key = hashlib.sha256(raw).hexdigest()
                if key not in offsets:
                    f.seek((f.tell() + 4095) // 4096 * 4096)  # page-aligned, so ONNX Runtime can map it
                    offsets[key] = (f.tell(), len(raw))
                    f.write(raw)
                offset, length = offsets[key]
                tensor.ClearField("raw_data")
                tensor.data_location = TensorProto.EXTERNAL
                del tensor.external_data[:]
                for k, v in (("location", data_file), ("offset", str(offset)), ("length", str(length))):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = k, v
            onnx.save(model, str(out_dir / graph))


def round_to_half(model: RNNsearch) -> RNNsearch:
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model


def export_graphs(model: RNNsearch, out_dir: Path) -> None:
    model.eval()
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID]])
    lengths = torch.tensor([4, 3])
    annotations, keys, mask, state = model.encode(src, lengths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        torch.onnx.export(
            EncoderGraph(model), (src, lengths), str(out_dir / "encoder.onnx"), dynamo=False, opset_version=OPSET,
            input_names=list(ENCODER_INPUTS), output_names=list(ENCODER_OUTPUTS),
            dynamic_axes={"src_tokens": {0: "batch", 1: "src_len"}, "src_lengths": {0: "batch"},
                          "annotations": {0: "batch", 1: "src_len"}, "keys": {0: "batch", 1: "src_len"},
                          "src_mask": {0: "batch", 1: "src_len"}, "init_state": {0: "batch"}})
        prev = torch.tensor([BOS_ID, BOS_ID])
        torch.onnx.export(
            DecoderStepGraph(model), (prev, state, annotations, keys, mask), str(out_dir / "decoder_step.onnx"),
            dynamo=False, opset_version=OPSET,
            input_names=list(DECODER_INPUTS), output_names=list(DECODER_OUTPUTS),
            dynamic_axes={"prev_tokens": {0: "batch"}, "state": {0: "batch"},
                          "annotations": {0: "batch", 1: "src_len"}, "keys": {0: "batch", 1: "src_len"},
                          "src_mask": {0: "batch", 1: "src_len"}, "log_probs": {0: "batch"},
                          "new_state": {0: "batch"}, "alpha": {0: "batch", 1: "src_len"}})


@torch.no_grad()
def check_parity(model: RNNsearch, engine: Engine, sources: list[list[int]], tolerance: float) -> dict:
    """Teacher-force PyTorch's greedy output through both runtimes, compare every
    step, then compare whole greedy translations. Raises on any mismatch."""
    batch = make_batch(sources, None, list(range(len(sources))))
    torch_out = translate_ids(model, sources, batch_size=len(sources))
    encoded = engine.encode([s + [EOS_ID] for s in sources])
    annotations, keys, mask, state = model.encode(batch.src, batch.lengths)
    diffs = {"annotations": float(np.abs(encoded.annotations - annotations.numpy()).max())}
    steps = max(len(o) for o in torch_out) + 1
    prev = torch.full((len(sources),), BOS_ID)
    ort_state = encoded.init_state
    worst_lp = worst_alpha = 0.0
    for i in range(steps):
        lp, state, alpha = model.step_log_probs(prev, state, keys, annotations, mask)
        o_lp, ort_state, o_alpha = engine.step(prev.numpy(), ort_state, encoded.annotations, encoded.keys, encoded.mask)
        worst_lp = max(worst_lp, float(np.abs(o_lp - lp.numpy()).max()))
        worst_alpha = max(worst_alpha, float(np.abs(o_alpha - alpha.numpy()).max()))
        ort_state = state.numpy()  # keep both on the same path so errors cannot compound
        prev = torch.tensor([o[i] if i < len(o) else EOS_ID for o in torch_out])
    diffs.update(log_probs=worst_lp, alpha=worst_alpha)
    if max(diffs.values()) > tolerance:
        raise RuntimeError(f"ONNX Runtime and PyTorch differ beyond {tolerance}: {diffs}")
    searches = [Search(s + [EOS_ID]) for s in sources]
    decode_all(engine, searches, max_rows=len(sources))
    ort_out = [[t for t in s.best()[0].tokens if t != EOS_ID] for s in searches]
    same = sum(a == b for a, b in zip(ort_out, torch_out))
    if same != len(sources):
        raise RuntimeError(f"greedy translations differ: {len(sources) - same} of {len(sources)} sentences")
    return {**diffs, "greedy_identical": f"{same}/{len(sources)}", "tolerance": tolerance}


def export(checkpoint: Path, tokenizer: Path, out_dir: Path, name: str, source_language: str, target_language: str,
           parity_sentences: list[str], training: dict | None = None, tolerance: float = 1e-4) -> dict:
    """Export, check parity in a scratch directory, then move the result to `out_dir`."""
    model = round_to_half(load_model(checkpoint))
    tok = Tokenizer(tokenizer)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        export_graphs(model, tmp)
        share_weights(tmp, ["encoder.onnx", "decoder_step.onnx"])
        shutil.copy(tokenizer, tmp / MODEL_FILE)
        half = RNNsearch(model.cfg)
        half.load_state_dict(model.state_dict())
        # half() on the module keeps tied parameters one tensor in the saved file
        torch.save({"model_config": model.cfg.to_dict(), "state_dict": half.half().state_dict()},
                   tmp / "checkpoint.pt")
        files = ["encoder.onnx", "decoder_step.onnx", "weights.bin", MODEL_FILE, "checkpoint.pt"]
        manifest = {
            "schema_version": SCHEMA_VERSION, "name": name, "version": dt.date.today().isoformat(),
            "architecture": "RNNsearch", "source_language": source_language, "target_language": target_language,
            "tokenizer": MODEL_FILE, "vocab_size": len(tok),
            "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID},
            "dimensions": model.cfg.to_dict(),
            "graphs": {"encoder": "encoder.onnx", "decoder_step": "decoder_step.onnx"},
            "opset": OPSET, "files": file_entries(tmp, files), "training": training or {}, "evaluation": {},
        }
        write_manifest(tmp, manifest)
        engine = Engine(tmp)
        sources = [tok.encode(s) for s in parity_sentences]
        manifest["export_parity"] = check_parity(model, engine, sources, tolerance)
        write_manifest(tmp, manifest)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        shutil.copytree(tmp, out_dir)
    return manifest


def update_manifest(model_dir: Path, **sections) -> None:
    """Merge sections (evaluation, quantization) into an exported manifest."""
    path = model_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(manifest.get(key), dict):
            manifest[key].update(value)
        else:
            manifest[key] = value
    write_manifest(model_dir, manifest)
