"""`attnmt export --quantize int8`: int8 graphs whose activations are quantized per
row, and what they cost and gain measured on the dev split and written to the manifest.

ONNX Runtime's `quantize_dynamic` stores the weights as int8 and quantizes each
MatMul's input on the fly with `DynamicQuantizeLinear`, whose scale and zero point come
from the whole tensor, i.e. from the whole batch: a sentence's output would depend on
its batch-mates. `per_row_activations` rewrites each of these so that every row (every
vector along the last axis) is quantized by its own values alone:

    s = max(|x|) / 127                      over the last axis: [..., 1]
    q = uint8(clip(round(x / s) + 128, 0, 255))

A per-row zero point is not possible: ONNX Runtime's MatMulInteger takes only a scalar
one for its first input, so the scale is symmetric and the zero point the constant 128.
The int32 accumulation is exact, so batch-mates cannot change a row's result through
the quantization; `quantize_int8` measures that and refuses a directory where they do.
They still reach it through the float attention, whose sums over a longer padded source
differ in the last bits; int8 rounding can turn such a difference into a whole quantum,
rarely (`batch_invariance`).

The shortlist step graphs are quantized so that their output layer computes what the full
graphs' does (`integer_matmuls`): the engine runs a sentence through one or the other
depending on its batch-mates.

Both directories are measured with the same greedy loop over the step graph, the
architecture's own (`rnnsearch.onnx_greedy`, `transformer.onnx_greedy`), so the comparison
is of the graphs alone; the teacher-forced steps of `batch_invariance` read the step
state, memory and `positions` from the manifest, so they run either architecture's graphs.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sacrebleu

from attnmt.model.batching import inference_batches, make_batch
from attnmt.model.export import rnnsearch, transformer
from attnmt.model.export.directory import PARITY_TOPK, full_precision, share_weights
from attnmt.model.export.directory import consumers as _consumers
from attnmt.model.tokenizer import BOS_ID, EOS_ID, Tokenizer
from attnmt.service.modeldir.manifest import (
    POSITIONS,
    Manifest,
    decoder_outputs,
    encoder_outputs,
    file_entries,
    load_manifest,
    write_manifest,
)
from attnmt.service.modeldir.vocabulary import no_specials_bias

ZERO_POINT = 128            # uint8: the symmetric int8 range shifted into MatMulInteger's uint8 input
EPSILON = 1e-20             # floor of a row's max |x|: an all-zero row still gets a finite scale
BATCH_TOLERANCE = 1e-5      # largest change batch-mates may make to a log-probability or α
INVARIANCE_SENTENCES = 64   # dev sentences decoded alone and together to measure it
_ROW = "per_row_quantization"   # prefix of the names the rewrite adds to a graph


@dataclass
class Graphs:
    """A model directory's graphs as ONNX Runtime sessions, with its manifest: the names
    of the step state, memory and initial state the contract leaves to the architecture."""
    sessions: dict
    manifest: Manifest

    @classmethod
    def load(cls, model_dir: Path, verify: bool = True) -> "Graphs":
        manifest = load_manifest(model_dir, verify=verify)
        runs = transformer if manifest.architecture == "Transformer" else rnnsearch
        return cls(runs.onnx_sessions(model_dir), manifest)

    def greedy(self, sources: list[list[int]], batch_size: int = 64) -> list[list[int]]:
        """The architecture's greedy loop over the direct step graph; token ids without </s>."""
        vocab_size = self.manifest.vocab_size
        if self.manifest.architecture != "Transformer":
            return rnnsearch.onnx_greedy(self.sessions, sources, vocab_size, batch_size=batch_size)
        results: list[list[int]] = [[] for _ in sources]
        for indices in inference_batches(sources, batch_size):
            traces, _ = transformer.onnx_greedy(self.sessions, [sources[i] for i in indices], vocab_size,
                                                check_shared=False)
            for i, trace in zip(indices, traces):
                results[i] = [t for t in trace.tokens if t != EOS_ID]     # </s> only ever last
        return results


def _greedy(model_dir: Path, sources: list[str], refs: list[str]) -> tuple[float, float]:
    graphs = Graphs.load(model_dir)
    tok = Tokenizer(model_dir / graphs.manifest.tokenizer)
    ids = [tok.encode(s) for s in sources]
    graphs.greedy(ids[:16])                                   # warm-up
    start = time.perf_counter()
    hyps = [tok.decode(out) for out in graphs.greedy(ids)]
    return sacrebleu.corpus_bleu(hyps, [refs]).score, time.perf_counter() - start


def untie(graph) -> None:
    """Give every use of a shared initializer its own copy. The tied embedding is
    both a Gather table and the output Gemm's weight in each step graph (and a
    Gather table in the encoder); the quantizer transposes a Gemm weight in place,
    which would hand the Gather a transposed table. share_weights() stores the
    copies once again afterwards: the Gather tables of the three graphs are one
    tensor in weights.bin, the quantized output weight (the same in both step
    graphs) another."""
    initializers = {t.name: t for t in graph.initializer}
    seen: set[str] = set()
    for n, node in enumerate(graph.node):
        for i, name in enumerate(node.input):
            if name not in initializers:
                continue
            if name in seen:
                copy = graph.initializer.add()
                copy.CopyFrom(initializers[name])
                copy.name = f"{name}__use{n}"
                node.input[i] = copy.name
            seen.add(name)


def per_row_activations(model) -> int:
    """Replace each `DynamicQuantizeLinear(x) -> (xq, x_scale, x_zero_point)` by per-row
    quantization of x (`_quantize_rows`): x flattened to rows [N, K], xq [N, K], x_scale [N],
    x_zero_point the constant 128. quantize_dynamic uses these only as
    MatMulInteger(xq, w, x_zero_point, w_zero_point) rescaled by
    Cast(int32 -> float) * (x_scale * w_scale) (checked; anything else is refused); the
    MatMulInteger now runs on the rows and the rescale becomes one DequantizeLinear by
    x_scale * w_scale along the rows, reshaped back to x's leading axes
    (`_dequantize_rows`). Returns how many were replaced."""
    from onnx import numpy_helper

    graph = model.graph
    opset = _opset(model)
    direct = _row_ranks(model)
    producers = {name: node for node in graph.node for name in node.output}
    consumers = _consumers(graph)
    quantizers = [node for node in graph.node if node.op_type == "DynamicQuantizeLinear"]
    casts: set[str] = set()                          # Cast(MatMulInteger): dropped
    rescales: dict[str, tuple[str, str, str]] = {}   # rescale output -> (MatMulInteger output, scale, x)
    for quantizer in quantizers:
        for product, rescale, cast in _rescales(quantizer, producers, consumers):
            casts.add(cast.output[0])
            rescales[rescale.output[0]] = (cast.input[0], product.output[0], quantizer.input[0])

    nodes = []
    for node in graph.node:
        out = node.output[0]
        if node.op_type == "DynamicQuantizeLinear":
            x, (xq, x_scale, x_zero_point) = node.input[0], node.output
            nodes.extend(_quantize_rows(x, xq, x_scale, opset, direct.get(x)))
            graph.initializer.append(numpy_helper.from_array(np.array(ZERO_POINT, np.uint8), x_zero_point))
        elif out in rescales:
            integer, scale, x = rescales[out]
            nodes.extend(_dequantize_rows(integer, scale, x, out, x in direct))
        elif out not in casts:
            nodes.append(node)
    if quantizers:
        inputs = {quantizer.input[0] for quantizer in quantizers}
        _add_row_constants(graph, opset, {direct.get(x, 0) for x in inputs})
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]           # quantize_dynamic recorded x_scale and its products as scalars
    return len(quantizers)


def _rescales(quantizer, producers: dict, consumers: dict) -> list[tuple]:
    """How quantize_dynamic uses one DynamicQuantizeLinear: per MatMulInteger of xq, the
    nodes (Mul(x_scale, w_scale), Mul(Cast, that), Cast(MatMulInteger)). ValueError if
    its outputs are used in any other way."""
    xq, x_scale, x_zero_point = quantizer.output

    def refused(why: str) -> ValueError:
        return ValueError(f"{quantizer.name}: {why}; per-row scales are not applied to it")

    matmuls = consumers[xq]
    for matmul in matmuls:
        if matmul.op_type != "MatMulInteger" or matmul.input[0] != xq or matmul.input[2:3] != [x_zero_point]:
            raise refused(f"{xq} is used by {matmul.op_type} {matmul.name}")
    if any(node not in matmuls for node in consumers[x_zero_point]):
        raise refused(f"{x_zero_point} is used beside MatMulInteger")
    found = []
    for product in consumers[x_scale]:
        after = consumers[product.output[0]]
        if product.op_type != "Mul" or len(after) != 1 or after[0].op_type != "Mul":
            raise refused(f"{x_scale} is used by {product.op_type} {product.name}")
        rescale = after[0]
        cast = next((producers.get(name) for name in rescale.input if name != product.output[0]), None)
        if cast is None or cast.op_type != "Cast" or producers.get(cast.input[0]) not in matmuls:
            raise refused(f"{rescale.name} does not rescale a MatMulInteger of {xq}")
        found.append((product, rescale, cast))
    if len(found) != len(matmuls):
        raise refused(f"not every MatMulInteger of {xq} is rescaled by {x_scale}")
    return found


def integer_matmuls(model) -> int:
    """Turn each MatMul(x, DequantizeLinear(wq, w_scale, w_zero_point)) into what
    per_row_activations makes of quantize_dynamic's MatMuls: x quantized per row,
    MatMulInteger(xq, wq, 128, w_zero_point), DequantizeLinear by x_scale * w_scale.
    quantize_dynamic leaves it float: the shortlist graphs' output layer, whose weight is the
    int8 table gathered by `candidates`. The engine runs a sentence through the shortlist graph
    or the full one depending on its batch-mates (service/inference/vocab_bias.py), so the two
    output layers must compute the same logits. Returns how many were replaced."""
    from onnx import helper

    graph = model.graph
    opset = _opset(model)
    direct: dict[str, int] | None = None      # `_row_ranks`, inferred only where a MatMul is replaced (few graphs)
    ranks: set[int] = set()                   # of the inputs quantized (0: flattened to rows)
    scalars = {t.name for t in graph.initializer if not t.dims}
    producers = {name: node for node in graph.node for name in node.output}
    nodes, replaced = [], 0
    for node in graph.node:
        weight = producers.get(node.input[1]) if node.op_type == "MatMul" else None
        dequantized = weight is not None and weight.op_type == "DequantizeLinear" and len(weight.input) == 3
        if not (dequantized and set(weight.input[1:]) <= scalars):     # a per-tensor scale and zero point
            nodes.append(node)
            continue
        x, (wq, w_scale, w_zero_point), out = node.input[0], weight.input, node.output[0]
        if direct is None:
            direct = _row_ranks(model)
        ranks.add(direct.get(x, 0))
        name = f"{out}/{_ROW}"
        nodes.extend(_quantize_rows(x, f"{name}/xq", f"{name}/x_scale", opset, direct.get(x)))
        nodes.extend([
            helper.make_node("MatMulInteger", [f"{name}/xq", wq, f"{_ROW}/x_zero_point", w_zero_point],
                             [f"{name}/integer"]),
            helper.make_node("Mul", [f"{name}/x_scale", w_scale], [f"{name}/scale"]),
            *_dequantize_rows(f"{name}/integer", f"{name}/scale", x, out, x in direct),
        ])
        replaced += 1
    used = {name for node in nodes for name in node.input} | {o.name for o in graph.output}
    nodes = [n for n in nodes if n.op_type != "DequantizeLinear" or n.output[0] in used]
    if replaced:
        _add_row_constants(graph, opset, ranks)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return replaced


def _opset(model) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _row_ranks(model) -> dict[str, int]:
    """Tensors already one row per entry, by name -> rank: shape [N, K], or [N, 1, ..., 1, K]
    by ONNX shape inference (a Transformer step's activations, [R, 1, d]). They are quantized
    and rescaled as they are, along axis 0, where the others are flattened to rows and reshaped
    back: the five nodes that does per MatMul (Flatten, Shape, Slice, Concat, Reshape) are a
    step's time at a few rows."""
    import onnx
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]            # quantize_dynamic's own annotations are not all right
    ranks = {}
    for info in (*onnx.shape_inference.infer_shapes(bare).graph.value_info, *model.graph.input):
        tensor = info.type.tensor_type
        shape = tensor.shape.dim if tensor.HasField("shape") else ()
        if len(shape) >= 2 and all(d.HasField("dim_value") and d.dim_value == 1 for d in shape[1:-1]):
            ranks[info.name] = len(shape)
    return ranks


def _rows(x: str) -> str:
    """The name of x flattened to rows [N, K] (`_quantize_rows` makes it)."""
    return f"{x}/{_ROW}/rows"


def _dequantize_rows(integer: str, scale: str, x: str, out: str, direct: bool = False) -> list:
    """out = integer [N, M] * scale [N] along the rows, in x's leading axes [..., M]: one
    DequantizeLinear (int32 -> float, per axis 0). Not Cast * scale: ONNX Runtime's optimizer
    fuses MatMulInteger -> Cast -> Mul(a_scale * b_scale) -> Add(bias) into a
    MatMulIntegerToFloat, which (onnxruntime 1.31) multiplies a non-scalar a_scale into the
    output after adding the bias; and one op reads the int32 output once where Cast and Mul
    read it twice. direct: x was one row per entry (`_row_ranks`), integer is in its axes."""
    from onnx import helper
    if direct:
        return [helper.make_node("DequantizeLinear", [integer, scale], [out], axis=0)]
    return [helper.make_node("DequantizeLinear", [integer, scale], [f"{out}/{_ROW}/rows"], axis=0),
            helper.make_node("Reshape", [f"{out}/{_ROW}/rows", f"{_rows(x)}/shape"], [out])]


def _add_row_constants(graph, opset: int, ranks: set[int]) -> None:
    """The constants `_quantize_rows` reads for inputs of these ranks as it quantizes them (0:
    flattened to rows), and none it does not read (ONNX Runtime warns of each)."""
    from onnx import numpy_helper
    have = {t.name for t in graph.initializer}
    values = {"epsilon": np.float32(EPSILON), "q_max": np.float32(127), "x_zero_point": np.uint8(ZERO_POINT)}
    if 0 in ranks:                      # the shape a flattened input's output is given back in
        values.update(first=np.array([0], np.int64), last_axis=np.array([-1], np.int64))
    if opset >= 18:                     # ReduceMax's axes as an input (_quantize_rows)
        values.update({_axes(rank or 2): np.arange(1, rank or 2, dtype=np.int64) for rank in ranks})
    graph.initializer.extend(numpy_helper.from_array(np.asarray(v), f"{_ROW}/{k}") for k, v in values.items()
                             if f"{_ROW}/{k}" not in have)


def _axes(rank: int) -> str:
    """The constant of ReduceMax's axes over all but the first of `rank` (opset 18 on)."""
    return "second_axis" if rank == 2 else f"axes_1_to_{rank - 1}"


def _quantize_rows(x: str, xq: str, x_scale: str, opset: int, rank: int | None = None) -> list:
    """The nodes that flatten x [..., K] to rows [N, K] and quantize each row by its own
    scale, xq = uint8(saturate(round(x / s) + 128)) with x_scale = s = max(|x|, EPSILON) / 127
    [N], in one QuantizeLinear per axis 0 (its zero point [N] of 128s); and `{rows}/shape`,
    x's leading axes and -1, that `_dequantize_rows` gives the output back in. rank: x is
    already one row per entry (`_row_ranks`), of this rank: quantized as it is, no flattening."""
    from onnx import helper

    rows = _rows(x)

    def name(step: str) -> str:
        return f"{rows}/{step}"

    source = x if rank else rows
    if opset >= 18:   # ReduceMax's axes became an input in opset 18
        reduce_max = helper.make_node("ReduceMax", [name("abs"), f"{_ROW}/{_axes(rank or 2)}"], [name("max")],
                                      keepdims=0)
    else:
        reduce_max = helper.make_node("ReduceMax", [name("abs")], [name("max")], axes=list(range(1, rank or 2)),
                                      keepdims=0)
    quantized = [
        helper.make_node("Abs", [source], [name("abs")]),
        reduce_max,                                                                       # [N]
        helper.make_node("Max", [name("max"), f"{_ROW}/epsilon"], [name("floored")]),
        helper.make_node("Div", [name("floored"), f"{_ROW}/q_max"], [x_scale]),          # [N]
        helper.make_node("Shape", [x_scale], [name("count")]),
        helper.make_node("Expand", [f"{_ROW}/x_zero_point", name("count")], [name("zero_points")]),
        helper.make_node("QuantizeLinear", [source, x_scale, name("zero_points")], [xq], axis=0),
    ]
    if rank:
        return quantized
    return [
        helper.make_node("Flatten", [x], [rows], axis=-1),                               # [N, K]
        *quantized,
        helper.make_node("Shape", [x], [name("x_shape")]),
        helper.make_node("Slice", [name("x_shape"), f"{_ROW}/first", f"{_ROW}/last_axis"], [name("leading")]),
        helper.make_node("Concat", [name("leading"), f"{_ROW}/last_axis"], [f"{rows}/shape"], axis=0),
    ]


# What `attnmt export --quantize` may write: every graph int8, or the encoder's alone, whose
# MatMuls are most of a sentence's work at a few rows a step (the encoder 0.41-0.53x the time
# int8; AMD EPYC, 2026-11-29), while the steps, whose output layer and attention decide each
# token, stay float.
QUANTIZED = {"int8": None, "int8-encoder": ("encoder",)}


def write_int8(fp32_dir: Path, out_dir: Path, only: tuple[str, ...] | None = None) -> dict:
    """Quantize every graph of a model directory (the shortlist's too) into `out_dir`,
    with per-row activation scales; copy the tokenizer and shortlist; return the manifest.
    only: the graphs (manifest `graphs` keys) to quantize; the others are copied as they are."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    logging.getLogger().setLevel(logging.ERROR)               # quantize_dynamic advises pre-processing at WARNING
    manifest = load_manifest(fp32_dir).model_dump(mode="json")
    graphs = list(manifest["graphs"].values())
    for role, graph in manifest["graphs"].items():
        model = onnx.load(str(fp32_dir / graph))          # with its external weights
        if only is not None and role not in only:
            onnx.save(model, str(out_dir / graph))        # float, its weights shared below
            continue
        # The TorchScript exporter's intermediate shape annotations can be wrong (a
        # concatenation recorded wider than it is); the quantizer would trust
        # them and build MatMulIntegers ONNX Runtime rejects. Let it infer afresh.
        del model.graph.value_info[:]
        full_precision(model.graph)                       # weights stored as float16 behind Casts
        untie(model.graph)
        # The shortlist graphs' output layer gathers its weight and bias by `candidates`.
        # quantize_dynamic would store both tables as activations (uint8, asymmetric): as
        # an int8 weight the first holds the full graphs' output weight, value for value,
        # and the bias stays float as theirs does.
        weights, biases = _gathered_output_layer(model.graph)
        overrides = {name: [{"quant_type": QuantType.QInt8, "reduce_range": True}] for name in weights}
        plain = out_dir / f"{graph}.float"
        onnx.save(model, str(plain))
        # What becomes int8: every MatMul whose weight is a constant (quantize_dynamic's
        # MatMulConstBOnly, its default, spelled out): the RNNsearch's projections; the
        # Transformer's attention projections (Q, K, V, the encoder's cross K and V, the
        # output), both FFN layers and the output layer; and the embedding tables (Gather).
        # What stays float: a MatMul of two activations (the Transformer's QK^T and αV),
        # whose second input would take one scale from the whole batch (ONNX Runtime's
        # MatMulInteger quantizes it per tensor), the softmax and layer norms (not
        # quantizable here), and the Transformer step's position table (`_position_tables`).
        # Weights in 7 bits (reduce_range): on a CPU without VNNI (AVX2 only) ONNX Runtime's
        # u8 x s8 kernel adds pairs of products in saturating int16, which full-range weights
        # can overflow; 7 bits keep every sum exact, so every CPU computes the same.
        quantize_dynamic(str(plain), str(out_dir / graph), weight_type=QuantType.QInt8,
                         nodes_to_exclude=biases + _position_tables(model.graph), reduce_range=True,
                         extra_options={"TensorQuantOverrides": overrides, "MatMulConstBOnly": True})
        plain.unlink()
        model = onnx.load(str(out_dir / graph))
        per_row_activations(model)
        integer_matmuls(model)
        onnx.save(model, str(out_dir / graph))
    share_weights(out_dir, graphs)
    copied = [manifest["tokenizer"]] + ([manifest["shortlist"]["file"]] if manifest.get("shortlist") else [])
    for name in copied:
        shutil.copy(fp32_dir / name, out_dir / name)
    files = [*graphs, "weights.bin", *copied]                # no checkpoint: it holds the float weights
    suffix = "-int8" if only is None else "-int8-" + "-".join(only).replace("_", "-")
    manifest.update(files=file_entries(out_dir, files), version=manifest["version"] + suffix)
    write_manifest(out_dir, manifest)
    return manifest


def _gathered_output_layer(graph) -> tuple[list[str], list[str]]:
    """(weight tables, names of the bias Gathers) of an output layer whose rows are
    gathered: Gather(W) -> [Transpose] -> MatMul's weight, Gather(b) -> Add."""
    consumers = _consumers(graph)
    shapes = {t.name: len(t.dims) for t in graph.initializer}
    weights, biases = [], []
    for node in (n for n in graph.node if n.op_type == "Gather" and n.input[0] in shapes):
        table, rows = node.input[0], node.output[0]
        as_weight = {rows} | {u.output[0] for u in consumers[rows] if u.op_type == "Transpose"}
        if shapes[table] == 2 and any(u.op_type == "MatMul" and u.input[1] in as_weight
                                      for name in as_weight for u in consumers[name]):
            weights.append(table)
        elif shapes[table] == 1 and any(u.op_type == "Add" for u in consumers[rows]):
            biases.append(node.name)
    return weights, biases


def _position_tables(graph) -> list[str]:
    """Names of the Gathers that read a table by the step's `positions` input (the
    Transformer's sinusoids): kept float, as the encoder's positions are (the encoder
    does not gather them by an index input, so the quantizer leaves them alone there); the
    table is small and E[y]·√d + PE[t] would otherwise carry two quantization errors."""
    return [node.name for node in graph.node if node.op_type == "Gather" and node.input[1:] == [POSITIONS]]


def batch_invariance(model_dir: Path, sources: list[list[int]]) -> dict:
    """What batch-mates change. Each sentence's greedy translation (decoded in one batch
    with the others) is teacher-forced through the encoder and step graph in that batch
    and on its own, comparing the top-k log-probabilities, the forced token's and α:

    batch_mates     alone, but with its memory padded as in the batch: only the
                    quantization could let batch-mates in (per row: nothing)
    alone_vs_batch  encoded alone, at its own source length: the float attention sums
                    over another padded length and differs in the last bits, which int8
                    rounding can now and then turn into a whole quantum
    """
    graphs = Graphs.load(model_dir, verify=False)
    paths = graphs.greedy(sources, batch_size=len(sources))
    memory, state, lengths = _encode(graphs, sources)
    together = _teacher_forced(graphs, memory, state, lengths, paths)
    padded, own, changed = 0.0, [], 0
    for r, (source, path) in enumerate(zip(sources, paths)):
        row = slice(r, r + 1)
        same_padding = _teacher_forced(graphs, tuple(m[row] for m in memory),
                                       {name: s[row] for name, s in state.items()}, lengths[row], [path])[0]
        alone = _teacher_forced(graphs, *_encode(graphs, [source]), [path])[0]
        padded = max(padded, _difference(same_padding, together[r]))
        own.append(_difference(alone, together[r]))
        changed += graphs.greedy([source])[0] != path
    return {"batch_mates": padded, "alone_vs_batch": max(own),
            "sentences_beyond_tolerance": sum(not d <= BATCH_TOLERANCE for d in own),
            "greedy_translations_changed": changed, "sentences": len(sources)}


def _difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(a[name] - b[name]).max()) for name in a)


def _encode(graphs: Graphs, sources: list[list[int]]) -> tuple[tuple, dict[str, np.ndarray], np.ndarray]:
    """(memory (the manifest's, in its order), {step state input: its initial value}, lengths)
    of one padded batch."""
    manifest = graphs.manifest
    batch = make_batch(sources, None, list(range(len(sources))))
    lengths = batch.lengths.numpy()
    outputs = graphs.sessions["encoder"].run(list(encoder_outputs(manifest.memory, manifest.initial_state.values())),
                                             {"src_tokens": batch.src.numpy(), "src_lengths": lengths})
    memory = tuple(outputs[:len(manifest.memory)])
    return memory, dict(zip(manifest.initial_state, outputs[len(manifest.memory):])), lengths


def _teacher_forced(graphs: Graphs, memory: tuple, state: dict[str, np.ndarray], lengths: np.ndarray,
                    paths: list[list[int]]) -> list[dict[str, np.ndarray]]:
    """Per sentence, along its path and </s> (T steps): topk_log_probs T x k,
    forced_log_probs T, alpha T x its own source length. Every row starts at step 0,
    so a Transformer's caches have one age and need no left padding."""
    manifest, session = graphs.manifest, graphs.sessions["decoder_step"]
    takes_positions = POSITIONS in {i.name for i in session.get_inputs()}
    outputs = list(decoder_outputs(manifest.step_state.values()))
    bias = no_specials_bias(manifest.vocab_size)
    prev = np.full(len(paths), BOS_ID, dtype=np.int64)
    steps = []
    for i in range(max(len(p) for p in paths) + 1):
        forced = np.array([p[i] if i < len(p) else EOS_ID for p in paths], dtype=np.int64)
        feeds = {"prev_tokens": prev, **state, **dict(zip(manifest.memory, memory)), "vocab_bias": bias,
                 "k": np.array([PARITY_TOPK], dtype=np.int64), "forced_tokens": forced}
        if takes_positions:
            feeds[POSITIONS] = np.full(len(paths), i, dtype=np.int64)
        out = dict(zip(outputs, session.run(outputs, feeds)))
        steps.append(out)
        state, prev = {name: out[new] for name, new in manifest.step_state.items()}, forced
    return [{"topk_log_probs": np.stack([s["topk_log_probs"][r] for s in steps[:len(p) + 1]]),
             "forced_log_probs": np.array([s["forced_log_probs"][r] for s in steps[:len(p) + 1]]),
             "alpha": np.stack([s["alpha"][r, :lengths[r]] for s in steps[:len(p) + 1]])}
            for r, p in enumerate(paths)]


def quantize_int8(fp32_dir: Path, out_dir: Path, sources: list[str], refs: list[str],
                  only: tuple[str, ...] | None = None) -> dict:
    """`write_int8`, then check batch invariance (nothing is left in `out_dir` unless it
    holds) and measure BLEU, speed and size against the float directory."""
    manifest = write_int8(fp32_dir, out_dir, only)
    tok = Tokenizer(out_dir / manifest["tokenizer"])
    invariance = batch_invariance(out_dir, [tok.encode(s) for s in sources[:INVARIANCE_SENTENCES]])
    if not invariance["batch_mates"] <= BATCH_TOLERANCE:     # written so that a NaN fails too
        shutil.rmtree(out_dir)
        raise RuntimeError(f"int8 graphs: batch-mates change a sentence's log-probabilities by "
                           f"{invariance['batch_mates']} (tolerance {BATCH_TOLERANCE})")
    bleu32, seconds32 = _greedy(fp32_dir, sources, refs)
    bleu8, seconds8 = _greedy(out_dir, sources, refs)
    weights = [*manifest["graphs"].values(), "weights.bin"]
    manifest["quantization"] = {
        "method": "onnxruntime.quantization.quantize_dynamic, QInt8 weights; activations quantized per row "
                  "(symmetric, max|x|/127 over the last axis, zero point 128): batch-mates do not change a row's "
                  "quantization" + ("" if only is None else f"; only {', '.join(only)}, the other graphs float"),
        "graphs": sorted(manifest["graphs"]) if only is None else sorted(only),
        "measured_on": f"dev split, {len(sources)} sentences, greedy",
        "batch_invariance": {**invariance, "tolerance": BATCH_TOLERANCE,
                             "measured_on": "dev sentences decoded in one batch and alone, greedy paths "
                                            "teacher-forced: top-k and forced log-probabilities, alpha"},
        "bleu_float32": round(bleu32, 2), "bleu_int8": round(bleu8, 2), "bleu_change": round(bleu8 - bleu32, 2),
        "seconds_float32": round(seconds32, 2), "seconds_int8": round(seconds8, 2),
        "speedup": round(seconds32 / seconds8, 2),
        # on disk: the float directory stores its weights as float16, the int8 one its
        # weights as int8 with float32 scales, biases and one copy per use of the tied table
        "bytes_float": sum(e["bytes"] for n, e in load_manifest(fp32_dir).model_dump()["files"].items()
                           if n in weights),
        "bytes_int8": sum(manifest["files"][n]["bytes"] for n in weights),
    }
    write_manifest(out_dir, manifest)
    return manifest["quantization"]
