"""A Transformer's PyTorch weights read back from its model directory's ONNX graphs.

A bundled model directory ships its graphs and `weights.bin`, not `checkpoint.pt` (the
repository leaves it out). Continuing training from the bundled model, building a
CTranslate2 model from it, or holding PyTorch against ONNX Runtime on it (`attnmt bench
engine`) needs the PyTorch state dict: this module recovers it (`load_model_directory`
reads `checkpoint.pt` where it is present, and the graphs where it is not).

ONNX's exporter keeps a parameter's name where the graph uses it as it is (biases, layer
norms, the tied embedding), but a Linear's weight enters a MatMul transposed, as an
anonymous initializer (`onnx::MatMul_1060`). Each such MatMul feeds an Add with its
Linear's named bias, which names the weight. No library maps exported initializers back to
module parameters (onnx2torch rebuilds a new module with its own names), hence this.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from attnmt.model.export.directory import HALF_SUFFIX, INT8_SUFFIX, SCALE_SUFFIX, consumers, stored_weights
from attnmt.service.modeldir.manifest import load_manifest

PREFIX = "model."                     # the export wraps the network in a module holding it as `model`


class MissingCheckpoint(ValueError):
    """A model directory whose PyTorch weights are neither in a checkpoint.pt nor readable from its graphs."""


def recover_state(model_dir: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(model_config, state) of a Transformer model directory: the config as
    `TransformerConfig` takes it and every parameter as a float32 array in PyTorch's layout."""
    import onnx
    from onnx import numpy_helper

    manifest = load_manifest(model_dir)
    if manifest.architecture != "Transformer":
        raise ValueError(f"{model_dir} holds a {manifest.architecture}: only a Transformer's weights can be "
                         "read back from its graphs (an RNNsearch directory ships its checkpoint.pt)")
    state: dict[str, np.ndarray] = {}
    for graph_file in manifest.graphs.values():
        graph = onnx.load(str(model_dir / graph_file), load_external_data=False)
        onnx.load_external_data_for_model(graph, str(model_dir))
        _read_graph(graph.graph, numpy_helper, state)
    return dict(manifest.dimensions), state


def _read_graph(graph, numpy_helper, state: dict[str, np.ndarray]) -> None:
    # a weight stored as float16 or int8 is read under the name its Cast or Mul gives it
    values = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in graph.initializer
              if not t.name.endswith((HALF_SUFFIX, INT8_SUFFIX, SCALE_SUFFIX))}
    values.update(stored_weights(graph))

    def initializer(name: str) -> str | None:
        return name if name in values else None

    readers = consumers(graph)

    for name, value in values.items():
        if name.startswith(PREFIX):
            state[name.removeprefix(PREFIX)] = value
    for node in graph.node:
        if node.op_type != "MatMul" or (weight := initializer(node.input[1])) is None:
            continue
        if weight.startswith(PREFIX):
            continue                  # a named matrix (the tied output layer reads the embedding as it is)
        biases = [initializer(i) for add in readers[node.output[0]] if add.op_type == "Add"
                  for i in add.input if i != node.output[0]]
        names = [b for b in biases if b and b.endswith(".bias")]
        if len(names) != 1:
            raise ValueError(f"MatMul {node.name}: no single named bias follows it, so its weight {weight} "
                             "cannot be named")
        # MatMul computes x @ W^T's transpose: PyTorch's Linear weight is [out, in]
        state[names[0].removeprefix(PREFIX).removesuffix(".bias") + ".weight"] = values[weight].T.copy()


def recover_checkpoint(model_dir: Path) -> dict:
    """A checkpoint as `torch.save` writes one in training (`architecture`, `model_config`,
    `state_dict`), every parameter of the Transformer present and of its shape."""
    import torch

    from attnmt.model.architectures.transformer import Transformer, TransformerConfig

    config, state = recover_state(model_dir)
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    model = Transformer(TransformerConfig(**{k: v for k, v in config.items() if k in fields}))
    expected = model.state_dict()
    embedding = state.get("encoder.embedding.weight")
    for tied in ("decoder.embedding.weight", "decoder.output_layer.weight"):
        if tied in expected and tied not in state and embedding is not None:
            state[tied] = embedding
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ValueError(f"{model_dir}: {len(missing)} parameters not found in the graphs: {', '.join(missing[:5])}")
    for k, v in expected.items():
        if tuple(v.shape) != state[k].shape:
            raise ValueError(f"{model_dir}: {k} is {state[k].shape} in the graphs, {tuple(v.shape)} in the network")
    model.load_state_dict({k: torch.from_numpy(state[k]) for k in expected})
    return {"architecture": "transformer", "model_config": model.cfg.to_dict(), "state_dict": model.state_dict()}


def load_model_directory(model_dir: Path):
    """The network of a model directory in PyTorch for inference (fp32, eval mode): its
    `checkpoint.pt` (`attnmt export` writes it), or where that is absent a Transformer's
    weights read back from the graphs: the numbers the graphs compute with (float16-rounded, or
    int8-rounded where `attnmt store-weights` stored them so)."""
    from attnmt.model.train import build_model, load_model

    checkpoint = model_dir / "checkpoint.pt"
    if checkpoint.exists():
        return load_model(checkpoint)
    architecture = load_manifest(model_dir, verify=False).architecture
    if architecture != "Transformer":
        raise MissingCheckpoint(f"{model_dir} has no checkpoint.pt, and an {architecture}'s weights cannot be read "
                                "back from its graphs: `attnmt export` writes it from a training run (`make export`)")
    ckpt = recover_checkpoint(model_dir)
    model = build_model(ckpt)
    model.load_state_dict(ckpt["state_dict"])
    return model.eval()
