"""`attnmt upgrade-model`: a model directory of an older schema re-exported in the
current one from what it already holds, its float16 `checkpoint.pt` and `spm.model`:

- schema_version 1 (a step graph returning log_probs[R,V]), an RNNsearch;
- a schema_version 2 Transformer (its caches and cross K/V one [R,T,2*L*d] and two
  [N,S,L*d] tensors, sliced and transposed to heads at every step), into the head-major
  layout of `model/export/transformer.py`; without a checkpoint.pt, from the weights read
  back from its graphs (`recover.py`). A schema 2 RNNsearch is served as it is;
- a current-schema float Transformer exported before the append steps
  (`decoder_step_append`, `decoder_step_grouped`), which it gains with the other graphs
  exported again by the current export (the same weights and numbers);
- a current-schema float Transformer whose graphs an older export wrote (`graphs_revision`
  below TRANSFORMER_GRAPHS_REVISION, service/modeldir/manifest.py): the same graphs, inputs,
  outputs and numbers, with fewer nodes a step.

The export is the ordinary one (`rnnsearch.py`, `transformer.py`), parity check included;
what the old manifest knew about the model (name, version, languages, training card, test
scores, quantization; a Transformer's alignment, hard links and quality too) carries over,
and files beside it (eval/) are kept.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path

from attnmt.corpus.splits import corpus_files, read_parallel
from attnmt.model.export import rnnsearch, transformer
from attnmt.model.export.recover import load_model_directory
from attnmt.model.export.storage import store_weights
from attnmt.model.tokenizer import MODEL_FILE
from attnmt.service.modeldir.manifest import (
    APPEND_GRAPH,
    GROUPED_GRAPH,
    MANIFEST,
    SCHEMA_VERSION,
    file_entries,
    graphs_behind,
    write_manifest,
)

# The steps a current-schema Transformer exported before them lacks.
LATER_STEPS = (*APPEND_GRAPH, *GROUPED_GRAPH)

# For a directory whose training data is not at hand: short everyday, software and Bible Spanish.
FALLBACK_SENTENCES = [
    "El archivo no existe.",
    "No se puede abrir el directorio.",
    "La casa es grande y tiene un jardín.",
    "¿Dónde está la estación de tren?",
    "Mañana vamos a la playa con nuestros amigos.",
    "El programa terminó con un error.",
    "Y dijo Dios: Sea la luz; y fue la luz.",
    "Los niños juegan en el parque después de la escuela.",
]


class UpgradeError(Exception):
    """A directory `attnmt upgrade-model` cannot upgrade; the message says why."""


def parity_sources(training: dict, count: int = 64) -> list[str]:
    """Dev sentences of the run's data directory (as `attnmt export` takes them) if
    it is still there, else FALLBACK_SENTENCES."""
    config = training.get("config") or {}
    try:
        src, tgt = corpus_files(Path(config["data_dir"]), "dev", config["src_lang"], config["tgt_lang"])
        sentences = [s for s, _ in read_parallel(src, tgt)][:count]
    except (KeyError, FileNotFoundError):
        return list(FALLBACK_SENTENCES)
    return sentences or list(FALLBACK_SENTENCES)


def read_old(model_dir: Path) -> dict:
    """The old manifest, or UpgradeError saying why this directory cannot be upgraded."""
    path = model_dir / MANIFEST
    if not path.is_file():
        raise UpgradeError(f"{model_dir}: no {MANIFEST}, not a model directory")
    old = json.loads(path.read_text(encoding="utf-8"))
    version = old.get("schema_version")
    is_transformer = old.get("architecture") == "Transformer"
    behind = _missing(old) or graphs_behind(old.get("graphs_revision"))
    if version == SCHEMA_VERSION and not (is_transformer and behind):
        raise UpgradeError(f"{model_dir}: already schema_version {SCHEMA_VERSION}, nothing to upgrade")
    if version == 2 and not is_transformer:
        raise UpgradeError(f"{model_dir}: a schema_version 2 {old.get('architecture', 'RNNsearch')} is served as it "
                           "is, nothing to upgrade")
    if version not in (1, 2, SCHEMA_VERSION):
        raise UpgradeError(f"{model_dir}: schema_version {version!r}; upgrade-model reads schema_version 1, "
                           "and 2 for a Transformer")
    # A float Transformer's weights can be read back from its graphs; an int8 one's cannot.
    if not (model_dir / "checkpoint.pt").is_file() and (not is_transformer or old.get("quantization")):
        raise UpgradeError(f"{model_dir}: no checkpoint.pt to re-export from (an int8 directory holds no float "
                           "weights: upgrade the float directory it was quantized from, then quantize again)")
    return old


def _missing(manifest: dict) -> list[str]:
    """The LATER_STEPS a manifest's graphs lack."""
    return [step for step in LATER_STEPS if step not in (manifest.get("graphs") or {})]


def upgrade_model(model_dir: Path, out_dir: Path | None = None, tolerance: float = 1e-4) -> dict:
    """Upgrade `model_dir` into `out_dir` (default: in place); returns the new manifest."""
    old = read_old(model_dir)
    training = old.get("training") or {}
    out_dir = out_dir or model_dir
    described = (old["name"], old["source_language"], old["target_language"], parity_sources(training), training,
                 tolerance)
    with tempfile.TemporaryDirectory() as tmp_name:
        staged = Path(tmp_name) / "model"
        tokenizer = model_dir / old.get("tokenizer", MODEL_FILE)
        if old.get("architecture") == "Transformer":
            # its cfg holds the α the old export chose (alignment layer and head)
            manifest = transformer.export_model(load_model_directory(model_dir), tokenizer, staged, *described,
                                                shift_att=bool((old.get("alignment") or {}).get("shift_att")))
            for key, value in old.items():       # what was measured on these weights: hard links, quality
                manifest.setdefault(key, value)
            for section in ("names", "lexicon"):  # the known-words list and the lexicon go along
                if manifest.get(section):
                    shutil.copy(model_dir / manifest[section]["file"], staged / manifest[section]["file"])
                    manifest["files"].update(file_entries(staged, [manifest[section]["file"]]))
        else:
            manifest = rnnsearch.export(model_dir / "checkpoint.pt", tokenizer, staged, *described)
        # Same weights, so the same version and the same measured scores.
        added = _missing(old)
        manifest.update(version=old["version"], evaluation=old.get("evaluation") or {},
                        upgraded={"from_schema_version": old["schema_version"], "date": dt.date.today().isoformat(),
                                  **({"added": added} if old["schema_version"] == SCHEMA_VERSION and added else {}),
                                  **({"from_graphs_revision": old.get("graphs_revision") or 1}
                                     if old.get("architecture") == "Transformer" else {})})
        if old.get("quantization") is not None:
            manifest["quantization"] = old["quantization"]
        manifest.pop("weights_storage", None)     # the export stored them as float16
        write_manifest(staged, manifest)
        if old.get("weights_storage"):             # int8, as the old directory stored them
            stored = Path(tmp_name) / "stored"
            manifest = store_weights(staged, stored)
            staged = stored
            manifest.update(version=old["version"], weights_storage=old["weights_storage"])
            write_manifest(staged, manifest)
        if out_dir.resolve() != model_dir.resolve():
            if out_dir.exists():
                shutil.rmtree(out_dir)
            shutil.copytree(model_dir, out_dir)
        # The manifest goes last: a copy cut short leaves a schema 1 directory, refused and upgradable.
        for file in [*manifest["files"], MANIFEST]:
            shutil.copy(staged / file, out_dir / file)
    return manifest
