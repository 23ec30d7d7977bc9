"""The model directory contract shared by `model/` (which writes it) and
`service/` (which reads it): `manifest.json` beside the graphs and tokenizer.

    encoder.onnx        src_tokens[B,S] int64, src_lengths[B] int64
                        -> annotations[B,S,2n], keys[B,S,K], src_mask[B,S] bool, init_state[B,d]
    decoder_step.onnx   prev_tokens[B] int64, state[B,d], annotations, keys, src_mask
                        -> log_probs[B,V], new_state[B,d], alpha[B,S]
    spm.model           SentencePiece
    manifest.json       this schema
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ModelLoadError

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"

ENCODER_INPUTS = ("src_tokens", "src_lengths")
ENCODER_OUTPUTS = ("annotations", "keys", "src_mask", "init_state")
DECODER_INPUTS = ("prev_tokens", "state", "annotations", "keys", "src_mask")
DECODER_OUTPUTS = ("log_probs", "new_state", "alpha")


class SpecialIds(BaseModel):
    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3


class FileEntry(BaseModel):
    sha256: str
    bytes: int


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int
    name: str
    version: str
    architecture: str = "RNNsearch"
    source_language: str
    target_language: str
    tokenizer: str = "spm.model"
    vocab_size: int
    special_ids: SpecialIds = Field(default_factory=SpecialIds)
    dimensions: dict[str, Any] = Field(default_factory=dict)
    graphs: dict[str, str] = Field(default_factory=lambda: {"encoder": "encoder.onnx",
                                                            "decoder_step": "decoder_step.onnx"})
    opset: int = 17
    files: dict[str, FileEntry]
    training: dict[str, Any] = Field(default_factory=dict)
    evaluation: dict[str, Any] = Field(default_factory=dict)
    quantization: dict[str, Any] | None = None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_entries(model_dir: Path, names: list[str]) -> dict[str, dict]:
    return {n: {"sha256": sha256_of(model_dir / n), "bytes": (model_dir / n).stat().st_size} for n in names}


def load_manifest(model_dir: Path, verify: bool = True) -> Manifest:
    """Read and validate `manifest.json`; with `verify`, check every listed file's checksum."""
    path = Path(model_dir) / MANIFEST
    if not path.is_file():
        raise ModelLoadError(f"{model_dir}: no {MANIFEST} (is this a model directory made by `attnmt export`?)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from e
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ModelLoadError(f"{path}: schema_version {version!r} is not supported "
                             f"(this attnmt reads schema_version {SCHEMA_VERSION})")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as e:
        raise ModelLoadError(f"{path}: {e}") from e
    required = {manifest.tokenizer, *manifest.graphs.values()}
    missing = sorted(required - set(manifest.files))
    if missing:
        raise ModelLoadError(f"{path}: files {missing} are not listed with checksums")
    for name, entry in manifest.files.items():
        file = Path(model_dir) / name
        if not file.is_file():
            raise ModelLoadError(f"{model_dir}: {name} is listed in the manifest but missing")
        if verify and (file.stat().st_size != entry.bytes or sha256_of(file) != entry.sha256):
            raise ModelLoadError(f"{model_dir}: {name} does not match its manifest checksum (corrupt or replaced)")
    return manifest


def write_manifest(model_dir: Path, manifest: dict) -> None:
    (Path(model_dir) / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
