"""``Call``: one instruction as the checker and the executors see it (live operand views), and
``Core``: what an executor needs of the core it runs on.

Kept apart from ``rules`` and ``machine`` so the modules that only use them (``indirect``, the
accelerators) import neither (no import cycle in ``trnsim.core``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from trnsim.core.isa import Engine, Op
from trnsim.core.memory import View
from trnsim.hw import CoreSpec
from trnsim.numerics import Format


@dataclass(slots=True)
class Call:
    """What a rule sees: the op, its engine, named operand views, attributes and the target.

    A slotted dataclass (``dataclasses.replace`` works on it); ``views()`` and ``on_chip()``
    are computed once per call."""

    op: Op
    engine: Engine
    dst: dict[str, View]
    src: dict[str, View]
    attrs: dict[str, Any]
    spec: CoreSpec
    _views: list[tuple[str, View, bool]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _on_chip: list[tuple[str, View, bool]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def views(self) -> list[tuple[str, View, bool]]:
        """(role, view, is_dst) of every operand, dst first (computed once)."""
        if self._views is None:
            self._views = [(r, v, True) for r, v in self.dst.items()] + [
                (r, v, False) for r, v in self.src.items()
            ]
        return self._views

    def on_chip(self) -> list[tuple[str, View, bool]]:
        """The SBUF/PSUM operands among ``views()``."""
        if self._on_chip is None:
            self._on_chip = [(r, v, d) for r, v, d in self.views() if v.on_chip]
        return self._on_chip


class Core(Protocol):
    """The data interface of a ``NeuronCore`` that executors and accelerators use."""

    index: int
    spec: CoreSpec
    decode: Any

    def read(self, v: View) -> np.ndarray: ...

    def read_raw(self, v: View) -> np.ndarray: ...

    def write(self, v: View, values: np.ndarray, *, mark_acc: bool = False) -> None: ...

    def write_raw(self, v: View, values: np.ndarray) -> None: ...

    def cast(self, values: np.ndarray, fmt: Format) -> np.ndarray: ...
