"""``neuronxcc.nki.isa`` (legacy NKI): ISA calls that return tiles.

Each function allocates the tile it returns (``differences.RETURNS``) and issues the new API's
instruction (``trnsim.nki.isa``) with that tile as ``dst``, through ``ops.result`` (masks, pending
issue). Enums keep the legacy numbering (``differences``). Source: SDK 2.26
``general/nki/api/nki/isa/__init__.py``.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from trnsim.core import indirect
from trnsim.core.location import fail
from trnsim.core.memory import View
from trnsim.nki import isa as nisa
from trnsim.nki.context import current
from trnsim.nki.legacy import differences as D
from trnsim.nki.legacy import index as ix
from trnsim.nki.legacy import ops
from trnsim.nki.legacy.index import Expr, Mask
from trnsim.nki.legacy.tile import as_tile, flush

engine = enum.IntEnum("engine", {k: v for k, (v, _) in D.ENGINE.items()})  # type: ignore[misc]
engine.__doc__ = "Neuron device engines (legacy numbering: differences.ENGINE)."
dge_mode = enum.IntEnum("dge_mode", {k: v for k, (v, _) in D.DGE_MODE.items()})  # type: ignore[misc]
reduce_cmd = enum.IntEnum("reduce_cmd", {k: v for k, (v, _) in D.REDUCE_CMD.items()})  # type: ignore[misc]
oob_mode = enum.IntEnum("oob_mode", {k: v for k, (v, _) in D.OOB_MODE.items()})  # type: ignore[misc]
nc_version = enum.IntEnum("nc_version", {k: v for k, (v, _) in D.NC_VERSION.items()})  # type: ignore[misc]

tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown
dma_engine = "dma"
fp32 = np.finfo(np.float32)


def _to_new(member: Any, table: dict[str, tuple[int, str]], new_enum: Any) -> Any:
    """A legacy enum member -> the new API's member of the same meaning."""
    if member is None:
        return None
    if isinstance(member, enum.Enum):
        return new_enum[table[member.name][1]]
    raise fail("enum", f"{member!r} is not a member of the legacy {new_enum.__name__} enum")


def _eng(e: Any) -> Any:
    return _to_new(e, D.ENGINE, nisa.engine)


def get_nc_version() -> Any:
    gen = current().core.spec.generation
    names = {v: k for k, (v, _) in D.NC_VERSION.items()}
    return nc_version[names[gen]] if gen in names else nisa.nc_version(gen)


def _dt(dtype: Any, default: Any) -> Any:
    return ops.normalize_dtype(dtype) or default


def _opn(op: Any) -> str | None:
    return None if op is None else ops.op_name(op)


# ---- Tensor engine -------------------------------------------------------------------------


def nc_matmul(
    stationary: Any,
    moving: Any,
    *,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    tile_position: tuple = (),
    tile_size: tuple = (),
    mask: Any = None,
    **kwargs: Any,
) -> Any:
    """``stationary.T @ moving`` into a new fp32 PSUM tile ``[M, N]``."""
    from trnsim.nki.legacy.language import _matmul

    st = ops.tensor(stationary, "stationary", "nisa.nc_matmul")
    mv = ops.tensor(moving, "moving", "nisa.nc_matmul")
    if is_transpose and current().core.spec.generation < 3:
        # a compiler hint on v2 (no transpose mode): the math stays stationary.T @ moving
        # (differences.LOWERING)
        is_transpose = False
    attrs: dict[str, Any] = {
        "is_stationary_onezero": is_stationary_onezero,
        "is_moving_onezero": is_moving_onezero,
        "is_transpose": is_transpose,
        "tile_position": tile_position,
        "tile_size": tile_size,
    }
    if "perf_mode" in kwargs:
        attrs["perf_mode"] = kwargs["perf_mode"]
    return _matmul("nisa.nc_matmul", st, mv, mask, attrs)


def nc_transpose(data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **kw: Any):
    """The legacy compiler's ``nc_transpose``: the engine is chosen from the shape, whatever
    ``engine=`` says. The NKI release notes (aws-neuron-sdk main,
    ``release-notes/components/nki.rst``, NKI 0.4.0 / Neuron 2.30.0): "Fixed
    ``nki.isa.nc_transpose`` silently ignoring the ``engine`` argument"; so the compilers
    before it (the ones that ran the ``neuronxcc.nki`` kernels measured publicly, such as
    Autocomp's sd_attention candidates asking the Vector engine for a [128, 64] transpose)
    picked the engine themselves: the Tensor engine for what the Vector engine's 32 x 32
    cannot hold (sdk226 ``nki.isa.nc_transpose``: "Neuron Compiler will automatically select
    an engine based on the input shape"). The argument is still checked."""
    d = ops.tensor(data, "data", "nisa.nc_transpose")
    if engine is not None:
        _eng(engine)  # a bad value is still an error
    eng = nisa.engine.unknown
    quad = current().core.spec.partitions // 4  # the Vector engine's largest transpose
    small = d.shape[0] <= quad and d.free_size <= quad
    on_tensor = not small
    from trnsim.nki.legacy.language import transposer

    return ops.result(
        "nisa.nc_transpose@tensor" if on_tensor else "nisa.nc_transpose",
        (d.free_size, d.shape[0]),
        _dt(dtype, d.dtype),
        transposer(nisa.engine.tensor if on_tensor else eng),
        (d,),
        mask,
    )


# ---- Scalar engine ------------------------------------------------------------------------------


def activation(
    op: Any,
    data: Any,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = None,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Any:
    d = ops.tensor(data, "data", "nisa.activation")
    flush()

    def issue(dst: View, x: View, bias: Any, scale: Any, reduce_res: Any) -> None:
        nisa.activation(
            dst, ops.op_name(op), x, bias=bias, scale=scale,
            reduce_op=_opn(reduce_op), reduce_res=reduce_res,
        )  # fmt: skip

    side = {"bias": bias, "scale": scale, "reduce_res": reduce_res}
    return ops.result("activation", d.shape, _dt(dtype, d.dtype), issue, (d,), mask, side=side)


def activation_reduce(
    op: Any, data: Any, *, reduce_op: Any, reduce_res: Any, bias: Any = None, scale: Any = 1.0,
    mask: Any = None, dtype: Any = None, **kwargs: Any,
) -> Any:  # fmt: skip
    return activation(
        op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
        mask=mask, dtype=dtype,
    )  # fmt: skip


# ---- Vector / GpSimd engines -------------------------------------------------------------------


def tensor_tensor(
    data1: Any, data2: Any, op: Any, *, dtype: Any = None, mask: Any = None, engine: Any = None,
    **kwargs: Any,
) -> Any:  # fmt: skip
    a = ops.tensor(data1, "data1", "nisa.tensor_tensor")
    b = ops.tensor(data2, "data2", "nisa.tensor_tensor")
    name = ops.op_name(op)
    dt = _dt(dtype, D.promote(ops.dtype_of(a), ops.dtype_of(b)))
    eng = _eng(engine) if engine is not None else nisa.engine.unknown
    return ops.result(
        "elementwise",
        a.shape,
        dt,
        lambda dst, x, y: nisa.tensor_tensor(dst, x, y, name, engine=eng),
        (a, b),
        mask,
    )


def tensor_scalar(
    data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
    operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
    engine: Any = None, **kwargs: Any,
) -> Any:  # fmt: skip
    d = ops.tensor(data, "data", "nisa.tensor_scalar")
    eng = _eng(engine) if engine is not None else nisa.engine.unknown
    dt = _dt(dtype, d.dtype)

    def issue(dst: View, x: View, operand0: Any, operand1: Any) -> None:
        nisa.tensor_scalar(
            dst, x, ops.op_name(op0), operand0, reverse0, _opn(op1), operand1, reverse1,
            engine=eng,
        )  # fmt: skip

    side = {"operand0": operand0, "operand1": operand1}
    return ops.result("elementwise", d.shape, dt, issue, (d,), mask, side=side)


def tensor_scalar_reduce(
    *, data: Any, op0: Any, operand0: Any, reduce_op: Any, reduce_res: Any,
    reverse0: bool = False, dtype: Any = None, mask: Any = None, **kwargs: Any,
) -> Any:  # fmt: skip
    """``data <op0> operand0`` into the returned tile, and ``reduce_op`` of that result along
    all free axes into ``reduce_res``: the docstring's two formulas as the two instructions
    they name (``tensor_scalar``, then ``tensor_reduce`` of its result)."""
    d = ops.tensor(data, "data", "nisa.tensor_scalar_reduce")
    r = ops.tensor(reduce_res, "reduce_res", "nisa.tensor_scalar_reduce")
    rop = ops.op_name(reduce_op)

    def issue(dst: View, x: View, res: View, operand0: Any) -> None:
        nisa.tensor_scalar(dst, x, ops.op_name(op0), operand0, reverse0)
        axes = tuple(range(1, len(dst.shape)))
        flat = res if len(res.shape) == 2 else as_tile(res).reshape(res.shape[0], 1)
        nisa.tensor_reduce(flat, rop, dst, axes, keepdims=True)

    return ops.result(
        "elementwise", d.shape, _dt(dtype, d.dtype), issue, (d, r), mask,
        side={"operand0": operand0},
    )  # fmt: skip


def tensor_reduce(
    op: Any, data: Any, axis: Any, *, mask: Any = None, dtype: Any = None, negate: bool = False,
    keepdims: bool = False, **kwargs: Any,
) -> Any:  # fmt: skip
    from trnsim.nki.legacy.language import _reduce_shape

    d = ops.tensor(data, "data", "nisa.tensor_reduce")
    axes, shape = _reduce_shape(d, axis, keepdims)
    name = ops.op_name(op)
    return ops.result(
        "reduce",
        shape,
        _dt(dtype, d.dtype),
        lambda dst, x: nisa.tensor_reduce(dst, name, x, axes, negate=negate, keepdims=keepdims),
        (d,),
        None if mask is None else _reject_mask("tensor_reduce"),
    )


def _reject_mask(call: str) -> Any:
    raise fail("not-implemented", f"nisa.{call} with mask= (trnsim: cut the input instead)")


def tensor_partition_reduce(op: Any, data: Any, *, mask: Any = None, dtype: Any = None, **kw: Any):
    d = ops.tensor(data, "data", "nisa.tensor_partition_reduce")
    name = ops.op_name(op)
    return ops.result(
        "reduce",
        (1, *d.shape[1:]),
        _dt(dtype, d.dtype),
        lambda dst, x: nisa.tensor_partition_reduce(dst, name, x),
        (d,),
        None if mask is None else _reject_mask("tensor_partition_reduce"),
    )


def tensor_copy(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **kw: Any):
    s = ops.tensor(src, "src", "nisa.tensor_copy")
    eng = _eng(engine) if engine is not None else nisa.engine.unknown
    return ops.result(
        "nl.copy",
        s.shape,
        _dt(dtype, s.dtype),
        lambda dst, x: nisa.tensor_copy(dst, x, engine=eng),
        (s,),
        mask,
    )


def tensor_copy_predicated(
    *, src: Any, dst: Any, predicate: Any, reverse_pred: bool = False, mask: Any = None,
    dtype: Any = None, **kwargs: Any,
) -> None:  # fmt: skip
    flush()
    nisa.tensor_copy_predicated(dst, src, predicate, reverse_pred=reverse_pred)


def tensor_tensor_scan(
    data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False,
    reverse1: bool = False, *, dtype: Any = None, mask: Any = None, **kwargs: Any,
) -> Any:  # fmt: skip
    a = ops.tensor(data0, "data0", "nisa.tensor_tensor_scan")
    b = ops.tensor(data1, "data1", "nisa.tensor_tensor_scan")
    return ops.result(
        "elementwise",
        a.shape,
        _dt(dtype, D.promote(ops.dtype_of(a), ops.dtype_of(b))),
        lambda dst, x, y, initial: nisa.tensor_tensor_scan(
            dst, x, y, initial, ops.op_name(op0), ops.op_name(op1), reverse0, reverse1
        ),
        (a, b),
        mask,
        side={"initial": initial},
    )


def scalar_tensor_tensor(
    *, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any, reverse0: bool = False,
    reverse1: bool = False, dtype: Any = None, mask: Any = None, **kwargs: Any,
) -> Any:  # fmt: skip
    d = ops.tensor(data, "data", "nisa.scalar_tensor_tensor")
    o1 = ops.tensor(operand1, "operand1", "nisa.scalar_tensor_tensor")
    return ops.result(
        "elementwise",
        d.shape,
        _dt(dtype, D.promote(ops.dtype_of(d), ops.dtype_of(o1))),
        lambda dst, x, y, operand0: nisa.scalar_tensor_tensor(
            dst, x, ops.op_name(op0), operand0, ops.op_name(op1), y, reverse0, reverse1
        ),
        (d, o1),
        mask,
        side={"operand0": operand0},
    )


def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = None, **kw: Any):
    eng = _eng(engine) if engine is not None else nisa.engine.unknown
    return ops.result(
        "memset",
        tuple(shape),
        ops.normalize_dtype(dtype),
        lambda dst: nisa.memset(dst, value, engine=eng),
        (),
        mask,
    )


def iota(expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> Any:
    """The values of an affine index expression (``value = offset + channel_multiplier * p +
    sum(step_k * i_k)``) into a new SBUF tile."""
    e = _expr(expr, "nisa.iota")
    shape, cm, pattern, offset = _affine(e)
    return ops.result(
        "iota",
        shape,
        ops.normalize_dtype(dtype),
        lambda dst: nisa.iota(dst, pattern, offset, cm),
        (),
        mask,
    )


def _expr(e: Any, call: str) -> Expr:
    if isinstance(e, int | np.integer):
        from trnsim.nki.legacy.index import Expr as _E

        return _E({}, int(e), {}, 2)
    if not isinstance(e, Expr):
        raise fail("index-expr", f"{call} takes an affine expression of nl.arange, got {e!r}")
    return e


def _affine(e: Expr) -> tuple[tuple[int, ...], int, list[tuple[int, int]], int]:
    """An expression over a tile ``[P, F...]`` as (shape, channel_multiplier, free pattern,
    offset)."""
    nd = e.ndim if e.ndim > 2 else 2
    shape = [1] * nd
    coef = [0] * nd
    for it, a in e._placed(nd).items():
        shape[a] = it.size
        coef[a] += e.terms.get(it, 0)
    pattern = [(coef[a], shape[a]) for a in range(1, nd)]
    return tuple(shape), coef[0], pattern, e.const


def affine_select(
    pred: Any, on_true_tile: Any, on_false_value: Any, *, mask: Any = None, dtype: Any = None,
    **kwargs: Any,
) -> Any:  # fmt: skip
    if not isinstance(pred, Mask):
        raise fail("affine-select", f"affine_select pred must compare index expressions: {pred!r}")
    e, cmp = pred.expr_for_select()
    t = ops.tensor(on_true_tile, "on_true_tile", "nisa.affine_select")
    shape, cm, pattern, offset = _affine(e)
    if shape[0] not in (1, t.shape[0]) or (len(pattern) and len(shape) != len(t.shape)):
        raise fail(
            "affine-select",
            f"affine_select predicate of shape {list(shape)} for a {list(t.shape)} tile",
        )
    pattern = [(s, t.shape[k + 1]) for k, (s, _) in enumerate(pattern)]
    return ops.result(
        "elementwise",
        t.shape,
        _dt(dtype, t.dtype),
        lambda dst, x: nisa.affine_select(
            dst, pattern, x, on_false_value, D.CMP_NAMES[cmp], offset, cm
        ),
        (t,),
        mask,
    )


def range_select(
    *, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
    reduce_cmd: Any = None, reduce_res: Any = None, reduce_op: Any = np.amax,
    range_start: Any = 0, on_false_value: Any = fp32.min, mask: Any = None, dtype: Any = None,
    **kwargs: Any,
) -> Any:  # fmt: skip
    t = ops.tensor(on_true_tile, "on_true_tile", "nisa.range_select")
    return ops.result(
        "elementwise",
        t.shape,
        _dt(dtype, t.dtype),
        lambda dst, x, bound0, bound1, reduce_res: nisa.range_select(
            dst,
            x,
            ops.op_name(comp_op0),
            ops.op_name(comp_op1),
            bound0,
            bound1,
            reduce_res=reduce_res,
            reduce_op=_opn(reduce_op),
            range_start=range_start,
            on_false_value=on_false_value,
        ),
        (t,),
        mask,
        side={"bound0": bound0, "bound1": bound1, "reduce_res": reduce_res},
    )


def select_reduce(
    *, dst: Any, predicate: Any, on_true: Any, on_false: Any, reduce_res: Any = None,
    reduce_cmd: Any = None, reduce_op: Any = np.amax, reverse_pred: bool = False,
    mask: Any = None, dtype: Any = None, **kwargs: Any,
) -> None:  # fmt: skip
    flush()
    nisa.select_reduce(
        dst, predicate, on_true, on_false, reduce_res=reduce_res, reduce_op=_opn(reduce_op),
        reverse_pred=reverse_pred,
    )  # fmt: skip


def tensor_scalar_cumulative(
    dst: Any = None, src: Any = None, op0: Any = None, op1: Any = None, imm0: Any = None,
    imm1: Any = None, reduce_cmd: Any = None, *, mask: Any = None, **kwargs: Any,
) -> None:  # fmt: skip
    """``dst[i] = reg = op1(op0(src[i], imm0), reg)`` along each partition's free elements,
    ``reg`` starting as ``reduce_cmd`` says (``reset_reduce``: ``op1``'s identity;
    ``load_reduce``: ``imm1``; ``reduce``: the Vector engine's accumulator as left): the SDK
    main branch's docstring, written into ``dst`` (its call takes ``dst``, as its ``nki/test``
    file does through ``neuronxcc.nki.isa``)."""
    call = "nisa.tensor_scalar_cumulative"
    d = ops.tensor(dst, "dst", call)
    s = ops.tensor(src, "src", call)
    i0, i1 = ops.operand(imm0, "imm0", call), ops.operand(imm1, "imm1", call)
    flush()
    box = ix.box(mask, d.shape)
    if box is not None:
        d, s = ops.cut(d, box, d.shape), ops.cut(s, box, s.shape)
        i0, i1 = ops.partitions(i0, box), ops.partitions(i1, box)
    cmd = _to_new(reduce_cmd, D.REDUCE_CMD, nisa.reduce_cmd) or nisa.reduce_cmd.reset_reduce
    nisa.tensor_scalar_cumulative(
        d, s, ops.op_name(op0), ops.op_name(op1), i0, i1, cmd,
    )  # fmt: skip


def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    d = ops.tensor(data, "data", "nisa.reciprocal")
    return ops.result("activation", d.shape, _dt(dtype, d.dtype), nisa.reciprocal, (d,), mask)


def bn_stats(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """``mask`` is over the data's index space (the instruction reads only what it keeps: the
    2.26 programming guide, "Masking"); the statistics are those of the elements it keeps (the
    SDK layernorm tutorial's v2 kernel masks the free-axis tail of its last 512-wide chunk)."""
    d = ops.tensor(data, "data", "nisa.bn_stats")
    out_dtype = _dt(dtype, d.dtype)
    boxes = ix.boxes(mask, tuple(d.shape))
    if boxes is None:
        return ops.result("bn_stats", (d.shape[0], 6), out_dtype, nisa.bn_stats, (d,), None)
    if len(boxes) != 1 or boxes[0][0] != slice(0, d.shape[0]):
        raise fail(
            "not-implemented",
            "nisa.bn_stats with a mask= that drops partitions or keeps more than one "
            f"free-axis range of its data {list(d.shape)}",
        )
    ops.check_inside(d, boxes[0])
    kept = ops.cut(d, boxes[0], tuple(d.shape))
    if kept.shape[-1] == 0:
        raise fail("shape", f"nisa.bn_stats: mask= keeps no element of its data {list(d.shape)}")
    return ops.result("bn_stats", (d.shape[0], 6), out_dtype, nisa.bn_stats, (kept,), None)


def bn_aggr(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    d = ops.tensor(data, "data", "nisa.bn_aggr")
    return ops.result("bn_stats", (d.shape[0], 2), _dt(dtype, d.dtype), nisa.bn_aggr, (d,), None)


def max8(*, src: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """The 8 largest values per partition; ``mask`` applies to ``src`` (the result keeps its 8
    columns and takes the mask's partitions)."""
    s = ops.tensor(src, "src", "nisa.max8")
    shape = (s.shape[0], 8)
    box = ix.box(mask, s.shape)
    if box is not None:
        s = ops.cut(s, box, s.shape)

    def issue(dst: View, a: View) -> None:
        nisa.max8(ops.partitions(dst, box), a)

    return ops.result("reduce", shape, _dt(dtype, s.dtype), issue, (s,), None)


def nc_find_index8(*, data: Any, vals: Any, mask: Any = None, dtype: Any = None, **kw: Any):
    d = ops.tensor(data, "data", "nisa.nc_find_index8")
    v = ops.tensor(vals, "vals", "nisa.nc_find_index8")
    return ops.result(
        "reduce", (d.shape[0], 8), _dt(dtype, np.dtype(np.uint32)), nisa.nc_find_index8, (d, v)
    )


def local_gather(
    src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None, *,
    mask: Any = None,
) -> Any:  # fmt: skip
    s = ops.tensor(src_buffer, "src_buffer", "nisa.local_gather")
    i = ops.tensor(index, "index", "nisa.local_gather")
    # each GpSimd core's 16 partitions all receive its valid indices' elements (the docstring's
    # NumPy semantics): per partition num_valid_indices * num_elem_per_idx elements, by default
    # every index of the core's 16-partition slice
    per_core = min(16, i.shape[0]) * i.free_size
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    shape = (s.shape[0], valid * int(num_elem_per_idx))
    return ops.result(
        "elementwise",
        shape,
        s.dtype,
        lambda dst, a, b: nisa.local_gather(dst, a, b, num_elem_per_idx, num_valid_indices),
        (s, i),
        mask,
    )


# ---- DMA ----------------------------------------------------------------------------------------


def dma_copy(
    *, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
    dge_mode: Any = None,
) -> None:  # fmt: skip
    """``dst <- src`` (both given, as in the legacy signature)."""
    from trnsim.nki.legacy.language import _box

    d = ops.tensor(dst, "dst", "nisa.dma_copy")
    s = ops.tensor(src, "src", "nisa.dma_copy")
    flush()
    if dst_rmw_op is not None:  # a scatter read-modify-write when d is indirect
        if mask is not None:
            raise fail("not-implemented", "dma_copy dst_rmw_op= with mask= is not modelled")
        nisa.dma_compute(d, [d, s], reduce_op=ops.op_name(dst_rmw_op))
        return
    box = _box(mask, s.shape)
    if box is not None:
        d, s = ops.cut(d, box, d.shape), ops.cut(s, box, s.shape)
    nisa.dma_copy(
        d,
        s,
        oob_mode=_to_new(oob_mode, D.OOB_MODE, nisa.oob_mode) or nisa.oob_mode.error,
        dge_mode=_to_new(dge_mode, D.DGE_MODE, nisa.dge_mode) or nisa.dge_mode.unknown,
    )


def dma_transpose(src: Any, *, axes: Any = None, mask: Any = None, dtype: Any = None, **kw: Any):
    s = ops.tensor(src, "src", "nisa.dma_transpose")
    shape = tuple(reversed(s.shape)) if axes is None else tuple(s.shape[a] for a in axes)
    return ops.result(
        "nl.load",
        shape,
        _dt(dtype, s.dtype),
        lambda dst, x: nisa.dma_transpose(dst, x, axes=axes),
        (s,),
        mask,
    )


# ---- lowered onto the NKI 0.6 instructions added since (issue 13) ----------------------------


def dropout(data: Any, prob: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """``data`` with elements zeroed at probability ``prob`` (a scalar or a ``[P, 1]`` tile)."""
    d = ops.tensor(data, "data", "nisa.dropout")
    p = ops.operand(prob, "prob", "nisa.dropout")
    return ops.result(
        "activation", d.shape, _dt(dtype, d.dtype), lambda dst, a, b: nisa.dropout(dst, a, b),
        (d, p), mask,
    )  # fmt: skip


def nc_match_replace8(
    *, data: Any, vals: Any, imm: Any, dst_idx: Any = None, mask: Any = None, dtype: Any = None,
    **kwargs: Any,
) -> Any:  # fmt: skip
    """``data`` with the first match of each of the 8 ``vals`` per partition replaced by ``imm``
    (indices into ``dst_idx`` if given); ``mask`` applies to ``data`` (the docstring), ``vals``
    and ``dst_idx`` keep their free axes and take the mask's partitions."""
    call = "nisa.nc_match_replace8"
    d = ops.tensor(data, "data", call)
    v = ops.tensor(vals, "vals", call)
    idx = None if dst_idx is None else ops.tensor(dst_idx, "dst_idx", call)
    box = ix.box(mask, d.shape)

    def issue(dst: View, a: View) -> None:
        nisa.nc_match_replace8(
            dst, a, ops.partitions(v, box), float(imm), dst_idx=ops.partitions(idx, box)
        )

    return ops.result("activation", d.shape, _dt(dtype, d.dtype), issue, (d,), mask)


def nc_stream_shuffle(
    src: Any, dst: Any, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None, **kw: Any
) -> None:
    """Cross-partition moves within each 32-partition quadrant into ``dst`` (by reference);
    ``mask`` applies to ``dst``."""
    from trnsim.nki.legacy.language import _box

    s = ops.tensor(src, "src", "nisa.nc_stream_shuffle")
    d = ops.tensor(dst, "dst", "nisa.nc_stream_shuffle")
    flush()
    box = _box(mask, d.shape)
    if box is not None:
        d = ops.cut(d, box, d.shape)
    nisa.nc_stream_shuffle(d, s, [int(m) for m in shuffle_mask])


def sequence_bounds(*, segment_ids: Any, dtype: Any = None) -> Any:
    """``[P, 2, N]`` start and end index of each element's segment (``[1, N]`` input)."""
    s = ops.tensor(segment_ids, "segment_ids", "nisa.sequence_bounds")
    shape = (s.shape[0], 2, *s.shape[1:])
    return ops.result(
        "activation", shape, _dt(dtype, s.dtype), lambda dst, a: nisa.sequence_bounds(dst, a), (s,)
    )


def _not_implemented(name: str):
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise fail("not-implemented", f"neuronxcc.nki.isa.{name} is not implemented by trnsim")

    fn.__name__ = name
    return fn


def _dynamic(v: Any, role: str, call: str) -> View:
    if not isinstance(v, indirect.IndirectView) or v.memory == "hbm":
        raise fail(
            "indirect",
            f"nisa.{call} {role} must be an SBUF/PSUM tile indexed at run time (an index "
            f"expression plus a one-element SBUF tile, e.g. t[i_p, off[0, j] + i_f]), got "
            f"{type(v).__name__}",
        )
    return v


def tensor_copy_dynamic_src(
    src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **kwargs: Any
) -> Any:
    """A copy from a dynamic offset within each partition; lowers onto the NKI 0.6
    ``tensor_copy`` with an ``.ap(scalar_offset=...)`` source (``trnsim.core.indirect``
    choice 7)."""
    s = _dynamic(src, "src", "tensor_copy_dynamic_src")
    return tensor_copy(s, mask=mask, dtype=dtype, engine=engine)


def tensor_copy_dynamic_dst(
    *, dst: Any, src: Any, mask: Any = None, dtype: Any = None, engine: Any = None,
    **kwargs: Any,
) -> None:  # fmt: skip
    """A copy to a dynamic offset within each partition (``tensor_copy`` with an
    ``.ap(scalar_offset=...)`` destination)."""
    d = _dynamic(dst, "dst", "tensor_copy_dynamic_dst")
    if mask is not None:
        raise fail("not-implemented", "nisa.tensor_copy_dynamic_dst mask= is not modelled")
    s = ops.tensor(src, "src", "nisa.tensor_copy_dynamic_dst")
    flush()
    eng = _eng(engine) if engine is not None else nisa.engine.unknown
    nisa.tensor_copy(d, s, engine=eng)


for _n in (
    "builtin_custom_op",
):  # fmt: skip
    globals()[_n] = _not_implemented(_n)
