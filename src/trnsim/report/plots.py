"""PNG charts (matplotlib, Agg backend), drawn honestly and written whole.

Rules every chart here keeps: axes say their units; legends sit outside the data; labels never
print over one another or over a footnote (the layout makes room for them); one colour per
series; every file goes through ``trnsim.report.output.atomic_write`` (mode 0644, no temporary
left behind). Timelines aggregate per pixel: a pixel column's filled height is the fraction of
that pixel's time the engine was busy, so the drawn area equals the real busy time at any size.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from trnsim.report.output import atomic_write, output_path

DPI = 100


def palette(n: int) -> list[Any]:
    """``n`` distinct colours: tab10, then the light tab20 shades, then Dark2 and Set1; past
    that, evenly spaced hues (never a repeated colour)."""
    base = (
        list(plt.get_cmap("tab10").colors)
        + list(plt.get_cmap("tab20").colors[1::2])
        + list(plt.get_cmap("Dark2").colors)
        + list(plt.get_cmap("Set1").colors)
    )
    if n <= len(base):
        return base[:n]
    return base + [plt.get_cmap("hsv")(i / (n - len(base))) for i in range(n - len(base))]


def save(fig: Any, path: str | os.PathLike[str], flag: str = "png") -> Path:
    """Write ``fig`` as a PNG at ``path`` whole (checked with ``output_path`` first)."""
    out = output_path(path, flag)
    try:
        return atomic_write(out, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI))
    finally:
        plt.close(fig)


def _bytes_label(x: float, _pos: Any = None) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= scale:
            return f"{x / scale:g} {unit}"
    return f"{x:g} B"


def value_label(v: float) -> str:
    """A bar's figure in plain notation: 4,110 / 632 / 0.427 (three significant digits)."""
    if abs(v) >= 1000:
        return f"{float(f'{v:.3g}'):,.0f}"
    return f"{v:.3g}"


def sweep_chart(results: Sequence[Any], path: str | os.PathLike[str]) -> Path:
    """Bus bandwidth (GB/s) and time (us) against the per-rank size of a collective sweep
    (``results``: ``trnsim.fabric.CollectiveResult``), log-scaled sizes in binary units."""
    sizes = [r.nbytes for r in results]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    ax1.plot(sizes, [r.busbw / 1e9 for r in results], marker="o")
    ax1.set(xlabel="size per rank", ylabel="bus bandwidth (GB/s, decimal)")
    ax1.set_title("bus bandwidth (nccl-tests busbw)")
    ax2.plot(sizes, [r.time_s * 1e6 for r in results], marker="o")
    ax2.set(yscale="log", xlabel="size per rank", ylabel="time (µs)")
    ax2.set_title("time per collective")
    step = max(1, -(-len(sizes) // 8))  # at most 8 labelled sizes
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes[::step])
        ax.xaxis.set_major_formatter(FuncFormatter(_bytes_label))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30)
    r0 = results[0]
    evaluator = "flow simulation" if r0.evaluator == "flow" else "closed form"
    fig.suptitle(f"{r0.op} on {r0.ranks} ranks of {r0.system} ({evaluator})")
    return save(fig, path, "--plot")


def comparison_chart(
    rows: Sequence[Any],
    path: str | os.PathLike[str],
    title: str,
    note: str | None = None,
    slo: Any = None,
) -> Path:
    """Bars of tokens/s per chip, USD per million tokens and joules per token, one bar per
    system (``rows``: ``trnsim.perf.compare.CompareRow``); missing figures are marked n/a.
    Serving rows (with a TTFT) add two latency panels, TTFT (s) and TPOT (ms), each with the
    latency bound ``slo`` (a ``trnsim.perf.slo.ServingSLO``) drawn as a dashed line.

    ``note``: the footnote (what model produced the figures), supplied by the caller, who
    knows; none is drawn without it.
    """
    names = [r.system for r in rows]
    panels = [
        ("throughput", "tokens/s per chip", [r.tokens_per_s_per_chip for r in rows], None),
        ("cost", "USD per million tokens", [r.usd_per_million_tokens for r in rows], None),
        ("energy", "joules per token", [r.joules_per_token for r in rows], None),
    ]
    if any(getattr(r, "ttft_s", None) is not None for r in rows):
        panels += [
            (
                "time to first token",
                "TTFT (s)",
                [r.ttft_s for r in rows],
                slo.ttft_s if slo else None,
            ),
            (
                "time per output token",
                "TPOT (ms)",
                [r.tpot_s * 1e3 if r.tpot_s is not None else None for r in rows],
                slo.tpot_s * 1e3 if slo else None,
            ),
        ]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(4.2 * ncols, 4.6 * nrows),
        layout="constrained",
        squeeze=False,
    )
    flat = list(axes.flat)
    for ax in flat[len(panels) :]:
        ax.set_visible(False)
    colours = palette(len(names))
    for ax, (label, unit, values, bound) in zip(flat, panels, strict=False):
        heights = [v or 0.0 for v in values]
        bars = ax.bar(range(len(names)), heights, color=colours)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.set_ylabel(unit)
        top = max([*heights, bound or 0.0], default=0.0) or 1.0
        ax.set_ylim(0, top * 1.15)
        if bound is not None:
            ax.axhline(bound, color="0.3", linestyle="--", linewidth=1)
            ax.annotate(
                f"bound {value_label(bound)} {unit.split('(')[-1].rstrip(')')}",
                (len(names) - 0.5, bound),
                ha="right",
                va="bottom",
                fontsize=7,
                color="0.3",
            )
        for b, v in zip(bars, values, strict=True):
            ax.annotate(
                "n/a" if not v else value_label(v),
                (b.get_x() + b.get_width() / 2, v or 0.0),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    fig.suptitle(title, fontsize=11)
    if note:
        foot = 0.09 / nrows  # room for a 2-line note
        fig.get_layout_engine().set(rect=(0, foot, 1, 1 - foot))
        fig.text(0.5, 0.01, note, ha="center", va="bottom", fontsize=7, wrap=True)
    return save(fig, path, "--png")


# ---------------------------------------------------------------------------------------------
# Timelines
# ---------------------------------------------------------------------------------------------


def busy_per_pixel(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Busy seconds of the intervals ``[start, end)`` inside each bin of ``edges`` (exact:
    the bins sum to the intervals' total length within ``[edges[0], edges[-1]]``).

    F(x) = sum over intervals of the part before x = sum_{s<x} (x - s) - sum_{e<x} (x - e).
    """
    s = np.sort(np.asarray(start, float))
    e = np.sort(np.asarray(end, float))
    cs = np.concatenate([[0.0], np.cumsum(s)])
    ce = np.concatenate([[0.0], np.cumsum(e)])
    ks = np.searchsorted(s, edges, side="left")
    ke = np.searchsorted(e, edges, side="left")
    f = (ks * edges - cs[ks]) - (ke * edges - ce[ke])
    return np.diff(f)


def family(opcode: str) -> str:
    """The colour group of an opcode (its name: each opcode is its own family)."""
    return opcode


def draw_timeline(profile: Any, order: Sequence[int], width_px: int = 1600) -> Any:
    """A figure of ``profile.schedule``: one row per engine / DMA queue; in each pixel column
    the filled height is the busy fraction of that pixel, stacked by opcode family (drawn
    area = busy time); ``order``: track indices top to bottom. Returns the matplotlib figure
    (the caller writes it)."""
    sched = profile.schedule
    names = list(sched.track_names)
    row_of = {t: r for r, t in enumerate(order)}
    total = profile.total_s or 1.0
    scale = 1e6  # microseconds on the axis
    bins = max(int(width_px * 0.8), 50)
    edges = np.linspace(0.0, total, bins + 1)
    track = np.asarray(sched.track, dtype=np.int64)
    start = np.asarray(sched.start, dtype=float)
    end = np.asarray(sched.end, dtype=float)
    fam_of = [family(ins.opcode.value) for ins in sched.instructions]
    families = sorted(set(fam_of))
    index = {f: i for i, f in enumerate(families)}
    fam = np.fromiter((index[f] for f in fam_of), dtype=np.int64, count=len(fam_of))
    colour = dict(zip(families, palette(len(families)), strict=True))
    # one group of instructions per (track, family), in a single sort
    key = track * len(families) + fam
    by_key = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[by_key], np.arange(len(names) * len(families) + 1))
    height = 0.8
    fig, ax = plt.subplots(figsize=(width_px / DPI, 1.4 + 0.45 * len(order)), dpi=DPI)
    x = edges * scale
    widths = np.diff(edges)
    busy = {}
    for t in order:
        row = row_of[t]
        bottom = np.zeros(bins)
        for i, f in enumerate(families):
            k = t * len(families) + i
            sel = by_key[bounds[k] : bounds[k + 1]]
            if len(sel) == 0:
                continue
            frac = busy_per_pixel(start[sel], end[sel], edges) / widths
            top = np.minimum(bottom + frac, 1.0)
            y0 = row + height / 2 - bottom * height
            y1 = row + height / 2 - top * height
            ax.fill_between(
                x,
                np.append(y0, y0[-1]),
                np.append(y1, y1[-1]),
                step="post",
                color=colour[f],
                linewidth=0,
            )
            bottom = top
        busy[t] = float((bottom * widths).sum())
        ax.axhline(row + height / 2, color="0.85", linewidth=0.5, zorder=0)
    ax.set_yticks(range(len(order)), [f"{names[t]} {busy[t] / total:.1%}" for t in order])
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_xlim(0, total * scale)
    ax.set_xlabel("time (µs)")
    ax.set_title(
        f"{profile.target}: {total * 1e3:.3f} ms, MFU {profile.mfu:.1%} (trnsim timing model)"
        "\nfilled height = busy fraction of each pixel column; row label: busy share of the run",
        fontsize=10,
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[f]) for f in families]
    ax.legend(
        handles,
        families,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=7,
        title="opcode",
        title_fontsize=7,
        frameon=False,
        ncol=1 if len(families) <= 16 else 2,
    )
    return fig


# ---------------------------------------------------------------------------------------------
# trnsim torch-demo: training-loss curves of the numerics study
# ---------------------------------------------------------------------------------------------


def loss_curves(
    curves: dict[str, Sequence[float]],
    path: str | os.PathLike[str],
    title: str = "training loss",
    window: int = 10,
) -> Path:
    """One line per run: the loss at each step, smoothed by a trailing mean over ``window``
    steps (the raw points are drawn faintly underneath)."""
    fig, ax = plt.subplots(figsize=(9, 5))
    for (name, ys), colour in zip(curves.items(), palette(len(curves)), strict=True):
        y = np.asarray(ys, dtype=float)
        x = np.arange(1, len(y) + 1)
        ax.plot(x, y, color=colour, alpha=0.15, linewidth=0.8)
        w = max(1, min(window, len(y)))
        smooth = np.convolve(y, np.ones(w) / w, mode="valid")
        ax.plot(x[w - 1 :], smooth, color=colour, linewidth=1.6, label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss (nats per character)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return save(fig, path, "png")


def microbench_chart(results: Sequence[Any], path: str | os.PathLike[str]) -> Path:
    """One panel per benchmark (``trnsim.perf.microbench.MicroResult``): GEMM TFLOP/s against
    size, one line per target and dtype; STREAM TB/s and attention TFLOP/s as bars; published
    measurements as black marks."""
    benches = [b for b in ("gemm", "stream", "attention") if any(r.bench == b for r in results)]
    fig, axes = plt.subplots(
        1, len(benches), figsize=(4.6 * len(benches), 4.2), layout="constrained", squeeze=False
    )
    for ax, bench in zip(axes[0], benches, strict=True):
        mine = [r for r in results if r.bench == bench]
        scale, unit = (1e12, "TB/s") if bench == "stream" else (1e12, "TFLOP/s")
        if bench == "gemm":
            keys = list(dict.fromkeys((r.target, r.dtype) for r in mine))
            for colour, key in zip(palette(len(keys)), keys, strict=True):
                pts = sorted(
                    (int(r.shape.split("x")[0]), r.rate / scale, r) for r in mine
                    if (r.target, r.dtype) == key
                )  # fmt: skip
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colour,
                        label=f"{key[0]} {key[1]}")  # fmt: skip
                for x, _, r in pts:
                    if r.published:
                        ax.plot([x], [r.published.value / scale], "k_", markersize=14)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("M = N = K")
            ax.legend(fontsize=7)
        else:
            names = [r.target for r in mine]
            bars = ax.bar(range(len(mine)), [r.rate / scale for r in mine],
                          color=palette(len(mine)))  # fmt: skip
            ax.set_xticks(range(len(mine)), names, rotation=30, ha="right", fontsize=8)
            for b, r in zip(bars, mine, strict=True):
                ax.annotate(value_label(r.rate / scale),
                            (b.get_x() + b.get_width() / 2, r.rate / scale),
                            ha="center", va="bottom", fontsize=7)  # fmt: skip
                if r.published:
                    ax.plot([b.get_x() + b.get_width() / 2], [r.published.value / scale], "k_",
                            markersize=18)  # fmt: skip
        ax.set_title(bench if bench != "gemm" else "GEMM", fontsize=10)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
    fig.suptitle("single-chip microbenchmarks (black marks: published measurements)", fontsize=11)
    return save(fig, path, "--png")
