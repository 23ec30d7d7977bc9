"""Writing a corpus directory: `{split}.es`, `{split}.en` and `{split}.ids`, one pair a line."""

from __future__ import annotations

from pathlib import Path


def write_splits(out_dir: Path, splits: dict[str, list[tuple[str, str, str]]]) -> dict[str, int]:
    """Rows (id, Spanish, English) of each split into line-aligned files; the count of each split.
    An empty split is written too (the mix reads every corpus's dev)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        for suffix, column in (("ids", 0), ("es", 1), ("en", 2)):
            (out_dir / f"{split}.{suffix}").write_text("".join(row[column] + "\n" for row in rows), encoding="utf-8")
    return {split: len(rows) for split, rows in splits.items()}
