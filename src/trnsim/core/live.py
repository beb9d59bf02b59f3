"""The instruction record while it executes: ``LiveInstruction``, and ``Core``, what an
executor needs of the core it runs on.

A ``LiveInstruction`` is an ``Instruction`` (``trnsim.core.instruction``; equal to, and built
from the same fields as, the one the core records) that also carries, outside the compared and
recorded fields, the live operand views, the attributes as passed and the target. The checker
(``trnsim.core.rules``), the executors (``trnsim.core.machine``, ``trnsim.core.indirect``) and
the deferred accelerator (``trnsim.core.accel.deferred``) read it; the recorder and the timing
model read the plain ``Instruction``. One record, two lifetimes: the views live only as long
as the instruction executes (queued work holds detached ones).

Kept apart from ``instruction`` (which ``memory`` imports) so that neither module imports the
other in a cycle, and from ``machine`` so that ``indirect`` and the accelerators import no
``machine``.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Engine, Op
from trnsim.core.memory import View
from trnsim.hw import CoreSpec
from trnsim.numerics import Format


class LiveInstruction(Instruction):
    """An ``Instruction`` while it executes: the record's fields plus (in its ``__dict__``,
    never compared, hashed or recorded) ``dst_views`` / ``src_views`` (role -> live ``View``,
    the views the ``Operand``s describe), ``args`` (the attributes as passed: lists and
    arrays unfrozen, views as views) and ``spec`` (the target ``CoreSpec``). It compares
    equal to the recorded ``Instruction``; the core records the plain ``Instruction`` so the
    record holds no live storage. Build it with ``live_from`` (the record's fields) or ``live``."""

    dst_views: dict[str, View]
    src_views: dict[str, View]
    args: dict[str, Any]
    spec: CoreSpec

    def views(self) -> list[tuple[str, View, bool]]:
        """(role, view, is_dst) of every operand, dst first (computed once)."""
        d = self.__dict__
        out = d.get("_views")
        if out is None:
            out = d["_views"] = [(r, v, True) for r, v in self.dst_views.items()] + [
                (r, v, False) for r, v in self.src_views.items()
            ]
        return out

    def on_chip(self) -> list[tuple[str, View, bool]]:
        """The SBUF/PSUM operands among ``views()``."""
        d = self.__dict__
        out = d.get("_on_chip")
        if out is None:
            out = d["_on_chip"] = [(r, v, x) for r, v, x in self.views() if v.on_chip]
        return out

    def with_views(
        self, dst_views: dict[str, View], src_views: dict[str, View], args: dict[str, Any]
    ) -> LiveInstruction:
        """The same record over other live views (scratch copies, detached views) and
        attributes."""
        return live_from(tuple(self), dst_views, src_views, args, self.spec)

    def __reduce__(self) -> Any:  # pickles (and copies) as the recorded Instruction
        return (Instruction, tuple(self))


def live_from(
    fields: tuple,
    dst_views: dict[str, View],
    src_views: dict[str, View],
    args: dict[str, Any],
    spec: CoreSpec,
) -> LiveInstruction:
    ins = tuple.__new__(LiveInstruction, fields)
    ins.__dict__.update(dst_views=dst_views, src_views=src_views, args=args, spec=spec)
    return ins


def live(
    opcode: Op,
    engine: Engine,
    dst_views: dict[str, View],
    src_views: dict[str, View],
    args: dict[str, Any],
    spec: CoreSpec,
    *,
    dst: tuple[Operand, ...] = (),
    src: tuple[Operand, ...] = (),
    attrs: tuple[tuple[str, Any], ...] = (),
    file: str = "",
    line: int = 0,
    core: int = 0,
) -> LiveInstruction:
    """A ``LiveInstruction`` from its parts. The core passes every field; a rule test may
    leave the recorded operands and attributes empty (the rules read the live views)."""
    fields = (opcode, engine, dst, src, attrs, file, line, core)
    return live_from(fields, dst_views, src_views, args, spec)


class Core(Protocol):
    """The data interface of a ``NeuronCore`` that executors and accelerators use (so the
    modules that only execute, ``indirect`` and the accelerators, import no ``machine``)."""

    index: int
    spec: CoreSpec
    decode: Any

    def read(self, v: View) -> np.ndarray: ...

    def read_raw(self, v: View) -> np.ndarray: ...

    def write(self, v: View, values: np.ndarray, *, mark_acc: bool = False) -> None: ...

    def write_raw(self, v: View, values: np.ndarray) -> None: ...

    def cast(self, values: np.ndarray, fmt: Format) -> np.ndarray: ...
