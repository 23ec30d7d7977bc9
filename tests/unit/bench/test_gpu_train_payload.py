"""The training payload's pieces (bench/gpu_train_payload.py): files packed into pieces no larger
than a call may carry, and what a stage's machine reads, its piece-link cache made here."""

from __future__ import annotations

import lzma
import tarfile
from pathlib import Path

import pytest
import yaml

from attnmt.bench.gpu_train_payload import Stage, pack, stage_files

SPM = Path(__file__).resolve().parents[3] / "models" / "transformer-es-en" / "spm.model"


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


def test_a_stage_gets_its_data_links_and_a_piece_link_cache_made_here(tmp_path, monkeypatch):
    from attnmt.model.guided_alignment import load_links
    from attnmt.model.train import TrainConfig, links_cache_key
    monkeypatch.chdir(tmp_path)
    data = Path("data/tiny")
    data.mkdir(parents=True)
    pairs = [("el archivo", "the file"), ("no se puede abrir", "cannot open"), ("hola", "hello")]
    for split in ("train", "dev"):
        (data / f"{split}.es").write_text("".join(s + "\n" for s, _ in pairs))
        (data / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs))
    (data / "train.links").write_text("0-0 1-1\n0-0 1-0 2-0 3-1\n0-0\n")
    config = Path("stage.yaml")
    config.write_text(yaml.safe_dump({"architecture": "transformer", "data_dir": str(data), "src_lang": "es",
                                      "tgt_lang": "en", "spm_model": str(SPM), "placeholder_rate": 0.0,
                                      "guided_alignment": {"links": str(data / "train.links"), "weight": 0.1}}))
    made = stage_files(Stage("es", config, Path("runs/tiny"), None), tmp_path / "work")
    assert [name for name, _ in made] == ["es/data.tar.xz", "es/spm.model", "es/train.links.xz",
                                          "es/piece_links.npz.xz"]
    with tarfile.open(made[0][1]) as tar:
        assert sorted(tar.getnames()) == ["data/tiny/dev.en", "data/tiny/dev.es", "data/tiny/train.en",
                                          "data/tiny/train.es"]
    cache = load_links(Path("runs/tiny/piece_links.npz"), links_cache_key(TrainConfig.from_yaml(config)))
    assert cache is not None and len(cache) == 3 and all(lk is not None and len(lk) for lk in cache)
    assert lzma.decompress(made[3][1].read_bytes()) == Path("runs/tiny/piece_links.npz").read_bytes()
