"""``nki.isa`` (NKI 0.3 - 0.6): dst-first instruction calls that return nothing.

Each call turns its Python arguments into named operand views and attributes and hands them to
the running ``NeuronCore`` (``trnsim.core``), which checks, records and executes. Sources: SDK
``nki/api/nki/isa/__init__.py`` (signatures and semantics).
"""

from __future__ import annotations

import enum
import functools
import inspect
from typing import Any

import numpy as np

from trnsim.core import indirect
from trnsim.core.argrules import broken
from trnsim.core.isa import Engine, Op
from trnsim.core.memory import View
from trnsim.core.spec import (
    DATA,
    DST,
    FP32_MIN,
    INDEX,
    MOVING,
    MOVING_SCALE,
    PREDICATE,
    REDUCE_RES,
    SPECS,
    SRC,
    STATIONARY,
    STATIONARY_SCALE,
)
from trnsim.nki.context import current


class engine(enum.Enum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown


class reduce_cmd(enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.Enum):
    error = 0
    skip = 1


class matmul_perf_mode(enum.Enum):
    none = 0
    double_row = 1


@functools.total_ordering
class nc_version(enum.Enum):
    """NeuronCore generation; members order by generation, as kernels compare
    ``nisa.get_nc_version() >= nisa.nc_version.gen3`` (nki-library does)."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def __lt__(self, other: object) -> bool:
        if isinstance(other, nc_version):
            return self.value < other.value
        return NotImplemented


class dma_engine(enum.Enum):
    dma = 1
    gpsimd_dma = 2


# the enum behind each argument that may be given as a member's integer value (_enum_name)
_ENUM_ARGS: dict[str, type[enum.Enum]] = {
    "engine": engine,
    "reduce_cmd": reduce_cmd,
    "dge_mode": dge_mode,
    "oob_mode": oob_mode,
    "dma_engine": dma_engine,
}


_ENGINES = {
    engine.tensor: Engine.TENSOR,
    engine.scalar: Engine.SCALAR,
    engine.gpsimd: Engine.GPSIMD,
    engine.vector: Engine.VECTOR,
    engine.dma: Engine.DMA,
    engine.sync: Engine.SYNC,
}


def get_nc_version() -> nc_version:
    return nc_version(current().core.spec.generation)


def _eng(e: Any) -> Engine | None:
    if e is None or e == engine.unknown:
        return None
    if isinstance(e, engine):
        return _ENGINES[e]
    raise broken("engine-arg", f"engine must be an nki.isa.engine member, got {e!r}")


def _op(o: Any) -> str | None:
    if o is None:
        return None
    if isinstance(o, str):
        return o
    name = getattr(o, "name", None) or getattr(o, "__name__", None)
    if name is None:
        raise broken("operator", f"{o!r} is not an nki.language operator")
    return {"absolute": "abs", "true_divide": "divide", "exp2": "exp2"}.get(name, name)


class NkiInstruction(tuple):  # type: ignore[type-arg]
    """``nki.isa.NkiInstruction``: the handle an ``nki.isa`` call returns (its instruction in
    its core's record). ``c.depends_on(a, b)`` makes ``c`` start after ``a`` and ``b`` end (the
    docstring: "this instruction runs after every listed producer completes"); it returns
    ``c``, so calls chain. On hardware the edge is a semaphore wait; in trnsim it is an edge
    of the timing model (functional runs execute in program order, so it changes no value).
    A producer must be an earlier instruction of the same core (a later one could not signal
    first; an edge between the cores of an LNC=2 launch is not modelled)."""

    # a (core, position) tuple: made by ``_run`` with tuple.__new__, no Python-level __init__
    # (one is made per instruction, on the recording hot path)
    __slots__ = ()

    @property
    def _core(self) -> Any:
        return self[0]

    @property
    def _pos(self) -> int:
        return self[1]  # type: ignore[no-any-return]

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        for p in producers:
            if not isinstance(p, NkiInstruction):
                raise broken(
                    "depends-on",
                    f"depends_on() takes instructions returned by nki.isa calls, got "
                    f"{type(p).__name__}",
                )
            if p._core is not self._core:
                raise broken(
                    "depends-on",
                    f"depends_on(): the producer is on core {p._core.index}, this instruction on "
                    f"core {self._core.index}; edges between cores are not modelled",
                )
            if p._pos >= self._pos:
                raise broken(
                    "depends-on",
                    f"depends_on(): the producer (instruction {p._pos + 1} of the core) does not "
                    f"come before this instruction ({self._pos + 1}); a consumer waits for "
                    "earlier instructions only",
                )
        if producers:
            self._core.depend(self._pos, tuple(p._pos for p in producers))
        return self

    def __repr__(self) -> str:
        ins = self._core.record[self._pos]
        return f"NkiInstruction({ins.opcode.value} #{self._pos + 1} on core {self._core.index})"


_new_handle = tuple.__new__


def _run(
    op: Op, dst: dict[str, Any], src: dict[str, Any], attrs: dict[str, Any], eng: Any = None
) -> NkiInstruction:
    # a non-tensor operand is the core's operand-tensor error (NeuronCore.execute)
    core = current().core
    core.execute(op, dst, src, attrs, None if eng is None else _eng(eng))
    return _new_handle(NkiInstruction, (core, len(core.record) - 1))


def _scalar_or_vector(name: str, x: Any, src: dict[str, Any], attrs: dict[str, Any]) -> None:
    if isinstance(x, View):
        src[name] = x
    elif x is not None:
        attrs[name] = float(x)


def _unmodelled(op: Op, attrs: dict[str, Any], **given: Any) -> dict[str, Any]:
    """Add the arguments trnsim does not model (``modelled=False`` in the op's spec entry) that
    have a non-default value: the checker refuses them (``not-implemented``), none is ignored."""
    entry = SPECS[op]
    for name, value in given.items():
        a = entry.attr(name)
        assert a is not None and not a.modelled, (op, name)
        v = _enum_name(value, name)
        if v != a.default:
            attrs[name] = v
    return attrs


def _opt(d: dict[str, Any], **kv: Any) -> dict[str, Any]:
    d.update({k: v for k, v in kv.items() if v is not None})
    return d


def instruction(op: Op) -> Any:
    """The NKI call of ``op``, built from its ``trnsim.core.spec`` entry: parameters are the
    operands (dst first) then the attributes, in the entry's order, then ``engine`` (if the
    entry has engine choices) and ``name``; defaults are the entry's. A tensor argument of a
    role goes to ``dst`` / ``src``, a number given for a ``scalar`` role and each attribute go
    to the attributes (enums by name, ``nl`` operators by name); an unmodelled attribute goes
    only when it is not at its default (so the checker refuses it)."""
    entry = SPECS[op]
    by_name: dict[str, inspect.Parameter] = {}
    for r in entry.operands:
        by_name[r.name] = inspect.Parameter(
            r.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None if r.optional else _REQ
        )
    for a in entry.attrs:
        by_name[a.name] = inspect.Parameter(
            a.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=_REQ if a.default is None and not _optional(a.kind) else a.default,
        )
    order = list(entry.params) + [n for n in by_name if n not in entry.params]
    params = [by_name[n] for n in order]
    if entry.engines is not None:
        default = engine.unknown  # the instruction's default engine (the spec's ``engine``)
        params.append(
            inspect.Parameter("engine", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    params.append(inspect.Parameter("name", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None))
    sig = inspect.Signature(
        [p.replace(default=inspect.Parameter.empty) if p.default is _REQ else p for p in params]
    )

    def call(*args: Any, **kwargs: Any) -> NkiInstruction:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise broken("arguments", f"nki.isa.{op.value}: {exc}") from None
        bound.apply_defaults()
        given = bound.arguments
        dst: dict[str, Any] = {}
        src: dict[str, Any] = {}
        attrs: dict[str, Any] = {}
        for r in entry.operands:
            v = given[r.name]
            if v is None and r.optional:
                continue
            if r.scalar and not isinstance(v, View):
                attrs[r.name] = float(v)
            else:
                (dst if r.dst else src)[r.name] = v
        for a in entry.attrs:
            v = given[a.name]
            v = _enum_name(v, a.name)
            if a.kind is str and v is not None and not isinstance(v, str):
                v = _op(v)
            if v is None or (not a.modelled and v == a.default):
                continue
            attrs[a.name] = v
        return _run(op, dst, src, attrs, given.get("engine"))

    call.__name__ = call.__qualname__ = op.value
    call.__signature__ = sig  # type: ignore[attr-defined]
    call.__doc__ = f"``nki.isa.{op.value}``, built from its ``trnsim.core.spec`` entry. {entry.doc}"
    return call


_REQ = object()


def _optional(kind: Any) -> bool:
    return isinstance(kind, tuple) and type(None) in kind


# ---- Tensor engine ---------------------------------------------------------------------------


def nc_matmul(
    dst: View,
    stationary: View,
    moving: View,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: tuple = (),
    tile_size: tuple = (),
    perf_mode: Any = matmul_perf_mode.none,
    name: str | None = None,
) -> NkiInstruction:
    pm = perf_mode._name_ if isinstance(perf_mode, matmul_perf_mode) else str(perf_mode)
    pm = "double_row" if pm in ("double_row", "double_row_gen3") else pm
    pm = "none" if perf_mode is None else pm
    return _run(
        Op.NC_MATMUL,
        {DST: dst},
        {STATIONARY: stationary, MOVING: moving},
        {
            "accumulate": accumulate,
            "is_transpose": bool(is_transpose),
            "tile_position": tuple(tile_position or ()),
            "tile_size": tuple(tile_size or ()),
            "perf_mode": pm,
            "is_stationary_onezero": bool(is_stationary_onezero),
            "is_moving_onezero": bool(is_moving_onezero),
        },
    )


def nc_matmul_mx(
    dst: View,
    stationary: View,
    moving: View,
    stationary_scale: View,
    moving_scale: View,
    tile_position: tuple | None = None,
    tile_size: tuple | None = None,
    accumulate: bool | None = None,
    name: str | None = None,
) -> NkiInstruction:
    return _run(
        Op.NC_MATMUL_MX,
        {DST: dst},
        {
            STATIONARY: stationary,
            MOVING: moving,
            STATIONARY_SCALE: stationary_scale,
            MOVING_SCALE: moving_scale,
        },
        {
            "accumulate": accumulate,
            "tile_position": tuple(tile_position or ()),
            "tile_size": tuple(tile_size or ()),
        },
    )


def nc_transpose(
    dst: View, data: View, engine: Any = engine.unknown, name: str | None = None
) -> None:
    eng = _eng(engine)
    if eng is None:  # the compiler picks: Vector for <= 32x32 outside PSUM dst... Tensor else
        quad = current().core.spec.partitions // 4
        small = data.partitions <= quad and data.free_size <= quad
        eng = Engine.VECTOR if small and dst.memory != "psum" else Engine.TENSOR
    current().core.execute(Op.NC_TRANSPOSE, {DST: dst}, {DATA: data}, {}, eng)


quantize_mx = instruction(Op.QUANTIZE_MX)

# ---- Scalar engine ---------------------------------------------------------------------------


def activation(
    dst: View,
    op: Any,
    data: View,
    bias: View | None = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: View | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: str | None = None,
) -> NkiInstruction:
    src: dict[str, Any] = {DATA: data}
    attrs: dict[str, Any] = {"op": _op(op)}
    if bias is not None:
        src["bias"] = bias
    _scalar_or_vector("scale", scale, src, attrs)
    dsts = _scalar_reduction(dst, reduce_op, reduce_res, reduce_cmd, attrs)
    return _run(Op.ACTIVATION, dsts, src, attrs)


def _scalar_reduction(
    dst: View, reduce_op: Any, reduce_res: View | None, cmd: Any, attrs: dict[str, Any]
) -> dict[str, Any]:
    """activation / activate2: ``reduce_res`` (default reduction add), ``reduce_op`` and a
    ``reduce_cmd`` other than ``idle`` (the Scalar engine's ``reduce_regs``) into the call."""
    dsts: dict[str, Any] = {DST: dst}
    if reduce_res is not None:
        dsts[REDUCE_RES] = reduce_res
        attrs["reduce_op"] = _op(reduce_op) or "add"
    elif reduce_op is not None:
        attrs["reduce_op"] = _op(reduce_op)
    cmd = _enum_name(cmd, "reduce_cmd")
    if cmd != "idle":
        attrs["reduce_cmd"] = cmd
    return dsts


def activation_reduce(
    dst: View,
    op: Any,
    data: View,
    reduce_op: Any,
    reduce_res: View,
    bias: Any = None,
    scale: Any = 1.0,
    name: str | None = None,
) -> None:
    activation(dst, op, data, bias, scale, reduce_op, reduce_res)


def activate2(
    dst: View,
    op: Any,
    data: View,
    imm0: Any,
    imm1: Any,
    op0: Any,
    op1: Any,
    relu_param: float = 0.0,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op: Any = None,
    reduce_res: View | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: str | None = None,
) -> NkiInstruction:
    src: dict[str, Any] = {DATA: data}
    attrs: dict[str, Any] = {
        "op": _op(op),
        "op0": _op(op0),
        "op1": _op(op1),
        "reverse0": reverse0,
        "reverse1": reverse1,
    }
    _scalar_or_vector("imm0", imm0, src, attrs)
    _scalar_or_vector("imm1", imm1, src, attrs)
    if isinstance(relu_param, View) or float(relu_param) != 0.0:
        _scalar_or_vector("relu_param", relu_param, src, attrs)
    dsts = _scalar_reduction(dst, reduce_op, reduce_res, reduce_cmd, attrs)
    return _run(Op.ACTIVATE2, dsts, src, attrs)


# ---- Vector / GpSimd engines -------------------------------------------------------------------


def exponential(
    dst: View,
    src: View,
    max_value: Any = 0.0,
    reduce_res: View | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_init: float = 0.0,
    name: str | None = None,
) -> NkiInstruction:
    s: dict[str, Any] = {SRC: src}
    attrs: dict[str, Any] = {"reduce_init": float(reduce_init)}
    _scalar_or_vector("max_value", max_value, s, attrs)
    dsts: dict[str, Any] = {DST: dst}
    if reduce_res is not None:
        dsts[REDUCE_RES] = reduce_res
    _unmodelled(Op.EXPONENTIAL, attrs, reduce_cmd=reduce_cmd)
    return _run(Op.EXPONENTIAL, dsts, s, attrs)


tensor_tensor = instruction(Op.TENSOR_TENSOR)


def tensor_scalar(
    dst: View,
    data: View,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = engine.unknown,
    name: str | None = None,
) -> NkiInstruction:
    src: dict[str, Any] = {DATA: data}
    attrs: dict[str, Any] = {"op0": _op(op0), "reverse0": reverse0, "reverse1": reverse1}
    if op1 is not None:
        attrs["op1"] = _op(op1)
    _scalar_or_vector("operand0", operand0, src, attrs)
    _scalar_or_vector("operand1", operand1, src, attrs)
    return _run(Op.TENSOR_SCALAR, {DST: dst}, src, attrs, engine)


def tensor_reduce(
    dst: View,
    op: Any,
    data: View,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
) -> NkiInstruction:
    axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
    axes = tuple(int(a) % len(data.shape) for a in axes)  # (rule reduce-axis checks them)
    return _run(
        Op.TENSOR_REDUCE,
        {DST: dst},
        {DATA: data},
        {"op": _op(op), "axis": axes, "negate": negate, "keepdims": keepdims},
    )


tensor_partition_reduce = instruction(Op.TENSOR_PARTITION_REDUCE)

_tensor_copy = instruction(Op.TENSOR_COPY)


def tensor_copy(
    dst: View, src: View, engine: Any = engine.unknown, name: str | None = None, dtype: Any = None
) -> NkiInstruction:
    """``nki.isa.tensor_copy``; ``dtype=`` (as the official tutorials pass it): the values are
    cast to ``dtype`` on the way, then written in ``dst``'s dtype (the tutorials copy fp32
    PSUM into an fp32 SBUF tile "cast to the expected output data-type")."""
    via = None
    if dtype is not None:
        from trnsim.numerics import get_format

        try:
            via = get_format(dtype).name
        except Exception:  # a user's bad dtype: one clear line
            raise broken(
                "tensor-copy-dtype", f"tensor_copy dtype={dtype!r} is not a dtype"
            ) from None
    if isinstance(dst, indirect.IndirectView) or isinstance(src, indirect.IndirectView):
        # a dynamic start within each partition (.ap(scalar_offset=...) on SBUF/PSUM)
        srcs: dict[str, Any] = {SRC: src}
        attrs: dict[str, Any] = {} if via is None else {"dtype": via}
        indirect.annotate_dynamic(dst, srcs, attrs)
        return _run(Op.TENSOR_COPY, {DST: dst}, srcs, attrs, engine)
    return _tensor_copy(dst=dst, src=src, dtype=via, engine=engine, name=name)


def tensor_copy_predicated(
    dst: View, src: Any, predicate: View, reverse_pred: bool = False, name: str | None = None
) -> NkiInstruction:
    s: dict[str, Any] = {PREDICATE: predicate}
    attrs: dict[str, Any] = {"reverse_pred": reverse_pred}
    if isinstance(src, View):
        s[SRC] = src
    else:
        attrs[SRC] = float(src)
    return _run(Op.TENSOR_COPY_PREDICATED, {DST: dst}, s, attrs)


def tensor_tensor_scan(
    dst: View,
    data0: View,
    data1: View,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> NkiInstruction:
    src: dict[str, Any] = {"data0": data0, "data1": data1}
    attrs: dict[str, Any] = {
        "op0": _op(op0),
        "op1": _op(op1),
        "reverse0": bool(reverse0),
        "reverse1": bool(reverse1),
    }
    _scalar_or_vector("initial", initial, src, attrs)
    return _run(Op.TENSOR_TENSOR_SCAN, {DST: dst}, src, attrs)


def scalar_tensor_tensor(
    dst: View,
    data: View,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: View,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> NkiInstruction:
    src: dict[str, Any] = {DATA: data, "operand1": operand1}
    attrs: dict[str, Any] = {
        "op0": _op(op0),
        "op1": _op(op1),
        "reverse0": reverse0,
        "reverse1": reverse1,
    }
    _scalar_or_vector("operand0", operand0, src, attrs)
    return _run(Op.SCALAR_TENSOR_TENSOR, {DST: dst}, src, attrs)


memset = instruction(Op.MEMSET)


def iota(
    dst: View, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: str | None = None
) -> NkiInstruction:
    pat = tuple((int(s), int(n)) for s, n in pattern)
    return _run(
        Op.IOTA,
        {DST: dst},
        {},
        {"pattern": pat, "offset": int(offset), "channel_multiplier": int(channel_multiplier)},
    )


def affine_select(
    dst: View,
    pattern: Any,
    on_true_tile: View,
    on_false_value: float,
    cmp_op: Any = None,
    offset: int = 0,
    channel_multiplier: int = 0,
    name: str | None = None,
) -> NkiInstruction:
    pat = tuple((int(s), int(n)) for s, n in pattern)
    return _run(
        Op.AFFINE_SELECT,
        {DST: dst},
        {DATA: on_true_tile},
        {
            "pattern": pat,
            "offset": int(offset),
            "channel_multiplier": int(channel_multiplier),
            "cmp_op": _op(cmp_op) or "greater_equal",
            "on_false_value": float(on_false_value),
        },
    )


def range_select(
    dst: View,
    on_true_tile: View,
    comp_op0: Any,
    comp_op1: Any,
    bound0: View,
    bound1: View,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_res: View | None = None,
    reduce_op: Any = None,
    range_start: float = 0.0,
    on_false_value: float = -3.4028235e38,
    name: str | None = None,
) -> NkiInstruction:
    fill = float(on_false_value)  # (rule range-select-fill: FP32_MIN only)
    fill = FP32_MIN if np.float32(fill) == np.float32(FP32_MIN) else fill
    if reduce_op is not None and _op(reduce_op) != "maximum":
        raise broken(
            "range-select-reduce-op",
            f"range_select reduce_op must be nl.maximum, got {_op(reduce_op)}",
        )
    dsts: dict[str, Any] = {DST: dst}
    if reduce_res is not None:
        dsts[REDUCE_RES] = reduce_res
    return _run(
        Op.RANGE_SELECT,
        dsts,
        {"on_true_tile": on_true_tile, "bound0": bound0, "bound1": bound1},
        {
            "comp_op0": _op(comp_op0),
            "comp_op1": _op(comp_op1),
            "range_start": float(range_start),
            "on_false_value": fill,
            **_unmodelled(Op.RANGE_SELECT, {}, reduce_cmd=reduce_cmd),
        },
    )


reciprocal = instruction(Op.RECIPROCAL)

bn_stats = instruction(Op.BN_STATS)

bn_aggr = instruction(Op.BN_AGGR)

max8 = instruction(Op.MAX8)

nc_find_index8 = instruction(Op.NC_FIND_INDEX8)


def local_gather(
    dst: View,
    src_buffer: View,
    index: View,
    num_elem_per_idx: int = 1,
    num_valid_indices: Any = None,
    name: str | None = None,
) -> NkiInstruction:
    return _run(
        Op.LOCAL_GATHER,
        {DST: dst},
        {"src_buffer": src_buffer, INDEX: index},
        {
            "num_elem_per_idx": int(num_elem_per_idx),
            "num_valid_indices": None if num_valid_indices is None else int(num_valid_indices),
        },
    )


def select_reduce(
    dst: View,
    predicate: View,
    on_true: View,
    on_false: Any,
    reduce_res: View | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    name: str | None = None,
) -> NkiInstruction:
    if reduce_op is not None and _op(reduce_op) not in ("maximum", "max", "amax"):
        raise broken(
            "select-reduce-op", f"select_reduce reduce_op must be nl.maximum, got {_op(reduce_op)}"
        )
    cmd = _enum_name(reduce_cmd, "reduce_cmd")
    if cmd not in ("idle", "reset_reduce", "reduce"):
        raise broken(
            "select-reduce-cmd", f"select_reduce reduce_cmd {cmd} not in idle/reset_reduce/reduce"
        )
    src: dict[str, Any] = {PREDICATE: predicate, "on_true": on_true}
    attrs: dict[str, Any] = {"reverse_pred": bool(reverse_pred), "reduce_cmd": cmd}
    _scalar_or_vector("on_false", on_false, src, attrs)
    dsts: dict[str, Any] = {DST: dst}
    if reduce_res is not None:
        dsts[REDUCE_RES] = reduce_res
    return _run(Op.SELECT_REDUCE, dsts, src, attrs)


def rand2(dst: View, min: Any, max: Any, name: str | None = None) -> NkiInstruction:
    """Uniform random values in [min, max] from the Vector engine's XORWOW generators."""
    src: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    _scalar_or_vector("min", min, src, attrs)
    _scalar_or_vector("max", max, src, attrs)
    return _run(Op.RAND2, {DST: dst}, src, attrs)


rand_set_state = instruction(Op.RAND_SET_STATE)

rand_get_state = instruction(Op.RAND_GET_STATE)


# ---- DMA ---------------------------------------------------------------------------------------


def _enum_name(x: Any, arg: str | None = None) -> Any:
    """An enum argument as its member name. Kernels may pass the member's integer value
    (nki-library: ``dge_mode=3``; the issue's "enum arguments given as their integer
    values"): for an argument named in ``_ENUM_ARGS`` a value of that enum becomes its name;
    any other value is returned as given, for the argument rule to name."""
    if isinstance(x, enum.Enum):
        return x._name_  # _name_: the plain attribute of .name
    cls = _ENUM_ARGS.get(arg or "")
    if cls is not None and isinstance(x, int | np.integer) and not isinstance(x, bool):
        try:
            return cls(int(x))._name_
        except ValueError:
            return x
    return x


def dma_copy(
    dst: View,
    src: View,
    priority: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    engine: Any = engine.unknown,
    name: str | None = None,
) -> NkiInstruction:
    srcs: dict[str, Any] = {SRC: src}
    attrs = _opt(
        {
            "dge_mode": _enum_name(dge_mode, "dge_mode"),
            "oob_mode": _enum_name(oob_mode, "oob_mode"),
        },
        priority=priority,
        dge_engine=None if engine in (None, unknown_engine, 0) else _enum_name(engine, "engine"),
    )
    indirect.annotate(dst, srcs, attrs)  # gather/scatter: the index tile is read too
    return _run(Op.DMA_COPY, {DST: dst}, srcs, attrs)


def dma_transpose(
    dst: View,
    src: View,
    axes: Any = None,
    priority: Any = None,
    dge_mode: Any = dge_mode.unknown,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
) -> NkiInstruction:
    return _run(
        Op.DMA_TRANSPOSE,
        {DST: dst},
        {SRC: src},
        _unmodelled(
            Op.DMA_TRANSPOSE,
            _opt(
                {"dge_mode": _enum_name(dge_mode, "dge_mode")}, axes=tuple(axes) if axes else None
            ),
            priority=priority,
            oob_mode=oob_mode,
        ),
    )


def dma_compute(
    dst: View,
    srcs: Any,
    reduce_op: Any = None,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
) -> NkiInstruction:
    if scales is not None and any(float(x) != 1.0 for x in scales):
        raise broken(
            "dma-compute-scales", f"dma_compute scales={list(scales)} (the docs allow only 1.0)"
        )
    src = {f"src{i}": s for i, s in enumerate(srcs)}
    attrs: dict[str, Any] = {"reduce_op": _op(reduce_op) or "add"}
    oob = _enum_name(oob_mode, "oob_mode")
    if indirect.annotate_rmw(dst, src, attrs, bool(unique_indices)):  # vector_offset RMW
        if oob != "error":
            attrs["oob_mode"] = oob
    elif oob != "error" or unique_indices is not True:
        given = [f"unique_indices={unique_indices!r}"] if unique_indices is not True else []
        given += [f"oob_mode={oob!r}"] if oob != "error" else []
        raise broken(
            "dma-compute-static",
            f"dma_compute {', '.join(given)}: only a read-modify-write through a vector_offset "
            "view takes it; a static dma_compute is modelled with the defaults",
        )
    return _run(Op.DMA_COMPUTE, {DST: dst}, src, attrs)


# ---- LNC=2 ---------------------------------------------------------------------------------------


def core_barrier(
    data: Any = None, cores: Any = None, engine: Any = None, name: str | None = None
) -> None:
    prog = current()
    if prog.launch.lnc < 2:
        raise broken("core-barrier-lnc", "core_barrier needs an LNC=2 launch (kernel[2](...))")
    prog.core.execute(Op.CORE_BARRIER, {}, {}, {})
    prog.core.sync()  # this core's data work is done before the other core goes on
    prog.launch.barrier.wait()


def sendrecv(
    src: View,
    dst: View,
    send_to_rank: int,
    recv_from_rank: int,
    pipe_id: int,
    dma_engine: Any = dma_engine.dma,
    name: str | None = None,
) -> None:
    """Send ``src`` to ``dst`` of core ``send_to_rank`` while receiving ``dst`` from core
    ``recv_from_rank`` (LNC=2). Both programs must call it (same ``pipe_id``)."""
    prog = current()
    launch = prog.launch
    if launch.lnc < 2:
        raise broken("sendrecv-lnc", "sendrecv needs an LNC=2 launch (kernel[2](...))")
    for what, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if int(r) not in range(launch.lnc):
            raise broken(
                "sendrecv-rank", f"{what} {r} is not a core of this LNC={launch.lnc} launch"
            )
    me = prog.program_id
    attrs = {
        "send_to_rank": int(send_to_rank),
        "recv_from_rank": int(recv_from_rank),
        "pipe_id": int(pipe_id),
        "dma_engine": _enum_name(dma_engine, "dma_engine"),
    }
    _run(Op.SENDRECV, {DST: dst}, {SRC: src}, attrs)
    prog.core.sync()  # the deferred data work up to here (trnsim.core.accel)
    payload = np.array(src.array()) if prog.core.functional else None
    with launch.lock:
        launch.mailbox[("sendrecv", int(pipe_id), me, int(send_to_rank))] = payload
    launch.barrier.wait()
    with launch.lock:
        key = ("sendrecv", int(pipe_id), int(recv_from_rank), me)
        if key not in launch.mailbox:
            raise broken(
                "sendrecv-pair",
                f"core {me} expects data from core {recv_from_rank} on pipe {pipe_id}, but "
                "that core sent to another core",
            )
        got = launch.mailbox.pop(key)
    if got is not None:
        prog.core.write_raw(dst, got.reshape(dst.shape))
    launch.barrier.wait()  # a later sendrecv on the same pipe must not overwrite the mailbox


def _not_here(name: str):
    def fn(*args: Any, **kwargs: Any) -> None:
        raise broken("front-end-missing", f"nki.isa.{name} is not implemented by trnsim yet")

    fn.__name__ = name
    return fn


# ---- built from the specification -------------------------------------------------------------

dropout = instruction(Op.DROPOUT)
rng = instruction(Op.RNG)
set_rng_seed = instruction(Op.SET_RNG_SEED)


for _n in (
    "tensor_copy_dynamic_src",
    "tensor_copy_dynamic_dst",
):
    globals()[_n] = _not_here(_n)


# ---- issue 13: the rest of the NKI 0.6 ISA, built from the specification ------------------------

tensor_scalar_cumulative = instruction(Op.TENSOR_SCALAR_CUMULATIVE)
nc_match_replace8 = instruction(Op.NC_MATCH_REPLACE8)
nc_n_gather = instruction(Op.NC_N_GATHER)
sequence_bounds = instruction(Op.SEQUENCE_BOUNDS)
nonzero_with_count = instruction(Op.NONZERO_WITH_COUNT)
topk = instruction(Op.TOPK)
_tensor_scalar_reduce = instruction(Op.TENSOR_SCALAR_REDUCE)
_nc_stream_shuffle = instruction(Op.NC_STREAM_SHUFFLE)

_REDUCE_ALIASES = {"max": "maximum", "min": "minimum"}


def tensor_scalar_reduce(
    dst: View,
    data: View,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: View | None = None,
    reverse0: bool = False,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    name: str | None = None,
) -> NkiInstruction:
    """``nki.isa.tensor_scalar_reduce`` (spec entry); ``operand0`` 0 / None with a unary op0."""
    op = _REDUCE_ALIASES.get(_op(reduce_op) or "", _op(reduce_op))
    return _tensor_scalar_reduce(
        dst=dst,
        data=data,
        op0=op0,
        reduce_op=op,
        operand0=operand0,
        reduce_res=reduce_res,
        reverse0=reverse0,
        reduce_cmd=reduce_cmd,
        reduce_init=reduce_init,
        reduce_res_negate=reduce_res_negate,
    )


def nc_stream_shuffle(
    dst: View, src: View, shuffle_mask: Any, name: str | None = None
) -> NkiInstruction:
    """``nki.isa.nc_stream_shuffle`` (spec entry); the mask's entries as Python ints."""
    return _nc_stream_shuffle(dst, src, tuple(int(m) for m in shuffle_mask), name)


class VirtualRegister:
    """``nki.isa.VirtualRegister``: a 32-bit engine-sequencer register. trnsim runs the
    kernel as it is traced, so a register's value is known: ``while reg:``, ``range(reg)``,
    ``int(reg)`` and ``nl.dynamic_range(reg)`` follow it (the control flow on registers the
    ``register_alloc`` docstring describes)."""

    def __init__(self, value: int | None = None) -> None:
        self._value = None if value is None else _int32(value)

    @property
    def value(self) -> int:
        if self._value is None:
            raise broken("register-uninitialized", "a register read before any register_load/move")
        return self._value

    def __index__(self) -> int:
        return self.value

    __int__ = __index__

    def __bool__(self) -> bool:
        return self.value != 0

    def __repr__(self) -> str:
        return f"VirtualRegister({self._value})"


def _int32(x: Any) -> int:
    v = int(x)
    if not -(2**31) <= v < 2**32:
        raise broken("register-32bit", f"register value {v} does not fit 32 bits")
    return v - 2**32 if v >= 2**31 else v


def _register(x: Any, what: str) -> VirtualRegister:
    if not isinstance(x, VirtualRegister):
        raise broken(
            "register-operand", f"{what} must be an nki.isa register (register_alloc), got {x!r}"
        )
    return x


def register_alloc(x: Any = None) -> VirtualRegister:
    """Allocate a register, uninitialised, set to an integer, or loaded from a one-element
    tensor (as nki-library passes ``t[0, 0]``)."""
    if isinstance(x, View):
        reg = VirtualRegister()
        register_load(reg, x)
        return reg
    return VirtualRegister(x)


def register_move(dst: Any, src: Any) -> None:
    """Set register ``dst`` to an integer or to another register's value."""
    reg = _register(dst, "register_move dst")
    value = _register(src, "register_move src").value if not isinstance(src, int) else src
    value = _int32(value)
    _run(Op.REGISTER_MOVE, {}, {}, {"value": value})
    reg._value = value


def register_load(dst: Any, src: View) -> None:
    """Load the one (integer, <= 32-bit) element of ``src`` (HBM or SBUF) into ``dst``."""
    reg = _register(dst, "register_load dst")
    _run(Op.REGISTER_LOAD, {}, {SRC: src}, {})
    core = current().core
    core.sync()  # the data work up to here (trnsim.core.accel)
    if core.functional:
        reg._value = _int32(np.asarray(core.read_raw(src)).reshape(-1)[0])
    else:
        raise broken(
            "register-load-timing-only",
            "register_load in a timing-only run: the register's value is data, which a "
            "timing-only run does not hold",
        )


def register_store(dst: View, src: Any) -> NkiInstruction:
    """Store register ``src``'s value into the one-element tensor ``dst``."""
    reg = _register(src, "register_store src")
    value = reg.value
    if isinstance(dst, View) and dst.fmt.kind == "int":
        info = np.iinfo(dst.fmt.dtype)
        if not info.min <= value <= info.max:
            raise broken(
                "register-store-range",
                f"register_store of {value} into {dst.fmt.name} (range {info.min}..{info.max})",
            )
    return _run(Op.REGISTER_STORE, {DST: dst}, {}, {"value": value})
