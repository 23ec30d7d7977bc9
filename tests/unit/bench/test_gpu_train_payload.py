"""The training payload's pieces (bench/gpu_train_payload.py): files packed into pieces no larger
than a call may carry, and a stage refused without the piece-link cache its machine would need."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from attnmt.bench.gpu_train_payload import Stage, pack, stage_files


def files(tmp_path: Path, sizes: dict[str, int]) -> list[tuple[str, Path]]:
    out = []
    for name, size in sizes.items():
        path = tmp_path / name.replace("/", "_")
        path.write_bytes(b"x" * size)
        out.append((name, path))
    return out


def test_pack_fills_each_piece_up_to_the_capacity_largest_first(tmp_path):
    pieces = pack(files(tmp_path, {"en/data": 60, "en/site": 10, "es/data": 70, "es/ckpt": 35, "en/spm": 5}), 100)
    names = [[n for n, _ in piece] for piece in pieces]
    assert names == [["es/data", "en/site", "en/spm"], ["en/data", "es/ckpt"]]
    assert all(sum(p.stat().st_size for _, p in piece) <= 100 for piece in pieces)


def test_pack_refuses_a_file_larger_than_a_call_and_says_what_to_do(tmp_path):
    with pytest.raises(SystemExit, match="gpu_aside aside"):
        pack(files(tmp_path, {"es/checkpoint.pt": 101}), 100)


def test_a_stage_is_parsed_with_or_without_starting_weights():
    assert Stage.parse("en=c.yaml,runs/x,models/m") == Stage("en", Path("c.yaml"), Path("runs/x"), Path("models/m"))
    assert Stage.parse("en=c.yaml,runs/x").weights is None
    with pytest.raises(Exception, match="LABEL=CONFIG,RUN"):
        Stage.parse("c.yaml")


def test_a_stage_without_its_piece_link_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        for lang in ("es", "en"):
            (data / f"{split}.{lang}").write_text("hola\n")
    (data / "train.links").write_text("0-0\n")
    (tmp_path / "spm.model").write_bytes(b"spm")
    config = tmp_path / "stage.yaml"
    config.write_text(yaml.safe_dump({"architecture": "transformer", "data_dir": str(data), "src_lang": "es",
                                      "tgt_lang": "en", "spm_model": str(tmp_path / "spm.model"),
                                      "guided_alignment": {"links": str(data / "train.links"), "weight": 0.1}}))
    with pytest.raises(SystemExit, match="dry-run the stage here first"):
        stage_files(Stage("es", config, tmp_path / "run", None), tmp_path / "work")
