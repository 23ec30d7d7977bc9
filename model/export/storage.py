"""`attnmt store-weights`: a model directory's weights stored again, as int8 with a
float32 scale per output channel (`directory._store_int8`), in a new directory.

The graphs, inputs, outputs and the computation stay those of the float directory:
ONNX Runtime folds each int8 matrix and its scale into a float32 initializer when it
loads a graph, so decoding costs what it cost and only the weights are rounded (each to
within half a step of 1/127 of its channel's largest value). `weights.bin` halves
again (a Transformer of 256 wide with 8,000 pieces: 19.1 → 10.4 MB). What the
rounding changes in translations is measured, not assumed: `attnmt evaluate` on each
test set, the float directory beside it (docs/benchmarks.md, "Weights stored as int8").

The float16 `checkpoint.pt` is left out: it holds other numbers than the graphs.
Training continued from the new directory, `attnmt bench engine` and the CTranslate2
conversion read the rounded weights back from its graphs (`recover.py`).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from attnmt.model.export.directory import full_precision, share_weights
from attnmt.service.modeldir.manifest import MANIFEST, file_entries, load_manifest, write_manifest

STORAGE = "int8"
WEIGHTS = "weights.bin"
VERSION_SUFFIX = "+int8"
CARD = "MODEL_CARD.md"                 # the model card, beside the manifest's files


class StorageError(ValueError):
    """A directory whose weights cannot be stored as asked."""


def store_weights(model_dir: Path, out_dir: Path) -> dict:
    """Write `model_dir` to `out_dir` with its weights stored as int8; return the manifest.
    The other files (tokenizer, shortlist, lexicon, names, model card) are copied as they are."""
    import onnx

    load_manifest(model_dir)                      # every file as its checksum says
    # the manifest as written, so that what a reader defaults (an older schema's) stays unwritten
    manifest = json.loads((model_dir / MANIFEST).read_text(encoding="utf-8"))
    if manifest.get("quantization"):
        raise StorageError(f"{model_dir} holds int8 graphs (`attnmt export --quantize`): their weights are "
                           "int8 already")
    if (manifest.get("weights_storage") or {}).get("format") == STORAGE:
        raise StorageError(f"{model_dir}: its weights are stored as int8 already")
    if out_dir.resolve() == model_dir.resolve():
        raise StorageError("--out must be another directory than the model's own")
    graphs = list(manifest["graphs"].values())
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for graph in graphs:
        model = onnx.load(str(model_dir / graph))            # with its external weights
        full_precision(model.graph)
        onnx.save(model, str(out_dir / graph))
    share_weights(out_dir, graphs, WEIGHTS, storage=STORAGE)
    copied = [name for name in manifest["files"] if name not in graphs and name not in (WEIGHTS, "checkpoint.pt")]
    for name in [*copied, *([CARD] if (model_dir / CARD).exists() else [])]:
        shutil.copy(model_dir / name, out_dir / name)
    before = manifest["files"][WEIGHTS]["bytes"]
    manifest["files"] = file_entries(out_dir, [*graphs, WEIGHTS, *copied])
    manifest["weights_storage"] = {
        "format": STORAGE,
        "method": "each weight matrix int8, one float32 scale per output channel (max |w| / 127), read as "
                  "Mul(Cast(int8), scale), which ONNX Runtime folds into float32 when it loads the graph; "
                  "biases and layer norms float16",
        "from_version": manifest["version"],      # the version gains "+int8": the same model, rounded
        "date": dt.date.today().isoformat(),
        "bytes_before": before,
        "bytes": manifest["files"][WEIGHTS]["bytes"],
    }
    manifest["version"] = manifest["version"] + VERSION_SUFFIX
    write_manifest(out_dir, manifest)
    return manifest
