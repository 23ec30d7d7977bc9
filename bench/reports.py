"""How every `attnmt bench` command ends: its table printed, its report written as JSON where asked."""

from __future__ import annotations

import json
from pathlib import Path


def show(report: dict, table: str, out: Path | None) -> None:
    """Print `table`; with `out`, write `report` there (UTF-8, its folder made if missing)."""
    print(table)
    if out:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
