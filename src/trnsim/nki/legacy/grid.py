"""Legacy SPMD launch grids: ``kernel[g0, g1, ...](...)`` and ``kernel[nl.spmd_dim(nl.nc(2), 2)]``.

The programs of a grid run one after another on their NeuronCore (the compiler serialises the
instances mapped to one core); ``nl.nc(n)`` dimensions spread the grid over ``n`` cores (an
LNC launch of the new API: one thread per core). ``shared_hbm`` tensors are shared by every
program of the launch: the i-th ``shared_hbm`` allocation of each program is the same tensor.
Source: SDK 2.26 ``programming_model.rst`` (SPMD), ``nl.nc`` / ``nl.spmd_dim`` docstrings.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from math import prod
from typing import Any

from trnsim.core.location import fail


@dataclass(frozen=True)
class nc:
    """``nl.nc(n)``: a launch-grid dimension spread over ``n`` physical NeuronCores;
    ``nl.nc(2) * 2`` is ``nl.spmd_dim(nl.nc(2), 2)``."""

    size: int

    def __mul__(self, other: Any) -> spmd_dim:
        return spmd_dim(self, other)

    def __rmul__(self, other: Any) -> spmd_dim:
        return spmd_dim(other, self)


class spmd_dim:
    """``nl.spmd_dim(nl.nc(2), 2)``: one grid dimension of ``prod(sizes)`` programs; program
    ``i`` of it is the mixed-radix number of its parts (first part most significant) and runs
    on the core given by its ``nl.nc`` digit."""

    def __init__(self, *parts: Any) -> None:
        self.parts = parts

    def __mul__(self, other: Any) -> spmd_dim:
        return spmd_dim(*self.parts, other)

    def __rmul__(self, other: Any) -> spmd_dim:
        return spmd_dim(other, *self.parts)


@dataclass(frozen=True)
class Grid:
    """The launch grid: dimension sizes and which digit of which dimension picks the core."""

    dims: tuple[int, ...]
    cores: int = 1
    core_dim: int | None = None  # the grid dimension spread over cores (None: all on core 0)
    parts: tuple[int, ...] = ()  # that dimension's mixed-radix parts
    nc_pos: int = 0  # which part is the core digit

    def programs(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*[range(n) for n in self.dims]))

    def core_of(self, pid: tuple[int, ...]) -> int:
        if self.core_dim is None:
            return 0
        i = pid[self.core_dim]
        digits = []
        for size in reversed(self.parts):
            digits.append(i % size)
            i //= size
        return digits[::-1][self.nc_pos]


def parse(key: Any) -> Grid:
    key = key if isinstance(key, tuple) else (key,)
    dims: list[int] = []
    cores, core_dim, parts, nc_pos = 1, None, (), 0
    for d, k in enumerate(key):
        if isinstance(k, nc):
            k = spmd_dim(k)
        if isinstance(k, spmd_dim):
            if not all(isinstance(p, nc) or (isinstance(p, int) and p >= 1) for p in k.parts):
                raise fail("spmd-grid", f"spmd_dim parts {k.parts!r}: positive ints and nl.nc")
            sizes = tuple(p.size if isinstance(p, nc) else int(p) for p in k.parts)
            ncs = [i for i, p in enumerate(k.parts) if isinstance(p, nc)]
            if len(ncs) > 1 or (ncs and core_dim is not None):
                raise fail("spmd-grid", "one nl.nc(...) per launch grid")
            dims.append(prod(sizes))
            if ncs:
                cores, core_dim, parts, nc_pos = sizes[ncs[0]], d, sizes, ncs[0]
        elif isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            dims.append(int(k))
        else:
            raise fail("spmd-grid", f"launch grid dimension {k!r} must be a positive integer")
    if cores not in (1, 2):
        raise fail("spmd-grid", f"nl.nc({cores}): trnsim launches on 1 or 2 NeuronCores")
    return Grid(tuple(dims), cores, core_dim, parts, nc_pos)


class _ProgramState(threading.local):
    pid: tuple[int, ...] = ()
    grid: Grid | None = None
    shared_seq: int = 0


state = _ProgramState()
