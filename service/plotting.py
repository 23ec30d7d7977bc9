"""Alignment heatmaps as PNG (matplotlib is optional: `pip install matplotlib`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnmt.service.text.translator import Hypothesis


def plot_alignment(hyp: "Hypothesis", path: Path, title: str = "", words: bool = True) -> None:
    """Heatmap of α: target rows x source columns, darker = more weight."""
    try:
        import matplotlib
    except ImportError as e:
        raise SystemExit("plotting needs matplotlib: pip install 'attnmt[train]' or matplotlib") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = hyp.word_alignment if words else hyp.alignment
    src = hyp.source_words if words else hyp.source_tokens
    tgt = hyp.target_words if words else hyp.target_tokens
    fig, ax = plt.subplots(figsize=(max(4, 0.32 * len(src) + 2), max(3, 0.32 * len(tgt) + 1.5)))
    ax.imshow(weights, cmap="gray_r", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(src)), src, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tgt)), tgt, fontsize=8)
    ax.xaxis.tick_top()
    if title:
        ax.set_title(title, fontsize=9, pad=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
