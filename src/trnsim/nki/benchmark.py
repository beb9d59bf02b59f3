"""``benchmark`` / ``profile_kernel``: run an NKI kernel in timing-only mode and time it.

The ``nki.benchmark``-style entry points. The kernel runs through ``trnsim.nki.run`` with
``functional=False`` (the rules are checked and the instruction stream is recorded, no data
moves), then ``trnsim.core.timing.schedule`` times the stream on the target generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trnsim.core.instruction import Instruction
from trnsim.core.profile import Profile
from trnsim.core.timing import schedule
from trnsim.hw import CoreSpec
from trnsim.nki.simulate import record_run, resolve_target, run


def _target_name(target: str | CoreSpec) -> str | CoreSpec:
    return resolve_target(target) if isinstance(target, str) else target


def record(
    kernel: Callable[..., Any],
    *arrays: Any,
    target: str | CoreSpec = "gen4",
    timing_only: bool = True,
    **kwargs: Any,
) -> list[Instruction]:
    """Run ``kernel`` (an ``@nki.jit`` kernel or a plain function) and return its instruction
    stream (every core's, for LNC=2). ``timing_only`` skips the data."""
    tgt = _target_name(target)
    name = tgt.name if isinstance(tgt, CoreSpec) else tgt
    if timing_only:
        return record_run(kernel, *arrays, target=name, **kwargs).instructions
    res = run(kernel, *arrays, target=name, **kwargs)
    return res.instructions


def profile_kernel(
    kernel: Callable[..., Any],
    *arrays: Any,
    target: str | CoreSpec = "gen4",
    timing_only: bool = True,
    active_cores: int | None = None,
    **kwargs: Any,
) -> Profile:
    """Run ``kernel`` on ``arrays`` and return its ``Profile`` on ``target``."""
    tgt = _target_name(target)
    instrs = record(kernel, *arrays, target=tgt, timing_only=timing_only, **kwargs)
    return schedule(instrs, tgt, active_cores=active_cores)


def benchmark(
    kernel: Callable[..., Any], *arrays: Any, target: str | CoreSpec = "gen4", **kwargs: Any
) -> float:
    """Modelled latency of ``kernel`` on ``arrays`` in seconds (``nki.benchmark``-style; AWS's
    reports microseconds percentiles from hardware, this is one deterministic estimate)."""
    return profile_kernel(kernel, *arrays, target=target, **kwargs).total_s
