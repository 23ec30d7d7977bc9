"""The slot graphs: small model-independent ONNX graphs with which the server keeps a
decode batch's slots on the execution device (`service/inference/device.py`), so that sentences
joining and leaving move the attention memory and the step state by device-side gathers
instead of through the host.

- `memory_gather_<type>_<rank>.onnx`: one tensor of the attention memory (the manifest's
  `memory`: RNNsearch's annotations and keys, float rank 3, and source mask, bool rank 2)
  as Gather(Concat(old, new), index), both parts cut or zero-padded to `length` source
  positions first: old is the memory as it was, new the encoder's output for the
  sentences that join. One graph per element type and rank, run once per memory tensor;
  `memory_gather_<type>_<rank>_at<axis>.onnx` for a tensor whose source positions run along
  another axis than 1 (a Transformer's head-major keys and values, [N,H,S,d_k]: at2).
- `rows_gather_<rank>.onnx`: a per-row tensor (the step state) as Gather(Concat(old, new),
  index), for tensors of that rank: the rows a beam copies, keeps, or gives up, and the
  joining sentences' initial states. Ranks 2 to 4, so a step state that is not an RNN's
  (a Transformer's self-attention cache, [R,T,d]) goes through the same path: from rank 3
  both parts are first padded with zeros on the left of axis 1 (or cut there) to `length`
  entries, the manifest's alignment of caches of different ages (service/modeldir/manifest.py);
  `rows_gather_<rank>_at<axis>.onnx` pads along another axis ([R,H,T,d_k]: rows_gather_4_at2).

ONNX Runtime has no in-place update, so each gather writes a new buffer; on a GPU that
costs microseconds, and it runs only on the steps where rows join, leave or move.

They are generated here (the `onnx` package is a training dependency, not a serving one)
and shipped with the service as package data; tests/unit/inference/test_device.py checks that the
committed files are what this module generates. Regenerate with
`python -m attnmt.model.export.slot_graphs service/inference/graphs`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

OPSET = 17
IR_VERSION = 8          # what ONNX Runtime 1.20 and later load
ROW_RANKS = (2, 3, 4)
# The memory tensors' element types (as ONNX Runtime names them: tensor(float)) and ranks.
MEMORY_TYPES = {"float": TensorProto.FLOAT, "bool": TensorProto.BOOL}
MEMORY_KINDS = (("float", 2), ("float", 3), ("float", 4), ("bool", 2))
# (kind, rank, axis) / (rank, axis) of the tensors whose positions are not on axis 1
MEMORY_AT = (("float", 4, 2),)
ROWS_AT = ((4, 2),)


def memory_gather_name(kind: str, rank: int, axis: int = 1) -> str:
    return f"memory_gather_{kind}_{rank}" + (f"_at{axis}" if axis != 1 else "")


def rows_gather_name(rank: int, axis: int = 1) -> str:
    return f"rows_gather_{rank}" + (f"_at{axis}" if axis != 1 else "")


def _dims(prefix: str, rank: int, name: str) -> list[str]:
    return [prefix] + [f"{name}_d{i}" for i in range(1, rank)]


def _model(nodes: list, name: str, inputs: list, outputs: list, initializers: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="attnmt",
                              ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


def _pads(rank: int, axis: int, amount: str, left: bool) -> list[str]:
    """Pad's pads input: `amount` before (left) or after `axis`, zero elsewhere."""
    begins, ends = ["zero"] * rank, ["zero"] * rank
    (begins if left else ends)[axis] = amount
    return begins + ends


def _to_length(x: str, rank: int, nodes: list, axis: int = 1) -> str:
    """x cut to `length` positions on `axis`, or zero-padded there to `length`."""
    cut, short, pads, out = f"{x}_cut", f"{x}_short", f"{x}_pads", f"{x}_sized"
    nodes += [helper.make_node("Slice", [x, "zero", "length1", "axis"], [cut]),
              helper.make_node("Shape", [cut], [f"{x}_has"], start=axis, end=axis + 1),
              helper.make_node("Sub", ["length1", f"{x}_has"], [short]),
              helper.make_node("Concat", _pads(rank, axis, short, left=False), [pads], axis=0),
              helper.make_node("Pad", [cut, pads], [out])]
    return out


def memory_gather(kind: str, rank: int, axis: int = 1) -> onnx.ModelProto:
    """One memory tensor of that element type and rank: Gather(Concat(old, new), index) over
    sentences, both parts cut or zero-padded to `length` source positions (along `axis`) first."""
    dtype = MEMORY_TYPES[kind]
    nodes = [helper.make_node("Reshape", ["length", "one"], ["length1"])]
    inputs = [helper.make_tensor_value_info("old", dtype, _dims("A", rank, "old")),
              helper.make_tensor_value_info("new", dtype, _dims("B", rank, "new")),
              helper.make_tensor_value_info("index", TensorProto.INT64, ["N"]),
              helper.make_tensor_value_info("length", TensorProto.INT64, [])]
    nodes += [helper.make_node("Concat", [_to_length("old", rank, nodes, axis), _to_length("new", rank, nodes, axis)],
                               ["both"], axis=0),
              helper.make_node("Gather", ["both", "index"], ["memory"], axis=0)]
    outputs = [helper.make_tensor_value_info("memory", dtype, _dims("N", rank, "memory"))]
    constants = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
                 helper.make_tensor("one", TensorProto.INT64, [1], [1]),
                 helper.make_tensor("axis", TensorProto.INT64, [1], [axis])]
    return _model(nodes, memory_gather_name(kind, rank, axis), inputs, outputs, constants)


def _to_length_left(x: str, rank: int, nodes: list, axis: int = 1) -> str:
    """x zero-padded (or cut) on the left of `axis` to `length` entries."""
    short, pads, out = f"{x}_short", f"{x}_pads", f"{x}_sized"
    nodes += [helper.make_node("Shape", [x], [f"{x}_has"], start=axis, end=axis + 1),
              helper.make_node("Sub", ["length1", f"{x}_has"], [short]),
              helper.make_node("Concat", _pads(rank, axis, short, left=True), [pads], axis=0),
              helper.make_node("Pad", [x, pads], [out])]
    return out


def rows_gather(rank: int, axis: int = 1) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("old", TensorProto.FLOAT, _dims("A", rank, "x")),
              helper.make_tensor_value_info("new", TensorProto.FLOAT, _dims("B", rank, "x")),
              helper.make_tensor_value_info("index", TensorProto.INT64, ["N"])]
    nodes, constants, parts = [], [], ["old", "new"]
    if rank >= 3:
        inputs.append(helper.make_tensor_value_info("length", TensorProto.INT64, []))
        nodes.append(helper.make_node("Reshape", ["length", "one"], ["length1"]))
        constants = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
                     helper.make_tensor("one", TensorProto.INT64, [1], [1])]
        parts = [_to_length_left(x, rank, nodes, axis) for x in parts]
    nodes += [helper.make_node("Concat", parts, ["both"], axis=0),
              helper.make_node("Gather", ["both", "index"], ["rows"], axis=0)]
    outputs = [helper.make_tensor_value_info("rows", TensorProto.FLOAT, _dims("N", rank, "x"))]
    return _model(nodes, rows_gather_name(rank, axis), inputs, outputs, constants)


def graphs() -> dict[str, onnx.ModelProto]:
    """File name -> graph."""
    memory = [(kind, rank, 1) for kind, rank in MEMORY_KINDS] + list(MEMORY_AT)
    rows = [(rank, 1) for rank in ROW_RANKS] + list(ROWS_AT)
    return {**{f"{memory_gather_name(*m)}.onnx": memory_gather(*m) for m in memory},
            **{f"{rows_gather_name(*r)}.onnx": rows_gather(*r) for r in rows}}


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, model in graphs().items():
        (directory / name).write_bytes(model.SerializeToString())


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "service/inference/graphs"))
