"""``benchmark`` / ``profile_kernel``: run an NKI kernel in timing-only mode and time it.

The ``nki.benchmark``-style entry points. The kernel runs through ``trnsim.nki.run`` with
``functional=False`` (the rules are checked and the instruction stream is recorded, no data
moves), then ``trnsim.core.timing.schedule`` times the stream on the target generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim.core.instruction import Instruction
from trnsim.core.profile import Profile
from trnsim.core.timing import schedule
from trnsim.errors import UsageError
from trnsim.hw import CoreSpec
from trnsim.nki.simulate import record_run, resolve_target, run


def _target_name(target: str | CoreSpec | None, where: str) -> str | CoreSpec:
    """``target`` as a generation name or a ``CoreSpec`` (None: the default, as ``run``)."""
    if target is None or isinstance(target, str):
        return resolve_target(target)
    if isinstance(target, CoreSpec):
        return target
    raise UsageError(
        f"trnsim.nki.benchmark.{where}: target={target!r:.60} must be a generation name "
        "(gen2, gen3, gen4, trn1, trn2, trn3), a core preset name or a CoreSpec"
    )


def check_active_cores(target: str | CoreSpec, active_cores: Any, said: str = "") -> None:
    """``active_cores`` must be None or a whole number in 1..the cores of the target's chip;
    ``said``: how the caller names the value (default ``active_cores=<value>``)."""
    if active_cores is None:
        return
    from trnsim.core.calibration import chip_of
    from trnsim.hw import core

    spec = target if isinstance(target, CoreSpec) else core(resolve_target(target))
    chip = chip_of(spec)
    ok = isinstance(active_cores, int | np.integer) and not isinstance(active_cores, bool)
    if not ok or not 1 <= active_cores <= chip.cores:
        raise UsageError(
            f"{said or f'active_cores={active_cores!r:.40}'}: {chip.name} has {chip.cores} "
            f"NeuronCores (must be a whole number 1..{chip.cores})"
        )


def _check_flag(value: Any, name: str, where: str) -> None:
    if not isinstance(value, bool | np.bool_):
        raise UsageError(
            f"trnsim.nki.benchmark.{where}: {name}={value!r:.40} must be True or False"
        )


def record(
    kernel: Callable[..., Any],
    *arrays: Any,
    target: str | CoreSpec | None = "gen4",
    timing_only: bool = True,
    **kwargs: Any,
) -> list[Instruction]:
    """Run ``kernel`` (an ``@nki.jit`` kernel or a plain function) and return its instruction
    stream (every core's, for LNC=2). ``timing_only`` skips the data."""
    _check_flag(timing_only, "timing_only", "record")
    tgt = _target_name(target, "record")
    name = tgt.name if isinstance(tgt, CoreSpec) else tgt
    if timing_only:
        return record_run(kernel, *arrays, target=name, **kwargs).instructions
    res = run(kernel, *arrays, target=name, **kwargs)
    return res.instructions


def profile_kernel(
    kernel: Callable[..., Any],
    *arrays: Any,
    target: str | CoreSpec | None = "gen4",
    timing_only: bool = True,
    active_cores: int | None = None,
    **kwargs: Any,
) -> Profile:
    """Run ``kernel`` on ``arrays`` and return its ``Profile`` on ``target``."""
    tgt = _target_name(target, "profile_kernel")
    check_active_cores(tgt, active_cores)
    instrs = record(kernel, *arrays, target=tgt, timing_only=timing_only, **kwargs)
    return schedule(instrs, tgt, active_cores=active_cores)


def benchmark(
    kernel: Callable[..., Any],
    *arrays: Any,
    target: str | CoreSpec | None = "gen4",
    **kwargs: Any,
) -> float:
    """Modelled latency of ``kernel`` on ``arrays`` in seconds (``nki.benchmark``-style; AWS's
    reports microseconds percentiles from hardware, this is one deterministic estimate)."""
    return profile_kernel(kernel, *arrays, target=target, **kwargs).total_s
