"""`attnmt upgrade-model`: a schema_version 1 model directory (a step graph
returning log_probs[R,V]) re-exported as schema_version 2 from what it already
holds, its float16 `checkpoint.pt` and `spm.model`. The export is the ordinary
one (`model/export/rnnsearch.py`), parity check included; what the old manifest knew about the
model (name, version, languages, training card, test scores, quantization)
carries over, and files beside it (eval/) are kept.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path

from attnmt.model.export.rnnsearch import export
from attnmt.model.tokenizer import MODEL_FILE
from attnmt.service.modeldir.corpus import corpus_files, read_parallel
from attnmt.service.modeldir.manifest import MANIFEST, SCHEMA_VERSION, write_manifest

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


def read_schema_1(model_dir: Path) -> dict:
    """The old manifest, or UpgradeError saying why this directory cannot be upgraded."""
    path = model_dir / MANIFEST
    if not path.is_file():
        raise UpgradeError(f"{model_dir}: no {MANIFEST}, not a model directory")
    old = json.loads(path.read_text(encoding="utf-8"))
    version = old.get("schema_version")
    if version == SCHEMA_VERSION:
        raise UpgradeError(f"{model_dir}: already schema_version {SCHEMA_VERSION}, nothing to upgrade")
    if version != 1:
        raise UpgradeError(f"{model_dir}: schema_version {version!r}; upgrade-model reads schema_version 1")
    if not (model_dir / "checkpoint.pt").is_file():
        raise UpgradeError(f"{model_dir}: no checkpoint.pt to re-export from (an int8 directory holds no float "
                           "weights: upgrade the float directory it was quantized from, then quantize again)")
    return old


def upgrade_model(model_dir: Path, out_dir: Path | None = None, tolerance: float = 1e-4) -> dict:
    """Upgrade `model_dir` into `out_dir` (default: in place); returns the new manifest."""
    old = read_schema_1(model_dir)
    training = old.get("training") or {}
    out_dir = out_dir or model_dir
    with tempfile.TemporaryDirectory() as tmp_name:
        staged = Path(tmp_name) / "model"
        manifest = export(model_dir / "checkpoint.pt", model_dir / old.get("tokenizer", MODEL_FILE), staged,
                          old["name"], old["source_language"], old["target_language"], parity_sources(training),
                          training, tolerance)
        # Same weights, so the same version and the same measured scores.
        manifest.update(version=old["version"], evaluation=old.get("evaluation") or {},
                        upgraded={"from_schema_version": 1, "date": dt.date.today().isoformat()})
        if old.get("quantization") is not None:
            manifest["quantization"] = old["quantization"]
        write_manifest(staged, manifest)
        if out_dir.resolve() != model_dir.resolve():
            if out_dir.exists():
                shutil.rmtree(out_dir)
            shutil.copytree(model_dir, out_dir)
        # The manifest goes last: a copy cut short leaves a schema 1 directory, refused and upgradable.
        for file in [*manifest["files"], MANIFEST]:
            shutil.copy(staged / file, out_dir / file)
    return manifest
