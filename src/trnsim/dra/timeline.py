"""The fleet over time as a figure: busy devices per UltraServer (or per group of standalone
nodes) as a heat map, and below it the fleet's utilisation and the queue length."""

from __future__ import annotations

from typing import Any

import numpy as np

from trnsim.dra.sim import SimResult
from trnsim.dra.state import FleetState

MAX_ROWS = 400
BINS = 300


def occupancy(result: SimResult, state: FleetState, bins: int = BINS):
    """(edges, rows x bins busy fraction, row labels): rows are UltraServers, then standalone
    nodes in groups; at most ``MAX_ROWS`` rows (neighbours merged)."""
    t = result.series["t"]
    t0, t1 = (float(t[0]), float(t[-1])) if len(t) else (0.0, 1.0)
    if t1 <= t0:
        t1 = t0 + 1.0
    edges = np.linspace(t0, t1, bins + 1)
    row_of = np.where(state.node_us >= 0, state.node_us, -1)
    n_us = state.n_us
    standalone = np.flatnonzero(row_of < 0)
    per_row = (
        max(1, int(np.ceil(len(standalone) / max(1, MAX_ROWS - n_us)))) if len(standalone) else 1
    )
    row_of = row_of.copy()
    row_of[standalone] = n_us + np.arange(len(standalone)) // per_row
    rows = int(row_of.max()) + 1
    cap = np.bincount(row_of, weights=state.devices, minlength=rows)
    busy = np.zeros((rows, bins))
    width = edges[1] - edges[0]
    for rec in result.records:
        for start, end, p in rec.history:
            lo = np.clip((start - t0) / width, 0, bins)
            hi = np.clip((end - t0) / width, 0, bins)
            if hi <= lo:
                continue
            cover = np.clip(
                np.minimum(np.arange(1, bins + 1), hi) - np.maximum(np.arange(bins), lo), 0, 1
            )
            for node, devs in zip(p.nodes, p.devices, strict=True):
                busy[row_of[node]] += len(devs) * cover
    frac = busy / np.maximum(cap, 1)[:, None]
    merge = int(np.ceil(rows / MAX_ROWS))
    if merge > 1:
        pad = (-rows) % merge
        frac = np.vstack([frac, np.zeros((pad, bins))]).reshape(-1, merge, bins).mean(axis=1)
    label = "UltraServers" if n_us else "nodes"
    if n_us and len(standalone):
        label = "UltraServers, then standalone nodes"
    return edges, frac, label


def figure(result: SimResult, state: FleetState) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges, frac, label = occupancy(result, state)
    scale, unit = (3600.0, "h") if edges[-1] - edges[0] > 7200 else (1.0, "s")
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]}
    )
    im = ax.imshow(
        frac,
        aspect="auto",
        origin="lower",
        interpolation="nearest",
        extent=(edges[0] / scale, edges[-1] / scale, 0, frac.shape[0]),
        vmin=0,
        vmax=1,
        cmap="viridis",
    )
    ax.set_ylabel(label)
    ax.set_title(f"{result.fleet}: policy {result.policy}")
    fig.colorbar(im, ax=ax, label="busy fraction")
    t = result.series["t"] / scale
    usable = max(state.usable_devices(), 1)
    ax2.step(t, result.series["busy"] / usable, where="post", color="tab:blue", label="busy")
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("utilisation")
    ax3 = ax2.twinx()
    ax3.step(t, result.series["queue"], where="post", color="tab:red", label="queue")
    ax3.set_ylabel("jobs queued", color="tab:red")
    ax2.set_xlabel(f"time ({unit})")
    fig.tight_layout()
    return fig
