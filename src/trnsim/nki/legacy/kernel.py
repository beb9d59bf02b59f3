"""Legacy kernels: ``@nki.jit(mode=...)``, ``nki.baremetal``, ``nki.trace``, ``simulate_kernel``
and SPMD grids ``kernel[g0, g1](...)``.

A ``LegacyKernel`` is a ``trnsim.nki.simulate.Kernel`` whose function runs the grid's programs
assigned to its core (``grid.py``): every tool that runs new-API kernels (``trnsim run`` /
``profile``, ``trnsim.nki.run``, ``trnsim.nki.benchmark``) runs legacy kernels the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from trnsim.core.location import fail
from trnsim.core.memory import View
from trnsim.nki import language as new_nl
from trnsim.nki.context import current, current_or_none
from trnsim.nki.legacy import grid as _grid
from trnsim.nki.legacy.allocator import Allocator
from trnsim.nki.legacy.tile import as_tile, discard, flush
from trnsim.nki.legacy.typing import TensorPlaceholder
from trnsim.nki.simulate import Kernel, run

MODES = ("auto", "simulation", "baremetal", "benchmark", "profile", "trace", "jax", "torch")
"""``@nki.jit(mode=...)`` values; every mode runs the kernel on the emulator (``jax`` /
``torch`` take NumPy arrays here: no framework is involved)."""


def _program_runner(fn: Callable[..., Any], grid: _grid.Grid) -> Callable[..., Any]:
    @functools.wraps(fn)
    def programs(*args: Any, **kwargs: Any) -> Any:
        prog = current()
        core = prog.program_id
        alloc = Allocator(prog.core, prog.launch)  # the compiler's memory model (allocator.py)
        args = tuple(_argument(a, i) for i, a in enumerate(args))
        kwargs = {k: _argument(v, k) for k, v in kwargs.items()}
        first: Any = None
        ran = False
        try:
            for pid in grid.programs():
                if grid.core_of(pid) != core:
                    continue
                _grid.state.pid, _grid.state.grid, _grid.state.shared_seq = pid, grid, 0
                discard()
                try:
                    out = fn(*args, **kwargs)
                    flush()
                finally:
                    discard()
                if not ran:
                    first, ran = out, True
            alloc.finish()
        finally:
            prog.core.observer = None
            _grid.state.pid, _grid.state.grid = (), None
        return first

    return programs


def _argument(a: Any, key: Any) -> Any:
    """A kernel argument as a legacy tensor; a shape placeholder (``nt.tensor[shape, dtype]``)
    becomes an HBM tensor without data, the same one for every program of the launch."""
    if isinstance(a, View):
        return as_tile(a)
    if isinstance(a, TensorPlaceholder):
        prog = current()
        with prog.launch.lock:
            t = prog.launch.mailbox.get(("legacy-arg", key))
            if t is None:
                t = prog.launch.mailbox[("legacy-arg", key)] = new_nl.ndarray(
                    a.shape, a.dtype, new_nl.shared_hbm, name=f"arg{key}"
                )
        return as_tile(t)
    return a


class LegacyKernel(Kernel):
    """A legacy ``@nki.jit`` kernel; ``kernel[g0, g1, ...]`` is a launch on an SPMD grid."""

    def __init__(
        self, fn: Callable[..., Any], grid: _grid.Grid | None = None, **options: Any
    ) -> None:
        if isinstance(fn, LegacyKernel):
            options = {**fn.options, **options}
            fn = fn.legacy_fn
        mode = options.get("mode", "auto")
        if mode not in MODES:
            raise fail("jit-mode", f"@nki.jit mode {mode!r} not in {list(MODES)}")
        self.legacy_fn = fn
        self.grid = grid or _grid.Grid((1,))
        super().__init__(_program_runner(fn, self.grid), self.grid.cores, **options)
        self.__wrapped__ = fn

    def __getitem__(self, key: Any) -> LegacyKernel:
        return LegacyKernel(self.legacy_fn, _grid.parse(key), **self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_or_none() is not None and _grid.state.grid is not None:
            # called from inside a running legacy kernel: the compiler traces a jit helper
            # into its caller (one kernel), so it runs inline, on the caller's core and tiles
            return self.legacy_fn(*args, **kwargs)
        return run(
            self, *_numpy_args(args), target=self.options.get("platform_target"), **kwargs
        ).outputs


def _numpy_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """NumPy ``bool`` arrays as uint8 views of the same bytes (``nl.bool_`` is uint8)."""
    return tuple(a.view(np.uint8) if isinstance(a, np.ndarray) and a.dtype == bool else a
                 for a in args)  # fmt: skip


def jit(func: Callable[..., Any] | None = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``@nki.jit`` / ``@nki.jit(mode=..., platform_target=...)``."""
    if func is None:
        return lambda f: LegacyKernel(f, mode=mode, **kwargs)
    return LegacyKernel(func, mode=mode, **kwargs)


def baremetal(kernel: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.baremetal``: NumPy in, NumPy out (compile options have no effect here)."""
    return jit(kernel, mode="baremetal", **kwargs)


def trace(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """``@nki.trace``: a kernel for ``simulate_kernel`` (or a framework) to run."""
    return jit(func, mode="trace", **kwargs)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``kernel`` on NumPy arrays; returns its outputs and writes back arrays it stored
    into (the legacy kernels that take their output as an argument)."""
    k = kernel if isinstance(kernel, LegacyKernel) else LegacyKernel(kernel)
    return run(k, *_numpy_args(args), target=k.options.get("platform_target"), **kwargs).outputs


class FrameworkKernel:
    """``nki.FrameworkKernel``: the base of framework integrations (none in trnsim)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise fail(
            "not-implemented",
            "neuronxcc.nki.FrameworkKernel (framework integration) is not implemented by trnsim",
        )
