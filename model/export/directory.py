"""What every exported model directory holds, whatever the architecture
(`rnnsearch.py`, `transformer.py`): graphs traced at one opset, their weights in
one `weights.bin` stored as float16, the float16 `checkpoint.pt` beside them, the
token choice inside the step graphs, and the manifest's common sections.

Weights are rounded to float16 and back before export (`round_to_half`), and the
same rounded weights are stored as `checkpoint.pt`, so the ONNX graphs and the
PyTorch checkpoint hold identical numbers: parity tests and `attnmt bench engine`
compare like with like.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnmt.model.data import placeholders
from attnmt.model.tokenizer import BOS_ID, EOS_ID, MODEL_FILE, PAD_ID, UNK_ID
from attnmt.service.modeldir.manifest import SCHEMA_VERSION

OPSET = 17
HALF_SUFFIX = "/float16"
INT8_SUFFIX = "/int8"                  # share_weights(storage="int8"): X as X/int8 * X/scale
SCALE_SUFFIX = "/scale"
STORAGES = ("float32", "float16", "int8")
PARITY_TOPK = 5                        # k of the parity steps


def to_onnx(module: nn.Module, inputs: tuple, path: Path, input_names: tuple, output_names: tuple,
            axes: dict) -> None:
    torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=OPSET,
                      input_names=list(input_names), output_names=list(output_names), dynamic_axes=axes)


def choose_tokens(logits: Tensor, vocab_bias: Tensor, k: Tensor, forced_tokens: Tensor
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """The token choice every step graph makes itself, so a host never copies R x V
    log-probabilities out: the top k of log_softmax(logits + vocab_bias) and the
    log-probability of each row's forced token."""
    # vocab_bias: 1 x V or R x V, -inf where a row may not choose; the softmax renormalises the rest
    log_probs = torch.log_softmax(logits + vocab_bias, dim=-1)                     # R x V
    # k is a tensor, so the tracer records it as TopK's input rather than a constant
    topk_log_probs, topk_ids = log_probs.topk(k, dim=-1)                           # R x k, best first
    forced_log_probs = log_probs.gather(1, forced_tokens.unsqueeze(1)).squeeze(1)  # R
    return topk_log_probs, topk_ids, forced_log_probs


def round_to_half(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model


def save_half_checkpoint(model: nn.Module, architecture: str, path: Path) -> None:
    """The (already rounded) weights as a float16 `checkpoint.pt` that `load_model` reads."""
    half = type(model)(model.cfg)
    half.load_state_dict(model.state_dict())
    # half() on the module keeps tied parameters one tensor in the saved file
    torch.save({"architecture": architecture, "model_config": model.cfg.to_dict(),
                "state_dict": half.half().state_dict()}, path)


def share_weights(out_dir: Path, graphs: list[str], data_file: str = "weights.bin",
                  storage: str = "float32") -> None:
    """Move the initializers of all graphs into one external-data file, each
    distinct tensor stored once: the tied embedding matrix, which the encoder and
    both step graphs hold, is the largest part of the model.

    `storage` float16: store float32 weights as float16, each read through a Cast back
    to float32. Exported weights are already rounded to float16 (round_to_half), so
    this loses nothing and halves the file; ONNX Runtime folds the Casts into
    float32 initializers when it loads the graph, so a step computes as before.
    int8: the weight matrices as int8 with a float32 scale per output channel
    (`_store_int8`), the rest as float16: half the file again, and the weights
    rounded (`attnmt store-int8` measures what that changes)."""
    import onnx
    from onnx import TensorProto

    offsets: dict[str, tuple[int, int]] = {}
    with open(out_dir / data_file, "wb") as f:
        for graph in graphs:
            model = onnx.load(str(out_dir / graph))
            _constants_to_initializers(model.graph)
            _transposes_to_nodes(model.graph)
            if storage == "int8":
                _store_int8(model.graph)
            if storage in ("float16", "int8"):
                _store_half(model.graph)
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


def _constants_to_initializers(graph) -> None:
    """Large Constant nodes (a buffer the tracer folded in, such as the Transformer's
    sinusoid table) become initializers, so that they too are stored once in weights.bin."""
    from onnx import numpy_helper

    keep = []
    for node in graph.node:
        value = node.attribute[0].t if node.op_type == "Constant" and len(node.attribute) == 1 else None
        if value is not None and node.attribute[0].name == "value" and len(value.raw_data) >= 1024:
            graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(value), node.output[0]))
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


def _transposes_to_nodes(graph) -> None:
    """A 2-D initializer that is another one transposed becomes a Transpose node of it, so the
    tensor is stored once: the Transformer's output layer reads the tied embedding table
    transposed, in a copy of its own (reading it untransposed made a row's logits depend on
    the batch, docs/transformer.md), 4 MB of its 23. ONNX Runtime folds the Transpose back
    into a constant when it loads the graph, so a step computes exactly as before."""
    from onnx import TensorProto, helper, numpy_helper

    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer
              if len(t.dims) == 2 and t.data_type == TensorProto.FLOAT and len(t.raw_data) >= 1024}
    by_content = {(a.shape, hashlib.sha256(a.tobytes()).hexdigest()): name for name, a in arrays.items()}
    replaced: dict[str, str] = {}                       # initializer -> the one it is the transpose of
    for name, a in arrays.items():
        source = by_content.get((a.T.shape, hashlib.sha256(np.ascontiguousarray(a.T).tobytes()).hexdigest()))
        # the table the other graphs hold too (the embedding, vocabulary x width) is the one kept
        if (source is not None and source != name and a.shape[0] < a.shape[1] and source not in replaced
                and name not in replaced.values()):
            replaced[name] = source
    if not replaced:
        return
    keep = [t for t in graph.initializer if t.name not in replaced]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    nodes = [helper.make_node("Transpose", [source], [name], perm=[1, 0], name=name + "/transposed")
             for name, source in replaced.items()] + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


def _store_half(graph) -> None:
    """Large float32 initializers become float16 ones named `<name>/float16`, and a
    Cast at the head of the graph gives `<name>` back as float32. Only those float16
    holds exactly: the weights, rounded before export; a constant the graph computes
    from (the Transformer's sinusoid table) stays float32."""
    import onnx
    from onnx import helper, numpy_helper

    casts = []
    for tensor in graph.initializer:
        if (tensor.data_type != onnx.TensorProto.FLOAT or len(tensor.raw_data) < 2048
                or tensor.name.endswith(SCALE_SUFFIX)):
            continue
        values = numpy_helper.to_array(tensor)
        if not _half_exact(values):
            continue
        name = tensor.name
        tensor.CopyFrom(numpy_helper.from_array(values.astype(np.float16), name + HALF_SUFFIX))
        casts.append(helper.make_node("Cast", [name + HALF_SUFFIX], [name], to=onnx.TensorProto.FLOAT,
                                      name=name + "/to_float32"))
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


def _store_int8(graph) -> None:
    """Each weight matrix (a float32 initializer float16 holds exactly, read by a
    MatMul, a Gemm, a Gather or a GRU as its weight) becomes an int8 initializer
    `<name>/int8` with one float32 scale per output channel `<name>/scale`
    (symmetric: max |w| / 127 over the channel), and `Mul(Cast(<name>/int8), <name>/scale)`
    at the head of the graph gives `<name>` back as float32. ONNX Runtime folds both
    nodes into a float32 initializer when it loads the graph (constant folding), so
    a step computes in float32 as before, on the rounded weights. Not a
    DequantizeLinear: ONNX Runtime would fuse it with its MatMul into an 8-bit
    `MatMulNBits`, which is slower on batches (docs/benchmarks.md) and not exact.
    The output channel is found from how the graph reads the matrix, so that each
    channel's values keep their own range; a matrix read two ways stays float16."""
    import onnx
    from onnx import helper, numpy_helper

    readers = consumers(graph)
    nodes = []
    for tensor in graph.initializer:
        if tensor.data_type != onnx.TensorProto.FLOAT or len(tensor.raw_data) < 2048 or len(tensor.dims) < 2:
            continue
        values = numpy_helper.to_array(tensor)
        axis = _output_axis(tensor.name, len(values.shape), readers)
        if axis is None or not _half_exact(values):
            continue
        other = tuple(a for a in range(values.ndim) if a != axis)
        peak = np.abs(values).max(axis=other, keepdims=True)
        scale = np.where(peak > 0, peak / 127, 1).astype(np.float32)
        q = np.clip(np.rint(values / scale), -127, 127).astype(np.int8)
        name = tensor.name
        tensor.CopyFrom(numpy_helper.from_array(q, name + INT8_SUFFIX))
        graph.initializer.append(numpy_helper.from_array(scale, name + SCALE_SUFFIX))
        nodes += [helper.make_node("Cast", [name + INT8_SUFFIX], [name + "/int8_as_float"], to=onnx.TensorProto.FLOAT,
                                   name=name + "/to_float32"),
                  helper.make_node("Mul", [name + "/int8_as_float", name + SCALE_SUFFIX], [name],
                                   name=name + "/scaled")]
    nodes += list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


def consumers(graph) -> dict[str, list]:
    """tensor name -> the nodes that read it (an empty list for a name nothing reads)"""
    readers = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            readers[name].append(node)
    return readers


def _half_exact(values: np.ndarray) -> bool:
    """Whether float16 holds `values` exactly: the exported weights (rounded before export), not a
    constant the graph computes from (the Transformer's sinusoid table)."""
    return np.array_equal(values.astype(np.float16).astype(np.float32), values)


def _output_axis(name: str, rank: int, consumers: dict[str, list]) -> int | None:
    """The axis of a weight along which its output channels lie, as every node that
    reads it reads it, or None (no reader, an unknown one, or two that disagree)."""
    axes = set()
    for node in consumers.get(name, []):
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "MatMul" and node.input[1] == name:
            axes.add(rank - 1)
        elif node.op_type == "Gemm" and node.input[1] == name:
            axes.add(0 if "transB" in attrs and attrs["transB"].i else 1)
        elif node.op_type == "Gather" and node.input[0] == name and ("axis" not in attrs or attrs["axis"].i == 0):
            axes.add(0)                            # an embedding table: a row per token
        elif node.op_type == "GRU" and name in node.input[1:3]:
            axes.add(1)                            # [directions, 3 x hidden, input or hidden]
        elif (node.op_type == "Transpose" and rank == 2
              and (list(attrs["perm"].ints) if "perm" in attrs else [1, 0]) == [1, 0]
              and consumers.get(node.output[0])
              and all(u.op_type == "MatMul" and u.input[1] == node.output[0] for u in consumers[node.output[0]])):
            axes.add(0)                            # the tied output layer: a row per token
        else:
            return None
    return axes.pop() if len(axes) == 1 else None


def stored_weights(graph) -> dict[str, np.ndarray]:
    """{name the graph's nodes read: its float32 value} of every weight stored as
    float16 (`_store_half`) or int8 (`_store_int8`), computed as ONNX Runtime folds it."""
    from onnx import numpy_helper

    stored = {t.name: t for t in graph.initializer if t.name.endswith((HALF_SUFFIX, INT8_SUFFIX, SCALE_SUFFIX))}
    values: dict[str, np.ndarray] = {}
    for node in graph.node:
        if node.op_type == "Cast" and node.input[0] in stored and node.input[0].endswith(HALF_SUFFIX):
            values[node.output[0]] = numpy_helper.to_array(stored[node.input[0]]).astype(np.float32)
        elif (node.op_type == "Mul" and node.name.endswith("/scaled") and node.output[0] + INT8_SUFFIX in stored
              and node.input[1] == node.output[0] + SCALE_SUFFIX and node.input[1] in stored):
            q = numpy_helper.to_array(stored[node.output[0] + INT8_SUFFIX]).astype(np.float32)
            values[node.output[0]] = q * numpy_helper.to_array(stored[node.input[1]])
    return values


def full_precision(graph) -> None:
    """Undo float16 or int8 storage: each stored weight becomes the float32 initializer
    it stands for (float16 → float32 loses nothing; int8 gives the rounded weights the
    graph computes with), and each Transpose of one (`_transposes_to_nodes`) an initializer
    again. The int8 quantizer needs the weights as initializers of the nodes that use them."""
    from onnx import numpy_helper

    values = stored_weights(graph)
    storage = {t.name for t in graph.initializer if t.name.endswith((HALF_SUFFIX, INT8_SUFFIX, SCALE_SUFFIX))}
    keep_init = [t for t in graph.initializer if t.name not in storage]
    del graph.initializer[:]
    graph.initializer.extend(keep_init)
    graph.initializer.extend(numpy_helper.from_array(v, name) for name, v in values.items())
    keep = []
    for node in graph.node:             # the stored weights' nodes go, then the Transposes of what they give back
        if node.output[0] in values or (node.op_type == "Cast" and node.input[0] in storage):
            continue
        if node.op_type == "Transpose" and node.input[0] in values and node.name.endswith("/transposed"):
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(values[node.input[0]].T),
                                                             node.output[0]))
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


def placeholder_contract(training: dict | None) -> dict | None:
    """The manifest's `placeholders` section, for a model trained with sentinels."""
    config = (training or {}).get("config") or {}
    if config.get("placeholder_rate", 0) <= 0:
        return None
    return {"pattern": placeholders.PATTERN, "sentinel": placeholders.SENTINEL,
            "max": placeholders.MAX_SENTINELS}


def base_manifest(name: str, architecture: str, source_language: str, target_language: str, vocab_size: int,
                  dimensions: dict, graphs: dict[str, str], files: dict, training: dict | None) -> dict:
    """The manifest's sections every architecture writes alike; the caller adds its own
    (score function, step state, memory, alignment, shortlist) and `export_parity`."""
    manifest = {
        "schema_version": SCHEMA_VERSION, "name": name, "version": dt.date.today().isoformat(),
        "architecture": architecture, "source_language": source_language, "target_language": target_language,
        "tokenizer": MODEL_FILE, "vocab_size": vocab_size,
        "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID},
        "dimensions": dimensions, "graphs": graphs, "opset": OPSET, "files": files,
        "training": training or {}, "evaluation": {},
    }
    contract = placeholder_contract(training)
    if contract:
        manifest["placeholders"] = contract
    return manifest


def max_diff(a: np.ndarray, b: np.ndarray) -> float:
    # Equal infinities (a token both sides rule out) are no difference; inf - inf would be NaN.
    return float(np.where(a == b, 0.0, np.abs(a - b)).max(initial=0.0))


def publish(staged: Path, out_dir: Path) -> None:
    """Put a checked directory in place of `out_dir`."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    shutil.copytree(staged, out_dir)


def check_and_publish(staged: Path, out_dir: Path, manifest: dict, parity) -> dict:
    """Write `manifest`, load it as the service will (its contract must hold), record
    `parity()` (the graphs against PyTorch) in it as `export_parity`, then put the directory
    in place of `out_dir`; a failed parity check raises before anything is published."""
    from attnmt.service.modeldir.manifest import load_manifest, write_manifest

    write_manifest(staged, manifest)
    load_manifest(staged)
    manifest["export_parity"] = parity()
    write_manifest(staged, manifest)
    publish(staged, out_dir)
    return manifest
