"""Legality rules as data: a table of ``Rule``s that ``check`` walks before an instruction runs.

Each rule has a name (it appears first in the error: ``"moving-fmax: ..."``), the ops it
applies to, and a check returning ``None`` or the message with the offending values. Every
limit comes from the target's ``CoreSpec`` (``trnsim.hw``). Sources: the per-instruction
docstrings (``nki/api/nki/isa/__init__.py``) and the architecture guides (nki-notes.md 1.4,
4.2, 5).

A rule receives the instruction as a ``LiveInstruction`` (``trnsim.core.live``): the
record the core appends, with its live operand views (``dst_views``, ``src_views``), the
attributes as passed (``args``) and the target (``spec``).

The rule contract (what makes the per-signature cache of ``Checker`` sound): a rule reads
only the op, the engine, the target, the attributes, and per operand its role, memory,
format, shape, strides and start partition, which is exactly the ``signature`` of the call
(the recorded ``Operand``s without their byte offsets). Two calls with the same signature get
the same verdict, so a signature that passed once is not re-checked. Bounds (which depend on
the offset) are checked per view, see ``View.inbounds``. Calls with an operand of a view class
that describes itself differently (the indirect views of ``trnsim.core.indirect``) are never
cached: ``NeuronCore.execute`` runs ``check`` on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod

import numpy as np

from trnsim.core import indirect
from trnsim.core import spec as sp
from trnsim.core.indirect import IndirectView, indirect_roles
from trnsim.core.isa import ALL_OPS, DMA_OPS, Engine, Op
from trnsim.core.live import LiveInstruction
from trnsim.core.location import fail
from trnsim.core.memory import PSUM, SBUF, View
from trnsim.core.spec import (
    DATA,
    DST,
    DST_SCALE,
    FP32_MIN,
    INDEX,
    MOVING,
    SPECS,
    SRC,
    SRC_SEEDS,
    STATIONARY,
    Instr,
)

Check = Callable[[LiveInstruction], str | None]


@dataclass(frozen=True)
class Rule:
    """``name``: what the error starts with. ``key``: how a ``spec`` entry names an op-specific
    rule (its ``rules``); generic rules have ``key=""`` and apply where ``applies`` says."""

    name: str
    ops: frozenset[Op]
    check: Check = field(compare=False)
    key: str = ""


RULES: list[Rule] = []
"""Every rule, in check order (the first broken one is reported)."""


def _ops_where(pred: Callable[[Instr], bool]) -> frozenset[Op]:
    return frozenset(Op(e.name) for e in SPECS.values() if pred(e))


def rule(
    name: str,
    ops: frozenset[Op] | set[Op] | Callable[[Instr], bool] = ALL_OPS,
    *,
    key: str = "",
) -> Callable[[Check], Check]:
    """Register a rule. Generic rules give ``ops`` (a set, or a predicate on the ``spec``
    entry); op-specific ones give ``key`` and apply to the entries whose ``rules`` name it."""

    def register(fn: Check) -> Check:
        if key:
            if any(r.key == key for r in RULES):
                raise ValueError(f"rule key {key!r} registered twice")
            applies = _ops_where(lambda e: key in e.rules)
        elif callable(ops):
            applies = _ops_where(ops)
        else:
            applies = frozenset(ops)
        RULES.append(Rule(name, applies, fn, key))
        return fn

    return register


# ---- tables ---------------------------------------------------------------------------------

FLOAT_MATMUL_IN = frozenset(
    {"float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32"}
)
FP8 = frozenset({"float8_e4m3", "float8_e5m2", "float8_e4m3fn"})

# (op, role) -> allowed format names (the ``dtypes`` of the spec's roles); generation-dependent
# sets are checked in op-specific rules.
DTYPES: dict[tuple[Op, str], frozenset[str]] = {
    (Op(e.name), r.name): r.dtypes
    for e in SPECS.values()
    for r in e.operands
    if r.dtypes is not None
}
SAME_SHAPE_ROLES: dict[Op, tuple[str, ...]] = {
    Op(e.name): roles
    for e in SPECS.values()
    if (roles := tuple(r.name for r in e.operands if not r.dst and r.shape == sp.SAME))
}
"""Sources that must have ``dst``'s partitions and elements per partition (spec ``SAME``)."""
COLUMN_ROLES: dict[Op, tuple[tuple[str, bool], ...]] = {
    Op(e.name): roles
    for e in SPECS.values()
    if (
        roles := tuple(
            (r.name, r.dst) for r in sorted(e.operands, key=lambda r: r.dst) if r.shape == sp.COLUMN
        )
    )
}
"""(role, is_dst) of the ``[P, 1]`` per-partition operands (spec ``COLUMN``), sources first."""


def _on_chip(call: LiveInstruction) -> list[tuple[str, View, bool]]:
    return call.on_chip()


# ---- generic rules ---------------------------------------------------------------------------


@rule("engine", lambda e: e.engines is not None)
def _engine(call: LiveInstruction) -> str | None:
    choices = SPECS[call.opcode].choices
    if call.engine not in choices:
        allowed = ", ".join(sorted(e.value for e in choices))
        return f"{call.opcode.value} cannot run on {call.engine.value}; allowed: {allowed}"
    return None


# ---- tensor indirection (trnsim.core.indirect, T4-T6; checked first) ---------------------------


def _TI_OPS(e: Instr) -> bool:
    return any(r.ti for r in e.operands)


@rule("ti-operand")
def _ti_operand(call: LiveInstruction) -> str | None:
    return indirect.ti_operand_error(call.opcode, call.dst_views, call.src_views)


@rule("ti-generation", _TI_OPS)
def _ti_generation(call: LiveInstruction) -> str | None:
    tis = indirect.ti_views(call.dst_views, call.src_views)
    if tis and call.spec.generation < indirect.TI_MIN_GENERATION:
        return (
            f"{call.opcode.value} {tis[0][0]}: tensor indirection (.indirect) needs NeuronCore-v"
            f"{indirect.TI_MIN_GENERATION} or later; target is {call.spec.name} "
            f"(v{call.spec.generation})"
        )
    return None


@rule("ti-tiling", lambda e: _TI_OPS(e) and e.attr("tile_position") is not None)
def _ti_tiling(call: LiveInstruction) -> str | None:
    if indirect.ti_views(call.dst_views, call.src_views):
        return indirect.ti_tiling_error(call.opcode, call.args)
    return None


def _ti_limit(which: str) -> Check:
    def check(call: LiveInstruction) -> str | None:
        for role, v, is_dst in indirect.ti_views(call.dst_views, call.src_views):
            got = indirect.ti_operand_limits(call.opcode, call.engine, role, v, is_dst)
            if got is not None and got[0] == which:
                return got[1]
        return None

    check.__name__ = f"_{which.replace('-', '_')}"
    return check


rule("ti-dtype", _TI_OPS)(_ti_limit("ti-dtype"))
rule("ti-psum-scatter", _TI_OPS)(_ti_limit("ti-psum-scatter"))


@rule("ti-index", _TI_OPS)
def _ti_index(call: LiveInstruction) -> str | None:
    for role, v, _ in indirect.ti_views(call.dst_views, call.src_views):
        msg = indirect.ti_groups_error(call.opcode, role, call.engine, v)
        if msg is not None:
            return msg
    return None


# ---- generic rules (continued) -------------------------------------------------------------------


@rule("generation", lambda e: e.min_generation > 2)
def _generation(call: LiveInstruction) -> str | None:
    need = SPECS[call.opcode].min_generation
    if call.spec.generation < need:
        return (
            f"{call.opcode.value} needs NeuronCore-v{need} or newer; target is {call.spec.name} "
            f"(v{call.spec.generation})"
        )
    return None


@rule("not-implemented", lambda e: any(not a.modelled for a in e.attrs))
def _unmodelled(call: LiveInstruction) -> str | None:
    for a in SPECS[call.opcode].attrs:
        if not a.modelled and a.name in call.args and call.args[a.name] != a.default:
            return (
                f"{call.opcode.value} {a.name}={call.args[a.name]!r} is not modelled by trnsim; "
                f"only the default ({a.default!r}) is accepted"
            )
    return None


# (registered before "memory" so an indirect view on a compute op gets this message)
@rule("indirect-operand", lambda e: not any(r.ap for r in e.operands))
def _indirect_elsewhere(call: LiveInstruction) -> str | None:
    if "indirect" in call.args and call.opcode is Op.DMA_COMPUTE:
        return None  # a read-modify-write the front end checked (indirect.annotate_rmw)
    for v in (
        *call.dst_views.values(),
        *call.src_views.values(),
    ):  # the common case: one cheap pass
        if type(v) is IndirectView:
            break
    else:
        return None
    roles = indirect_roles(call)
    if call.opcode is Op.TENSOR_COPY and "dynamic" in call.args:
        # an on-chip scalar_offset view, annotated by the front end (indirect.annotate_dynamic)
        side = call.dst_views.get(roles[0]) or call.src_views[roles[0]]
        if len(roles) == 1 and side.memory != "hbm" and side.kind == "scalar":  # type: ignore[attr-defined]
            return None
    extra = (
        " (indirect dma_transpose/dma_compute are not modelled)" if call.opcode in DMA_OPS else ""
    )
    return (
        f"{call.opcode.value} {roles[0]} is an indirect view (.ap with vector_offset / "
        f"scalar_offset); only dma_copy accepts one{extra} (and tensor_copy an SBUF/PSUM "
        "scalar_offset view)"
    )


@rule("memory")
def _memory(call: LiveInstruction) -> str | None:
    entry = SPECS[call.opcode]
    for role, v, is_dst in call.views():
        mem = v.memory
        if mem not in entry.memories(role, is_dst, call.engine):
            return (
                f"{call.opcode.value} {role} is in {mem.upper()}, which {call.opcode.value} cannot "
                + ("write" if is_dst else "read")
                + f" on the {call.engine.value} engine"
            )
    return None


@rule("memory", key="psum-inputs")
def _psum_inputs(call: LiveInstruction) -> str | None:
    ins = [v for _, v, d in call.views() if not d]
    if len(ins) >= 2 and all(v.memory == PSUM for v in ins[:2]):
        return f"{call.opcode.value}: both inputs are in PSUM; at most one may be"
    return None


@rule("partition-dim")
def _partition_dim(call: LiveInstruction) -> str | None:
    limit = call.spec.partitions
    for role, v, _ in _on_chip(call):
        if v.partitions > limit:
            return f"{call.opcode.value} {role} partition dimension {v.partitions} exceeds {limit}"
    return None


@rule("contiguous-partitions")
def _contiguous(call: LiveInstruction) -> str | None:
    for role, v, _ in _on_chip(call):
        if v.partitions > 1 and v.strides[0] != 1:
            return (
                f"{call.opcode.value} {role} steps over partitions with stride {v.strides[0]}; "
                "a tensor must occupy contiguous partitions"
            )
    return None


@rule("start-partition", lambda e: e.compute)
def _start_partition(call: LiveInstruction) -> str | None:
    quad = call.spec.partitions // 4
    for role, v, _ in _on_chip(call):
        n, start = v.partitions, v.partition_start
        step = call.spec.partitions if n > 2 * quad else 2 * quad if n > quad else quad
        if start % step:
            legal = list(range(0, call.spec.partitions, step))
            return (
                f"{call.opcode.value} {role} starts at partition {start} with {n} partitions; "
                f"legal starts for {n} partitions are {legal}"
            )
    return None


@rule("dtype")
def _dtype(call: LiveInstruction) -> str | None:
    for role, v, _ in call.views():
        allowed = DTYPES.get((call.opcode, role))
        if allowed is not None and v.fmt.name not in allowed:
            return (
                f"{call.opcode.value} {role} dtype {v.fmt.name} not allowed; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
    return None


# ---- Tensor engine ---------------------------------------------------------------------------


@rule("dtype", key="matmul-dtype")
def _matmul_dtype(call: LiveInstruction) -> str | None:
    allowed = FLOAT_MATMUL_IN | ({"float8_e4m3fn"} if call.spec.generation >= 4 else set())
    names = {}
    for role in (STATIONARY, MOVING):
        name = call.src_views[role].fmt.name
        names[role] = name
        if name not in allowed:
            return (
                f"nc_matmul {role} dtype {name} not allowed on {call.spec.name}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
    wide = {"float32", "tfloat32"}
    if (names[STATIONARY] in wide) != (names[MOVING] in wide):
        return (
            f"nc_matmul: fp32/tf32 input must be paired with fp32/tf32, got stationary "
            f"{names['stationary']} and moving {names['moving']}"
        )
    if {"float8_e4m3", "float8_e4m3fn"} <= set(names.values()):
        return "nc_matmul: float8_e4m3 (legacy) and float8_e4m3fn (OCP) cannot be mixed"
    if call.args.get("perf_mode") == "double_row":
        if call.spec.generation < 3:
            return f"nc_matmul perf_mode=double_row needs NeuronCore-v3+, target {call.spec.name}"
        bad = [n for n in names.values() if n not in FP8]
        if bad:
            return f"nc_matmul perf_mode=double_row needs fp8 inputs, got {', '.join(bad)}"
    return None


@rule("dtype", key="matmul-dst-dtype")
def _matmul_dst_dtype(call: LiveInstruction) -> str | None:
    name = call.dst_views[DST].fmt.name
    allowed = {"float32", "bfloat16"} if call.spec.supports_bf16_psum else {"float32"}
    if call.args.get("is_transpose"):
        allowed = allowed | {call.src_views[STATIONARY].fmt.name}
        if call.src_views[STATIONARY].fmt.name in FP8:
            allowed |= {"bfloat16", "float16"}
    if name not in allowed:
        return (
            f"{call.opcode.value} dst dtype {name} not allowed on {call.spec.name}; allowed: "
            f"{', '.join(sorted(allowed))}"
        )
    return None


@rule("shape", key="matmul-shape")
def _matmul_shape(call: LiveInstruction) -> str | None:
    st, mv, dst = call.src_views[STATIONARY], call.src_views[MOVING], call.dst_views[DST]
    double = call.args.get("perf_mode") == "double_row"
    if st.partitions != mv.partitions:
        return (
            f"nc_matmul contraction (partition) dims differ: stationary {st.partitions}, "
            f"moving {mv.partitions}"
        )
    if double and (st.shape[1:2] != (2,) or mv.shape[1:2] != (2,)):
        return (
            f"nc_matmul double_row needs [K, 2, F] operands, got stationary {list(st.shape)}, "
            f"moving {list(mv.shape)}"
        )
    m = st.free_size // (2 if double else 1)
    n = mv.free_size // (2 if double else 1)
    if dst.partitions != m or dst.free_size != n:
        return (
            f"nc_matmul dst shape {list(dst.shape)} does not match [stationary free {m}, "
            f"moving free {n}]"
        )
    return None


@rule("stationary-fmax", key="stationary-fmax")
def _stationary_fmax(call: LiveInstruction) -> str | None:
    st = call.src_views[STATIONARY]
    m = st.free_size // (2 if call.args.get("perf_mode") == "double_row" else 1)
    limit = call.spec.tensor.stationary_fmax
    tile = call.args.get("tile_size") or ()
    if tile:
        rows, cols = tile
        if st.partitions > rows:
            return (
                f"{call.opcode.value} stationary partitions {st.partitions} exceed tile rows {rows}"
            )
        limit = min(limit, cols)
    if m > limit:
        return f"{call.opcode.value} stationary free size {m} exceeds {limit}"
    return None


@rule("moving-fmax", key="moving-fmax")
def _moving_fmax(call: LiveInstruction) -> str | None:
    mv, dst = call.src_views[MOVING], call.dst_views[DST]
    n = mv.free_size // (2 if call.args.get("perf_mode") == "double_row" else 1)
    fmax = call.spec.tensor.moving_fmax
    key = "bf16" if dst.fmt.name == "bfloat16" else "fp32"
    limit = fmax[key] if key in fmax else fmax["fp32"]
    if n > limit:
        return (
            f"{call.opcode.value} moving free size {n} exceeds {limit} for a {dst.fmt.name} dst on "
            f"{call.spec.name}"
        )
    return None


@rule("tile-position", key="tile-position")
def _tile_position(call: LiveInstruction) -> str | None:
    pos, size = call.args.get("tile_position") or (), call.args.get("tile_size") or ()
    if bool(pos) != bool(size):
        return "tile_position and tile_size must both be set (or neither)"
    if not pos:
        return None
    rows = call.spec.tensor.rows
    smallest = rows // 4 if call.spec.generation >= 3 else rows // 2
    for what, v in (("row", size[0]), ("column", size[1])):
        if v not in {rows, rows // 2, smallest} or v < smallest:
            return f"tile_size {what} size {v} not allowed on {call.spec.name}"
    if pos[0] % size[0] or pos[1] % size[1] or pos[0] >= rows or pos[1] >= call.spec.tensor.cols:
        return f"tile_position {tuple(pos)} is not a multiple of tile_size {tuple(size)}"
    return None


@rule("shape", key="matmul-mx-shape")
def _matmul_mx_shape(call: LiveInstruction) -> str | None:
    st, mv, dst = call.src_views[STATIONARY], call.src_views[MOVING], call.dst_views[DST]
    quad = call.spec.partitions // 4
    if st.partitions != mv.partitions or st.partitions % quad:
        return (
            f"nc_matmul_mx partition dims must match and be a multiple of {quad}: stationary "
            f"{st.partitions}, moving {mv.partitions}"
        )
    if st.free_size % 2:
        return f"nc_matmul_mx stationary free size {st.free_size} must be even"
    if dst.partitions != st.free_size or dst.free_size != mv.free_size:
        return (
            f"nc_matmul_mx dst shape {list(dst.shape)} does not match [{st.free_size}, "
            f"{mv.free_size}]"
        )
    return None


@rule("shape", key="transpose-shape")
def _transpose_shape(call: LiveInstruction) -> str | None:
    data, dst = call.src_views[DATA], call.dst_views[DST]
    limit = call.spec.partitions if call.engine == Engine.TENSOR else call.spec.partitions // 4
    if data.partitions > limit or data.free_size > limit:
        return (
            f"nc_transpose on the {call.engine.value} engine handles up to [{limit}, {limit}], "
            f"got {list(data.shape)}"
        )
    if dst.partitions != data.free_size or dst.free_size != data.partitions:
        return f"nc_transpose dst {list(dst.shape)} is not the transpose of {list(data.shape)}"
    if dst.fmt.name != data.fmt.name:
        return f"nc_transpose dst dtype {dst.fmt.name} must equal data dtype {data.fmt.name}"
    return None


# ---- Vector / Scalar / GpSimd ----------------------------------------------------------------


@rule("shape", lambda e: Op(e.name) in SAME_SHAPE_ROLES)
def _same_shape(call: LiveInstruction) -> str | None:
    dst = call.dst_views[DST]
    for role in SAME_SHAPE_ROLES[call.opcode]:
        v = call.src_views.get(role)
        if v is None:
            continue
        if v.partitions != dst.partitions or v.free_size != dst.free_size:
            return (
                f"{call.opcode.value} {role} shape {list(v.shape)} does not match dst "
                f"{list(dst.shape)} (same partitions and elements per partition needed)"
            )
    return None


@rule("shape", lambda e: Op(e.name) in COLUMN_ROLES)
def _vector_operands(call: LiveInstruction) -> str | None:
    p = call.dst_views[DST].partitions
    for role, is_dst in COLUMN_ROLES[call.opcode]:
        v = (call.dst_views if is_dst else call.src_views).get(role)
        if v is not None and (v.partitions != p or v.free_size != 1):
            return f"{call.opcode.value} {role} must have shape [{p}, 1], got {list(v.shape)}"
    return None


@rule("shape", lambda e: any(r.shape == sp.ONE for r in e.operands))
def _one_value(call: LiveInstruction) -> str | None:
    for role, v, _ in call.views():
        r = SPECS[call.opcode].role(role)
        if r is not None and r.shape == sp.ONE and (v.partitions != 1 or v.free_size != 1):
            return f"{call.opcode.value} {role} must have shape [1, 1], got {list(v.shape)}"
    return None


@rule("shape", key="quantize-mx-shape")
def _quantize_mx_shape(call: LiveInstruction) -> str | None:
    src, dst, scale = call.src_views[SRC], call.dst_views[DST], call.dst_views[DST_SCALE]
    quad = call.spec.partitions // 4
    if src.partitions % quad or src.free_size % 4:
        return (
            f"quantize_mx src {list(src.shape)}: partitions must be a multiple of {quad} and "
            f"the free size a multiple of 4"
        )
    if dst.partitions != src.partitions or dst.free_size * 4 != src.free_size:
        return f"quantize_mx dst {list(dst.shape)} must be [{src.partitions}, {src.free_size // 4}]"
    want_p = 4 if src.partitions == quad else src.partitions
    if scale.partitions < want_p or scale.free_size * 4 < src.free_size:
        return (
            f"quantize_mx dst_scale {list(scale.shape)} must cover [{want_p}, "
            f"{src.free_size // 4}] (4 scale rows per 32-partition quadrant)"
        )
    return None


@rule("shape", key="bn-stats-shape")
def _bn_stats_shape(call: LiveInstruction) -> str | None:
    data, dst = call.src_views[DATA], call.dst_views[DST]
    limit = call.spec.psum_bank_bytes // 4  # bn_stats_fmax: one PSUM bank of fp32 (512)
    if data.free_size > limit:
        return f"bn_stats free size {data.free_size} exceeds bn_stats_fmax {limit}"
    if dst.free_size != 6 or dst.partitions != data.partitions:
        return f"bn_stats dst must be [{data.partitions}, 6], got {list(dst.shape)}"
    return None


# ---- DMA ---------------------------------------------------------------------------------------
# Sources: SDK ``nki/api/nki/isa/__init__.py`` ``dma_copy`` docstring (dge_mode, priority,
# engine, indirect addressing, dtype conversion via fp32), ``nki/deep-dives/nki-dge.rst`` (mode
# table: hwdge NeuronCore-v3+, no gather/scatter; swdge the only gather/scatter mode, indirect
# on v3+; none has no runtime addresses), ``nki/migration/index.rst`` 0.3.0 (HWDGE needs equal
# dtypes). Indirect views: ``trnsim.core.indirect``.

DGE_MODES = frozenset({"unknown", "swdge", "hwdge", "none"})
HWDGE_MIN_GENERATION = 3
INDIRECT_MIN_GENERATION = 3  # nki-dge.rst mode table: swdge "Any (indirect: v3+)"
HWDGE_ENGINES = frozenset({"sync", "scalar"})  # dma_copy ``engine=``: the HWDGE trigger
PRIORITY_MIN_GENERATION = 4  # dma_copy ``priority``: "NeuronCore-v4+ only"
PRIORITY_LEVELS = range(4)  # "level 0-3 where lower is higher priority"


@rule("shape", key="dma-shape")
def _dma_shape(call: LiveInstruction) -> str | None:
    dst = call.dst_views[DST]
    for role, v in call.src_views.items():
        if role != INDEX and v.size != dst.size:
            return (
                f"{call.opcode.value} {role} has {v.size} elements {list(v.shape)}, dst has "
                f"{dst.size} {list(dst.shape)}"
            )
    return None


@rule("indirect", key="indirect")
def _indirect_annotated(call: LiveInstruction) -> str | None:
    roles = indirect_roles(call)
    if roles and INDEX not in call.src_views:
        return "dma_copy got an indirect view but no index operand (front end did not annotate)"
    for r in roles:
        v = call.dst_views.get(r) or call.src_views[r]
        if v.memory != "hbm":
            return (
                f"dma_copy {r} is a {v.memory.upper()} scalar_offset view: a DMA indexes HBM "
                "tensors only (trnsim.core.indirect choice 4); a dynamic offset within SBUF/PSUM "
                "partitions is for nisa.tensor_copy"
            )
    return None


@rule("dge-mode", key="dge-mode")
def _dge_mode(call: LiveInstruction) -> str | None:
    a, gen, name = call.args, call.spec.generation, call.spec.name
    mode = a.get("dge_mode") or "unknown"
    kind = a.get("indirect_kind")
    if mode not in DGE_MODES:
        return f"dma_copy dge_mode {mode!r} not in {sorted(DGE_MODES)}"
    if mode == "hwdge" and gen < HWDGE_MIN_GENERATION:
        return f"dma_copy dge_mode=hwdge needs NeuronCore-v{HWDGE_MIN_GENERATION}+, target {name}"
    if mode == "none" and kind:
        # nki-dge.rst: 'none' "cannot handle dynamic (runtime-computed) addresses or indices";
        # dma_copy docstring: dynamic start addresses need sw_dge or hw_dge. (The same page's
        # summary table lists scalar_offset under "any mode"; the two specific texts win.)
        return f"dma_copy dge_mode=none cannot take a runtime {kind}_offset; use swdge or unknown"
    if kind == "vector":
        if mode == "hwdge":
            return "dma_copy dge_mode=hwdge does not support gather/scatter (vector_offset)"
        if gen < INDIRECT_MIN_GENERATION:
            return (
                f"dma_copy gather/scatter (vector_offset, swdge) needs NeuronCore-"
                f"v{INDIRECT_MIN_GENERATION}+, target {name}"
            )
    eng = a.get("dge_engine")
    if eng is not None:
        if mode != "hwdge":
            return f"dma_copy engine={eng} selects the HWDGE trigger and needs dge_mode=hwdge"
        if eng not in HWDGE_ENGINES:
            return f"dma_copy engine={eng}: HWDGE is triggered by {sorted(HWDGE_ENGINES)} only"
    pr = a.get("priority")
    if pr is not None:
        if gen < PRIORITY_MIN_GENERATION:
            return f"dma_copy priority needs NeuronCore-v{PRIORITY_MIN_GENERATION}+, target {name}"
        if pr not in PRIORITY_LEVELS:
            return f"dma_copy priority {pr!r} not in 0..{PRIORITY_LEVELS[-1]}"
        if mode == "none":
            return "dma_copy priority is not supported with dge_mode=none"
    return None


@rule("dtype", key="dma-dtype")
def _dma_dtype(call: LiveInstruction) -> str | None:
    src, dst = call.src_views[SRC].fmt, call.dst_views[DST].fmt
    if src.name == dst.name:
        return None
    if call.args.get("dge_mode") == "hwdge":
        return (
            f"dma_copy with dge_mode=hwdge needs equal dtypes, got src {src.name} and dst "
            f"{dst.name}"
        )
    if "packed" in (src.kind, dst.kind):
        # the fp32 round trip of the docstring has no meaning for 4-values-per-word formats
        return (
            f"dma_copy cannot convert {src.name} to {dst.name}: packed x4 formats are copied "
            "bit-exactly only (same dtype; .view() to reinterpret)"
        )
    return None


@rule("shape", key="rng-state-shape")
def _rng_state_shape(call: LiveInstruction) -> str | None:
    v = call.src_views.get(SRC_SEEDS) or call.dst_views.get(DST)
    assert v is not None
    words = 4 * 6  # 4 XORWOW generators x 6 uint32 per Vector-engine lane (nki-notes 5)
    if v.free_size != words:
        return (
            f"{call.opcode.value} on the Vector engine needs {words} uint32 per partition "
            f"(4 XORWOW generators x 6 words), got {list(v.shape)}"
        )
    return None


@rule("dtype", key="dropout-dtype")
def _dropout_dtype(call: LiveInstruction) -> str | None:
    data, dst = call.src_views[DATA].fmt, call.dst_views[DST].fmt
    if dst.name != data.name:
        return f"dropout dst dtype {dst.name} must equal data dtype {data.name}"
    prob = call.src_views.get("prob")
    if prob is not None:
        need = ("float32",) if data.kind == "int" else None
        bad = prob.fmt.name not in need if need else prob.fmt.kind not in ("float",)
        if bad:
            want = "float32" if need else "a float type"
            return (
                f"dropout prob dtype {prob.fmt.name} not allowed with {data.name} data; "
                f"allowed: {want}"
            )
    return None


@rule("not-implemented", key="vector-prng")
def _vector_prng(call: LiveInstruction) -> str | None:
    if call.engine is not Engine.VECTOR:
        return (
            f"{call.opcode.value} on the {call.engine.value} engine: trnsim models the Vector "
            "engine's PRNG only"
        )
    return None


@rule("memset-value", key="memset-value")
def _memset_value(call: LiveInstruction) -> str | None:
    dst, value = call.dst_views[DST], call.args.get("value")
    if dst.fmt.kind == "packed" and value != 0:
        return f"memset of {dst.fmt.name} supports only 0, got {value}"
    return None


@rule("shape", key="iota-shape")
def _iota_shape(call: LiveInstruction) -> str | None:
    dst = call.dst_views[DST]
    n = dst.partitions * prod(int(size) for _, size in call.args.get("pattern", ()))
    if n != dst.size:
        return f"iota pattern makes {n} elements, dst has {dst.size}"
    return None


@rule("shape", key="local-gather-shape")
def _local_gather_shape(call: LiveInstruction) -> str | None:
    # each GpSimd core serves ``group`` (16) partitions and gathers ``num_valid_indices``
    # indices (default: all of its partitions' indices) of ``num_elem_per_idx`` elements for
    # every one of its partitions (SDK nki.isa.local_gather docstring and its NumPy reference)
    dst, index = call.dst_views[DST], call.src_views[INDEX]
    group = call.args.get("group") or call.spec.partitions // 8  # 8 GpSimd cores
    per_core = min(group, index.partitions) * index.free_size
    valid = call.args.get("num_valid_indices")
    if valid is not None and not 0 < valid <= per_core:
        return (
            f"num_valid_indices {valid} outside 1..{per_core} (the indices of one GpSimd "
            f"core's {group}-partition slice of index)"
        )
    n = index.partitions * (per_core if valid is None else valid)
    n *= call.args.get("num_elem_per_idx", 1)
    if n != dst.size:
        return f"local_gather produces {n} elements, dst has {dst.size}"
    return None


@rule("rand2-range", key="rand2-range")
def _rand2_range(call: LiveInstruction) -> str | None:
    lo, hi = call.args.get("min"), call.args.get("max")
    if lo is not None and hi is not None and not lo < hi:
        return f"rand2 needs min < max, got min {lo}, max {hi}"
    return None


@rule("reduce-axis", key="reduce-axis")
def _reduce_axis(call: LiveInstruction) -> str | None:
    axes, ndim = tuple(call.args.get("axis", ())), len(call.src_views[DATA].shape)
    if (
        not axes
        or 0 in axes
        or axes[-1] != ndim - 1
        or list(axes) != list(range(axes[0], axes[0] + len(axes)))
    ):
        return (
            f"tensor_reduce axes {axes} of {list(call.src_views[DATA].shape)} must be "
            "consecutive free axes ending at the last one (axis 0 is the partition axis)"
        )
    return None


@rule("range-select-fill", key="range-select-fill")
def _range_select_fill(call: LiveInstruction) -> str | None:
    v = call.args.get("on_false_value", FP32_MIN)
    if np.float32(v) != np.float32(FP32_MIN):
        return f"range_select on_false_value must be FP32_MIN ({FP32_MIN:g}), got {v}"
    return None


@rule("sendrecv", key="sendrecv")
def _sendrecv(call: LiveInstruction) -> str | None:
    src, dst = call.src_views[SRC], call.dst_views[DST]
    for role, v in ((SRC, src), (DST, dst)):
        if v.memory != SBUF:
            return f"sendrecv {role} is in {v.memory.upper()}; src and dst must both be in SBUF"
    if src.fmt.name != dst.fmt.name:
        return f"sendrecv src dtype {src.fmt.name} != dst dtype {dst.fmt.name}"
    if src.partitions != dst.partitions or src.free_size != dst.free_size:
        return f"sendrecv src shape {list(src.shape)} != dst shape {list(dst.shape)}"
    return None


# ---- issue 13: the rest of the NKI 0.6 ISA ---------------------------------------------------


@rule("op0", key="arith-op0")
def _arith_op0(call: LiveInstruction) -> str | None:
    """tensor_scalar_reduce / tensor_scalar_cumulative: op0 is an arithmetic ALU operator
    (bitvec operators are not supported, docstrings)."""
    from trnsim.core.semantics import ARITH_OPS, UNARY_ALU_OPS

    op0 = call.args.get("op0")
    unary = call.opcode is Op.TENSOR_SCALAR_REDUCE and op0 in UNARY_ALU_OPS
    if op0 not in ARITH_OPS and not unary:
        return f"{call.opcode.value} op0={op0!r} is not an arithmetic operator"
    if unary and ("operand0" in call.src_views or call.args.get("operand0", 0.0) != 0.0):
        given = "a tensor" if "operand0" in call.src_views else call.args["operand0"]
        return f"{call.opcode.value} unary op0={op0!r} takes operand0 None or 0, got {given}"
    return None


@rule("reduce-init", key="reduce-init")
def _reduce_init(call: LiveInstruction) -> str | None:
    """The accumulator's initial value is given exactly when ``reduce_cmd`` is load_reduce."""
    name = "reduce_init" if call.opcode is Op.TENSOR_SCALAR_REDUCE else "imm1"
    given = name in call.src_views or name in call.args
    cmd = call.args.get("reduce_cmd", "reset_reduce")
    if given != (cmd == "load_reduce"):
        have = "given" if given else "not given"
        return (
            f"{call.opcode.value} {name} is {have} with reduce_cmd={cmd}; it goes with load_reduce"
        )
    return None


@rule("stream-shuffle", key="stream-shuffle")
def _stream_shuffle(call: LiveInstruction) -> str | None:
    from trnsim.core.semantics import STREAM_SHUFFLE_KEEP, STREAM_SHUFFLE_QUADRANT

    src, dst = call.src_views[SRC], call.dst_views[DST]
    q = STREAM_SHUFFLE_QUADRANT
    mask = call.args.get("shuffle_mask", ())
    if src.fmt.name != dst.fmt.name:
        return f"nc_stream_shuffle dst dtype {dst.fmt.name} != src dtype {src.fmt.name}"
    if src.free_size != dst.free_size:
        return (
            f"nc_stream_shuffle dst has {dst.free_size} elements per partition, "
            f"src {src.free_size}; they must be equal"
        )
    if len(mask) != q:
        return f"nc_stream_shuffle shuffle_mask has {len(mask)} entries, needs {q}"
    bad = [m for m in mask if m != STREAM_SHUFFLE_KEEP and m not in range(q)]
    if bad:
        return f"nc_stream_shuffle shuffle_mask values {bad} not in 0..{q - 1} or 255"
    for p in range(dst.partitions):
        m = mask[p % q]
        if m != STREAM_SHUFFLE_KEEP and (p // q) * q + m >= src.partitions:
            return (
                f"nc_stream_shuffle dst partition {p} copies src partition {(p // q) * q + m}, "
                f"but src has {src.partitions} partitions"
            )
    active = -(-max(src.partitions, dst.partitions) // q) * q
    starts = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}.get(active, (0,))
    for role, v in ((SRC, src), (DST, dst)):
        if v.partition_start not in starts:
            return (
                f"nc_stream_shuffle {role} starts at partition {v.partition_start}; with "
                f"{active} active partitions the start must be one of {list(starts)}"
            )
    return None


@rule("shape", key="match-replace8-shape")
def _match_replace8_shape(call: LiveInstruction) -> str | None:
    vals, idx = call.src_views["vals"], call.dst_views.get("dst_idx")
    data = call.src_views[DATA]
    if vals.partitions != data.partitions or vals.free_size != 8:
        return f"nc_match_replace8 vals {list(vals.shape)} must be [{data.partitions}, 8]"
    if idx is not None and (idx.partitions, idx.free_size) != (data.partitions, 8):
        return f"nc_match_replace8 dst_idx {list(idx.shape)} must be [{data.partitions}, 8]"
    return None


@rule("shape", key="max8-shape")
def _max8_shape(call: LiveInstruction) -> str | None:
    """aws-neuron-sdk ``nki/api/nki/isa/__init__.py`` max8: "The number of elements read per
    partition must be between 8 and 16,384 inclusive"; dst is [par_dim, 8], the source's
    partitions."""
    src, dst = call.src_views[SRC], call.dst_views[DST]
    if not 8 <= src.free_size <= 16384:
        return (
            f"max8 reads {src.free_size} elements per partition of src {list(src.shape)}; "
            "it must read between 8 and 16384"
        )
    if (dst.partitions, dst.free_size) != (src.partitions, 8):
        return f"max8 dst {list(dst.shape)} must be [{src.partitions}, 8]"
    return None


@rule("shape", key="n-gather-shape")
def _n_gather_shape(call: LiveInstruction) -> str | None:
    dst, data, idx = call.dst_views[DST], call.src_views[DATA], call.src_views["indices"]
    if dst.fmt.name != data.fmt.name:
        return f"nc_n_gather dst dtype {dst.fmt.name} != data dtype {data.fmt.name}"
    if not dst.partitions == data.partitions == idx.partitions:
        return (
            f"nc_n_gather partitions differ: dst {dst.partitions}, data {data.partitions}, "
            f"indices {idx.partitions}"
        )
    if dst.free_size != idx.free_size:
        return (
            f"nc_n_gather dst has {dst.free_size} elements per partition, indices "
            f"{idx.free_size}; they must be equal"
        )
    return None


@rule("shape", key="sequence-bounds-shape")
def _sequence_bounds_shape(call: LiveInstruction) -> str | None:
    dst, ids = call.dst_views[DST], call.src_views["segment_ids"]
    if ids.partitions != 1 or dst.partitions != 1:
        return (
            f"sequence_bounds needs 1 partition, got segment_ids {list(ids.shape)}, "
            f"dst {list(dst.shape)}"
        )
    if dst.free_size != 2 * ids.free_size:
        return (
            f"sequence_bounds dst {list(dst.shape)} must hold 2 x {ids.free_size} values "
            f"(start and end per element of segment_ids {list(ids.shape)})"
        )
    return None


@rule("shape", key="nonzero-shape")
def _nonzero_shape(call: LiveInstruction) -> str | None:
    from trnsim.core.semantics import NONZERO_STRIDE

    dst, src = call.dst_views[DST], call.src_views[SRC]
    if dst.partitions != src.partitions or dst.free_size != src.free_size + 1:
        return (
            f"nonzero_with_count dst {list(dst.shape)} must be [{src.partitions}, "
            f"{src.free_size + 1}] for src {list(src.shape)} (one more element: the count)"
        )
    for role, v in ((SRC, src), (DST, dst)):
        if v.partition_start % NONZERO_STRIDE:
            return (
                f"nonzero_with_count {role} starts at partition {v.partition_start}; it must "
                f"start on a GpSimd core's first partition (a multiple of {NONZERO_STRIDE})"
            )
    return None


@rule("register-scalar", key="register-scalar")
def _register_scalar(call: LiveInstruction) -> str | None:
    v = call.src_views.get(SRC) or call.dst_views[DST]
    if v.size != 1 or v.fmt.bits > 32:
        return (
            f"{call.opcode.value} needs one element of at most 32 bits, got {list(v.shape)} "
            f"{v.fmt.name}"
        )
    return None


@rule("collective", key="collective-v")
def _collective_v(call: LiveInstruction) -> str | None:
    """``all_gather_v`` / ``all_to_all_v``: flat HBM src and dst of one dtype; the uint32
    metadata ``(rows, n)`` in HBM or ``(1, rows, n)`` in SBUF, ``rows`` 4 with
    ``has_rdispls`` else 3 (docstrings of nki/api/nki/collectives/__init__.py)."""
    src, dst, meta = call.src_views[SRC], call.dst_views[DST], call.src_views["metadata"]
    name = call.opcode.value
    if src.fmt.name != dst.fmt.name:
        return f"{name} src dtype {src.fmt.name} != dst dtype {dst.fmt.name}"
    n = len(call.args.get("ranks", ()))
    rows = 4 if call.args.get("has_rdispls") else 3
    want = [rows, n] if meta.memory == "hbm" else [1, rows, n]
    if list(meta.shape) != want:
        return (
            f"{name} metadata_tensor {list(meta.shape)} in {meta.memory.upper()} must be {want} "
            f"({rows} rows with has_rdispls={bool(call.args.get('has_rdispls'))}, one column per "
            f"rank of the {n}-rank group)"
        )
    if dst.size % n:
        return f"{name} dst of {dst.size} elements does not split into {n} equal slots"
    return None


@rule("collective", key="collective")
def _collective(call: LiveInstruction) -> str | None:
    """nki.collectives: src and dst in one memory with one dtype, shaped as the collective
    and its replica group's size say (docstrings of nki/api/nki/collectives/__init__.py)."""
    src, dst = call.src_views[SRC], call.dst_views[DST]
    name = call.opcode.value
    if src.memory != dst.memory:
        return (
            f"{name} mixes memories (src in {src.memory.upper()}, dst in "
            f"{dst.memory.upper()}); all tensors must be in HBM or all in SBUF"
        )
    if src.fmt.name != dst.fmt.name:
        return f"{name} src dtype {src.fmt.name} != dst dtype {dst.fmt.name}"
    n = len(call.args.get("ranks", ()))
    dim = call.args.get("collective_dim", 0)
    if dim and src.memory == "hbm":
        return f"{name} collective_dim={dim} on HBM tensors; only 0 is supported there"
    s, d = list(src.shape), list(dst.shape)
    if dim >= len(s) or len(s) != len(d):
        return f"{name} src {s} and dst {d}: collective_dim {dim} needs both of the same rank"
    want = list(s)
    if call.opcode is Op.ALL_GATHER:
        want[dim] = s[dim] * n
    elif call.opcode is Op.REDUCE_SCATTER:
        if s[dim] % n:
            return f"{name} src {s} axis {dim} does not split into {n} ranks"
        want[dim] = s[dim] // n
    elif call.opcode is Op.ALL_TO_ALL and s[dim] % n:
        return f"{name} src {s} axis {dim} does not split into {n} ranks"
    if d != want:
        return f"{name} over {n} ranks: dst {d} must be {want} for src {s}"
    return None


@rule("shape", key="topk-shape")
def _topk_shape(call: LiveInstruction) -> str | None:
    """topk docstring constraints: 8 <= n < 65536, 1 <= K < 32768, K <= n, src columns >=
    ceil(n / 16), partitions a multiple of 16, outputs [P, K] with src's partitions."""
    from trnsim.core.semantics import TOPK_SNAKE

    src, val, idx = call.src_views[SRC], call.dst_views["val_dst"], call.dst_views["idx_dst"]
    n, k = call.args.get("n", 0), val.free_size
    if not 8 <= n < 65536:
        return f"topk n={n} not in [8, 65536)"
    if not 1 <= k < 32768 or k > n:
        return f"topk K={k} (val_dst {list(val.shape)}) must be in [1, 32768) and <= n={n}"
    if src.partitions % TOPK_SNAKE:
        return f"topk src has {src.partitions} partitions, not a multiple of {TOPK_SNAKE}"
    if src.free_size < -(-n // TOPK_SNAKE):
        return f"topk src {list(src.shape)} holds fewer than n={n} elements in its 16P snake"
    for role, v in (("val_dst", val), ("idx_dst", idx)):
        if (v.partitions, v.free_size) != (src.partitions, k):
            return f"topk {role} {list(v.shape)} must be [{src.partitions}, {k}]"
    return None


@rule("attribute", lambda e: any(a.allowed is not None for a in e.attrs))
def _attribute_values(call: LiveInstruction) -> str | None:
    """Attribute values outside the spec's ``allowed`` (checked last: an op-specific rule with
    a more precise message comes first)."""
    for a in SPECS[call.opcode].attrs:
        if a.allowed is None or a.name not in call.args:
            continue
        v = call.args[a.name]
        if v != a.default and v not in a.allowed:
            return f"{call.opcode.value} {a.name}={v!r} not in {list(a.allowed)}"
    return None


_BY_OP: dict[Op, list[Rule]] = {op: [r for r in RULES if op in r.ops] for op in Op}


def check_bounds(call: LiveInstruction) -> None:
    """Raise the out-of-bounds KernelError of the first operand outside its allocation."""
    for v in call.dst_views.values():
        if not v.inbounds:
            v.check_bounds()
    for v in call.src_views.values():
        if not v.inbounds:
            v.check_bounds()


def check_rules(call: LiveInstruction) -> None:
    """Raise a KernelError (at the kernel's line) for the first rule ``call`` breaks."""
    for r in _BY_OP[call.opcode]:
        msg = r.check(call)
        if msg is not None:
            raise fail(r.name, msg)


def check(call: LiveInstruction) -> None:
    """Bounds, then every rule of the op: the plain, uncached check (the specification)."""
    check_bounds(call)
    check_rules(call)


class Checker:
    """``check`` with a memory of the signatures that passed (see the rule contract above).

    The signature of a call is ``(op, engine, frozen attributes, *operand signatures)``, an
    operand's signature being its recorded ``Operand`` without the byte offset
    (``View.described``). Only passes are remembered, so every failing call runs the rules
    and raises exactly what ``check`` raises. Bounds are not part of it: the caller checks
    them first (``check_bounds``), as ``check`` does.
    """

    __slots__ = ("passed", "version")

    def __init__(self) -> None:
        self.passed: set[tuple] = set()
        self.version = _VERSION[0]

    def known(self, signature: tuple) -> bool:
        """Whether a call with this signature already passed every rule."""
        if self.version != _VERSION[0]:  # rules were registered since: forget the verdicts
            self.passed.clear()
            self.version = _VERSION[0]
        return signature in self.passed

    def check(self, call: LiveInstruction, signature: tuple) -> None:
        """``check`` (bounds, then the rules) unless ``signature`` passed before."""
        check_bounds(call)
        if not self.known(signature):
            self.check_rules(call, signature)

    def check_rules(self, call: LiveInstruction, signature: tuple) -> None:
        """Run the rules of ``call`` (raising on the first broken one); remember a pass."""
        check_rules(call)
        self.passed.add(signature)


_VERSION = [0]


def refresh() -> None:
    """Rebuild the per-op index (after registering extra rules); forgets cached verdicts."""
    _BY_OP.clear()
    _BY_OP.update({op: [r for r in RULES if op in r.ops] for op in Op})
    _VERSION[0] += 1
