"""The one place a legacy call becomes new-API instructions: operand checks, the returned tile
(memory and dtype from ``differences.RETURNS``), ``mask=`` boxes and pending issue.

Every legacy ``nl`` / ``nisa`` function that returns a tile is ``result(call, shape, dtype,
issue, operands, mask)``: ``issue(dst, *operands)`` calls ``trnsim.nki.isa`` with ``dst`` and the
operands cut to the mask's box.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trnsim.core.location import fail, kernel_location
from trnsim.core.memory import View, user_dtype
from trnsim.nki import language as new_nl
from trnsim.nki.legacy import differences as D
from trnsim.nki.legacy import index as ix
from trnsim.nki.legacy.allocator import allocator
from trnsim.nki.legacy.tile import (
    BlockTensor,
    Pending,
    Tile,
    _Unplaced,
    as_tile,
    check_fresh,
    check_inside,
    defer,
    flush,
    one_psum_input,
    touch,
)
from trnsim.nki.legacy.tile import new_tile as _tile_new
from trnsim.numerics import get_format

_BUFFER_OF = {D.BUFFERS["sbuf"]: new_nl.sbuf, D.BUFFERS["psum"]: new_nl.psum}


def tensor(x: Any, what: str, call: str) -> View:
    """A tensor operand (a tile, an HBM tensor or an index of one)."""
    if isinstance(x, BlockTensor) and not x.block_shape:
        return x.whole()
    if isinstance(x, BlockTensor):
        raise fail(
            "block-dim",
            f"{call} {what}: {x!r} has block dimensions; index its blocks (t[i]) to get a tile",
        )
    if not isinstance(x, View):
        raise fail("operand", f"{call} {what} must be a tile, got {type(x).__name__}")
    if isinstance(x.storage, _Unplaced):
        flush()  # the pending result is used: it gets its bytes now
    check_fresh(x)
    touch(x)
    return x


def operand(x: Any, what: str, call: str) -> Any:
    """A tensor operand as a tile, or a scalar as is."""
    return tensor(x, what, call) if isinstance(x, BlockTensor | View) else x


def new_tile(shape: Sequence[int], dtype: Any, memory: str, name: str = "") -> Tile:
    """A new SBUF/PSUM tile, placed by the compiler's allocation model (``allocator``)."""
    return _tile_new(tuple(int(s) for s in shape), dtype, memory, name)


def cut(v: View, box: tuple[slice, ...] | None, shape: tuple[int, ...]) -> View:
    """``v`` restricted to the mask box of an instruction over ``shape`` (axes where ``v`` is
    broadcast, size 1, are left whole)."""
    if box is None:
        return v
    if len(v.shape) != len(shape):
        return v
    key = tuple(s if n == m else slice(None) for s, n, m in zip(box, v.shape, shape, strict=True))
    return Tile.__getitem__(as_tile(v), key)


def partitions(v: Any, box: tuple[slice, ...] | None) -> Any:
    """``v`` restricted to the partitions of a mask box (its free axes whole): the operands of
    a masked call that do not share the masked tile's free axes."""
    if box is None or not isinstance(v, View):
        return v
    return Tile.__getitem__(as_tile(v), (box[0],) + (slice(None),) * (len(v.shape) - 1))


def empty_box(box: tuple[slice, ...] | None) -> bool:
    return box is not None and any(s.stop <= s.start for s in box)


def result(
    call: str,
    shape: Sequence[int],
    dtype: Any,
    issue: Callable[..., None],
    operands: Sequence[Any] = (),
    mask: Any = None,
    accumulate: Callable[..., None] | None = None,
    side: dict[str, Any] | None = None,
) -> Tile:
    """A new tile, pending, computed by ``issue(dst, *operands, **side)`` (cut to the mask).

    ``side``: the instruction's per-partition operands (an activation's ``bias`` / ``scale``
    / ``reduce_res``, a ``tensor_scalar`` tile operand, ...; tiles or scalars), cut to the
    mask's partitions: the mask applies to the whole instruction, every operand (the 2.26
    programming guide, "Masking")."""
    memory, _, memories, casts = D.RETURNS[call]
    shape = tuple(int(s) for s in shape)
    boxes = ix.boxes(mask, shape) or [None]  # one instruction per box of the mask
    side = {k: operand(v, k, call) for k, v in (side or {}).items()}
    flush()
    operands = one_psum_input(tuple(operands) + tuple(side.values()))
    operands, side = (
        operands[: len(operands) - len(side)],
        dict(zip(side, operands[len(operands) - len(side) :], strict=True)),
    )
    for box in boxes:
        for o in operands:
            if isinstance(o, View):
                check_inside(o, box if len(o.shape) == len(shape) else None)
    flush()
    out = _unplaced_tile(shape, dtype, memory)

    def each_box(fn: Callable[..., None], dst: View) -> None:
        for box in boxes:
            check_inside(dst, box)
            if empty_box(box):
                continue
            ops = [cut(o, box, shape) if isinstance(o, View) else o for o in operands]
            kw = {k: partitions(v, box) for k, v in side.items()}
            fn(cut(dst, box, shape), *ops, **kw)

    def run(dst: View) -> None:
        each_box(issue, dst)

    acc = None
    if accumulate is not None:

        def acc(dst: View) -> None:
            each_box(accumulate, dst)

    load = made = None
    if call == "nl.load" and operands and isinstance(operands[0], View):
        made = kernel_location()  # (a load's line: the key of its loop-invariance)
        load = (made, operands[0], out.fmt, tuple((s.start, s.stop) for b in boxes if b for s in b))
        held = allocator().hoisted_load(*load)
        if held is not None:  # a loop-invariant load: the tile loaded before (no DMA)
            return as_tile(held)

    # the loop of the call, not of the first use that places it (a result first used in an
    # inner loop's first iteration is still multi-buffered over the loop it was made in)
    loop = allocator().loop_here()

    def place() -> View:
        return _tile_new(shape, dtype, memory, "", made, loop)

    held = (*operands, *side.values())
    return defer(Pending(out, run, memories, casts, acc, place, load, held))


def _unplaced_tile(shape: tuple[int, ...], dtype: Any, memory: str) -> Tile:
    """A tile without bytes, shaped as ``new_tile`` would allocate it."""
    fmt = get_format(dtype)
    shp = shape or (1,)
    strides = [1] * len(shp)
    for i in range(len(shp) - 2, 0, -1):
        strides[i] = strides[i + 1] * shp[i + 1]
    storage = _Unplaced(memory, fmt, shp, 0)
    return Tile.trusted(storage, shp, tuple(strides), 0, 0, fmt, user_dtype(fmt), True)


def dtype_of(x: Any) -> np.dtype:
    if isinstance(x, View):
        return np.dtype(x.fmt.dtype) if x.fmt.kind != "packed" else x.dtype
    return D.scalar_dtype(x)


def normalize_dtype(dtype: Any) -> Any:
    if dtype is None:
        return None
    if dtype is bool or dtype is np.bool_:
        return D.COMPARISON_DTYPE
    try:
        return np.dtype(dtype)
    except TypeError:
        return get_format(dtype)


def op_name(op: Any) -> str:
    """An ALU operator given as an ``nl`` function, a NumPy function or a name."""
    if isinstance(op, str):
        return D.NUMPY_OPS.get(op, op)
    name = getattr(op, "legacy_op", None) or getattr(op, "__name__", None)
    if name is None:
        raise fail("operator", f"{op!r} is not an operator (nl.add, np.add, ...)")
    return D.NUMPY_OPS.get(name, name)


def broadcast_shape(shapes: Sequence[tuple[int, ...]], call: str) -> tuple[int, ...]:
    nd = max(len(s) for s in shapes)
    out = []
    for d in range(nd):
        sizes = {s[d - nd + len(s)] if d - nd + len(s) >= 0 else 1 for s in shapes}
        sizes.discard(1)
        if len(sizes) > 1:
            raise fail(
                "broadcast",
                f"{call}: operand shapes {[list(s) for s in shapes]} do not broadcast",
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
