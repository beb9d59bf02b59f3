"""Charts: per-pixel timelines draw busy time exactly, distinct colours, legends outside the
data, no label over the footnote, PNGs written whole with mode 0644."""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest

from trnsim.report.plots import (
    busy_per_pixel,
    comparison_chart,
    draw_timeline,
    palette,
    sweep_chart,
)


def test_busy_per_pixel_matches_brute_force():
    rng = np.random.default_rng(0)
    start = np.sort(rng.uniform(0, 1, 300))
    end = start + rng.uniform(0, 0.004, 300)  # many intervals shorter than a bin
    edges = np.linspace(0, 1.01, 97)
    got = busy_per_pixel(start, end, edges)
    want = [np.clip(np.minimum(end, b) - np.maximum(start, a), 0, None).sum()
            for a, b in itertools.pairwise(edges)]  # fmt: skip
    assert got == pytest.approx(want, abs=1e-12)
    assert got.sum() == pytest.approx((end - start).sum(), rel=1e-12)


def _profile(n_ops: int = 12, per_track: int = 3000, seed: int = 1):
    """A schedule of short instructions at ~11% duty on one row (many per pixel)."""
    rng = np.random.default_rng(seed)
    ops = [f"op{i:02d}" for i in range(n_ops)]
    instr, start, end, track = [], [], [], []
    for t in range(2):
        t0 = 0.0
        for _ in range(per_track):
            dur = 1e-9 * rng.uniform(1, 3)
            gap = dur * (8 if t == 0 else 0.2)
            instr.append(SimpleNamespace(opcode=SimpleNamespace(value=ops[rng.integers(n_ops)])))
            start.append(t0)
            end.append(t0 + dur)
            track.append(t)
            t0 += dur + gap
    total = max(end)
    sched = SimpleNamespace(instructions=instr, start=start, end=end, track=track,
                            track_names=["tensor", "vector"])  # fmt: skip
    return SimpleNamespace(schedule=sched, total_s=total, target="test", mfu=0.1), ops


def _polygon_area(v: np.ndarray) -> float:
    x, y = v[:, 0], v[:, 1]
    return 0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1)))


def test_timeline_drawn_area_is_busy_time_and_colours_are_distinct():
    prof, ops = _profile()
    fig = draw_timeline(prof, [0, 1], width_px=800)
    ax = fig.axes[0]
    area = {0: 0.0, 1: 0.0}
    for coll in ax.collections:
        for path in coll.get_paths():
            v = path.vertices
            area[round(v[:, 1].mean())] += _polygon_area(v) / 0.8 * 1e-6
    sched = prof.schedule
    for t in (0, 1):
        busy = sum(e - s for e, s, k in zip(sched.end, sched.start, sched.track, strict=True)
                   if k == t)  # fmt: skip
        assert area[t] == pytest.approx(busy, rel=1e-6)
    assert area[0] < 0.2 * prof.total_s  # 11 % duty is not drawn as a solid bar
    legend = ax.get_legend()
    colours = {tuple(h.get_facecolor()) for h in legend.legend_handles}
    assert len(colours) == len(ops) == 12
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    assert not legend.get_window_extent(r).overlaps(ax.get_window_extent(r))
    plt.close(fig)


def test_palette_never_repeats():
    for n in (10, 12, 30, 60):
        assert len({tuple(c) for c in palette(n)}) == n


def _rows():
    mk = SimpleNamespace
    return [mk(system=f"trn3-gen2-ultraserver-{i}", tokens_per_s_per_chip=4110.0 - i,
               usd_per_million_tokens=0.1 + i, joules_per_token=None if i else 0.3)
            for i in range(5)]  # fmt: skip


def test_comparison_chart_footnote_clear_of_labels(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr("trnsim.report.plots.plt.close", lambda fig: saved.setdefault("f", fig))
    out = comparison_chart(_rows(), tmp_path / "c.png", "title", note="model: a stated model")
    fig = saved["f"]
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    note = next(t for t in fig.texts if t.get_text() == "model: a stated model")
    nb = note.get_window_extent(r)
    for ax in fig.axes:
        for label in ax.get_xticklabels():
            assert not label.get_window_extent(r).overlaps(nb)
    assert os.stat(out).st_mode & 0o777 == 0o644
    assert sorted(os.listdir(tmp_path)) == ["c.png"]


def test_sweep_chart_writes_png_whole(tmp_path):
    r = [
        SimpleNamespace(nbytes=2.0**k, busbw=1e9 * k, time_s=1e-5 * k, op="all-reduce", ranks=8,
                        system="s", evaluator="closed")
        for k in range(10, 31, 2)
    ]  # fmt: skip
    out = sweep_chart(r, tmp_path / "s.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.stat(out).st_mode & 0o777 == 0o644
    assert sorted(os.listdir(tmp_path)) == ["s.png"]
