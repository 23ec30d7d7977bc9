"""Reading a split of a parallel corpus directory on the serving side (the
measurement commands), in the layouts `attnmt data` writes: `{split}.tsv`
(source<TAB>target) or `{split}.{src_lang}` beside `{split}.{tgt_lang}`."""

from __future__ import annotations

from pathlib import Path


def read_split(data_dir: Path, split: str, source_language: str, target_language: str) -> list[tuple[str, str]]:
    data_dir = Path(data_dir)
    tsv = data_dir / f"{split}.tsv"
    if tsv.is_file():
        pairs = [line.split("\t", 1) for line in tsv.read_text(encoding="utf-8").splitlines()]
        return [(s, t) for s, t in pairs]
    src, tgt = data_dir / f"{split}.{source_language}", data_dir / f"{split}.{target_language}"
    if not (src.is_file() and tgt.is_file()):
        raise FileNotFoundError(f"{data_dir}: neither {split}.tsv nor {split}.{source_language} + "
                                f"{split}.{target_language}")
    sources = src.read_text(encoding="utf-8").splitlines()
    targets = tgt.read_text(encoding="utf-8").splitlines()
    if len(sources) != len(targets):
        raise ValueError(f"{src} has {len(sources)} lines, {tgt} {len(targets)}")
    return list(zip(sources, targets))
