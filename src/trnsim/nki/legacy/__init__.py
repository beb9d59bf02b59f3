"""The legacy NKI front end: ``neuronxcc.nki`` (NKI <= 0.1, Neuron <= 2.26) on trnsim.

``install()`` makes ``neuronxcc``, ``neuronxcc.nki``, ``neuronxcc.nki.language``,
``neuronxcc.nki.isa`` (with ``isa.constants``), ``neuronxcc.nki.typing`` and
``neuronxcc.nki.compiler`` resolve to this package, beside the new ``nki``. Legacy calls return
tiles and lower onto the new API's instructions (``trnsim.nki.isa``): one core, one semantics;
where the two APIs differ the difference is a table in ``differences``.

Modules: ``language`` / ``isa`` / ``compiler`` / ``typing`` (the legacy modules), ``index``
(index expressions, masks), ``tile`` (tiles, block tensors, pending results), ``ops`` (the
lowering helper), ``grid`` (SPMD launch grids), ``kernel`` (``jit`` and friends), ``benchmark``
(``nki.benchmark`` / ``nki.profile``). Source: SDK 2.26 ``general/nki/``.
"""

from __future__ import annotations

import importlib
import sys
import types

from trnsim.nki.legacy import compiler, isa, language
from trnsim.nki.legacy import typing as typing
from trnsim.nki.legacy.benchmark import benchmark, profile
from trnsim.nki.legacy.kernel import (
    FrameworkKernel,
    LegacyKernel,
    baremetal,
    jit,
    simulate_kernel,
    trace,
)
from trnsim.nki.legacy.typing import tensor

__trnsim__ = True

MODULES = {
    "neuronxcc.nki": "trnsim.nki.legacy",
    "neuronxcc.nki.language": "trnsim.nki.legacy.language",
    "neuronxcc.nki.language.constants": "trnsim.nki.legacy.language_constants",
    "neuronxcc.nki.isa": "trnsim.nki.legacy.isa",
    "neuronxcc.nki.isa.constants": "trnsim.nki.legacy.constants",
    "neuronxcc.nki.typing": "trnsim.nki.legacy.typing",
    "neuronxcc.nki.compiler": "trnsim.nki.legacy.compiler",
}
"""Legacy module name -> trnsim module."""


def install(force: bool = False) -> None:
    """Register the legacy modules under their ``neuronxcc`` names (idempotent). Refuses to
    shadow a real ``neuronxcc`` already imported unless ``force``."""
    existing = sys.modules.get("neuronxcc")
    if existing is not None and not getattr(existing, "__trnsim__", False) and not force:
        raise ImportError(
            "a real 'neuronxcc' package is already imported; call trnsim.nki.install(force=True) "
            "to replace it in this process"
        )
    top = types.ModuleType("neuronxcc", "trnsim's stand-in for the Neuron compiler package")
    top.__trnsim__ = True  # type: ignore[attr-defined]
    top.__path__ = []  # type: ignore[attr-defined]
    sys.modules["neuronxcc"] = top
    for alias, target in MODULES.items():
        mod = importlib.import_module(target)
        sys.modules[alias] = mod
    top.nki = sys.modules["neuronxcc.nki"]  # type: ignore[attr-defined]
    isa.constants = sys.modules["neuronxcc.nki.isa.constants"]  # type: ignore[attr-defined]
    language.constants = sys.modules["neuronxcc.nki.language.constants"]  # type: ignore


def uninstall() -> None:
    for alias in ("neuronxcc", *MODULES):
        mod = sys.modules.get(alias)
        if (mod is not None and getattr(mod, "__trnsim__", False)) or (
            mod is not None and mod.__name__.startswith("trnsim.")
        ):
            del sys.modules[alias]


__all__ = [
    "FrameworkKernel",
    "LegacyKernel",
    "baremetal",
    "benchmark",
    "compiler",
    "install",
    "isa",
    "jit",
    "language",
    "profile",
    "simulate_kernel",
    "tensor",
    "trace",
    "typing",
    "uninstall",
]
