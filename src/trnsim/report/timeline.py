"""A PNG timeline of a timed kernel: one row per engine / DMA queue, one bar per instruction.

Drawn per pixel (``trnsim.report.plots.draw_timeline``): a pixel column's filled height is the
fraction of its time the engine was busy, stacked by opcode, so drawn area equals busy time.
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
    from trnsim.report.plots import draw_timeline

    fig = draw_timeline(profile, order, width_px)
    fig.tight_layout()
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)
