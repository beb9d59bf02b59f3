"""Serving runs as pictures: a Perfetto trace of steps and requests, and latency against
throughput over a load sweep with several systems on one chart.

Trace: one process per replica; its "steps" track holds a slice per step (a run of ``k``
identical decode steps is one slice, ``args.steps = k``), named prefill, decode or mixed, with
the sequences, tokens and padded tokens in ``args``; each request is an async slice from
arrival to finish with an instant at its first token (``ts`` in microseconds). Up to the log's
caps; ``otherData`` says how many were left out. Written whole (temp file + rename).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trnsim.report.output import atomic_write, output_path

US = 1e6


def serving_trace_events(res: Any) -> dict[str, Any]:
    log = res.trace
    if log is None:
        raise ValueError("this run kept no trace (pass trace=TraceLog(...) to simulate)")
    events: list[dict[str, Any]] = []
    replicas = sorted({s[0] for s in log.steps} | {r[1] for r in log.requests})
    for rep in replicas:
        events.append(
            {"name": "process_name", "ph": "M", "pid": rep, "args": {"name": f"replica {rep}"}}
        )
        events.append(
            {"name": "thread_name", "ph": "M", "pid": rep, "tid": 0, "args": {"name": "steps"}}
        )
        events.append(
            {"name": "thread_name", "ph": "M", "pid": rep, "tid": 1, "args": {"name": "requests"}}
        )
    for rep, start, end, kind, k, seqs, real, padded in log.steps:
        events.append(
            {
                "name": kind if k == 1 else f"{kind} x{k}",
                "cat": "step",
                "ph": "X",
                "pid": rep,
                "tid": 0,
                "ts": start * US,
                "dur": (end - start) * US,
                "args": {"steps": k, "sequences": seqs, "tokens": real, "padded_tokens": padded},
            }
        )
    for rid, rep, arrival, scheduled, first, finish, prompt, output in log.requests:
        common = {"cat": "request", "id": rid, "pid": rep, "tid": 1}
        events.append(
            {
                **common,
                "name": f"request {rid}",
                "ph": "b",
                "ts": arrival * US,
                "args": {
                    "input_tokens": prompt,
                    "output_tokens": output,
                    "queue_s": scheduled - arrival,
                    "ttft_s": first - arrival,
                },
            }
        )
        events.append({**common, "name": "first token", "ph": "n", "ts": first * US})
        events.append({**common, "name": f"request {rid}", "ph": "e", "ts": finish * US})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "deployment": res.deployment.describe(),
            "workload": res.workload,
            "steps_left_out": log.dropped_steps,
            "requests_left_out": log.dropped_requests,
        },
    }


def write_serving_trace(res: Any, path: str | os.PathLike[str]) -> Path:
    data = serving_trace_events(res)

    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, separators=(",", ":"), allow_nan=False)

    return atomic_write(output_path(path, "--perfetto"), write)


def latency_throughput_chart(
    curves: Sequence[tuple[Any, Any, Sequence[tuple[float, Any]]]],
    path: str | os.PathLike[str],
    load: str,
    lengths: Any,
) -> Path:
    """Two panels, one line per system: p99 TTFT and p50 TPOT (ms, log scale) against output
    tokens/s per chip; each point is one load (rate or concurrency) of the sweep."""
    from matplotlib.ticker import FuncFormatter

    from trnsim.report.plots import palette, plt, save

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    colours = palette(len(curves))
    for (sysm, _dep, pts), colour in zip(curves, colours, strict=True):
        xs = [r.output_tokens_per_s / r.chips for _x, r in pts]
        ttft = [(r.metrics.ttft.quantile(0.99) or 0) * 1e3 for _x, r in pts]
        tpot = [(r.metrics.tpot.quantile(0.5) or 0) * 1e3 for _x, r in pts]
        for ax, ys in zip(axes, (ttft, tpot), strict=True):
            ax.plot(xs, ys, marker="o", color=colour, label=sysm.name)
    axes[0].set(ylabel="TTFT p99 (ms)", yscale="log")
    axes[1].set(ylabel="TPOT p50 (ms)", yscale="log")
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in axes:
        ax.set_xlabel("output tokens/s per chip")
        ax.grid(True, which="both", alpha=0.3)
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig.suptitle(f"latency vs throughput, {load} sweep; {lengths.describe()}", fontsize=10)
    return save(fig, path, "--plot")
