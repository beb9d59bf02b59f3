"""A kernel's outputs: what it returns must be HBM tensors, and each of their elements written.

- **Returned tensors live in HBM.** NKI's calling convention (Neuron 2.20.1 on): a kernel makes
  its outputs with ``nl.ndarray(shape, dtype, buffer=nl.shared_hbm)`` and returns them; "Output
  tensors must be ``nl.shared_hbm``" (SDK ``nki/get-started/nki-language-guide.rst``). A returned
  SBUF or PSUM tile is refused (rule ``output-not-hbm``): on hardware it is not an output at all.
- **Every element of an output is written** by the kernel (or is an input it returns, which
  the host wrote). An element never written holds whatever the memory held; trnsim fills fresh
  memory with a sentinel (NaN, all-ones integers), so such an element can look like a result.
  ``unwritten`` finds them after a functional run: an element is a candidate when its bytes are
  still the sentinel bytes (cheap, vectorised; no finished kernel writes all-ones bytes to most
  of its output), and a candidate is unwritten when no recorded instruction wrote it (the
  instruction record is exact about which HBM bytes each instruction's destination covers, so
  a kernel that wrote -1 to an int32 output is not accused). A kernel that leaves elements
  unwritten on purpose (padding, a ragged last tile the caller ignores) says so: the run
  keyword ``allow_unwritten="why"`` (``trnsim.nki.run`` / ``simulate``) or, in a kernel file, the
  module-level ``UNWRITTEN = "why"`` (``trnsim.nki.kernelfile``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from trnsim.core.argrules import ARG_RULES
from trnsim.core.instruction import Operand
from trnsim.core.memory import HBM, SENTINEL_BYTE, Allocation, View
from trnsim.errors import KernelError, UsageError


@dataclass(frozen=True)
class Unwritten:
    """The elements of one returned output that no instruction wrote."""

    output: int
    """Index among the returned tensors, flattened in order (tuples, lists, dict values)."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    count: int
    first: tuple[int, ...]
    """Index of the first unwritten element (C order)."""
    mask: np.ndarray = field(repr=False, compare=False)
    """True where an element was never written (the output's shape)."""

    @property
    def size(self) -> int:
        return prod(self.shape)

    def describe(self) -> str:
        return (
            f"output {self.output} ({self.name}, {self.dtype}{list(self.shape)}): "
            f"{self.count:,} of {self.size:,} elements never written, first at {list(self.first)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "unwritten": self.count,
            "elements": self.size,
            "first": list(self.first),
        }


def returned_tensors(out: Any) -> list[Any]:
    """The leaves of a kernel's return value, flattened in order (tuples, lists, dict values)."""
    if isinstance(out, tuple | list):
        return [x for y in out for x in returned_tensors(y)]
    if isinstance(out, dict):
        return [x for y in out.values() for x in returned_tensors(y)]
    return [out]


def check_in_hbm(out: Any, kernel: Any) -> list[View]:
    """The returned views (HBM); a returned SBUF or PSUM tile is a ``KernelError``
    (``output-not-hbm``) at the kernel's ``def`` line. Non-tensor leaves (a Python value the
    kernel also returns) are passed over."""
    views = [v for v in returned_tensors(out) if isinstance(v, View)]
    for i, v in enumerate(views):
        if v.memory != HBM:
            raise kernel_rule(
                "output-not-hbm",
                f"kernel {_name(kernel)!r} returns output {i} ({v.storage.alloc.name}, "
                f"{v.fmt.name}{list(v.shape)}) in {v.memory.upper()}; outputs are HBM tensors: "
                "make it with nl.ndarray(shape, dtype, buffer=nl.shared_hbm), store the tile "
                "into it and return that",
                kernel,
            )
    return views


def unwritten(
    views: list[View],
    cores: Iterable[Any],
    host_written: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[Unwritten]:
    """Every returned HBM view with elements no instruction of ``cores``' records wrote.

    ``host_written``: ``id`` of the allocations the host filled (the kernel's arguments)."""
    found = []
    records = None
    for i, v in enumerate(views):
        alloc = v.storage.alloc
        if id(alloc) in host_written or v.size == 0:
            continue
        v.check_bounds()  # a view outside its allocation is refused before its bytes are read
        cand = _sentinel(v)
        if not cand.any():
            continue
        if records is None:
            records = [c.record for c in cores]
        written = _written_bytes(alloc, records)
        never = cand & ~_covered(v, written)
        n = int(np.count_nonzero(never))
        if n:
            first = tuple(int(x) for x in np.unravel_index(int(np.argmax(never)), never.shape))
            found.append(Unwritten(i, alloc.name, v.shape, v.fmt.name, n, first, never))
    return found


def kernel_rule(key: str, message: str, kernel: Any) -> KernelError:
    """The ``KernelError`` of argument rule ``key`` at the kernel's ``def`` line (the kernel
    has returned: no line of it runs any more)."""
    file, line = kernel_def(kernel)
    err = KernelError(ARG_RULES[key].name, message, file, line)
    err.key = key  # type: ignore[attr-defined]
    return err


def kernel_def(kernel: Any) -> tuple[str | None, int | None]:
    """(file, line) of a kernel's ``def`` (through ``@nki.jit`` and other wrappers)."""
    fn = getattr(kernel, "fn", kernel)
    try:
        code = inspect.unwrap(fn).__code__
    except (AttributeError, ValueError, TypeError):
        return None, None
    return code.co_filename, code.co_firstlineno


def checked_allowance(value: Any, where: str) -> bool | str:
    """``allow_unwritten`` / ``UNWRITTEN``: False, True, or a non-empty reason."""
    if value is None or value is False:
        return False
    if value is True or (isinstance(value, str) and value.strip()):
        return value
    raise UsageError(
        f"{where}={value!r:.60}: must be a reason (a non-empty string) or True, "
        "saying why the kernel leaves output elements unwritten"
    )


def _name(kernel: Any) -> str:
    return str(getattr(kernel, "__name__", None) or getattr(kernel, "fn", kernel).__name__)


# ---- how ------------------------------------------------------------------------------------


def _sentinel(v: View) -> np.ndarray:
    """True where every byte of an element still holds the sentinel fill."""
    a = np.ascontiguousarray(v.array())
    isz = a.dtype.itemsize
    b = a.reshape(-1).view(np.uint8).reshape(*a.shape, isz)
    return (b == SENTINEL_BYTE).all(axis=-1)


def _extent(op: Operand) -> tuple[int, int]:
    """[first byte, last byte] an HBM operand covers."""
    lo = hi = op.offset
    for stride, size in (op.partition_pattern, *op.pattern):
        span = (size - 1) * stride * op.itemsize
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + op.itemsize - 1


def _written_bytes(alloc: Allocation, records: list[list[Any]]) -> np.ndarray:
    """One bool per byte of ``alloc``: written by an instruction's HBM destination."""
    base, end = alloc.byte_offset, alloc.byte_offset + alloc.nbytes
    mask = np.zeros(alloc.nbytes, dtype=bool)
    for record in records:
        for ins in record:
            for op in ins.dst:
                if op.memory != HBM:
                    continue
                lo, hi = _extent(op)
                if hi < base or lo >= end:
                    continue
                dims = (op.partition_pattern, *op.pattern)
                if base <= lo and hi < end:  # inside the allocation: a strided view of the mask
                    shape = (*(size for _, size in dims), op.itemsize)
                    strides = (*(stride * op.itemsize for stride, _ in dims), 1)
                    as_strided(mask[op.offset - base :], shape, strides, writeable=True)[...] = True
                else:  # straddling its edge (no view does): the bytes inside, one by one
                    at = np.full(1, op.offset - base, dtype=np.int64)
                    for stride, size in dims:
                        at = (at[:, None] + np.arange(size) * stride * op.itemsize).reshape(-1)
                    at = (at[:, None] + np.arange(op.itemsize)).reshape(-1)
                    mask[at[(at >= 0) & (at < alloc.nbytes)]] = True
    return mask


def _covered(v: View, written: np.ndarray) -> np.ndarray:
    """True where every byte of an element of view ``v`` is marked in ``written``."""
    isz = v.itemsize
    start = v.offset * isz
    shape = (*v.shape, isz)
    strides = (*(s * isz for s in v.strides), 1)
    return as_strided(written[start:], shape, strides, writeable=False).all(axis=-1)
