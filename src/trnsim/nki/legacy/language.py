"""``neuronxcc.nki.language`` (legacy NKI, Neuron <= 2.26) on trnsim's new-API instructions.

Calls return tiles (``differences.RETURNS`` says where and of which dtype); each is one
``trnsim.nki.isa`` instruction (or a documented few) issued through ``ops.result``. Index
expressions and masks: ``index``; tiles, block tensors and pending results: ``tile``.
Source: SDK 2.26 ``general/nki/api/nki/language/__init__.py`` and the programming guide.
"""

from __future__ import annotations

import builtins
import sys
import weakref
from math import prod as _prod
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.core.argrules import shape_dims
from trnsim.core.location import fail
from trnsim.core.memory import HBM, PSUM, SBUF, View
from trnsim.errors import KernelError
from trnsim.nki import isa as nisa
from trnsim.nki import language as new_nl
from trnsim.nki.context import current
from trnsim.nki.legacy import differences as D
from trnsim.nki.legacy import grid as _grid
from trnsim.nki.legacy import index as _index
from trnsim.nki.legacy import ops
from trnsim.nki.legacy import tile as _tile_module
from trnsim.nki.legacy.tile import (
    CAPACITY_RULES,
    BlockTensor,
    Tile,
    as_tile,
    check_inside,
    flush,
    lazy_fill,
    release_spares,
    spillable,
    track,
)
from trnsim.numerics import get_format

nc, spmd_dim = _grid.nc, _grid.spmd_dim
arange, mgrid, ds = _index.arange, _index.mgrid, _index.ds  # index expressions (index.py)

# ---- dtypes --------------------------------------------------------------------------------

bool_ = new_nl.bool_
int8, int16, int32 = new_nl.int8, new_nl.int16, new_nl.int32
uint8, uint16, uint32 = new_nl.uint8, new_nl.uint16, new_nl.uint32
float16, float32, bfloat16 = new_nl.float16, new_nl.float32, new_nl.bfloat16
float8_e4m3 = new_nl.float8_e4m3
float8_e5m2 = new_nl.float8_e5m2
tfloat32 = new_nl.tfloat32
fp32 = np.finfo(np.float32)
bfp16 = ml_dtypes.finfo(ml_dtypes.bfloat16)


def finfo(dtype: Any) -> Any:
    return ml_dtypes.finfo(dtype) if np.dtype(dtype).kind != "f" else np.finfo(dtype)


# ---- buffers ---------------------------------------------------------------------------------


class Buffer:
    """A legacy buffer: ``nl.sbuf``, ``nl.psum``, ``nl.hbm`` / ``shared_hbm`` / ``private_hbm``,
    or a direct allocation (``neuronxcc.nki.compiler``)."""

    def __init__(self, name: str, allocator: Any = None) -> None:
        self.name = name
        self.memory = D.BUFFERS[name]
        self.allocator = allocator

    def __repr__(self) -> str:
        return f"nl.{self.name}" if self.allocator is None else f"{self.name}.alloc(...)"


sbuf = Buffer("sbuf")
psum = Buffer("psum")
hbm = Buffer("hbm")
shared_hbm = Buffer("shared_hbm")
private_hbm = Buffer("private_hbm")


class par_dim:
    """``nl.par_dim(n)``: marks the partition dimension of an SBUF/PSUM tensor shape; the
    dimensions before it are block dimensions."""

    def __init__(self, size: int) -> None:
        if not isinstance(size, int | np.integer) or size < 1:
            raise fail("par-dim", f"nl.par_dim takes a positive integer, got {size!r}")
        self.size = int(size)

    def __index__(self) -> int:
        return self.size

    def __int__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"par_dim({self.size})"


# ---- tensor creation ------------------------------------------------------------------------


def _buffer(buffer: Any) -> Buffer:
    if buffer is None:
        return sbuf
    if isinstance(buffer, Buffer):
        return buffer
    raise fail(
        "buffer",
        f"buffer must be nl.sbuf / nl.psum / nl.hbm / nl.shared_hbm / nl.private_hbm or a "
        f"neuronxcc.nki.compiler allocation, got {buffer!r}",
    )


def _split_shape(shape: Any, buf: Buffer) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(block dims, tile dims) of a legacy shape; ``par_dim`` only on SBUF/PSUM."""
    shape = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
    pos = [i for i, s in enumerate(shape) if isinstance(s, par_dim)]
    if len(pos) > 1:
        raise fail("par-dim", f"shape {shape} has {len(pos)} par_dim dimensions; at most one")
    dims = shape_dims(shape)  # a float such as 64.5 is refused, not truncated
    if any(d < 1 for d in dims):
        raise fail("shape", f"tensor shape {list(dims)} must have positive sizes")
    if not pos or buf.memory == HBM:
        return (), dims
    return dims[: pos[0]], dims[pos[0] :]


def ndarray(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    """A new tensor: an HBM tensor, an SBUF/PSUM tile, or a block tensor
    ``(B..., par_dim(P), F...)``."""
    flush()
    buf = _buffer(buffer)
    blocks, tile_shape = _split_shape(shape, buf)
    dtype = ops.normalize_dtype(dtype)
    if buf.memory == HBM:
        return _hbm(tile_shape, dtype, buf, name)
    if buf.allocator is not None:
        return buf.allocator.allocate(blocks, tile_shape, dtype, buf.memory, name)
    if not blocks:
        return ops.new_tile(tile_shape, dtype, buf.memory, name)
    fmt = get_format(dtype)
    label = name or "tensor"
    t = BlockTensor(
        blocks,
        tile_shape,
        block_locator(blocks, tile_shape, dtype, buf.memory, label),
        label,
        fmt.dtype if fmt.kind != "packed" else dtype,
        buf.memory,
        fmt.name,
    )
    double_buffer(t)
    t.locate.tensor = weakref.ref(t)  # type: ignore[attr-defined]
    return t


MULTI_BUFFER = 2
"""Physical copies the compiler keeps of a block tensor allocated in a loop (the block-dimension
migration guide: "compiler could choose to allocate 2 physical tiles ... then the dma copy from
HBM to SBUF can overlap"). A block tensor is allocated at its first use, after the kernel has
dropped the previous one made at the same line; the last ``MULTI_BUFFER - 1`` of them are kept
so consecutive iterations get different bytes (freed first when memory runs out:
``tile.allocating``)."""


def double_buffer(t: BlockTensor) -> None:
    from trnsim.core.location import kernel_location

    _state = _tile_module._state

    t.site = kernel_location()
    ring = _state.sites.setdefault(t.site, [])
    ring.append(t)
    del ring[:-MULTI_BUFFER]
    for spare in ring[:-1]:  # kept for double buffering only: the first to go when memory is full
        for alloc in spare.locate.allocs():
            alloc.reclaim_first = True


def _current(locate: Any) -> bool:
    """The block tensor of ``locate`` is alive and the latest made at its line (an earlier one
    kept for double buffering is not spilled: its blocks are dead once the next is made)."""
    ref = getattr(locate, "tensor", None)
    t = ref() if ref is not None else None
    if t is None:
        return False
    ring = _tile_module._state.sites.get(getattr(t, "site", None))
    return bool(ring) and ring[-1] is t


def _spill_tile(shape: tuple[int, ...], dtype: Any, name: str) -> Tile:
    """An SBUF tile for a spilled (or refilled) block that takes free space only: when SBUF
    has none, the oldest spilled block in SBUF moves on to HBM to make room; only when no
    spilled block is left does it take the ordinary placement (which reuses the least
    recently used tile's bytes). A spill must not displace a live tile of the kernel."""
    mem = current().core.sbuf
    isz = get_format(dtype).dtype.itemsize
    nbytes = _prod(shape[1:]) * isz
    while True:
        off = mem._first_fit(0, shape[0], nbytes, isz)
        if off is not None:
            t = as_tile(track(new_nl.ndarray(shape, dtype, new_nl.sbuf, name, address=(0, off))))
            t.storage.alloc.reclaim_first = True
            return t
        oldest = builtins.min(
            (a for a in tuple(mem.live) if a.reclaim_first and a.spill is not None),
            key=lambda a: a.last_seq,
            default=None,
        )
        if oldest is None:
            t = ops.new_tile(shape, dtype, SBUF, name)
            t.storage.alloc.reclaim_first = True
            return t
        hook, oldest.spill = oldest.spill, None
        hook()
        mem.free(oldest)


def block_locator(
    blocks: tuple[int, ...], tile_shape: tuple[int, ...], dtype: Any, memory: str, name: str
):
    """Logical blocks of an automatically allocated block tensor, allocated on first use: in
    SBUF all blocks side by side in one allocation when it fits, else (and always in PSUM)
    each block its own tile (the compiler allocates physical tiles for the blocks that are
    live and frees them after their last use: ``tile.allocating`` evicts the least recently
    used).

    Spilling (trnsim's model of what the 2.26 programming model says the compiler does when
    live data overflows an on-chip memory, "Memory hierarchy": spills and refills to the next
    tier). A block written and not read since is live: when its bytes are about to be given
    to another tile (``trnsim.core.memory`` reuse, or an eviction) it is first copied out: a
    PSUM block to a new SBUF tile (``tensor_copy``), an SBUF block, or a PSUM block's SBUF
    copy when SBUF is full, to a private HBM tensor (``dma_copy``). Using the block again
    refills it into a new tile: HBM -> SBUF (``dma_copy``), SBUF -> PSUM (``tensor_copy``;
    a DMA cannot write PSUM). The copy stays valid until the block is written again, so a
    block only read since its refill is dropped, not copied again, when its bytes go. A block
    read since its last write and never copied is dead when its bytes go (the compiler frees
    a tile after its last use; using it again is the ``overlap`` error, as before). Only the
    latest block tensor made at its line spills (an earlier one kept for double buffering is
    dead). Each copy is an instruction of the record, issued in program order where the spill
    or refill happens, so the timing model charges it. The compiler's own spill placement
    and cost are not public; this is trnsim's choice."""
    slot = _prod(tile_shape[1:])
    free = tile_shape[1:]
    strides = [1] * len(free)
    for i in range(len(free) - 2, -1, -1):
        strides[i] = strides[i + 1] * free[i + 1]
    st = (1, *strides)
    whole: list[Tile | None] = []
    tiles: dict[tuple[int, ...], Tile] = {}  # blocks in their own tile now
    copies: dict[tuple[int, ...], Tile] = {}  # valid spilled copies (SBUF or HBM)
    dirty: set[tuple[int, ...]] = set()  # written and not read since

    def locate(b: tuple[int, ...]) -> tuple[Tile, Any]:
        if not whole and memory == PSUM:  # PSUM: 8 banks; blocks live and die one by one
            whole.append(None)
        while not whole:
            try:
                shape2 = (tile_shape[0], _prod(blocks) * slot)
                u = new_nl.ndarray(shape2, dtype, ops._BUFFER_OF[memory], name)
                whole.append(as_tile(track(u)))
            except KernelError as exc:
                if exc.rule not in CAPACITY_RULES:
                    raise
                if not release_spares():
                    whole.append(None)
        u = whole[0]
        if u is not None:
            off = u.offset + _linear(b, blocks) * slot
            return Tile.trusted(u.storage, tile_shape, st, off, u.p0, u.fmt, u.dtype, True), None
        t = tiles.get(b)
        if t is None:
            t = ops.new_tile(tile_shape, dtype, memory, name)
            c = copies.get(b)  # (read after placing t, which may have moved it on to HBM)
            if c is not None:  # refill
                if c.memory == HBM and memory == SBUF:
                    nisa.dma_copy(t, c)
                else:
                    if c.memory == HBM:  # a DMA cannot write PSUM: staged in SBUF
                        stage = _spill_tile(tile_shape, dtype, f"{name} refill")
                        nisa.dma_copy(stage, c)
                        c = stage
                    nisa.tensor_copy(t, c)
            tiles[b] = t
            spillable(t, lambda: spill(b))
        return t, None

    def note(b: tuple[int, ...], write: bool) -> None:
        """An access to block ``b`` (``BlockTensor.block``): a write makes its copy stale."""
        if write:
            dirty.add(b)
            c = copies.pop(b, None)
            if c is not None:
                spillable(c, None)
        else:
            dirty.discard(b)

    def spill(b: tuple[int, ...]) -> None:
        t = tiles.pop(b)
        if b not in dirty or not _current(locate):
            return  # read since written (a copy, if any, is still valid), or dead
        dirty.discard(b)
        if memory == SBUF:
            c = as_tile(new_nl.ndarray(tile_shape, dtype, new_nl.private_hbm, f"{name} spill"))
            nisa.dma_copy(c, t)
        else:
            c = _spill_tile(tile_shape, dtype, f"{name} spill")
            nisa.tensor_copy(c, t)
            spillable(c, lambda: spill_copy(b))
        copies[b] = c

    def spill_copy(b: tuple[int, ...]) -> None:
        c = copies.get(b)
        if c is None or not _current(locate):
            return
        h = as_tile(new_nl.ndarray(tile_shape, dtype, new_nl.private_hbm, f"{name} spill"))
        nisa.dma_copy(h, c)
        copies[b] = h

    def allocs() -> list[Any]:
        return [u.storage.alloc for u in whole if u is not None] + [
            t.storage.alloc for t in tiles.values()
        ]

    locate.note = note  # type: ignore[attr-defined]
    locate.allocs = allocs  # type: ignore[attr-defined]
    return locate


def _linear(idx: tuple[int, ...], shape: tuple[int, ...]) -> int:
    out = 0
    for i, n in zip(idx, shape, strict=True):
        out = out * n + i
    return out


def _itemsize(dtype: Any) -> int:
    return get_format(dtype).dtype.itemsize


def _hbm(shape: tuple[int, ...], dtype: Any, buf: Buffer, name: str) -> Tile:
    prog = current()
    if buf.name != "shared_hbm":
        return as_tile(new_nl.ndarray(shape, dtype, new_nl.private_hbm, name=name))
    # every program of the launch gets the same i-th shared_hbm tensor (grid.py)
    seq = _grid.state.shared_seq
    _grid.state.shared_seq += 1
    with prog.launch.lock:
        key = ("legacy-shared-hbm", seq)
        t = prog.launch.mailbox.get(key)
        if t is None:
            t = prog.launch.mailbox[key] = new_nl.ndarray(
                shape, dtype, new_nl.private_hbm, name=name
            )
    if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
        raise fail(
            "spmd-shared-hbm",
            f"shared_hbm tensor #{seq} is {list(t.shape)} {t.dtype} in another program of the "
            f"grid but {list(shape)} {dtype} here",
        )
    return as_tile(t)


def zeros(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    return full(shape, 0, dtype, buffer=buffer, name=name)


def ones(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    return full(shape, 1, dtype, buffer=buffer, name=name)


def full(
    shape: Any, fill_value: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any
) -> Any:
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    if isinstance(t, BlockTensor):
        flush()
        for b in np.ndindex(*t.block_shape):
            nisa.memset(t.block(tuple(b), write=True), fill_value)
    elif t.memory == HBM:
        tmp = ops.new_tile(t.shape, t.dtype, SBUF)
        nisa.memset(tmp, fill_value)
        nisa.dma_copy(t, tmp)
    elif t.memory == PSUM:
        lazy_fill(t, fill_value)
    else:
        nisa.memset(t, fill_value)
    return t


def zeros_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "", **kw: Any) -> Any:
    return zeros(a.shape, dtype or a.dtype, buffer=buffer, name=name)


def empty_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "", **kw: Any) -> Any:
    return ndarray(a.shape, dtype or a.dtype, buffer=buffer, name=name)


def shared_constant(constant: Any, dtype: Any = None, **kwargs: Any) -> Tile:
    """An HBM tensor holding ``constant`` (written in before the kernel's first instruction)."""
    flush()
    arr = np.asarray(constant)
    dt = ops.normalize_dtype(dtype) if dtype is not None else arr.dtype
    t = as_tile(new_nl.ndarray(arr.shape, dt, new_nl.private_hbm, name="shared_constant"))
    prog = current()
    if prog.core.functional:
        t.array()[...] = arr.astype(t.fmt.dtype)
    return t


def shared_identity_matrix(n: int, dtype: Any = np.uint8, **kwargs: Any) -> Tile:
    return shared_constant(np.identity(int(n)), dtype=dtype)


def static_cast(input_data: Any, dtype: Any) -> Any:
    return np.asarray(input_data).astype(ops.normalize_dtype(dtype))


# ---- loops --------------------------------------------------------------------------------------


def affine_range(*args: Any, **kwargs: Any) -> range:
    """A loop whose iterations have no loop-carried dependency (trnsim runs it in order)."""
    return range(*args)


def sequential_range(*args: Any, **kwargs: Any) -> range:
    return range(*args)


def static_range(*args: Any) -> range:
    return range(*args)


# ---- SPMD ---------------------------------------------------------------------------------------


def _pid() -> tuple[int, ...]:
    current()
    return _grid.state.pid


def program_id(axis: int = 0) -> int:
    pid = _pid()
    if not pid:
        return 0
    if not 0 <= int(axis) < len(pid):
        raise fail("spmd-grid", f"program_id({axis}) of a {len(pid)}-d launch grid")
    return pid[int(axis)]


def num_programs(axes: Any = None) -> int:
    _pid()
    g = _grid.state.grid
    dims = g.dims if g is not None else (1,)
    if axes is None:
        return _prod(dims)
    ax = axes if isinstance(axes, tuple | list) else (axes,)
    for a in ax:
        if not 0 <= int(a) < len(dims):
            raise fail("spmd-grid", f"num_programs({axes}) of a {len(dims)}-d launch grid")
    return _prod(dims[int(a)] for a in ax)


def program_ndim() -> int:
    _pid()
    g = _grid.state.grid
    return len(g.dims) if g is not None else 0


# ---- tile sizes -------------------------------------------------------------------------------


class _TileSize:
    """``nl.tile_size``: the target's limits (``trnsim.hw`` via the new API's ``tile_size``)."""

    def __getattr__(self, name: str) -> int:
        if name == "psum_min_align":
            return 4
        return getattr(new_nl.tile_size, name)


tile_size = _TileSize()

# ---- memory -------------------------------------------------------------------------------------


def load(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tile:
    """HBM -> a new SBUF tile (``dma_copy``; converts to ``dtype`` on the way)."""
    src = ops.tensor(src, "src", "nl.load")
    dt = ops.normalize_dtype(dtype) or src.dtype
    return ops.result("nl.load", src.shape, dt, nisa.dma_copy, (src,), mask)


def store(dst: Any, value: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """A tile -> HBM (``dma_copy``)."""
    dst = ops.tensor(dst, "dst", "nl.store")
    value = ops.operand(value, "value", "nl.store")
    if not isinstance(value, View):
        flush()
        tmp = ops.new_tile(dst.shape, dst.dtype, SBUF)
        nisa.memset(tmp, value)
        value = tmp
    box = _box(mask, value.shape)
    flush()
    check_inside(dst, box)
    check_inside(value, box)
    if ops.empty_box(box):
        return
    if value.memory == PSUM:  # DMA cannot read PSUM: the compiler copies to SBUF first
        staged = ops.new_tile(value.shape, value.dtype, SBUF)
        nisa.tensor_copy(staged, value)
        value = staged
    if dst.size != value.size:
        raise fail(
            "shape",
            f"nl.store of a {list(value.shape)} tile into a {list(dst.shape)} tensor",
        )
    if box is not None:
        if tuple(dst.shape) != tuple(value.shape):
            raise fail("mask", "nl.store with mask= needs dst and value of the same shape")
        dst, value = ops.cut(dst, box, dst.shape), ops.cut(value, box, value.shape)
    nisa.dma_copy(dst, value)


def _box(mask: Any, shape: tuple[int, ...]) -> Any:
    return _index.box(mask, tuple(shape))


def load_transpose2d(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tile:
    """HBM ``[F, P]`` -> SBUF ``[P, F]`` (a transposing DMA access pattern)."""
    src = ops.tensor(src, "src", "nl.load_transpose2d")
    if len(src.shape) != 2:
        raise fail("shape", f"nl.load_transpose2d takes a 2-D tensor, got {list(src.shape)}")
    t = as_tile(src).permute(1, 0) if src.memory == HBM else None
    if t is None:
        raise fail("load-transpose", "nl.load_transpose2d reads an HBM tensor")
    dt = ops.normalize_dtype(dtype) or src.dtype
    return ops.result("nl.load", t.shape, dt, nisa.dma_copy, (t,), mask)


# ---- elementwise --------------------------------------------------------------------------------

_COMMUTATIVE = {
    "add", "multiply", "maximum", "minimum", "equal", "not_equal", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
}  # fmt: skip
_COMPARISONS = {
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor",
}  # fmt: skip


def _binary(name: str, x: Any, y: Any, dtype: Any, mask: Any) -> Tile:
    call = f"nl.{name}"
    x, y = ops.operand(x, "x", call), ops.operand(y, "y", call)
    xt, yt = isinstance(x, View), isinstance(y, View)
    if not (xt or yt):
        raise fail("operand", f"{call} needs at least one tile operand, got {x!r} and {y!r}")
    kind = "comparison" if name in _COMPARISONS else "elementwise"
    dt = ops.normalize_dtype(dtype)
    if dt is None:
        dt = (
            D.COMPARISON_DTYPE
            if kind == "comparison"
            else D.promote(ops.dtype_of(x), ops.dtype_of(y))
        )
    if xt and yt:
        nd = builtins.max(len(x.shape), len(y.shape))
        x, y = (_trailing_ones(v, nd) for v in (x, y))
        shape = ops.broadcast_shape([x.shape, y.shape], call)
        x, y = (_partition_broadcast(v, shape[0], call) for v in (x, y))
        scalar_y = len(y.shape) == len(shape) and y.free_size == 1 and x.free_size > 1
        scalar_x = len(x.shape) == len(shape) and x.free_size == 1 and y.free_size > 1
        if scalar_y or scalar_x:
            data, vec = (x, y) if scalar_y else (y, x)
            vec2 = as_tile(vec).reshape(vec.shape[0], 1)

            def issue(dst: View, data: View, vec: View) -> None:
                nisa.tensor_scalar(dst, data, name, vec, reverse0=scalar_x)

            return ops.result(kind, shape, dt, issue, (data, vec2), mask)

        def issue2(dst: View, a: View, b: View) -> None:
            broadcast_to = _tile_module.broadcast_to

            nisa.tensor_tensor(dst, broadcast_to(a, dst.shape), broadcast_to(b, dst.shape), name)

        return ops.result(kind, shape, dt, issue2, (x, y), mask)
    data, scalar = (x, y) if xt else (y, x)

    def issue3(dst: View, data: View) -> None:
        nisa.tensor_scalar(dst, data, name, float(scalar), reverse0=not xt)

    return ops.result(kind, data.shape, dt, issue3, (data,), mask)


def _trailing_ones(v: View, nd: int) -> View:
    """An on-chip tile of fewer dims broadcasts from the partition dim: ``[P]`` is ``[P, 1]``."""
    if not v.on_chip or len(v.shape) >= nd:
        return v
    t = as_tile(v)
    while len(t.shape) < nd:
        t = as_tile(t.expand_dims(len(t.shape)))
    return t


def _partition_broadcast(v: View, partitions: int, call: str) -> View:
    """A ``[1, F...]`` tile broadcast along partitions, as the legacy compiler does it with
    DMA: the row goes to an HBM scratch tensor and comes back to every partition (an HBM read
    pattern may repeat rows; an on-chip one may not)."""
    if not v.on_chip or v.shape[0] == partitions:
        return v
    if v.shape[0] != 1:
        raise fail(
            "broadcast",
            f"{call}: a {list(v.shape)} tile cannot broadcast to {partitions} partitions",
        )
    flush()
    row = as_tile(new_nl.ndarray(v.shape, v.dtype, new_nl.private_hbm, name="broadcast_row"))
    nisa.dma_copy(row, v)
    rep = Tile.trusted(
        row.storage, (partitions, *row.shape[1:]), (0, *row.strides[1:]), row.offset, 0,
        row.fmt, row.dtype, True,
    )  # fmt: skip
    out = ops.new_tile((partitions, *v.shape[1:]), v.dtype, SBUF)
    nisa.dma_copy(out, rep)
    return out


def _unary(name: str, x: Any, dtype: Any, mask: Any) -> Tile:
    x = ops.tensor(x, "x", f"nl.{name}")
    dt = ops.normalize_dtype(dtype) or x.dtype

    def issue(dst: View, data: View) -> None:
        nisa.activation(dst, name, data)

    return ops.result("activation", x.shape, dt, issue, (x,), mask)


def _make_binary(name: str):
    def fn(x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
        return _binary(name, x, y, dtype, mask)

    fn.__name__ = fn.legacy_op = name  # type: ignore[attr-defined]
    fn.__doc__ = f"``nl.{name}(x, y)`` elementwise, with legacy type promotion."
    return fn


def _make_unary(name: str):
    def fn(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
        return _unary(name, x, dtype, mask)

    fn.__name__ = fn.legacy_op = name  # type: ignore[attr-defined]
    fn.__doc__ = f"``nl.{name}(x)`` elementwise (Scalar-engine activation)."
    return fn


_BINARY = (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
    "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift", "fmod", "mod",
)  # fmt: skip
_UNARY = (
    "exp", "log", "sqrt", "rsqrt", "square", "abs", "negative", "sign", "tanh", "sin", "cos",
    "tan", "arctan", "ceil", "floor", "trunc", "sigmoid", "relu", "silu", "gelu",
    "gelu_apprx_tanh", "gelu_apprx_sigmoid", "softplus", "mish", "erf", "gelu_dx", "silu_dx",
    "erf_dx",
)  # fmt: skip
for _n in _BINARY:
    globals()[_n] = _make_binary(_n)
for _n in _UNARY:
    globals()[_n] = _make_unary(_n)


def reciprocal(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
    x = ops.tensor(x, "x", "nl.reciprocal")
    dt = ops.normalize_dtype(dtype) or x.dtype
    return ops.result("activation", x.shape, dt, nisa.reciprocal, (x,), mask)


reciprocal.legacy_op = "reciprocal"  # type: ignore[attr-defined]


def logical_not(x: Any, *, dtype: Any = bool, mask: Any = None, **kwargs: Any) -> Tile:
    return _binary("equal", x, 0, dtype, mask)


def invert(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
    return _binary("bitwise_xor", x, -1, dtype or getattr(x, "dtype", None), mask)


def copy(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tile:
    """A copy of a tile (``tensor_copy``), converted to ``dtype``."""
    src = ops.tensor(src, "src", "nl.copy")
    dt = ops.normalize_dtype(dtype) or src.dtype
    return ops.result("nl.copy", src.shape, dt, nisa.tensor_copy, (src,), mask)


copy.legacy_op = "copy"  # type: ignore[attr-defined]


def where(condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kw: Any):
    """``condition ? x : y``: a copy of ``y`` then a predicated copy of ``x``."""
    c = ops.tensor(condition, "condition", "nl.where")
    xs = x if isinstance(x, View) else None
    ys = y if isinstance(y, View) else None
    ref = xs if xs is not None else ys
    shape = c.shape if ref is None else ref.shape
    dt = ops.normalize_dtype(dtype) or D.promote(ops.dtype_of(x), ops.dtype_of(y))

    def issue(dst: View, cond: View) -> None:
        if ys is not None:
            nisa.tensor_copy(dst, ys)
        else:
            nisa.memset(dst, y)
        nisa.tensor_copy_predicated(dst, xs if xs is not None else float(x), cond)

    return ops.result("elementwise", shape, dt, issue, (c,), mask)


# ---- matmul, transpose ------------------------------------------------------------------------


def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> Tile:
    """``x.T @ y`` (``transpose_x=True``) or ``x @ y`` into a new fp32 PSUM tile
    (``nc_matmul``; with ``transpose_x=False`` ``x`` is transposed first on the Tensor
    engine, as the docs say the compiler does)."""
    x = ops.tensor(x, "x", "nl.matmul")
    y = ops.tensor(y, "y", "nl.matmul")
    if not transpose_x:
        xt = transpose(x)
        x = copy(xt, dtype=x.dtype)
    return _matmul("nl.matmul", x, y, mask, {})


def _matmul(call: str, st: View, mv: View, mask: Any, attrs: dict[str, Any]) -> Tile:
    if st.shape[0] != mv.shape[0]:
        raise fail(
            "matmul-shape",
            f"{call}: stationary {list(st.shape)} and moving {list(mv.shape)} must share the "
            "partition (contraction) dim",
        )
    # perf_mode double_row(_gen3): [K, 2, M] x [K, 2, N] operands contract over K x 2
    pm = attrs.get("perf_mode")
    pairs = 2 if str(getattr(pm, "name", pm)).startswith("double_row") else 1
    shape = (st.free_size // pairs, mv.free_size // pairs)
    st, mv = _to_sbuf(st), _to_sbuf(mv)

    def issue(dst: View, s: View, m: View) -> None:
        nisa.nc_matmul(dst, s, m, accumulate=False, **attrs)

    def acc(dst: View, s: View, m: View) -> None:
        # ``psum += matmul``: the new API's auto mode (an element's first matmul write
        # overwrites, later ones accumulate), which is what the legacy compiler makes of an
        # accumulation loop, whether or not the tile was zeroed first
        nisa.nc_matmul(dst, s, m, accumulate=None, **attrs)

    return ops.result(call, shape, float32, issue, (st, mv), mask, acc)


def _to_sbuf(v: View) -> View:
    """A PSUM matmul operand is copied to SBUF first (the Tensor engine reads SBUF only; the
    legacy compiler inserts the copy: ``differences.STAGED``)."""
    if v.memory != PSUM:
        return v
    flush()
    out = ops.new_tile(v.shape, v.dtype, SBUF)
    nisa.tensor_copy(out, v)
    return out


def transpose(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
    """A 2-D tile with partition and free dims swapped (``nc_transpose``; in PSUM)."""
    x = ops.tensor(x, "x", "nl.transpose")
    dt = ops.normalize_dtype(dtype) or x.dtype
    return ops.result(
        "nl.transpose",
        (x.free_size, x.shape[0]),
        dt,
        lambda dst, d: nisa.nc_transpose(dst, d, engine=nisa.engine.tensor),
        (x,),
        mask,
    )


# ---- reductions ---------------------------------------------------------------------------------


def _reduce_shape(x: View, axis: Any, keepdims: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
    axes = tuple(int(a) % len(x.shape) for a in axes)
    shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
    if not keepdims:
        shape = [n for d, n in enumerate(shape) if d not in axes or d == 0]
    return axes, tuple(shape)


def _make_reduce(name: str, op: str):
    def fn(
        x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kw: Any
    ) -> Tile:
        x = ops.tensor(x, "x", f"nl.{name}")
        axes, shape = _reduce_shape(x, axis, keepdims)
        dt = ops.normalize_dtype(dtype) or x.dtype
        nd = len(x.shape)
        if not keepdims and axes != tuple(range(nd - len(axes), nd)):
            # reduce any free axes: move them last (a free-dim permutation is a view)
            keep = [d for d in range(nd) if d not in axes]
            x = as_tile(x).permute(*keep, *axes)
            axes = tuple(range(nd - len(axes), nd))

        def issue(dst: View, data: View) -> None:
            nisa.tensor_reduce(dst, op, data, axes, keepdims=keepdims)

        box = _box(mask, x.shape)
        if box is not None:  # the mask is over the input's index space
            x = ops.cut(x, box, x.shape)
            axes, shape = _reduce_shape(x, axis, keepdims)
        return ops.result("reduce", shape, dt, issue, (x,), None)

    fn.__name__ = name
    fn.legacy_op = op  # type: ignore[attr-defined]
    return fn


sum = _make_reduce("sum", "add")
max = _make_reduce("max", "maximum")
min = _make_reduce("min", "minimum")
prod = _make_reduce("prod", "multiply")


def all(x: Any, axis: Any, *, dtype: Any = bool, mask: Any = None, **kwargs: Any) -> Tile:
    return _make_reduce("all", "minimum")(x, axis, dtype=dtype, mask=mask)


def mean(
    x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kw: Any
) -> Tile:
    """The mean along ``axis``: a ``tensor_reduce`` add into fp32, then a multiply by 1/n."""
    x = ops.tensor(x, "x", "nl.mean")
    axes, shape = _reduce_shape(x, axis, keepdims)
    n = _prod(x.shape[a] for a in axes)
    dt = ops.normalize_dtype(dtype) or x.dtype

    def issue(dst: View, data: View) -> None:
        s = ops.new_tile(dst.shape, float32, SBUF)
        nisa.tensor_reduce(s, "add", data, axes, keepdims=keepdims)
        nisa.tensor_scalar(dst, s, "multiply", 1.0 / n)

    return ops.result("reduce", shape, dt, issue, (x,), mask)


def var(x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
    """The variance along the free ``axis`` (``bn_stats`` + ``bn_aggr``)."""
    x = ops.tensor(x, "x", "nl.var")
    _, shape = _reduce_shape(x, axis, True)
    dt = ops.normalize_dtype(dtype) or x.dtype

    def issue(dst: View, data: View) -> None:
        st = ops.new_tile((data.shape[0], 6), float32, SBUF)
        nisa.bn_stats(st, as_tile(data).reshape(data.shape[0], data.free_size))
        mv = ops.new_tile((data.shape[0], 2), float32, SBUF)
        nisa.bn_aggr(mv, st)
        nisa.tensor_copy(dst, as_tile(mv)[:, 1:2].reshape(dst.shape))

    return ops.result("reduce", shape, dt, issue, (x,), mask)


def loop_reduce(
    x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> Tile:
    """``b = nl.loop_reduce(a, op, loop_indices)``: ``b <- op(b, a)`` where ``b`` is the tile
    the result is assigned to (the docstring: "the destination tile is also the rhs input to
    ``op``"; its equivalent is ``b = nisa.tensor_tensor(data1=b, data2=a, op)``). The
    destination is the variable named by the assignment in the kernel's code."""
    x = ops.tensor(x, "x", "nl.loop_reduce")
    dst = _assignment_target(sys._getframe(1))
    if not isinstance(dst, View) or tuple(dst.shape) != tuple(x.shape):
        raise fail(
            "loop-reduce",
            "nl.loop_reduce's result must be assigned to the running tile it reduces into "
            f"(b = nl.loop_reduce(a, ...) with b a tile of shape {list(x.shape)}), got {dst!r}",
        )
    name = ops.op_name(op)
    dt = ops.normalize_dtype(dtype) or dst.dtype

    def issue(out: View, b: View, a: View) -> None:
        nisa.tensor_tensor(out, b, a, name)

    flush()
    if dt != dst.dtype:
        return ops.result("elementwise", x.shape, dt, issue, (dst, x), mask)
    box = _box(mask, x.shape)
    nisa.tensor_tensor(ops.cut(dst, box, x.shape), ops.cut(dst, box, x.shape),
                       ops.cut(x, box, x.shape), name)  # fmt: skip
    return as_tile(dst)


def _assignment_target(frame: Any) -> Any:
    """The current value of the variable the calling statement assigns to (``b = f(...)``)."""
    import dis

    code, last = frame.f_code, frame.f_lasti
    for ins in dis.get_instructions(code):
        if ins.offset <= last or ins.opname in ("CACHE", "PRECALL"):
            continue
        if ins.opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"):
            name = ins.argval
            for scope in (frame.f_locals, frame.f_globals):
                if name in scope:
                    return scope[name]
        return None
    return None


# ---- broadcast / shape --------------------------------------------------------------------------


def broadcast_to(src: Any, *, shape: Any, **kwargs: Any) -> Tile:
    """``src`` broadcast to ``shape``: free dims by stride 0 (a view, no instruction);
    the partition dim through HBM (``_partition_broadcast``)."""
    src = ops.tensor(src, "src", "nl.broadcast_to")
    shape = tuple(int(s) for s in shape)
    flush()
    if src.on_chip and src.shape[0] == 1 and shape[0] > 1:
        src = _partition_broadcast(src, shape[0], "nl.broadcast_to")
    return _tile_module.broadcast_to(src, shape)  # type: ignore[return-value]


def expand_dims(data: Any, axis: Any) -> Tile:
    data = ops.tensor(data, "data", "nl.expand_dims")
    axes = sorted(axis if isinstance(axis, tuple | list) else (axis,))
    t = as_tile(data)
    for a in axes:
        if a == 0:
            raise fail("expand-dims", "nl.expand_dims cannot add a partition dim (axis 0)")
        t = as_tile(t.expand_dims(int(a)))
    return t


# ---- misc ---------------------------------------------------------------------------------------


def rand(shape: Any, dtype: Any = np.float32, **kwargs: Any) -> Tile:
    """A tile of uniform random values in [0, 1] (the Vector engine's ``rand2``)."""
    shape = tuple(int(n) for n in (shape if isinstance(shape, tuple | list) else (shape,)))
    return ops.result(
        "memset", shape, ops.normalize_dtype(dtype), lambda dst: nisa.rand2(dst, 0.0, 1.0)
    )


def device_print(prefix: str, x: Any, *, mask: Any = None, **kwargs: Any) -> None:
    flush()
    new_nl.device_print(prefix, x)


def gemm_grid() -> Any:
    raise fail("not-implemented", "nl.gemm_grid is not implemented by trnsim")


def gemm_stationary_grid() -> Any:
    raise fail("not-implemented", "nl.gemm_stationary_grid is not implemented by trnsim")


def dropout(x: Any, rate: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tile:
    """``x`` with elements zeroed at probability ``rate`` (``nisa.dropout``)."""
    d = ops.tensor(x, "x", "nl.dropout")
    r = ops.operand(rate, "rate", "nl.dropout")
    dt = ops.normalize_dtype(dtype) or d.dtype
    return ops.result(
        "activation", d.shape, dt, lambda dst, a, b: nisa.dropout(dst, a, b), (d, r), mask
    )


def gather_flattened(data: Any, indices: Any, *, mask: Any = None, dtype: Any = None, **kw: Any):
    """Per partition, ``data``'s flattened free elements at ``indices`` (uint32): a tile shaped
    as ``indices``, lowered onto ``nisa.nc_n_gather`` (the same operation in NKI 0.6). An index
    outside the row is trnsim's ``n-gather-index`` error where the docstring says "garbage"."""
    d = ops.tensor(data, "data", "nl.gather_flattened")
    i = ops.tensor(indices, "indices", "nl.gather_flattened")
    box = _index.box(mask, i.shape)  # over indices (the output's shape); data keeps its row
    dt = ops.normalize_dtype(dtype) or d.dtype
    return ops.result(
        "activation", i.shape, dt, lambda dst, b: nisa.nc_n_gather(dst, ops.partitions(d, box), b),
        (i,), mask,
    )  # fmt: skip


def _not_implemented(name: str):
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise fail("not-implemented", f"neuronxcc.nki.language.{name} is not implemented by trnsim")

    fn.__name__ = name
    return fn


def atomic_rmw(dst: Any, value: Any, op: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """``dst = op(dst, value)`` on indirectly indexed HBM rows (``dst`` subscripted with an SBUF
    index tile), lowered onto the NKI 0.6 ``dma_compute`` scatter read-modify-write (one
    semantics: ``trnsim.core.indirect.execute_rmw``). Only ``np.add`` / ``nl.add``, as the
    2.26 docstring says; a repeated index is that instruction's ``unique_indices`` error (the
    docs say the compiler serialises repeated updates; trnsim does not split them)."""
    if ops.op_name(op) != "add":
        raise fail("not-implemented", f"nl.atomic_rmw op={op!r}: only add is supported (docs)")
    if mask is not None:
        raise fail("not-implemented", "nl.atomic_rmw mask= is not modelled by trnsim")
    d = ops.tensor(dst, "dst", "nl.atomic_rmw")
    v = ops.tensor(value, "value", "nl.atomic_rmw")
    flush()
    nisa.dma_compute(d, [d, v], reduce_op="add")


for _n in (
    "all_reduce", "random_seed", "rms_norm", "softmax",
):  # fmt: skip
    globals()[_n] = _not_implemented(_n)


# the tile operators dispatch to this module (trnsim.nki.legacy.tile.NL)
_tile_module.NL = sys.modules[__name__]
