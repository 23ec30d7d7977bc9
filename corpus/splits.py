"""Reading a split of a parallel corpus directory, the one rule training, export's parity
sentences, evaluation and every measurement use, in the layouts `attnmt data` writes:
`{split}.tsv` (source<TAB>target) or `{split}.{src_lang}` beside `{split}.{tgt_lang}`.

A TSV directory may name its columns' languages in `languages.txt` (one line, `es<TAB>en`): read
for the other direction, its pairs come back swapped. Without it the first column is the source,
whatever is asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def read_parallel(source: Path, target: Path | None = None) -> Iterator[tuple[str, str]]:
    """Read a TSV (`source<TAB>target`, when `target` is None) or two line-aligned files."""
    if target is None:
        with open(source, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 2:
                    raise ValueError(f"{source}:{n}: expected 'source<TAB>target', got {len(fields)} fields")
                yield fields[0].strip(), fields[1].strip()
        return
    with open(source, encoding="utf-8") as fs, open(target, encoding="utf-8") as ft:
        try:
            for s, t in zip(fs, ft, strict=True):
                yield s.strip(), t.strip()
        except ValueError as e:
            raise ValueError(f"{source} and {target} have different numbers of lines") from e


def corpus_files(data_dir: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path | None]:
    """Locate a split in a data directory: `{split}.tsv` or `{split}.{src}`/`{split}.{tgt}`."""
    tsv = data_dir / f"{split}.tsv"
    if tsv.exists():
        return tsv, None
    src, tgt = data_dir / f"{split}.{src_lang}", data_dir / f"{split}.{tgt_lang}"
    if not (src.exists() and tgt.exists()):
        raise FileNotFoundError(f"no {split} data in {data_dir}: expected {tsv.name} or {src.name} + {tgt.name}")
    return src, tgt


COLUMNS_FILE = "languages.txt"


def tsv_languages(data_dir: Path) -> tuple[str, str] | None:
    """The (first column, second column) languages a TSV directory declares, or None."""
    path = Path(data_dir) / COLUMNS_FILE
    if not path.exists():
        return None
    fields = path.read_text(encoding="utf-8").split()
    if len(fields) != 2:
        raise ValueError(f"{path}: expected two language codes (first column, second column), got {fields}")
    return fields[0], fields[1]


def read_split(data_dir: Path, split: str, source_language: str, target_language: str) -> list[tuple[str, str]]:
    """All (source, target) pairs of `split` in `data_dir`, in the direction asked for."""
    source, target = corpus_files(Path(data_dir), split, source_language, target_language)
    pairs = list(read_parallel(source, target))
    if target is None:
        columns = tsv_languages(Path(data_dir))
        if columns is not None and columns not in ((source_language, target_language),
                                                   (target_language, source_language)):
            raise ValueError(f"{Path(data_dir) / COLUMNS_FILE} declares {columns[0]}→{columns[1]}, asked for "
                             f"{source_language}→{target_language}")
        if columns == (target_language, source_language):
            pairs = [(t, s) for s, t in pairs]
    return pairs
