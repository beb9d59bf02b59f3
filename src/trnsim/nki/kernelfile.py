"""Run an NKI kernel *file* the way ``trnsim run kernel.py`` does.

Kernel-file convention (every file in ``examples/kernels/`` follows it):

- The file imports NKI as on hardware (``import nki``, ``nki.language as nl``, ``nki.isa as
  nisa``) and defines one or more ``@nki.jit`` kernels. With several, ``KERNEL = "name"`` names
  the default one (else the first defined); ``--kernel NAME`` picks another.
- Inputs: ``make_inputs_<kernel>(rng)`` if defined, else ``make_inputs(rng)``, returning the
  kernel's positional arguments (a tuple of NumPy arrays, or one array); ``rng`` is a
  ``numpy.random.Generator`` seeded by ``--seed``. A module-level ``INPUTS`` tuple may be given
  instead of a function.
- Optional golden: ``golden_<kernel>(*inputs)`` if defined, else ``golden(*inputs)``, returning
  the expected output(s) (same structure as the kernel's return value), computed independently
  in NumPy.
- Optional ``TOLERANCE = {"rtol": ..., "atol": ...}`` (or ``TOLERANCE_<kernel>``): with it,
  the run passes when ``|out - golden| <= atol + rtol * |golden|`` everywhere.

Errors: ``max_abs_err = max |out - golden|``; ``max_rel_err = max_abs_err / max |golden|``
(normwise, so zeros in the golden do not blow it up), over all outputs.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from trnsim.errors import ConfigError
from trnsim.nki.compat import install
from trnsim.nki.simulate import Kernel, RunResult, run


@dataclass
class FileRun:
    """The result of running one kernel of a kernel file."""

    path: str
    kernel: str
    target: str
    result: RunResult
    outputs: list[np.ndarray]
    has_golden: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: dict[str, float] | None = None
    passed: bool | None = None
    by_engine: dict[str, int] = field(default_factory=dict)
    by_opcode: dict[str, int] = field(default_factory=dict)

    @property
    def instructions(self) -> int:
        return sum(self.by_engine.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "kernel": self.kernel,
            "target": self.target,
            "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in self.outputs],
            "golden": self.has_golden,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "instructions": self.instructions,
            "instructions_by_engine": self.by_engine,
            "instructions_by_opcode": self.by_opcode,
        }


def load_module(path: str) -> ModuleType:
    """Import a kernel file (after ``install()`` so its ``import nki`` resolves to trnsim)."""
    if not os.path.isfile(path):
        raise ConfigError(f"kernel file {path!r} does not exist")
    install()
    name = "trnsim_kernelfile_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {path!r} as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def kernels_of(mod: ModuleType) -> dict[str, Kernel]:
    """The ``@nki.jit`` kernels a module defines, in definition order."""
    found = [(k, v) for k, v in vars(mod).items() if isinstance(v, Kernel)]
    found.sort(key=lambda kv: _first_line(kv[1]))
    return dict(found)


def _first_line(k: Kernel) -> int:
    try:
        return inspect.getsourcelines(k.fn)[1]
    except (OSError, TypeError):
        return 0


def pick_kernel(mod: ModuleType, name: str | None) -> tuple[str, Kernel]:
    kernels = kernels_of(mod)
    if not kernels:
        raise ConfigError(f"{mod.__file__} defines no @nki.jit kernel")
    name = name or getattr(mod, "KERNEL", None) or next(iter(kernels))
    if name not in kernels:
        raise ConfigError(
            f"kernel {name!r} not found in {os.path.basename(str(mod.__file__))}; "
            f"kernels: {', '.join(kernels)}"
        )
    return name, kernels[name]


def _inputs(mod: ModuleType, kernel: str, seed: int) -> tuple[Any, ...]:
    fn = getattr(mod, f"make_inputs_{kernel}", None) or getattr(mod, "make_inputs", None)
    if fn is not None:
        args = fn(np.random.default_rng(seed))
    elif hasattr(mod, "INPUTS"):
        args = mod.INPUTS
    else:
        raise ConfigError(
            f"{os.path.basename(str(mod.__file__))} gives no inputs for kernel {kernel!r}: "
            f"define make_inputs_{kernel}(rng), make_inputs(rng) or INPUTS"
        )
    return tuple(args) if isinstance(args, tuple | list) else (args,)


def _flat(x: Any) -> list[np.ndarray]:
    if isinstance(x, tuple | list):
        return [a for y in x for a in _flat(y)]
    if isinstance(x, dict):
        return [a for y in x.values() for a in _flat(y)]
    return [np.asarray(x)]


def compare(outputs: list[np.ndarray], goldens: list[np.ndarray]) -> tuple[float, float]:
    """(max abs error, normwise max relative error) of outputs against goldens, in float64."""
    if len(outputs) != len(goldens):
        raise ConfigError(f"kernel returned {len(outputs)} outputs, golden {len(goldens)}")
    abs_err, scale = 0.0, 0.0
    for o, g in zip(outputs, goldens, strict=True):
        if o.shape != g.shape and o.size == g.size:
            g = g.reshape(o.shape)
        if o.shape != g.shape:
            raise ConfigError(f"output shape {list(o.shape)} != golden shape {list(g.shape)}")
        o64, g64 = o.astype(np.float64), g.astype(np.float64)
        abs_err = max(abs_err, float(np.max(np.abs(o64 - g64), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(g64), initial=0.0)))
    return abs_err, (abs_err / scale if scale > 0 else abs_err)


def run_file(
    path: str,
    kernel: str | None = None,
    *,
    target: str | None = None,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
) -> FileRun:
    """Run one kernel of a kernel file on the emulator and compare it with its golden."""
    mod = load_module(path)
    name, k = pick_kernel(mod, kernel)
    args = _inputs(mod, name, seed)
    res = run(k, *args, target=target)
    outputs = _flat(res.outputs)
    out = FileRun(
        path=path,
        kernel=name,
        target=res.cores[0].spec.name,
        result=res,
        outputs=outputs,
        has_golden=False,
    )
    counts = Counter(i.engine.value for i in res.instructions)
    out.by_engine = dict(sorted(counts.items()))
    out.by_opcode = dict(Counter(i.opcode.value for i in res.instructions).most_common())
    gold = getattr(mod, f"golden_{name}", None) or getattr(mod, "golden", None)
    if gold is None:
        return out
    out.has_golden = True
    goldens = _flat(gold(*args))
    out.max_abs_err, out.max_rel_err = compare(outputs, goldens)
    tol = dict(getattr(mod, f"TOLERANCE_{name}", None) or getattr(mod, "TOLERANCE", None) or {})
    if rtol is not None:
        tol["rtol"] = rtol
    if atol is not None:
        tol["atol"] = atol
    if tol:
        tol = {"rtol": float(tol.get("rtol", 0.0)), "atol": float(tol.get("atol", 0.0))}
        out.tolerance = tol
        out.passed = all(
            bool(
                np.all(
                    np.abs(o.astype(np.float64) - g.astype(np.float64).reshape(o.shape))
                    <= tol["atol"] + tol["rtol"] * np.abs(g.astype(np.float64).reshape(o.shape))
                )
            )
            for o, g in zip(outputs, goldens, strict=True)
        )
    return out
