"""Perfetto / Chrome trace JSON of a timed kernel: one track per engine and DMA queue.

Open the file in https://ui.perfetto.dev or chrome://tracing. Each instruction is a complete
("X") slice named by its opcode, with its source line and operands in ``args``. Times are in
microseconds (the trace format's unit). The file is written whole (temp file + rename).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trnsim.core.profile import Profile
from trnsim.errors import ConfigError
from trnsim.report.output import atomic_write, output_path

_ORDER = ("tensor", "vector", "scalar", "gpsimd", "sync")


def _track_sort_key(name: str) -> tuple[int, str]:
    base = name.rsplit(".", 1)[-1] if ".dma." not in name and not name.startswith("dma.") else ""
    if base in _ORDER:
        return (_ORDER.index(base), name)
    q = name.rsplit("q", 1)[-1]
    return (len(_ORDER) + (int(q) if q.isdigit() else 99), name)


def trace_events(profile: Profile, max_slices: int | None = None) -> dict[str, Any]:
    """The trace as a dict (``traceEvents`` plus metadata)."""
    sched = profile.schedule
    if sched is None:
        raise ConfigError("this profile has no schedule (was it built by trnsim.core.timing?)")
    names = sched.track_names
    order = sorted(range(len(names)), key=lambda t: _track_sort_key(names[t]))
    tid_of = {t: i for i, t in enumerate(order)}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": profile.target}},
    ]
    for t in order:
        events.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": 0,
                "tid": tid_of[t],
                "args": {"name": names[t]},
            }
        )
        events.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": 0,
                "tid": tid_of[t],
                "args": {"sort_index": tid_of[t]},
            }
        )
    n = len(sched.instructions) if max_slices is None else min(max_slices, len(sched.instructions))
    for i in range(n):
        ins = sched.instructions[i]
        events.append(
            {
                "name": ins.opcode.value,
                "cat": ins.engine.value,
                "ph": "X",
                "pid": 0,
                "tid": tid_of[sched.track[i]],
                "ts": sched.start[i] * 1e6,
                "dur": (sched.end[i] - sched.start[i]) * 1e6,
                "args": {"loc": f"{ins.file}:{ins.line}", "index": i, "instr": str(ins)},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "target": profile.target,
            "total_s": profile.total_s,
            "mfu": profile.mfu,
            "truncated": n < len(sched.instructions),
        },
    }


def write_trace(profile: Profile, path: str | Path, max_slices: int | None = None) -> Path:
    """Write the trace JSON to ``path`` whole (``trnsim.report.output.atomic_write``)."""
    data = trace_events(profile, max_slices)

    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, separators=(",", ":"), allow_nan=False)

    return atomic_write(output_path(path, "trace"), write)
