"""``neuronxcc.nki.compiler``: direct allocation of SBUF/PSUM tensors (``sbuf.alloc``,
``sbuf.mod_alloc``, ``psum.alloc``, ``psum.mod_alloc``, ``auto_alloc``) and the compiler
directives.

A direct allocation places every logical block ``(P, F...)`` of a tensor at a physical location
the kernel chooses. Blocks (of any tensors) placed at the same location share the same bytes,
as on hardware; reading a block after another block or tensor wrote its location is a
``tile-reused`` error (``tile.BlockTensor``). Placement of ``mod_alloc``: logical block index
``idx`` goes to physical tile ``idx % num_tiles`` (per dimension, then row-major), at
``base + tile * size``. Source: SDK 2.26 ``api/nki/compiler/sbuf.py`` / ``psum.py``
(``alloc`` / ``mod_alloc`` docstrings) and ``nki_direct_allocation_guide.rst``.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from math import prod
from typing import Any

import numpy as np

from trnsim.core.location import fail
from trnsim.core.memory import PSUM, SBUF, user_dtype
from trnsim.nki.context import current
from trnsim.nki.legacy.allocator import allocator
from trnsim.nki.legacy.tile import BlockTensor, Tile, as_tile
from trnsim.numerics import get_format


def _modulo(base: int, counts: tuple[int, ...], size: int, idx: tuple[int, ...]) -> int:
    """``base + linear(idx % counts) * size`` (counts () means one tile)."""
    shape = tuple(counts) if counts and idx else (1,) * len(idx)
    if len(shape) != len(idx):
        raise fail(
            "mod-alloc",
            f"mod_alloc tile counts {list(counts)} for a tensor with {len(idx)} block dims",
        )
    lin = 0
    for i, n in zip(idx, shape, strict=True):
        lin = lin * n + (i % n)
    return base + lin * size


class Allocator:
    """A ``buffer=`` of ``nl.ndarray``: places each logical block with ``func``."""

    def __init__(self, memory: str, func: Callable[..., tuple[int, ...]], what: str) -> None:
        self.memory, self.func, self.what = memory, func, what

    def allocate(
        self,
        blocks: tuple[int, ...],
        tile_shape: tuple[int, ...],
        dtype: Any,
        memory: str,
        name: str,
    ) -> BlockTensor:
        prog = current()
        core = prog.core
        spec = core.spec
        itemsize = get_format(dtype).dtype.itemsize
        fbytes = prod(tile_shape[1:]) * itemsize
        psum = self.memory == PSUM
        if psum and fbytes > spec.psum_bank_bytes:
            raise fail(
                "psum-alloc",
                f"{self.what}: a PSUM tile of {fbytes} bytes/partition spans banks (max "
                f"{spec.psum_bank_bytes})",
            )
        key = ("legacy-direct", core.index)
        with prog.launch.lock:
            state = prog.launch.mailbox.setdefault(key, ({}, {}))
        slots, owners = state
        label = name or "tensor"

        def locate(b: tuple[int, ...]) -> tuple[Tile, Any]:
            loc = tuple(int(v) for v in self.func(b, tile_shape[0], fbytes))
            if psum:
                if len(loc) != 3:
                    raise fail("psum-alloc", f"{self.what} returned {loc}; expected (bank, p, b)")
                bank, p, byte = loc
                byte = bank * spec.psum_bank_bytes + byte
            else:
                if len(loc) != 2:
                    raise fail("sbuf-alloc", f"{self.what} returned {loc}; expected (p, byte)")
                p, byte = loc
            if psum:  # a PSUM tile lives in one bank: the bank is allocated whole, once
                t = _in_bank(core, slots, bank, p, byte % spec.psum_bank_bytes, tile_shape, dtype)
                return t, (self.memory, p, byte)
            region = (self.memory, p, byte, tile_shape, get_format(dtype).name)
            t = slots.get(region)
            if t is None:
                fb = prod(tile_shape[1:]) * get_format(dtype).dtype.itemsize
                allocator().vacate(self.memory, p, tile_shape[0], byte, fb)
                t = as_tile(
                    core.allocate(tile_shape, dtype, self.memory, name=label, address=(p, byte))
                )
                slots[region] = t
            return t, (self.memory, p, byte)

        fmt = get_format(dtype)
        return BlockTensor(
            blocks, tile_shape, locate, label, fmt.dtype, self.memory, fmt.name, owners
        )


def _in_bank(
    core: Any, slots: dict[Any, Any], bank: int, p: int, byte: int, shape: tuple[int, ...],
    dtype: Any,
) -> Tile:  # fmt: skip
    """A view at ``(partition p, byte)`` of PSUM bank ``bank``, allocated whole on first use:
    every direct PSUM tensor placed in a bank is a view of it, so tensors of any shape placed
    at the same bytes alias, as on hardware."""
    spec = core.spec
    key = ("psum-bank", bank)
    whole = slots.get(key)
    if whole is None:
        allocator().vacate(PSUM, 0, spec.partitions, bank * spec.psum_bank_bytes,
                           spec.psum_bank_bytes)  # fmt: skip
        whole = core.allocate(
            (spec.partitions, spec.psum_bank_bytes), np.uint8, PSUM,
            name=f"psum bank {bank}", address=(0, bank * spec.psum_bank_bytes),
        )  # fmt: skip
        slots[key] = whole
    fmt = get_format(dtype)
    isz = fmt.dtype.itemsize
    fbytes = prod(shape[1:]) * isz
    if byte % isz or byte + fbytes > spec.psum_bank_bytes or p + shape[0] > spec.partitions:
        raise fail(
            "psum-alloc",
            f"a PSUM tile {list(shape)} {fmt.name} at partition {p}, byte {byte} of bank {bank} "
            f"does not fit the bank ({spec.partitions} x {spec.psum_bank_bytes} bytes)",
        )
    free = shape[1:]
    strides = [1] * len(free)
    for i in range(len(free) - 2, -1, -1):
        strides[i] = strides[i + 1] * free[i + 1]
    return Tile.trusted(
        whole.storage, tuple(shape), (1, *strides), byte // isz, p, fmt, user_dtype(fmt), True
    )


class _Space(types.SimpleNamespace):
    pass


def _space(memory: str) -> _Space:
    from trnsim.nki.legacy import language as nl

    name = "sbuf" if memory == SBUF else "psum"

    def alloc(func: Callable[..., Any]) -> Any:
        if not callable(func):
            raise fail(f"{name}-alloc", f"ncc.{name}.alloc takes a callable, got {func!r}")
        return nl.Buffer(name, Allocator(memory, func, f"ncc.{name}.alloc"))

    def auto_alloc() -> Any:
        return nl.sbuf if memory == SBUF else nl.psum

    if memory == SBUF:

        def mod_alloc(
            *, base_addr: int, base_partition: int = 0, num_par_tiles: tuple = (),
            num_free_tiles: tuple = (),
        ) -> Any:  # fmt: skip
            def func(idx: tuple[int, ...], pdim: int, fbytes: int) -> tuple[int, int]:
                return (
                    _modulo(base_partition, tuple(num_par_tiles), pdim, idx),
                    _modulo(base_addr, tuple(num_free_tiles), fbytes, idx),
                )

            return nl.Buffer(name, Allocator(memory, func, "ncc.sbuf.mod_alloc"))

    else:

        def mod_alloc(  # type: ignore[misc]
            *, base_bank: int, base_addr: int = 0, base_partition: int = 0,
            num_bank_tiles: tuple = (), num_par_tiles: tuple = (), num_free_tiles: tuple = (),
        ) -> Any:  # fmt: skip
            def func(idx: tuple[int, ...], pdim: int, fbytes: int) -> tuple[int, int, int]:
                return (
                    _modulo(base_bank, tuple(num_bank_tiles), 1, idx),
                    _modulo(base_partition, tuple(num_par_tiles), pdim, idx),
                    _modulo(base_addr, tuple(num_free_tiles), fbytes, idx),
                )

            return nl.Buffer(name, Allocator(memory, func, "ncc.psum.mod_alloc"))

    return _Space(alloc=alloc, mod_alloc=mod_alloc, auto_alloc=auto_alloc)


sbuf = _space(SBUF)
psum = _space(PSUM)

# ---- directives: scheduling hints with no effect on an in-order emulator ---------------------


def _passthrough(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    return func if func is not None else (lambda f: f)


enable_stack_allocator = force_auto_alloc = skip_middle_end_transformations = _passthrough


@contextlib.contextmanager
def allocation_scope() -> Iterator[None]:
    yield


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Instructions are issued in program order on trnsim anyway."""
    yield


def multi_buffer(factor: int = 2) -> Any:
    raise fail("not-implemented", "neuronxcc.nki.compiler.multi_buffer is not implemented")
