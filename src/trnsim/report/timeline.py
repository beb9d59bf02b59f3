"""A PNG timeline of a timed kernel: one row per engine / DMA queue, one bar per instruction.

Bars are coloured by opcode. With many instructions, adjacent bars of a row closer than a pixel
are merged (``broken_barh`` per row), so 10^5-instruction kernels still draw in seconds.
"""

from __future__ import annotations

from pathlib import Path

from trnsim.core.profile import Profile
from trnsim.errors import ConfigError
from trnsim.report.output import atomic_write, output_path
from trnsim.report.perfetto import _track_sort_key


def write_timeline(profile: Profile, path: str | Path, width_px: int = 1600) -> Path:
    """Draw the schedule to a PNG at ``path`` (written whole); returns the path."""
    path = output_path(path, "png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sched = profile.schedule
    if sched is None:
        raise ConfigError("this profile has no schedule to draw")
    names = sched.track_names
    order = sorted(range(len(names)), key=lambda t: _track_sort_key(names[t]))
    row_of = {t: r for r, t in enumerate(order)}
    total = profile.total_s or 1.0
    scale = 1e6  # microseconds on the axis
    pixel = total / width_px
    opcodes = sorted({ins.opcode.value for ins in sched.instructions})
    cmap = plt.get_cmap("tab10")
    colour = {op: cmap(i % 10) for i, op in enumerate(opcodes)}
    # merge bars per (row, opcode) closer than a pixel
    bars: dict[tuple[int, str], list[list[float]]] = {}
    for i, ins in enumerate(sched.instructions):
        key = (row_of[sched.track[i]], ins.opcode.value)
        s, e = sched.start[i], sched.end[i]
        lst = bars.setdefault(key, [])
        if lst and s - lst[-1][1] < pixel and s >= lst[-1][0]:
            lst[-1][1] = max(lst[-1][1], e)
        else:
            lst.append([s, e])
    fig, ax = plt.subplots(figsize=(width_px / 100, 1.0 + 0.35 * len(order)), dpi=100)
    for (row, op), spans in bars.items():
        ax.broken_barh(
            [(s * scale, max((e - s), pixel) * scale) for s, e in spans],
            (row - 0.4, 0.8),
            facecolors=colour[op],
        )
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([names[t] for t in order])
    ax.invert_yaxis()
    ax.set_xlim(0, total * scale)
    ax.set_xlabel("time (us)")
    ax.set_title(
        f"{profile.target}: {total * 1e3:.3f} ms, MFU {profile.mfu:.1%} (trnsim timing model)"
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[op]) for op in opcodes]
    ax.legend(handles, opcodes, loc="upper right", fontsize=7, ncol=min(4, len(opcodes)))
    fig.tight_layout()
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)
