"""PNG charts (matplotlib, Agg backend; written to a temporary file, then renamed)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=out.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
        os.replace(tmp, out)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
    return out


def comparison_chart(rows: Sequence[Any], path: str | os.PathLike[str], title: str) -> Path:
    """Bars of tokens/s per chip, USD per million tokens and joules per token, one bar per
    system (``rows``: ``trnsim.perf.compare.CompareRow``). Missing figures are left blank."""
    names = [r.system for r in rows]
    panels = [
        ("tokens/s per chip", [r.tokens_per_s_per_chip for r in rows]),
        ("USD per million tokens", [r.usd_per_million_tokens or 0.0 for r in rows]),
        ("joules per token", [r.joules_per_token or 0.0 for r in rows]),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0))
    for ax, (label, values) in zip(axes, panels, strict=True):
        bars = ax.bar(range(len(names)), values, color="#4c72b0")
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_title(label, fontsize=10)
        for b, v in zip(bars, values, strict=True):
            ax.annotate(
                "n/a" if v == 0 else f"{v:.3g}",
                (b.get_x() + b.get_width() / 2, v),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    fig.suptitle(title, fontsize=11)
    fig.text(
        0.5,
        -0.08,
        "trnsim estimate: roofline with the fitted Trn1 efficiency profile for "
        "every system; prices and power are inputs (see --json assumptions)",
        ha="center",
        fontsize=7,
    )
    return _save(fig, path)
