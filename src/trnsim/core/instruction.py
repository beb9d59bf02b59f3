"""The recorded instruction: one immutable node per executed ISA instruction.

The core appends one ``Instruction`` per executed instruction to ``NeuronCore.record``; the
timing model reads that list without re-running the kernel. Operands are plain descriptors
(``Operand``): memory kind, core, start address, the partition range and the free-dim access
pattern ``[[stride, size], ...]`` in elements, and the format name. No NumPy arrays, no
references to live storage: instructions are hashable and usable as cache keys.

Both are ``NamedTuple``s rather than frozen dataclasses: immutable, structurally equal and
hashable all the same, but built by ``tuple.__new__`` (about 4x cheaper than a frozen
dataclass's ``__init__``), which matters at one or two per executed instruction (timing-only
recording runs at tens of thousands of instructions per second; ``benchmarks/bench_timing.py``).
The timing model also uses an ``Operand`` itself as a dictionary key.

While it executes, the same record is a ``trnsim.core.live.LiveInstruction``: an
``Instruction`` that also carries its live operand views (what the checker and the executors
read).
"""

from __future__ import annotations

from math import prod
from typing import Any, NamedTuple

from trnsim.core.isa import Engine, Op


class Operand(NamedTuple):
    """Where one operand of an instruction lives and how it is walked.

    ``memory``: ``"hbm"``, ``"sbuf"`` or ``"psum"``. ``core``: the NeuronCore that owns the
    SBUF/PSUM (-1 for HBM). ``partition``: the first partition (0 for HBM). ``offset``: byte
    address of the first element (within a partition for SBUF/PSUM, absolute for HBM).
    ``partition_pattern``: ``(step, count)`` over partitions (for HBM ``(stride_elems, count)``
    of the outermost dim). ``pattern``: the free-dim access pattern, outermost first, as
    ``((stride_elems, size), ...)``. ``dtype``: the format name (``trnsim.numerics``).
    ``itemsize``: bytes per element (a packed x4 word counts as one element).
    """

    role: str
    memory: str
    dtype: str
    itemsize: int
    core: int
    partition: int
    offset: int
    partition_pattern: tuple[int, int]
    pattern: tuple[tuple[int, int], ...]

    @property
    def partitions(self) -> int:
        return self.partition_pattern[1]

    @property
    def free_size(self) -> int:
        """Elements per partition."""
        return prod(size for _, size in self.pattern)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.partitions, *(size for _, size in self.pattern))

    @property
    def nbytes(self) -> int:
        return self.partitions * self.free_size * self.itemsize

    @property
    def innermost_stride_bytes(self) -> int:
        return self.pattern[-1][0] * self.itemsize if self.pattern else self.itemsize


class Instruction(NamedTuple):
    """One executed instruction. ``attrs`` holds the non-tensor arguments as sorted pairs."""

    opcode: Op
    engine: Engine
    dst: tuple[Operand, ...]
    src: tuple[Operand, ...]
    attrs: tuple[tuple[str, Any], ...]
    file: str
    line: int
    core: int = 0

    def attr(self, name: str, default: Any = None) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        return default

    def operand(self, role: str) -> Operand | None:
        for op in (*self.dst, *self.src):
            if op.role == role:
                return op
        return None

    def __str__(self) -> str:
        ops = ", ".join(
            f"{o.role}={o.dtype}{list(o.shape)}@{o.memory}" for o in self.dst + self.src
        )
        return f"{self.opcode.value}[{self.engine.value}]({ops}) {self.file}:{self.line}"
