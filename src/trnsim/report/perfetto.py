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


# ---------------------------------------------------------------------------------------------
# the layered profile of a PyTorch run (trnsim.torch): module / ATen op / kernel / instructions
# ---------------------------------------------------------------------------------------------

LAYERS = ("phase", "module", "aten op", "kernel")


def layered_trace_events(profile: Any, max_instructions: int = 200_000) -> dict[str, Any]:
    """A ``trnsim.torch.profile.Profile`` as trace JSON: tracks ``phase`` (forward / backward),
    ``module`` (nested slices, one level per component of the module's qualified name),
    ``aten op`` (one slice per op), ``kernel`` (the kernel each op ran in: a high-level
    function's kernel, a fused group, a matmul kernel) and one track per engine for the
    instructions of ops timed by running an NKI kernel (scaled into the op's slice)."""
    records = profile.records
    starts = profile.starts()
    tid = {name: i for i, name in enumerate(LAYERS)}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": profile.device}}
    ]

    def track(name: str) -> int:
        if name not in tid:
            tid[name] = len(tid)
        return tid[name]

    def span(name: str, t: int, start: float, dur: float, args: dict[str, Any]) -> None:
        events.append(
            {
                "name": name,
                "ph": "X",
                "pid": 0,
                "tid": t,
                "ts": start * 1e6,
                "dur": max(dur, 0.0) * 1e6,
                "args": args,
            }
        )

    def runs(key: Any) -> list[tuple[Any, float, float]]:
        out: list[tuple[Any, float, float]] = []
        for r, s in zip(records, starts, strict=True):
            k = key(r)
            if out and out[-1][0] == k and k is not None:
                out[-1] = (k, out[-1][1], s + r.seconds)
            else:
                out.append((k, s, s + r.seconds))
        return [o for o in out if o[0] is not None and o[2] > o[1]]

    for ph, s, e in runs(lambda r: r.phase):
        span(ph, tid["phase"], s, e - s, {})
    depth = max((r.module.count(".") + 1 for r in records if r.module), default=0)
    for d in range(1, depth + 1):
        for mod, s, e in runs(
            lambda r, d=d: (
                ".".join(r.module.split(".")[:d]) if r.module.count(".") + 1 >= d else None
            )
        ):
            span(mod.rsplit(".", 1)[-1] if d > 1 else mod, tid["module"], s, e - s, {"module": mod})
    for r, s in zip(records, starts, strict=True):
        if r.seconds <= 0:
            continue
        args = {
            "module": r.module,
            "kind": r.kind,
            "flops": r.flops,
            "bytes": r.bytes,
            "dtype": r.dtype,
            "source": r.source,
        }
        if r.mmk:
            args["shape"] = "x".join(str(x) for x in r.mmk)
        span(r.op, tid["aten op"], s, r.seconds, args)
    for k, s, e in runs(lambda r: (r.group, r.kernel) if r.kernel else None):
        span(k[1], tid["kernel"], s, e - s, {"group": k[0]})
    placed = 0
    for r, s in zip(records, starts, strict=True):
        if not r.instructions or placed >= max_instructions:
            continue
        end = max(i[3] for i in r.instructions)
        scale = min(1.0, r.seconds / end) if end > 0 else 1.0
        for engine, opcode, i0, i1 in r.instructions:
            span(opcode, track(f"engine {engine}"), s + i0 * scale, (i1 - i0) * scale, {})
            placed += 1
    for name, t in tid.items():
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": t, "args": {"name": name}}
        )
        events.append(
            {"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": t, "args": {"sort_index": t}}
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"device": profile.device, "total_s": profile.total_s},
    }


def write_layered_trace(profile: Any, path: str | Path) -> Path:
    """Write ``layered_trace_events(profile)`` to ``path`` whole."""
    data = layered_trace_events(profile)

    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, separators=(",", ":"), allow_nan=False)

    return atomic_write(output_path(path, "trace"), write)
