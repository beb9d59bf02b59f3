"""Pareto fronts of two metrics: the points no other point beats on both (a pure function),
and the PNG that shows them among every point of the sweep."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trnsim.sweep.verbs import Better

MAX_LABELS = 12  # front points labelled on the chart (all are in the table)


def front(xy: Sequence[tuple[float, float]], x_better: Better, y_better: Better) -> list[int]:
    """Indices of the points of ``xy`` on the Pareto front, by increasing x.

    A point is on the front when no other point is at least as good on both metrics and
    strictly better on one. Of several identical points only the first is on it."""
    sx = -1.0 if x_better == "max" else 1.0
    sy = -1.0 if y_better == "max" else 1.0
    order = sorted(range(len(xy)), key=lambda i: (sx * xy[i][0], sy * xy[i][1], i))
    out: list[int] = []
    best = float("inf")
    for i in order:
        y = sy * xy[i][1]
        if y < best:
            out.append(i)
            best = y
    return sorted(out, key=lambda i: xy[i][0])


def _axis_label(path: str, unit: str) -> str:
    return f"{path} ({unit})" if unit else path


def chart(
    xy: Sequence[tuple[float, float]],
    on_front: Sequence[int],
    labels: Sequence[str],
    x: tuple[str, str, Better],
    y: tuple[str, str, Better],
    title: str,
    path: str | os.PathLike[str],
) -> Path:
    """Every point in grey, the front in colour joined by its staircase, front points labelled
    (the first ``MAX_LABELS``), the better corner marked; written whole (``report.plots``)."""
    from trnsim.report.plots import palette, plt, save

    fig, ax = plt.subplots(figsize=(9, 6), layout="constrained")
    xs = [p[0] for p in xy]
    ys = [p[1] for p in xy]
    ax.scatter(xs, ys, s=14, color="0.65", label=f"all points ({len(xy)})", zorder=2)
    fx = [xy[i][0] for i in on_front]
    fy = [xy[i][1] for i in on_front]
    colour = palette(1)[0]
    # the staircase bounding what the front attains: along x first when lower x is better
    ax.step(fx, fy, where="post" if x[2] == "min" else "pre", color=colour, lw=1.2, zorder=3)
    ax.scatter(fx, fy, s=36, color=colour, label=f"Pareto front ({len(on_front)})", zorder=4)
    for n, i in enumerate(on_front[:MAX_LABELS]):
        ax.annotate(
            labels[i],
            (xy[i][0], xy[i][1]),
            xytext=(4, 4 + 9 * (n % 2)),
            textcoords="offset points",
            fontsize=7,
            zorder=5,
        )
    for values, set_scale in ((xs, ax.set_xscale), (ys, ax.set_yscale)):
        positive = [v for v in values if v > 0]
        if len(positive) == len(values) and max(positive) > 100 * min(positive):
            set_scale("log")
    better = (
        f"better: {'lower' if x[2] == 'min' else 'higher'} {x[0]}, "
        f"{'lower' if y[2] == 'min' else 'higher'} {y[0]}"
    )
    from matplotlib.ticker import EngFormatter

    for axis, (_, unit, _) in ((ax.xaxis, x), (ax.yaxis, y)):
        if unit and axis.get_scale() == "linear":
            axis.set_major_formatter(EngFormatter(sep=" "))
    ax.margins(0.08)
    ax.set(xlabel=_axis_label(x[0], x[1]), ylabel=_axis_label(y[0], y[1]))
    ax.set_title(f"{title}\n{better}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return save(fig, path, "--png")


def label(values: dict[str, Any], varying: Sequence[str]) -> str:
    """A point's short label: the parameters that vary in the sweep."""
    return ", ".join(f"{k}={values.get(k)}" for k in varying)
