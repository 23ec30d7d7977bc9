"""`attnmt export --quantize int8`: ONNX Runtime dynamic int8 quantization of
the three graphs (weights stored as int8, activations quantized on the fly), with
what it costs and gains measured on the dev split and written to the manifest.

Both directories are measured with the same greedy loop over the step graph
(`export.onnx_greedy`), so the comparison is of the graphs alone.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import sacrebleu

from attnmt.service.manifest import GRAPHS as GRAPH_FILES
from attnmt.service.manifest import file_entries, load_manifest, write_manifest

from .export import onnx_greedy, onnx_sessions, share_weights
from .tokenizer import Tokenizer

GRAPHS = tuple(GRAPH_FILES.values())


def _greedy(model_dir: Path, sources: list[str], refs: list[str]) -> tuple[float, float]:
    manifest = load_manifest(model_dir)
    sessions = onnx_sessions(model_dir)
    tok = Tokenizer(model_dir / manifest.tokenizer)
    ids = [tok.encode(s) for s in sources]
    onnx_greedy(sessions, ids[:16], manifest.vocab_size)     # warm-up
    start = time.perf_counter()
    hyps = [tok.decode(out) for out in onnx_greedy(sessions, ids, manifest.vocab_size)]
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


def quantize_int8(fp32_dir: Path, out_dir: Path, sources: list[str], refs: list[str]) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    logging.getLogger().setLevel(logging.ERROR)               # quantize_dynamic advises pre-processing at WARNING
    import onnx

    for graph in GRAPHS:
        model = onnx.load(str(fp32_dir / graph))          # with its external weights
        # The TorchScript exporter's intermediate shape annotations can be wrong (a
        # concatenation recorded 8512 wide instead of 768); the quantizer would trust
        # them and build MatMulIntegers ONNX Runtime rejects. Let it infer afresh.
        del model.graph.value_info[:]
        untie(model.graph)
        plain = out_dir / f"{graph}.float"
        onnx.save(model, str(plain))
        quantize_dynamic(str(plain), str(out_dir / graph), weight_type=QuantType.QInt8)
        plain.unlink()
    share_weights(out_dir, list(GRAPHS))
    manifest = load_manifest(fp32_dir).model_dump(mode="json")
    shutil.copy(fp32_dir / manifest["tokenizer"], out_dir / manifest["tokenizer"])
    files = [*GRAPHS, "weights.bin", manifest["tokenizer"]]   # no checkpoint: it holds the float weights
    manifest.update(files=file_entries(out_dir, files), version=manifest["version"] + "-int8")
    write_manifest(out_dir, manifest)

    bleu32, seconds32 = _greedy(fp32_dir, sources, refs)
    bleu8, seconds8 = _greedy(out_dir, sources, refs)
    manifest["quantization"] = {
        "method": "onnxruntime.quantization.quantize_dynamic, QInt8 weights",
        "measured_on": f"dev split, {len(sources)} sentences, greedy",
        "bleu_float32": round(bleu32, 2), "bleu_int8": round(bleu8, 2), "bleu_change": round(bleu8 - bleu32, 2),
        "seconds_float32": round(seconds32, 2), "seconds_int8": round(seconds8, 2),
        "speedup": round(seconds32 / seconds8, 2),
        "bytes_float32": sum(e["bytes"] for n, e in load_manifest(fp32_dir).model_dump()["files"].items()
                             if n in (*GRAPHS, "weights.bin")),
        "bytes_int8": sum(manifest["files"][n]["bytes"] for n in (*GRAPHS, "weights.bin")),
    }
    write_manifest(out_dir, manifest)
    return manifest["quantization"]
