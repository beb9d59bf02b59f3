"""Legacy tensors: ``Tile`` (a view indexed by index expressions), ``BlockTensor`` (SBUF/PSUM
tensors with block dimensions in front of ``nl.par_dim``) and *pending* results.

Legacy calls return a new tile instead of writing a ``dst``. A result is first *pending*: the
instruction is issued when the tile is next used, or, when the very next thing done with it is
an assignment (``t[...] = nl.exp(x)``, ``psum[...] += nl.matmul(...)``), it is issued with the
assignment's target as its ``dst`` (with ``accumulate=True`` for ``+=`` of a matmul into PSUM).
That is what the legacy compiler does with such code (no extra copy), and it keeps the legacy
front end one instruction per call on the new API's instructions. Any other legacy call issues
the pending instruction first, so program order is kept.

A tile is *reused* when its on-chip bytes were given to another tensor by the modulo allocator
(``neuronxcc.nki.compiler``): reading a block whose physical slot now belongs to another block
is an error naming both.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trnsim.core import indirect
from trnsim.core.location import fail
from trnsim.core.memory import HBM, PSUM, SBUF, View
from trnsim.errors import KernelError
from trnsim.nki import isa as nisa
from trnsim.nki.legacy import index as ix
from trnsim.nki.legacy.allocator import LTile, allocator, covers, whole_view
from trnsim.nki.tensor import NkiTensor

# The legacy ``nl`` module the tile operators dispatch to (``a + b`` is ``nl.add(a, b)``, with
# legacy type promotion). ``trnsim.nki.legacy.language`` sits above this module and sets it
# when it is imported, so the two do not import each other.
NL: Any = None


class Tile(NkiTensor):
    """A legacy tile or HBM tensor: an ``NkiTensor`` that also takes index expressions."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Tile:
        if isinstance(self.storage, _Unplaced):
            flush()  # a view of a pending result: give it its bytes first
        if isinstance(key, tuple) and key and isinstance(key[0], View):
            return indirect_rows(self, key)  # type: ignore[return-value]
        if self.on_chip and isinstance(key, tuple) and _has_dynamic(key):
            return dynamic_view(self, key)  # type: ignore[return-value]
        if ix.is_expr_key(key):
            t = expr_view(self, key)
        else:
            t = NkiTensor.__getitem__(self, key)
            t.__class__ = Tile
        stale = _state.stale.get(id(self))
        if stale is not None and stale[0] is self:  # a view of a reused block is reused too
            _state.stale[id(t)] = (t, stale[1])
        return t  # type: ignore[return-value]

    def __setitem__(self, key: Any, value: Any) -> None:
        assign(self[key] if key is not Ellipsis else self, value)

    def _derive(self, *args: Any, **kwargs: Any) -> Tile:
        t = NkiTensor._derive(self, *args, **kwargs)
        t.__class__ = Tile
        return t  # type: ignore[return-value]

    def broadcast_to(self, shape: Any) -> Tile:  # type: ignore[override]
        return NL.broadcast_to(self, shape=tuple(shape))

    # tile arithmetic: the nl functions (legacy type promotion)
    def _nl(self, name: str, other: Any, reverse: bool = False) -> Tile:
        fn = getattr(NL, name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o: Any) -> Tile:  # type: ignore[override]
        if isinstance(o, ix.Expr):  # a runtime offset in an index: off_tile[0, i] + iy
            return ix.Dynamic(self, o)  # type: ignore[return-value]
        return self._nl("add", o)

    def __radd__(self, o: Any) -> Tile:
        if isinstance(o, ix.Expr):
            return ix.Dynamic(self, o)  # type: ignore[return-value]
        return self._nl("add", o, True)

    def __sub__(self, o: Any) -> Tile:
        return self._nl("subtract", o)

    def __rsub__(self, o: Any) -> Tile:
        return self._nl("subtract", o, True)

    def __mul__(self, o: Any) -> Tile:
        return self._nl("multiply", o)

    def __rmul__(self, o: Any) -> Tile:
        return self._nl("multiply", o, True)

    def __truediv__(self, o: Any) -> Tile:
        return self._nl("divide", o)

    def __rtruediv__(self, o: Any) -> Tile:
        return self._nl("divide", o, True)

    def __neg__(self) -> Tile:
        return self._nl("multiply", -1)

    def __iadd__(self, other: Any) -> Tile:
        accumulate(self, other)
        return self


def indirect_rows(t: View, key: tuple[Any, ...]) -> View:
    """``hbm[idx_tile, i_f]``: the rows of a 2-D HBM tensor named by an SBUF index tile (one
    index per partition), read when the DMA runs: the new API's ``.ap(vector_offset=idx,
    indirect_dim=0)`` gather/scatter view (SDK 2.26 ``nl.load`` / ``nl.store`` docstrings,
    indirect DMA examples)."""
    idx = key[0]
    if t.memory != HBM or len(t.shape) != 2 or len(key) != 2:
        raise fail(
            "indirect",
            f"an index tile selects rows of a 2-D HBM tensor (got a {list(t.shape)} "
            f"{t.memory} tensor and {len(key)} indices)",
        )
    if len(idx.shape) == 1:
        idx = NkiTensor.wrap(idx).reshape(idx.shape[0], 1)
    if idx.memory == HBM or idx.free_size != 1:
        raise fail(
            "indirect",
            f"the index tile must be an on-chip [n, 1] tile, got {list(idx.shape)} in {idx.memory}",
        )
    rest = key[1]
    if isinstance(rest, ix.Expr):
        shape, strides, off, _, problem = ix.expr_index(t.shape[1:], t.strides[1:], False, (rest,))
        if problem is not None:
            problem.check(None)
        free = [[st, n] for st, n in zip(strides, shape, strict=True) if n != 1] or [[1, 1]]
    else:
        start, stop, step = (rest if isinstance(rest, slice) else slice(None)).indices(t.shape[1])
        off, free = start * t.strides[1], [[step * t.strides[1], len(range(start, stop, step))]]
    pattern = [[t.strides[0], idx.shape[0]], *free]
    return NkiTensor.wrap(t).ap(pattern, t.offset + off, vector_offset=idx, indirect_dim=0)


def _has_dynamic(key: tuple[Any, ...]) -> bool:
    return any(isinstance(k, ix.Dynamic | View) for k in key[1:])


def dynamic_view(t: Tile, key: tuple[Any, ...]) -> View:
    """``sbuf[i_p, off_tile[0, j] + i_f]`` (or ``sbuf[i_p, off_tile[0, j], i_z]``): the access
    at offset 0 of the dynamic axis, moved at run time by the tile's value in units of that
    axis (``trnsim.core.indirect.on_chip``; ``ix.Dynamic``)."""
    dyn = [(a, k) for a, k in enumerate(key) if isinstance(k, ix.Dynamic | View)]
    if len(dyn) != 1 or dyn[0][0] == 0:
        raise fail(
            "indirect",
            f"a runtime index on an SBUF/PSUM tensor {list(t.shape)} takes one free axis "
            f"(got {len(dyn)}, on axes {[a for a, _ in dyn]})",
        )
    axis, k = dyn[0]
    d = k if isinstance(k, ix.Dynamic) else ix.Dynamic(k)
    scalar = d.scalar
    if isinstance(scalar.storage, _Unplaced):
        flush()
    static_key = tuple(d.expr if a == axis else x for a, x in enumerate(key))
    if ix.is_expr_key(static_key):
        static = expr_view(t, static_key)
    else:
        static = NkiTensor.__getitem__(t, static_key)
    if len(static.shape) != len(t.shape):
        raise fail(
            "indirect",
            f"a runtime index on SBUF/PSUM tensor {list(t.shape)} needs every axis indexed by "
            "an index expression or slice (no integer that drops an axis)",
        )
    return indirect.on_chip(t, static, scalar, axis, t.strides[axis])


def as_tile(v: View) -> Tile:
    if type(v) is not Tile:
        if isinstance(v, NkiTensor) and type(v) is NkiTensor:
            v.__class__ = Tile
            return v  # type: ignore[return-value]
        return Tile.trusted(
            v.storage, v.shape, v.strides, v.offset, v.p0, v.fmt, v.dtype, v.inbounds
        )
    return v  # type: ignore[return-value]


def expr_view(t: View, key: Any) -> Tile:
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (len(t.shape) - len(key) + 1) + key[i + 1 :]
    key = key + (slice(None),) * (len(t.shape) - len(key))
    shape, strides, off, p0, problem = ix.expr_index(t.shape, t.strides, t.on_chip, key)
    v = Tile.trusted(t.storage, shape, strides, t.offset + off, t.p0 + p0, t.fmt, t.dtype, False)
    if problem is None:
        v.check_bounds()
    else:
        _state.outside[id(v)] = (v, problem)
    return v


def check_inside(v: Any, box: tuple[slice, ...] | None) -> None:
    """An index that reached outside its tensor must be cut back inside by the mask ``box``
    of the instruction using it (else the out-of-bounds error, at the kernel's line)."""
    entry = _state.outside.get(id(v))
    if entry is not None and entry[0] is v:
        entry[1].check(box)
        if box is None:
            del _state.outside[id(v)]


# ---- unplaced tiles: a pending result's own storage, allocated only if it is issued there ----


class _UnplacedAlloc:
    __slots__ = ("kind", "name", "nbytes", "partitions")

    def __init__(self, kind: str, partitions: int, nbytes: int) -> None:
        self.kind, self.name, self.partitions, self.nbytes = kind, "unplaced", partitions, nbytes


class _Unplaced:
    """The storage of a tile that has no bytes yet (a pending result)."""

    __slots__ = ("alloc", "fmt", "shape")

    def __init__(self, kind: str, fmt: Any, shape: tuple[int, ...], nbytes: int) -> None:
        self.alloc = _UnplacedAlloc(kind, shape[0] if shape else 1, nbytes)
        self.fmt, self.shape = fmt, shape


# ---- pending results ----------------------------------------------------------------------------


@dataclass
class Pending:
    """A legacy call's result, not yet issued: ``issue(dst)`` issues it into ``dst``;
    ``place()`` gives ``tile`` its own bytes (``allocate``) first when it is issued there.
    ``load``: ``(line, src, format, mask boxes)`` of an ``nl.load`` (remembered for the next
    iteration: ``allocator.Allocator.hoisted_load``)."""

    tile: Tile
    issue: Callable[[View], None]
    memories: tuple[str, ...]
    casts: bool
    accumulate: Callable[[View], None] | None = None
    allocate: Callable[[], View] | None = None
    load: tuple[Any, ...] | None = None
    operands: tuple[Any, ...] = ()

    def issue_here(self) -> None:
        t = self.tile
        if self.allocate is None or not isinstance(t.storage, _Unplaced):
            self.issue(t)
            return
        _adopt(t, self.allocate())
        if self.load is None:
            self.issue(t)
            return
        alloc = allocator()
        first = len(alloc.core.record)
        self.issue(t)
        alloc.note_load(*self.load, t, first)


def _adopt(t: Tile, real: View) -> None:
    """An unplaced tile takes ``real``'s bytes (``real`` has ``t``'s shape)."""
    t.storage, t.shape, t.strides = real.storage, real.shape, real.strides
    t.offset, t.p0 = real.offset, real.p0


class _State(threading.local):
    pending: Pending | None = None

    def __init__(self) -> None:
        self.outside: dict[int, tuple[View, ix.OutsideTile]] = {}
        self.stale: dict[int, tuple[View, str]] = {}
        # tiles the front end makes once per program (language._identity)
        self.consts: dict[Any, Any] = {}


_state = _State()


def defer(p: Pending) -> Tile:
    """``p`` is the pending result; its operands keep their bytes until it is issued (the
    allocator does not give them away to place its result or its target)."""
    flush()
    _state.pending = p
    allocator().hold(p.operands)
    return p.tile


def flush() -> None:
    """Issue the pending result into its own tile (before any other use)."""
    p = _state.pending
    if p is not None:
        _state.pending = None
        try:
            p.issue_here()
        finally:
            allocator().hold(())


def discard() -> None:
    _state.pending = None
    _state.outside.clear()
    _state.stale.clear()
    _state.consts.clear()


# ---- fills made lazily: the compiler folds nl.zeros into the first matmul ----------------------


def lazy_fill(t: View, value: Any) -> None:
    """``nl.zeros`` / ``nl.full`` of a tile made lazily (every PSUM one; ``lazy_initialization``
    and every block of a block tensor): the memset is issued at the tile's first use, unless
    that use is ``t += matmul`` with value 0 (then the matmul starts the accumulation group:
    what the legacy compiler emits) or a write of the whole tile."""
    lt = t.storage.alloc.user
    if isinstance(lt, LTile):
        lt.fill = (value,)
    else:
        nisa.memset(t, value)


def _fill_of(v: View) -> Any:
    lt = v.storage.alloc.user
    return lt if lt is not None and getattr(lt, "fill", None) is not None else None


def _drop_fill(v: View, zero_only: bool) -> bool:
    """Forget a pending fill that a write of the whole tile ``v`` makes unnecessary."""
    lt = _fill_of(v)
    if lt is None:
        return False
    if (zero_only and lt.fill[0] != 0) or not covers(v, lt):
        return False
    lt.fill = None
    return True


def _issue_fill(v: View) -> None:
    lt = _fill_of(v)
    if lt is not None:
        value = lt.fill[0]
        lt.fill = None
        flush()
        nisa.memset(as_tile(whole_view(v.storage, lt.shape, lt.fmt)), value)


def touch(v: View) -> None:
    """``v`` is about to be used: a pending fill of its tile is issued first."""
    if _fill_of(v) is not None:
        _issue_fill(v)


def new_tile(
    shape: tuple[int, ...], dtype: Any, memory: str, name: str = "",
    made: tuple[str, int] | None = None, loop: Any = "here",
) -> Tile:  # fmt: skip
    """A new SBUF/PSUM tile, placed by the compiler's allocation model (``allocator``);
    ``made``: the kernel line that made it (a pending result's call; default: here);
    ``loop``: the ``nl`` loop it is made in (a pending result's: where it was called)."""
    t = allocator().new_tile(
        tuple(shape), dtype, memory, name, made=made, view_type=Tile, loop=loop
    )
    return t  # type: ignore[return-value]


_PSUM_BROADCASTS: weakref.WeakSet[Any] = weakref.WeakSet()
"""The storages of partition broadcasts left in PSUM (``language._partition_broadcast``)."""


def mark_psum_broadcast(v: View) -> None:
    """``v`` (a PSUM tile) holds a partition broadcast its readers may read in place."""
    _PSUM_BROADCASTS.add(v.storage)


def one_psum_input(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """``operands`` with at most one in PSUM where a PSUM broadcast makes two: "the two input
    tiles ... cannot both reside in PSUM" (SDK-2.26 ``nki.isa.tensor_tensor``,
    ``tensor_tensor_scan``, ``scalar_tensor_tensor`` docstrings), so a broadcast read with
    another PSUM input is copied to SBUF first, as the compiler would have placed it there."""
    psum = [i for i, o in enumerate(operands) if isinstance(o, View) and o.memory == PSUM]
    if len(psum) < 2:
        return operands
    out = list(operands)
    for i in psum:
        o = out[i]
        if o.storage in _PSUM_BROADCASTS:
            sb = new_tile(tuple(o.shape), o.dtype, SBUF, name="broadcast_sbuf")
            nisa.tensor_copy(sb, o)
            out[i] = sb
            if sum(isinstance(v, View) and v.memory == PSUM for v in out) < 2:
                break
    return tuple(out)


def check_fresh(v: Any) -> None:
    """Reading a block whose bytes another block or tensor has written since is an error."""
    entry = _state.stale.get(id(v))
    if entry is not None and entry[0] is v:
        raise fail("tile-reused", entry[1])


def _unstale(v: Any) -> bool:
    entry = _state.stale.get(id(v))
    if entry is not None and entry[0] is v:
        del _state.stale[id(v)]
        return True
    return False


def _take(value: Any) -> Pending | None:
    p = _state.pending
    if p is not None and p.tile is value:
        _state.pending = None
        allocator().hold(())
        return p
    return None


def _same(a: View, b: View) -> bool:
    return (
        a.storage is b.storage
        and a.shape == b.shape
        and a.strides == b.strides
        and a.offset == b.offset
        and a.p0 == b.p0
    )


def assign(dst: View, value: Any) -> None:
    """``dst[...] = value``: a pending result is issued into ``dst`` when it can write there
    (memory and dtype allowed, same shape); otherwise it is issued into its own tile and
    copied (``dma_copy`` to or from HBM, ``tensor_copy`` on chip)."""
    p = _take(value)
    if p is None:
        check_inside(dst, None)
    if p is not None:
        target = _same_size_view(dst, p.tile.shape)
        if target is not None and dst.memory in p.memories and (p.casts or dst.fmt == p.tile.fmt):
            _drop_fill(dst, zero_only=False)  # the whole tile is overwritten
            touch(dst)
            p.issue(target)
            return
        p.issue_here()
    touch(dst)
    flush()
    if isinstance(value, BlockTensor):
        raise fail("block-dim", "assigning a tensor with block dimensions; index its blocks")
    if isinstance(value, indirect.IndirectView) and value.memory != HBM:
        raise fail(
            "indirect",
            "copying a tensor indexed at run time by assignment is not supported (NKI "
            "err_copy_dynamic_indirect_indices_not_natively_supported); use "
            "nisa.tensor_copy_dynamic_src",
        )
    if isinstance(value, View):
        if _same(dst, value):
            return
        check_fresh(value)
        if tuple(value.shape) != tuple(dst.shape):
            same = _same_size_view(value, dst.shape)
            if same is not None:
                value = same
            elif not (dst.memory == HBM or value.memory == HBM):
                value = broadcast_to(value, dst.shape)
        if dst.memory == HBM or value.memory == HBM:
            nisa.dma_copy(dst, value)
        else:
            v = value
            _on_chip(dst, lambda d: nisa.tensor_copy(d, v))
        return
    _on_chip(dst, lambda d: nisa.memset(d, value))


def _on_chip(dst: View, write: Callable[[View], None]) -> None:
    """``write(dst)`` by a compute engine; where ``dst`` starts at a partition the compute
    engines cannot start at (rule ``start-partition``, e.g. ``t[i, j] = x`` for one partition
    ``i`` not a multiple of 32), the write goes to a new tile at partition 0 and a DMA (no
    start-partition rule) moves it into place (``differences.STAGED``)."""
    try:
        write(dst)
    except KernelError as e:
        if e.rule != "start-partition" or dst.memory == PSUM:
            raise
        tmp = new_tile(tuple(dst.shape), dst.dtype, SBUF)
        write(tmp)
        nisa.dma_copy(dst, tmp)


def _same_size_view(v: View, shape: tuple[int, ...]) -> View | None:
    """``v`` viewed as ``shape`` when that only adds or drops size-1 dims (``[P]`` as
    ``[P, 1]``), keeping the partition dim; None otherwise."""
    shape = tuple(shape)
    if tuple(v.shape) == shape:
        return v
    if [n for n in v.shape if n != 1] != [n for n in shape if n != 1]:
        return None
    if v.on_chip and (not shape or v.shape[0] != shape[0]):
        return None
    try:
        return NkiTensor.wrap(v).reshape(shape)
    except Exception:
        return None


def accumulate(dst: Tile, other: Any) -> None:
    """``dst += other``: a pending matmul accumulates into ``dst`` (PSUM, ``accumulate=True``);
    anything else is a Vector-engine add."""
    p = _take(other)
    if p is not None:
        if p.accumulate is not None and dst.memory == PSUM and dst.shape == p.tile.shape:
            # zeroed by nl.zeros, or a reused PSUM slot: this matmul starts the group
            fresh = _drop_fill(dst, zero_only=True) | _unstale(dst)
            touch(dst)
            (p.issue if fresh else p.accumulate)(dst)
            return
        p.issue_here()
    touch(dst)
    check_fresh(dst)
    flush()
    if isinstance(other, View):
        (other,) = one_psum_input((dst, broadcast_to(other, dst.shape)))[1:]
        nisa.tensor_tensor(dst, dst, other, "add")
    else:
        nisa.tensor_scalar(dst, dst, "add", float(other))


def broadcast_to(v: View, shape: tuple[int, ...]) -> View:
    """Free-dim broadcasting of size-1 dims (stride 0); the partition dim cannot broadcast."""
    shape = tuple(shape)
    if tuple(v.shape) == shape:
        return v
    if len(v.shape) < len(shape) and v.on_chip and v.shape and v.shape[0] == shape[0]:
        # a tile's first dim is its partition dim: a reduction's [P] result broadcasts to
        # [P, F...] as [P, 1...] (the 2.26 sd_attention example: tensor_reduce(axis=(1,))
        # then .broadcast_to((P, F)))
        v = NkiTensor.wrap(v).reshape(*v.shape, *([1] * (len(shape) - len(v.shape))))
    if len(v.shape) != len(shape):
        raise fail("broadcast", f"cannot broadcast {list(v.shape)} to {list(shape)}")
    t = NkiTensor.wrap(v)
    for d, (have, want) in enumerate(zip(v.shape, shape, strict=True)):
        if have == want:
            continue
        if have != 1 or (d == 0 and v.on_chip):
            what = "the partition dim" if d == 0 and v.on_chip else f"dim {d}"
            raise fail(
                "broadcast",
                f"cannot broadcast {list(v.shape)} to {list(shape)} along {what}",
            )
        t = t.broadcast(d, want)
    return as_tile(t)


# ---- block tensors ------------------------------------------------------------------------------


class BlockTensor:
    """An SBUF/PSUM tensor ``(B..., par_dim(P), F...)``: ``prod(B)`` logical ``(P, F...)`` tiles.

    ``locate(blocks)`` gives a logical block's tile and, for direct allocation
    (``neuronxcc.nki.compiler``), the key of the physical slot it occupies. Slots are shared:
    ``owners`` (one dict per core, shared by every directly allocated tensor) records which
    tensor block last wrote each slot, so reading a block whose slot was written since by
    another block or tensor is a ``tile-reused`` error."""

    def __init__(
        self,
        block_shape: tuple[int, ...],
        tile_shape: tuple[int, ...],
        locate: Callable[[tuple[int, ...]], tuple[Tile, Any]],
        name: str,
        dtype: Any,
        memory: str,
        fmt_name: str,
        owners: dict[Any, tuple[int, tuple[int, ...], str]] | None = None,
    ) -> None:
        self.block_shape = block_shape
        self.tile_shape = tile_shape
        self.locate = locate
        self.name = name
        self.dtype = dtype
        self.buffer = memory
        self.fmt_name = fmt_name
        self.owners = owners
        self.site: tuple[str, int] | None = None  # the kernel line that made it

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.block_shape, *self.tile_shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _split(self, key: Any) -> tuple[tuple[int, ...], tuple[Any, ...]]:
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1 :]
        nb = len(self.block_shape)
        if len(key) < nb:
            raise fail(
                "block-dim",
                f"tensor {self.name!r} {self._desc()}: index every block dimension with an "
                f"integer (got {len(key)} indices)",
            )
        blocks = []
        for d, (k, n) in enumerate(zip(key[:nb], self.block_shape, strict=True)):
            if not ix._is_int(k):
                raise fail(
                    "not-implemented",
                    f"block dim {d} of tensor {self.name!r} {self._desc()} indexed by {k!r}; "
                    "trnsim takes an integer per block dimension",
                )
            if not -n <= int(k) < n:
                raise fail(
                    "out-of-bounds",
                    f"block index {int(k)} of dim {d} (size {n}) of {self.name!r} {self._desc()}",
                )
            blocks.append(int(k) % n)
        return tuple(blocks), key[nb:]

    def _desc(self) -> str:
        b = "".join(f"{n}, " for n in self.block_shape)
        f = "".join(f", {n}" for n in self.tile_shape[1:])
        return f"({b}par_dim({self.tile_shape[0]}){f})"

    def block(self, blocks: tuple[int, ...], write: bool) -> Tile:
        t, slot = self.locate(blocks)
        if self.owners is not None and slot is not None:
            me = (id(self), blocks, self.name)
            owner = self.owners.get(slot)
            if write:
                self.owners[slot] = me
            elif owner is not None and owner[:2] != me[:2]:
                what = f"block {list(owner[1])} of {owner[2]!r}" if owner[1] else repr(owner[2])
                mine = f"block {list(blocks)} of {self.name!r}" if blocks else repr(self.name)
                # an error when read (not when written, or when a matmul group starts in it)
                t = Tile.trusted(
                    t.storage, t.shape, t.strides, t.offset, t.p0, t.fmt, t.dtype, t.inbounds
                )
                _state.stale[id(t)] = (
                    t,
                    f"{mine} {self._desc()} is read after its physical tile was reused by "
                    f"{what} (direct allocation at {slot})",
                )
        return t

    def whole(self) -> Tile:
        """The tensor as one tile (no block dimensions), read."""
        if self.block_shape:
            raise fail(
                "block-dim",
                f"{self!r} has block dimensions; index its blocks (t[i]) to get a tile",
            )
        return self.block((), write=False)

    def __getitem__(self, key: Any) -> Tile:
        blocks, rest = self._split(key)
        t = self.block(blocks, write=False)
        return t[rest] if rest and not _full(rest, t.shape) else t

    def __setitem__(self, key: Any, value: Any) -> None:
        blocks, rest = self._split(key)
        t = self.block(blocks, write=True)
        assign(t[rest] if rest and not _full(rest, t.shape) else t, value)

    def __iadd__(self, other: Any) -> BlockTensor:
        accumulate(self.whole(), other)
        return self

    def __repr__(self) -> str:
        return f"BlockTensor({self.name!r} {self._desc()} {self.fmt_name} @ {self.buffer})"


def _full(rest: tuple[Any, ...], shape: tuple[int, ...]) -> bool:
    return all(isinstance(k, slice) and k == slice(None) for k in rest) and len(rest) <= len(shape)
