"""Build what a lent GPU machine needs to train both directions side by side, in pieces that
fit its calls (`python -m attnmt.bench.gpu_train_payload`; docs/gpu.md, "Both directions in one
call", says how they travel and are used).

Each stage (`bench/gpu_train_pair.sh`: `en` for English→Spanish, `es` for Spanish→English) reads,
from /tmp/pieces/STAGE/ on the machine, what bench/gpu_train.sh unpacks:
- data.tar.xz: its config's `data_dir` train and dev splits in the config's two languages;
- train.links.xz: the eflomal links guided alignment reads;
- piece_links.npz.xz: the run's cache of piece links (converting the links takes minutes there
  too), made here into the stage's run directory unless one made from the same links and rates is
  there;
- spm.model, and checkpoint.pt: the starting weights in float16 (a run's best.pt, a checkpoint,
  or a bundled model directory's weights read back from its graphs); none for a stage from scratch;
- the first stage also site.tar.xz: pydantic for CPython 3.12, which the machine's image lacks.

The files go into `.gpu-p1`, `.gpu-p2`, … (ignored by git), each no larger than what a call may
carry beside the tree as it stands (64 MiB less the tree and a margin): set the bundled weights
aside first (`python -m attnmt.bench.gpu_aside aside`), which leaves about 50 MB a call.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from attnmt.bench.gpu_aside import LIMIT, repository, travelling_bytes
from attnmt.bench.gpu_payload import pinned, pip, xz_tar

PYDANTIC = ["pydantic", "pydantic-core", "annotated-types", "typing-extensions", "typing-inspection"]
DEFAULT_STAGES = [
    "en=model/configs/transformer-en-es-typed-gpu.yaml,runs/transformer-en-es-typed-gpu,models/transformer-en-es",
    "es=model/configs/transformer-es-en-typed-gpu.yaml,runs/transformer-es-en-typed-gpu,models/transformer-es-en",
]


@dataclass
class Stage:
    label: str          # the folder under /tmp/pieces: en or es
    config: Path
    run: Path           # where its piece-link cache is kept (made here when missing)
    weights: Path | None  # a run directory, a checkpoint file or a model directory; None: from scratch

    @classmethod
    def parse(cls, text: str) -> "Stage":
        label, _, rest = text.partition("=")
        parts = rest.split(",")
        if not label or len(parts) not in (2, 3):
            raise argparse.ArgumentTypeError(f"--stage LABEL=CONFIG,RUN[,WEIGHTS], got {text!r}")
        weights = Path(parts[2]) if len(parts) == 3 and parts[2] else None
        return cls(label, Path(parts[0]), Path(parts[1]), weights)


def pack(files: list[tuple[str, Path]], capacity: int) -> list[list[tuple[str, Path]]]:
    """(name, path) files into pieces of at most `capacity` bytes each, largest first, each into
    the first piece with room (first-fit decreasing); a file larger than a piece is refused."""
    pieces: list[list[tuple[str, Path]]] = []
    room: list[int] = []
    for name, path in sorted(files, key=lambda f: -f[1].stat().st_size):
        size = path.stat().st_size
        if size > capacity:
            raise SystemExit(f"{name} is {size:,} bytes, more than a call may carry ({capacity:,}): set the "
                             "bundled weights aside first (python -m attnmt.bench.gpu_aside aside)")
        for i, left in enumerate(room):
            if size <= left:
                pieces[i].append((name, path))
                room[i] -= size
                break
        else:
            pieces.append([(name, path)])
            room.append(capacity - size)
    return pieces


def _xz(source: Path, out: Path) -> Path:
    with open(source, "rb") as f, lzma.open(out, "wb", preset=6) as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return out


def starting_weights(source: Path, out: Path) -> Path:
    """The weights a stage starts from, in float16 (tied tensors kept one tensor)."""
    import torch
    if source.is_dir() and (source / "best.pt").exists():
        source = source / "best.pt"
    elif source.is_dir() and (source / "checkpoint.pt").exists():
        source = source / "checkpoint.pt"
    if source.is_dir():
        from attnmt.model.export.recover import recover_checkpoint
        ckpt = recover_checkpoint(source)
    else:
        ckpt = torch.load(source, map_location="cpu", weights_only=False)
    shared: dict = {}
    ckpt["state_dict"] = {k: shared.setdefault(v.data_ptr(), v.half()) for k, v in ckpt["state_dict"].items()}
    torch.save(ckpt, out)
    return out


def piece_links(cfg, run: Path, spm: Path) -> Path:
    """The run's cache of piece links, made here as the run's first start would make it (minutes
    on a large corpus: so the machine need not), unless the cache there was made from the same
    links and rates."""
    from attnmt.model.guided_alignment import load_links
    from attnmt.model.tokenizer import Tokenizer
    from attnmt.model.train import guided_links, links_cache_key, load_split
    cache = run / "piece_links.npz"
    if load_links(cache, links_cache_key(cfg)) is None:
        run.mkdir(parents=True, exist_ok=True)
        tok = Tokenizer(spm)
        src, tgt, _ = load_split(cfg, "train", tok)
        guided_links(cfg, run, tok, src, tgt, lambda message: print(message, file=sys.stderr, flush=True))
    return cache


def stage_files(stage: Stage, work: Path) -> list[tuple[str, Path]]:
    """What gpu_train.sh reads for one stage, built in `work` (paths relative to the repository's root)."""
    from attnmt.model.train import TrainConfig
    cfg = TrainConfig.from_yaml(stage.config)
    out = work / stage.label
    out.mkdir(parents=True)
    data = Path(cfg.data_dir)
    with tarfile.open(out / "data.tar.xz", "w:xz", preset=6) as tar:
        for split in ("train", "dev"):
            for lang in (cfg.src_lang, cfg.tgt_lang):
                tar.add(data / f"{split}.{lang}", (data / f"{split}.{lang}").as_posix())
    # a continued run keeps its weights' tokenizer (model/train.py): carried, and the links cut by it
    own = stage.weights / "spm.model" if stage.weights is not None and stage.weights.is_dir() else None
    spm = own if own is not None and own.exists() else Path(cfg.spm_model)
    files = [(f"{stage.label}/data.tar.xz", out / "data.tar.xz"),
             (f"{stage.label}/spm.model", Path(shutil.copy(spm, out / "spm.model")))]
    if cfg.guided_alignment.links and cfg.guided_alignment.weight > 0:
        links = Path(cfg.guided_alignment.links)
        files += [(f"{stage.label}/train.links.xz", _xz(links, out / "train.links.xz")),
                  (f"{stage.label}/piece_links.npz.xz", _xz(piece_links(cfg, stage.run, spm),
                                                            out / "piece_links.npz.xz"))]
    if stage.weights is not None:
        files.append((f"{stage.label}/checkpoint.pt", starting_weights(stage.weights, out / "checkpoint.pt")))
    return files


def site(work: Path) -> Path:
    """pydantic and what it needs for CPython 3.12, installed with --target and packed."""
    pip("download", "--no-deps", "-d", str(work / "wheels"), *[pinned(n) for n in PYDANTIC])
    pip("install", "--no-deps", "--no-index", "--no-compile", "--target", str(work / "site"),
        *map(str, (work / "wheels").glob("*.whl")))
    xz_tar(work / "site", work / "site.tar.xz")
    return work / "site.tar.xz"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stage", type=Stage.parse, action="append",
                   help="LABEL=CONFIG,RUN[,WEIGHTS] (repeat; RUN: where the piece-link cache is kept; default: "
                        "both typed-input stages, from the bundled models)")
    p.add_argument("--margin", type=int, default=4_600_000, help="bytes left free in each call's 64 MiB: the "
                   "device tool counts more than the files' bytes (3.6 MB passed), and 1 MB more lets the tree "
                   "grow a little before the call")
    p.add_argument("--no-site", action="store_true", help="leave pydantic out (a dry run here)")
    args = p.parse_args(argv)
    stages = args.stage or [Stage.parse(s) for s in DEFAULT_STAGES]
    repo = repository()
    work = Path(tempfile.mkdtemp(prefix="attnmt-gpu-train-"))
    files: list[tuple[str, Path]] = []
    for stage in stages:
        files += stage_files(stage, work)
    if not args.no_site:
        files.append((f"{stages[0].label}/site.tar.xz", site(work)))
    for old in repo.glob(".gpu-p*"):
        shutil.rmtree(old)
    capacity = LIMIT - travelling_bytes(repo) - args.margin
    pieces = pack(files, capacity)
    for i, piece in enumerate(pieces, 1):
        for name, path in piece:
            (repo / f".gpu-p{i}" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, repo / f".gpu-p{i}" / name)
    shutil.rmtree(work)
    for i, piece in enumerate(pieces, 1):
        size = sum((repo / f".gpu-p{i}" / n).stat().st_size for n, _ in piece)
        print(f".gpu-p{i}: {size:,} bytes: {', '.join(n for n, _ in piece)}")
    print(f"{len(pieces)} pieces of at most {capacity:,} bytes (the tree carries {travelling_bytes(repo):,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
