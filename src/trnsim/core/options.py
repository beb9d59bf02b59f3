"""How a ``NeuronCore`` runs: the plain interpreter (the specification) and opt-in accelerators.

``CoreOptions()`` is the plain, synchronous interpreter: every instruction is checked,
recorded and executed on the caller's thread by ``trnsim.core.machine``, decoding its operands
afresh. The accelerators (``trnsim.core.accel``) give the same bits, record and errors
(``tests/test_core_deferred.py``, ``tests/test_core_fast_paths.py``):

- ``fast_paths``: decoded-tile cache for ``nc_matmul`` operands and the PSUM
  open-accumulation memo (``accel.decode``);
- ``deferred``: the data work on other threads, tile products on two more
  (``accel.deferred``; implies ``fast_paths``; not with stochastic rounding nor in
  timing-only runs).

``max_instructions`` bounds the instructions one core may execute (``None``: no bound);
one more is a ``KernelError`` (rule ``instruction-budget``) at the kernel's line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CoreOptions:
    deferred: bool = False
    fast_paths: bool = False
    max_instructions: int | None = None

    def __post_init__(self) -> None:
        if self.max_instructions is not None and (
            isinstance(self.max_instructions, bool)
            or not isinstance(self.max_instructions, int)
            or self.max_instructions < 1
        ):
            raise ValueError(
                f"max_instructions must be a positive int or None, got {self.max_instructions!r}"
            )

    @property
    def accelerated(self) -> bool:
        return self.deferred or self.fast_paths

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kw: object) -> CoreOptions:
        """Options for an outermost entry point: ``TRNSIM_DEFERRED=1`` turns the deferred
        path (and the fast paths it uses) on when the machine has more than one core."""
        env = os.environ if environ is None else environ
        on = env.get("TRNSIM_DEFERRED", "0") not in ("", "0") and (os.cpu_count() or 1) > 1
        if on:
            kw.setdefault("deferred", True)
            kw.setdefault("fast_paths", True)
        return cls(**kw)  # type: ignore[arg-type]
