"""``neuronxcc.nki.language`` (legacy NKI, Neuron <= 2.26) on trnsim's new-API instructions.

Calls return tiles (``differences.RETURNS`` says where and of which dtype); each is one
``trnsim.nki.isa`` instruction (or a documented few) issued through ``ops.result``. Index
expressions and masks: ``index``; tiles, block tensors and pending results: ``tile``.
Source: SDK 2.26 ``general/nki/api/nki/language/__init__.py`` and the programming guide.
"""

from __future__ import annotations

import builtins
import sys
from math import prod as _prod
from typing import Any

import ml_dtypes
import numpy as np

from trnsim.core.argrules import shape_dims
from trnsim.core.location import fail
from trnsim.core.memory import HBM, PSUM, SBUF, View
from trnsim.nki import isa as nisa
from trnsim.nki import language as new_nl
from trnsim.nki.context import current
from trnsim.nki.legacy import differences as D
from trnsim.nki.legacy import grid as _grid
from trnsim.nki.legacy import index as _index
from trnsim.nki.legacy import language_constants as _constants
from trnsim.nki.legacy import ops, vectorize
from trnsim.nki.legacy import tile as _tile_module
from trnsim.nki.legacy.allocator import AUTO, Allocator, allocator
from trnsim.nki.legacy.tile import (
    BlockTensor,
    Tile,
    as_tile,
    check_inside,
    flush,
    lazy_fill,
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
    return _ndarray(shape, dtype, buffer, name)


def _ndarray(shape: Any, dtype: Any, buffer: Any, name: str, fill: Any = None) -> Any:
    """``ndarray``; ``fill`` (a 1-tuple): every block of a block tensor starts as that value
    (a lazy fill of each block at its first use)."""
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
    return BlockTensor(
        blocks,
        tile_shape,
        block_locator(tile_shape, dtype, buf.memory, label, fill),
        label,
        fmt.dtype if fmt.kind != "packed" else dtype,
        buf.memory,
        fmt.name,
    )


def block_locator(
    tile_shape: tuple[int, ...], dtype: Any, memory: str, name: str, fill: Any = None
):
    """The logical blocks of an automatically allocated block tensor: each block is a tile of
    its own (``allocator.LTile``), made at its first use and allocated by liveness like any
    tile (the block-dimension migration guide: "the physical tiles may not be alive in the
    memory simultaneously"). ``fill``: each block starts as ``fill[0]`` (made lazily)."""
    tiles: dict[tuple[int, ...], Tile] = {}
    loop = allocator().loop_here()  # the blocks are multi-buffered over this loop's iterations

    def locate(b: tuple[int, ...]) -> tuple[Tile, Any]:
        t = tiles.get(b)
        if t is None:
            t = tiles[b] = as_tile(allocator().new_tile(tile_shape, dtype, memory, name, loop=loop))
            if fill is not None:
                lazy_fill(t, fill[0])
        return t, None

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
    return full(shape, 0, dtype, buffer=buffer, name=name, **kwargs)


def ones(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Any:
    return full(shape, 1, dtype, buffer=buffer, name=name, **kwargs)


def full(
    shape: Any, fill_value: Any, dtype: Any, *, buffer: Any = None, name: str = "",
    lazy_initialization: bool = False, **kwargs: Any,
) -> Any:  # fmt: skip
    """A tensor of ``fill_value``. Each block of a block tensor, every PSUM tile and, with
    ``lazy_initialization=True`` (a keyword the compiler's own NKI emitter writes), every tile
    is filled lazily (``tile.lazy_fill``): the memset is issued at its first use, and not at
    all when that use overwrites it whole or starts a matmul accumulation group in it (the
    compiler emits no memset for such a tile: the first matmul starts the group)."""
    buf = _buffer(buffer)
    if buf.allocator is None and buf.memory != HBM and _split_shape(shape, buf)[0]:
        return _ndarray(shape, dtype, buffer, name, fill=(fill_value,))
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    if isinstance(t, BlockTensor):
        flush()
        for b in np.ndindex(*t.block_shape):
            nisa.memset(t.block(tuple(b), write=True), fill_value)
    elif t.memory == HBM:
        tmp = ops.new_tile(t.shape, t.dtype, SBUF)
        nisa.memset(tmp, fill_value)
        nisa.dma_copy(t, tmp)
    elif t.memory == PSUM or lazy_initialization:
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


class _Loop:
    """An ``nl`` loop: its integers, in order, with the running core's allocator told where
    the loop starts and ends (multi-buffering of ``affine_range`` bodies, loop-invariant
    loads: ``allocator``). Behaves as the ``range`` it wraps otherwise."""

    __slots__ = ("factor", "kind", "range")

    def __init__(self, kind: str, args: tuple[Any, ...], factor: int) -> None:
        self.kind, self.range, self.factor = kind, range(*args), int(factor)

    def __iter__(self) -> Any:
        al = Allocator.of_current()
        if al is None:
            yield from self.range
            return
        entry = al.enter_loop(self.kind, self.factor)
        record = al.core.record
        bounds = [len(record)]  # where each iteration's instructions start (vectorize.fold)
        try:
            for i in self.range:
                entry[3] = i
                al.next_iteration(entry)
                yield i
                bounds.append(len(record))
        finally:
            al.exit_loop(entry)
        # ran to its end: an innermost affine loop may be vectorized (timing only)
        innermost = al.entered_none_inside(entry)
        if self.kind == "affine" and innermost and len(bounds) == len(self.range) + 1:
            vectorize.fold(record, bounds)

    def __len__(self) -> int:
        return len(self.range)

    def __getitem__(self, i: Any) -> Any:
        return self.range[i]

    def __reversed__(self) -> Any:
        return reversed(self.range)

    def __getattr__(self, name: str) -> Any:  # start / stop / step / index / count
        return getattr(self.range, name)

    def __repr__(self) -> str:
        r = self.range
        return f"nl.{self.kind}_range({r.start}, {r.stop}, {r.step})"


def affine_range(*args: Any, multi_buffer: int = AUTO, **kwargs: Any) -> _Loop:
    """A loop whose iterations have no loop-carried dependency (trnsim runs it in order; tiles
    made in it are multi-buffered: ``multi_buffer`` physical copies, as the compiler keeps;
    default: the memory model's depth, ``allocator.dma_depth``)."""
    return _Loop("affine", args, multi_buffer)


def sequential_range(*args: Any, multi_buffer: int = AUTO, **kwargs: Any) -> _Loop:
    """A loop with a loop-carried dependency (run in order; the tiles made in each iteration
    are multi-buffered all the same: ``allocator``)."""
    return _Loop("sequential", args, multi_buffer)


def static_range(*args: Any) -> _Loop:
    return _Loop("static", args, AUTO)


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
        if name in ("psum_min_align", "sbuf_min_align"):
            return getattr(_constants, name)
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


PE_BROADCAST_DTYPES = frozenset({"float32", "bfloat16", "float16"})
"""Formats a partition broadcast goes through the Tensor engine in (exact: a product by 1.0,
one term per fp32 PSUM sum); others (integers) go through HBM by DMA."""


def _ones_row(partitions: int, dtype: Any) -> Tile:
    """The ``[1, partitions]`` row of ones a partition broadcast multiplies by: a compile-time
    constant ("multiplying a matrix to be reshaped with a compile-time constant matrix filled
    with zeros and ones", aws-neuron-sdk v2.26 ``general/nki/arch/trainium_inferentia2_arch.rst``,
    TensorE "Alternative Use Case"), so it is made once per launch, not per broadcast. Measured:
    the fused_mamba tutorial's profiles count 181 VectorE instructions for ``mamba_v1``'s 32
    (state, channel tile) iterations of 5 Vector instructions and 2 broadcasts each (``img/
    mamba_v1_profile_zoomed.png``), 2,896 for ``mamba_v2``'s 512 (``img/mamba_v2.png``): no
    memset per broadcast."""
    consts = allocator().constants
    key = ("broadcast_ones", partitions, np.dtype(dtype).name)
    ones = consts.get(key)
    if ones is None:
        ones = ops.new_tile((1, partitions), dtype, SBUF, name="broadcast_ones")
        nisa.memset(ones, 1.0)
        consts[key] = ones
    return ones


PSUM_BANK_FP32 = 512
"""fp32 elements of one PSUM bank per partition (2 KiB): "a single PSUM bank, which can only
hold 512 FP32 elements per PSUM partition" (aws-neuron-sdk v2.26
``general/nki/arch/trainium_inferentia2_arch.rst``, Tensor Engine)."""


def _partition_broadcast(v: View, partitions: int, call: str) -> View:
    """A ``[1, F]`` tile broadcast along partitions, as the compiler does it: on the Tensor
    engine, a matmul of a ``[1, P]`` row of ones (stationary, a constant: ``_ones_row``) by the
    row (moving) into PSUM (one bank, 512 fp32, per matmul). Source: neuron-profile's
    definition of ``hardware_flops`` counts "matmul instructions for data movement (i.e.
    transposes and partition broadcasts) inserted by the compiler" (aws-neuron-sdk
    tools/neuron-explorer/profile-schema-reference.rst).

    An fp32 row that fits one PSUM bank stays there: its readers read PSUM (a VectorE
    ``tensor_tensor`` with one operand in PSUM and one in SBUF costs ``N`` cycles, not ``2N``:
    SDK-2.26 ``nki.isa.tensor_tensor`` docstring). Wider rows (and bf16/fp16 ones, whose PSUM
    copy would be fp32) are copied to SBUF bank by bank. Measured: the fused_mamba tutorial's
    ``mamba_v2`` profile (``img/mamba_v2.png``, seq_len 512, fp32) shows PSUM occupied for the
    whole run and 2,896 VectorE instructions for 512 iterations of 5 Vector instructions and
    2 broadcasts each (no VectorE copy per broadcast), and its measured latency grows 2.75x
    from seq_len 512 (the broadcast rows fit one bank) to 1024 (they do not) for 2x the work
    (``tutorials/fused_mamba.rst``). Other formats: the row goes to an HBM scratch tensor and
    comes back to every partition by DMA (an HBM read pattern may repeat rows; an on-chip one
    may not)."""
    if not v.on_chip or v.shape[0] == partitions:
        return v
    if v.shape[0] != 1:
        raise fail(
            "broadcast",
            f"{call}: a {list(v.shape)} tile cannot broadcast to {partitions} partitions",
        )
    flush()
    if len(v.shape) == 2 and v.fmt.name == "float32" and v.shape[1] <= PSUM_BANK_FP32:
        ps = ops.new_tile((partitions, v.shape[1]), np.float32, PSUM, name="broadcast_psum")
        nisa.nc_matmul(ps, _ones_row(partitions, v.dtype), v, is_stationary_onezero=True)
        _tile_module.mark_psum_broadcast(ps)
        return ps
    out = ops.new_tile((partitions, *v.shape[1:]), v.dtype, SBUF)
    if len(v.shape) == 2 and v.fmt.name in PE_BROADCAST_DTYPES:
        ones = _ones_row(partitions, v.dtype)
        for c0 in range(0, v.shape[1], PSUM_BANK_FP32):
            n = builtins.min(PSUM_BANK_FP32, v.shape[1] - c0)
            ps = ops.new_tile((partitions, n), np.float32, PSUM, name="broadcast_psum")
            nisa.nc_matmul(ps, ones, v[:, c0 : c0 + n], is_stationary_onezero=True)
            nisa.tensor_copy(out[:, c0 : c0 + n], ps)
        return out
    row = as_tile(new_nl.ndarray(v.shape, v.dtype, new_nl.private_hbm, name="broadcast_row"))
    nisa.dma_copy(row, v)
    rep = Tile.trusted(
        row.storage, (partitions, *row.shape[1:]), (0, *row.strides[1:]), row.offset, 0,
        row.fmt, row.dtype, True,
    )  # fmt: skip
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
        "nl.transpose", (x.free_size, x.shape[0]), dt, transposer(nisa.engine.tensor), (x,), mask
    )


def transposer(eng: Any):
    """The issue function of a legacy transpose on engine ``eng``: ``nc_transpose``, or, for
    a Tensor-engine transpose written into PSUM of another float dtype
    (``psum_fp32[...] = nisa.nc_transpose(bf16_tile)``, which the legacy API casts), the
    Tensor engine's own way of transposing: a matmul of the data (stationary) with an identity
    (moving), whose fp32 result is the transpose exactly (every sum has one nonzero term)."""

    def issue(dst: View, data: View) -> None:
        on_pe = eng is nisa.engine.tensor or (
            eng is nisa.engine.unknown and (data.shape[0] > 32 or data.free_size > 32)
        )
        if (
            on_pe
            and dst.memory == PSUM
            and dst.fmt != data.fmt
            and dst.fmt.kind == data.fmt.kind == "float"
        ):
            flush()
            nisa.nc_matmul(dst, data, _identity(data.shape[0], data.dtype), accumulate=False)
            return
        nisa.nc_transpose(dst, data, engine=eng)

    return issue


def _identity(n: int, dtype: Any) -> Tile:
    """An ``n x n`` identity tile of ``dtype`` in SBUF, made once per program (``iota`` of
    ``p - f``, then ``== 0``)."""
    key = ("identity", n, get_format(dtype).name)
    cache = _tile_module._state.consts
    t = cache.get(key)
    if t is None:
        diff = ops.new_tile((n, n), np.float32, SBUF, "identity")
        nisa.iota(diff, [[-1, n]], 0, 1)
        t = ops.new_tile((n, n), dtype, SBUF, "identity")
        nisa.tensor_scalar(t, diff, "equal", 0.0)
        cache[key] = t
    return t


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
        dt = ops.normalize_dtype(dtype) or x.dtype
        axes, shape = _reduce_shape(x, axis, keepdims)
        nd = len(x.shape)
        # the mask is over the input's index space; the result keeps the box's other axes
        box = _box(mask, x.shape)
        out_box = None
        if box is not None:
            x = ops.cut(x, box, x.shape)
            kept = [s if d not in axes else slice(0, 1) for d, s in enumerate(box)]
            out_box = tuple(kept if keepdims else [s for d, s in enumerate(box) if d not in axes])
        if not keepdims and axes != tuple(range(nd - len(axes), nd)):
            # reduce any free axes of an access pattern (the 2-D max-pool idiom's axes [1, 3]):
            # move them last (a free-dim permutation is a view; the compiler orders them so)
            keep = [d for d in range(nd) if d not in axes]
            x = as_tile(x).permute(*keep, *axes)
            axes = tuple(range(nd - len(axes), nd))

        def issue(dst: View, data: View) -> None:
            if out_box is not None:
                if ops.empty_box(out_box):
                    return
                dst = ops.cut(dst, out_box, dst.shape)
            nisa.tensor_reduce(dst, op, data, axes, keepdims=keepdims)

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
    """``b = nl.loop_reduce(a, op, loop_indices)`` or ``t[...] = nl.loop_reduce(...)``:
    ``b <- op(b, a)`` where ``b`` is the running tile the result is assigned to (the
    docstring: "the destination tile is also the rhs input to ``op``"; its equivalent is
    ``b = nisa.tensor_tensor(data1=b, data2=a, op)``). The running tile is the variable the
    statement assigns (``b = ...``), or the target of a subscript assignment (a tile's view,
    a block of a block tensor). A running tile that holds no data yet (nothing wrote it) is
    initialised by the first call, ``b <- a``: the compiler-emitted kernels rely on it (the
    first iteration of ``loop_indices`` initialises an unzeroed accumulator); a tile zeroed
    first is reduced into, as the docstring's equivalence says."""
    x = ops.tensor(x, "x", "nl.loop_reduce")
    name = ops.op_name(op)
    target = _assignment_target(sys._getframe(1))
    box = _box(mask, x.shape)

    def issue(dst: View, a: View) -> None:
        if isinstance(dst.storage, _tile_module._Unplaced):
            raise fail(
                "loop-reduce",
                "nl.loop_reduce's result must be assigned to the running tile it reduces "
                f"into (b = nl.loop_reduce(a, ...) or t[...] = nl.loop_reduce(...)), got a "
                f"{list(a.shape)} tile used without an assignment",
            )
        d, src = ops.cut(dst, box, a.shape), ops.cut(a, box, a.shape)
        if not Allocator.holds_data(d):
            nisa.tensor_copy(d, src)
        else:
            nisa.tensor_tensor(d, d, src, name)

    if target is _SUBSCRIPT:  # t[...] = loop_reduce(...): issued into the target on assignment
        dt = ops.normalize_dtype(dtype) or x.dtype
        return ops.result("elementwise", x.shape, dt, issue, (x,), None)
    dst = target
    if not isinstance(dst, View) or tuple(dst.shape) != tuple(x.shape):
        raise fail(
            "loop-reduce",
            "nl.loop_reduce's result must be assigned to the running tile it reduces into "
            f"(b = nl.loop_reduce(a, ...) with b a tile of shape {list(x.shape)}), got {dst!r}",
        )
    flush()
    ops.tensor(dst, "running tile", "nl.loop_reduce")
    issue(dst, x)
    return as_tile(dst)


_SUBSCRIPT = object()


def _assignment_target(frame: Any) -> Any:
    """The current value of the variable the calling statement assigns to (``b = f(...)``),
    ``_SUBSCRIPT`` for a subscript assignment (``t[i] = f(...)``), else None."""
    key = (frame.f_code, frame.f_lasti)
    how = _TARGETS.get(key)
    if how is None:
        how = _TARGETS[key] = _target_of(frame.f_code, frame.f_lasti)
    if how is _SUBSCRIPT or not how:
        return how or None
    for scope in (frame.f_locals, frame.f_globals):
        if how in scope:
            return scope[how]
    return None


_TARGETS: dict[tuple[Any, int], Any] = {}
"""What the statement at each (code, instruction offset) assigns to (``_target_of``)."""


def _target_of(code: Any, last: int) -> Any:
    """The variable name a call's result at bytecode offset ``last`` is stored into,
    ``_SUBSCRIPT`` for a subscript store, else ``""``."""
    import dis

    for ins in dis.get_instructions(code):
        if ins.offset <= last or ins.opname in ("CACHE", "PRECALL"):
            continue
        if ins.opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"):
            return ins.argval
        if ins.opname == "STORE_SUBSCR":
            return _SUBSCRIPT
        if ins.opname in ("LOAD_FAST", "LOAD_NAME", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_CONST",
                          "BUILD_TUPLE", "LOAD_ATTR", "BUILD_SLICE", "BINARY_SUBSCR",
                          "LOAD_FAST_LOAD_FAST", "LOAD_SMALL_INT", "COPY", "SWAP",
                          "LOAD_FAST_BORROW", "BINARY_OP"):  # fmt: skip
            continue
        return ""
    return ""


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
    allocator().resident(x)
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


def softmax(
    x: Any, axis: Any, *, dtype: Any = None, compute_dtype: Any = None, mask: Any = None,
    **kwargs: Any,
) -> Tile:  # fmt: skip
    """``exp(x - max(x)) / sum(exp(x - max(x)))`` along ``axis`` (free axes ending at the last
    one: the 2.26 docstring's ``[1], [1, 2], ...``), computed in fp32, returned in ``dtype``
    (``compute_dtype`` "behaves the same"). Lowered as the compiler's engines do it: the
    negated max (``tensor_reduce``), ``exp`` with that bias and the sum in the same
    activation (``reduce_res``), a ``reciprocal``, a multiply; over fewer than all free axes
    the max and the sums broadcast along the others (``tensor_tensor``)."""
    x = ops.tensor(x, "x", "nl.softmax")
    nd = len(x.shape)
    axes = tuple(sorted(int(a) % nd for a in (axis if isinstance(axis, tuple | list) else [axis])))
    if not axes or axes[0] == 0 or axes != tuple(range(nd - len(axes), nd)):
        raise fail(
            "reduce-axis",
            f"nl.softmax axis {list(axes)} of a {nd}-d tile must be free axes ending at the last "
            f"one ([1], [1, 2], ...)",
        )
    dt = ops.normalize_dtype(dtype or compute_dtype) or x.dtype
    every = len(axes) == nd - 1

    def issue(dst: View, data: View) -> None:
        p = data.shape[0]
        if every:
            negmax = ops.new_tile((p, 1), float32, SBUF)
            nisa.tensor_reduce(negmax, "maximum", data, axes, negate=True, keepdims=True)
            e = ops.new_tile(data.shape, float32, SBUF)
            total = ops.new_tile((p, 1), float32, SBUF)
            nisa.activation(e, "exp", data, bias=negmax, reduce_op="add", reduce_res=total)
            inv = ops.new_tile((p, 1), float32, SBUF)
            nisa.reciprocal(inv, total)
            nisa.tensor_scalar(dst, e, "multiply", inv)
            return
        kept = data.shape[: nd - len(axes)]
        red = (*kept, *([1] * len(axes)))
        m = ops.new_tile(red, float32, SBUF)
        nisa.tensor_reduce(m, "maximum", data, axes, keepdims=True)
        d = ops.new_tile(data.shape, float32, SBUF)
        nisa.tensor_tensor(d, data, _tile_module.broadcast_to(m, data.shape), "subtract")
        nisa.activation(d, "exp", d)
        total = ops.new_tile(red, float32, SBUF)
        nisa.tensor_reduce(total, "add", d, axes, keepdims=True)
        nisa.reciprocal(total, total)
        nisa.tensor_tensor(dst, d, _tile_module.broadcast_to(total, data.shape), "multiply")

    return ops.result("activation", x.shape, dt, issue, (x,), mask)


softmax.legacy_op = "softmax"  # type: ignore[attr-defined]

for _n in (
    "all_reduce", "random_seed", "rms_norm",
):  # fmt: skip
    globals()[_n] = _not_implemented(_n)


# the tile operators dispatch to this module (trnsim.nki.legacy.tile.NL)
_tile_module.NL = sys.modules[__name__]
