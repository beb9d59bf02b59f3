"""``benchmark`` / ``profile_kernel``: run an NKI kernel in timing-only mode and time it.

The ``nki.benchmark``-style entry points. The kernel runs through ``trnsim.nki.run`` with
``functional=False`` (the rules are checked and the instruction stream is recorded, no data
moves), then ``trnsim.core.timing.schedule`` times the stream on the target generation.

Layering note: the kernel front end (``trnsim.nki``) sits above ``core``; it is imported lazily
inside the functions, so importing ``trnsim.core`` never pulls in the front end.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from trnsim.core.instruction import Instruction
from trnsim.core.profile import Profile
from trnsim.core.timing import schedule
from trnsim.errors import ConfigError
from trnsim.hw import CoreSpec

_TARGETS = {"trn1": "gen2", "trn2": "gen3", "trn3": "gen4"}


def _target_name(target: str | CoreSpec) -> str | CoreSpec:
    if isinstance(target, str):
        return _TARGETS.get(target.lower(), target)
    return target


def record(
    kernel: Callable[..., Any],
    *arrays: Any,
    target: str | CoreSpec = "gen4",
    timing_only: bool = True,
    **kwargs: Any,
) -> list[Instruction]:
    """Run ``kernel`` (an ``@nki.jit`` kernel or a plain function) and return its instruction
    stream (every core's, for LNC=2). ``timing_only`` skips the data."""
    from trnsim import nki

    tgt = _target_name(target)
    name = tgt.name if isinstance(tgt, CoreSpec) else tgt
    res = nki.run(kernel, *arrays, target=name, functional=not timing_only, **kwargs)
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


def load_kernel_file(path: str | Path) -> ModuleType:
    """Import a kernel file as a module (``nki`` imports resolve to trnsim's front end)."""
    from trnsim import nki

    nki.install()
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"kernel file {str(p)!r} does not exist")
    name = f"_trnsim_kernel_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import kernel file {str(p)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
