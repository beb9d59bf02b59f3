"""The instruction specification: one entry per NeuronCore instruction, everything about it.

**How to add an instruction.** (1) Write its semantics as a plain NumPy function in
``trnsim.core.semantics`` (arrays in, arrays out; no trnsim state). (2) Add one ``Instr``
entry below, in its engine's group: operand roles (memories, dtypes, shape class, whether
tensor indirection is allowed), typed attributes with defaults and allowed values (an
attribute trnsim does not model is ``modelled=False``: any non-default value is refused with a
``not-implemented`` error), the names of its op-specific rules (``trnsim.core.rules``), the
first NeuronCore generation that has it, ``in_order=True`` if it reads or writes engine state
beyond memory (random state, accumulators), ``auto_engine=True`` if, called without an engine,
the compiler places it by engine workload (the timing model picks the engine;
``trnsim.core.costs.auto_engines``), the semantics function, and its cost rule names
(``trnsim.core.costs``). An entry whose semantics function follows the generic convention
(``run="generic"``: sources by role name, decoded or ``raw``; attributes by name; ``shape``
and the Vector engine's random ``state`` if asked for; the result written to ``dst``) needs
no executor; others name one in ``trnsim.core.machine``. (3) Add one front-end line in
``trnsim.nki.isa``: ``name = instruction(Op.NAME)`` builds the NKI call from the entry (in
the order of ``params`` where the NKI signature is not operands-then-attributes); write a
function only for arguments that need translating. A legality check the generic rules
(memories, dtypes, shape classes, generation, attribute values) do not express is a named
rule in ``trnsim.core.rules`` (``@rule(name, key=...)``) listed in the entry's ``rules``, with
a failing-kernel case in ``tests/test_core_rules.py``; a check the front end must make before
the instruction exists (binding arguments, building a view) or on the data it reads is an
``trnsim.core.argrules`` entry raised with ``broken(key, message)``, with its case in
``ARG_CASES`` there (never a bare ``fail``). ``Op`` (``trnsim.core.isa``), the
property sets, the rule tables, the cost table, the deferred path's in-order set and the
tensor-indirection roles all derive from this registry, so nothing else changes;
``tests/test_core_spec.py`` checks every entry is complete.

Sources: SDK ``nki/api/nki.isa.rst`` (the instruction list) and the per-instruction docstrings
in ``nki/api/nki/isa/__init__.py`` (engines, memories, dtypes, generations, arguments),
nki-notes.md sections 1.3-1.5 and 5; the tensor-indirection roles: ``trnsim.core.indirect``
(T6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trnsim.core import semantics as S


class Engine(StrEnum):
    """The engine queue an instruction is issued to."""

    TENSOR = "tensor"
    VECTOR = "vector"
    SCALAR = "scalar"
    GPSIMD = "gpsimd"
    DMA = "dma"
    SYNC = "sync"


# ---- memories (the names of trnsim.core.memory) --------------------------------------------------

HBM, SBUF, PSUM = "hbm", "sbuf", "psum"
ON_CHIP = frozenset({SBUF, PSUM})
SB = frozenset({SBUF})
PS = frozenset({PSUM})
DMA_MEM = frozenset({HBM, SBUF})
ANY_MEM = frozenset({HBM, SBUF, PSUM})
NO_PSUM_ENGINES = frozenset({Engine.GPSIMD})
"""Engines that cannot access PSUM at all (GpSimd: rng / iota docstrings)."""

# ---- role names (spelled once; rules and executors use these constants) -------------------------

DST = "dst"
SRC = "src"
DATA = "data"
STATIONARY = "stationary"
MOVING = "moving"
STATIONARY_SCALE = "stationary_scale"
MOVING_SCALE = "moving_scale"
DST_SCALE = "dst_scale"
REDUCE_RES = "reduce_res"
INDEX = "index"
PREDICATE = "predicate"
SRC_SEEDS = "src_seeds"

# ---- shape classes ------------------------------------------------------------------------------

SAME = "same"
"""As many partitions and elements per partition as ``dst``."""
COLUMN = "column"
"""One value per partition of ``dst``: ``[P, 1]`` (a per-partition scalar operand)."""
ONE = "one"
"""A single value: ``[1, 1]``."""

# ---- dtype sets ---------------------------------------------------------------------------

MX_DATA = frozenset({"float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"})
MX_SCALE = frozenset({"uint8", "float8_e8m0fnu"})
INDEX_DTYPES = frozenset({"uint32", "int32"})
"""Index tiles of indirect DMA (``trnsim.core.indirect``, choice 2)."""
INT_DTYPES = frozenset({"int8", "int16", "int32", "uint8", "uint16", "uint32"})
WORD32 = frozenset({"int32", "uint32", "float32"})

# ---- attribute value sets -----------------------------------------------------------------------

FP32_MIN = -3.4028234663852886e38
"""float32 lowest: the only legal ``on_false_value`` of ``range_select`` (its docstring)."""
REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")
OOB_MODES = ("error", "skip")


@dataclass(frozen=True, slots=True)
class Role:
    """One operand of an instruction.

    ``memories``: where it may live (a set, or per engine a mapping; ``None``: the entry's
    ``reads`` / ``writes``). ``dtypes``: allowed format names (``None``: any, or checked by an
    op-specific rule). ``shape``: ``SAME`` / ``COLUMN`` / ``None`` (an op-specific rule).
    ``ti``: may be a tensor-indirection view. ``ap``: may be an indirect DMA view
    (``.ap(vector_offset=...)``). ``optional``: may be absent. ``scalar``: a Python number may
    stand for it (then it is an attribute of the same name). ``raw``: the generic executor
    passes its raw values (not decoded to float32). ``variadic``: ``name0``, ``name1``, ...
    """

    name: str
    dst: bool = False
    memories: frozenset[str] | Mapping[Engine, frozenset[str]] | None = None
    dtypes: frozenset[str] | None = None
    shape: str | None = None
    ti: bool = False
    ap: bool = False
    optional: bool = False
    scalar: bool = False
    raw: bool = False
    variadic: bool = False

    def allowed_memories(self, engine: Engine) -> frozenset[str] | None:
        m = self.memories
        if isinstance(m, Mapping):
            return m.get(engine)
        return m


def out(name: str = DST, **kw: Any) -> Role:
    """A destination operand."""
    return Role(name, dst=True, **kw)


def inp(name: str, **kw: Any) -> Role:
    """A source operand."""
    return Role(name, **kw)


def column(name: str, **kw: Any) -> Role:
    """A per-partition scalar source ``[P, 1]`` that a Python number may replace."""
    return Role(name, shape=COLUMN, optional=True, scalar=True, **kw)


@dataclass(frozen=True, slots=True)
class Attr:
    """One non-tensor argument. ``kind``: the Python type of its (frozen) value. ``allowed``:
    the legal values (``None``: any of ``kind``). ``modelled=False``: trnsim does not model it;
    the default is accepted and anything else refused (``not-implemented``)."""

    name: str
    kind: type | tuple[type, ...]
    default: Any = None
    allowed: tuple[Any, ...] | None = None
    modelled: bool = True


@dataclass(frozen=True, slots=True)
class Instr:
    """Everything about one instruction (see the module docstring). ``params``: the NKI
    call's parameter order when it is not operands (dst first) then attributes."""

    name: str
    engine: Engine
    operands: tuple[Role, ...]
    attrs: tuple[Attr, ...] = ()
    rules: tuple[str, ...] = ()
    cost: tuple[str, ...] = ()
    cost_source: str = ""
    semantics: Callable[..., Any] | None = None
    engines: frozenset[Engine] | None = None
    min_generation: int = 2
    in_order: bool = False
    auto_engine: bool = False
    reads: frozenset[str] = SB
    writes: frozenset[str] = SB
    run: str = "executor"
    params: tuple[str, ...] = ()
    doc: str = ""
    _roles: dict[str, Role] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._roles.update({r.name: r for r in self.operands})

    def role(self, name: str) -> Role | None:
        """The role ``name`` (``src0``, ``src1``... find a variadic ``src``)."""
        r = self._roles.get(name)
        if r is None:
            base = name.rstrip("0123456789")
            r = self._roles.get(base)
            if r is not None and not r.variadic:
                r = None
        return r

    def attr(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None

    def memories(self, role: str, is_dst: bool, engine: Engine) -> frozenset[str]:
        """Where operand ``role`` may live when the instruction runs on ``engine``."""
        r = self.role(role)
        allowed = r.allowed_memories(engine) if r is not None else None
        if allowed is None:
            allowed = self.writes if is_dst else self.reads
        if engine in NO_PSUM_ENGINES:
            allowed = allowed - PS
        return allowed

    @property
    def choices(self) -> frozenset[Engine]:
        """Engines the instruction may run on (``engine=``)."""
        return self.engines or frozenset({self.engine})

    @property
    def compute(self) -> bool:
        return self.engine not in (Engine.DMA, Engine.SYNC)


SPECS: dict[str, Instr] = {}
"""The registry: instruction name -> entry, in definition order (engine groups)."""


def register(entry: Instr) -> Instr:
    """Add ``entry``; a second entry of the same name is an error."""
    if entry.name in SPECS:
        raise ValueError(f"instruction {entry.name!r} is specified twice")
    for what, names in (
        ("operand", [r.name for r in entry.operands]),
        ("attribute", [a.name for a in entry.attrs]),
    ):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{entry.name}: {what} names given twice: {dup}")
    SPECS[entry.name] = entry
    return entry


def entries() -> Iterator[Instr]:
    return iter(SPECS.values())


# Attributes several instructions share
_ACC = Attr("accumulate", (bool, type(None)), None)
_TILE_POS = Attr("tile_position", tuple, ())
_TILE_SIZE = Attr("tile_size", tuple, ())
_OP = Attr("op", str)
_REDUCE_OP = Attr("reduce_op", (str, type(None)), None)
_REV0 = Attr("reverse0", bool, False)
_REV1 = Attr("reverse1", bool, False)
_OPT_INT = (int, type(None))


def _reduce_cmd(default: str) -> Attr:
    return Attr("reduce_cmd", str, default, REDUCE_CMDS, modelled=False)


SCALAR_REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce")
"""``reduce_cmd`` on the Scalar engine's ``reduce_regs`` (``activation`` docstring: reset,
idle, reduce, reset_reduce; semantics ``semantics.scalar_reduce_regs``)."""
_SCALAR_REDUCE_CMD = Attr("reduce_cmd", str, "idle", SCALAR_REDUCE_CMDS)


ISA_DOC = "SDK-2.26 general/nki/api/nki/isa/__init__.py (instruction docstrings)"
_DOC = "SDK nki/api/nki/isa/__init__.py"

# =================================================================================================
# Tensor engine
# =================================================================================================

register(
    Instr(
        "nc_matmul",
        Engine.TENSOR,
        (
            out(memories=PS, ti=True),
            inp(STATIONARY, memories=SB, ti=True),
            inp(MOVING, memories=SB, ti=True),
        ),
        (
            _ACC,
            Attr("is_transpose", bool, False),
            _TILE_POS,
            _TILE_SIZE,
            Attr("perf_mode", str, "none", ("none", "double_row")),
            Attr("is_stationary_onezero", bool, False),
            Attr("is_moving_onezero", bool, False),
        ),
        rules=(
            "matmul-dtype",
            "matmul-dst-dtype",
            "matmul-shape",
            "stationary-fmax",
            "moving-fmax",
            "tile-position",
        ),
        cost=("matmul",),
        semantics=S.nc_matmul,
    )
)
register(
    Instr(
        "nc_matmul_mx",
        Engine.TENSOR,
        (
            out(memories=PS, ti=True),
            inp(STATIONARY, memories=SB, dtypes=MX_DATA, ti=True),
            inp(MOVING, memories=SB, dtypes=MX_DATA, ti=True),
            inp(STATIONARY_SCALE, memories=SB, dtypes=MX_SCALE),
            inp(MOVING_SCALE, memories=SB, dtypes=MX_SCALE),
        ),
        (_ACC, _TILE_POS, _TILE_SIZE),
        rules=(
            "matmul-dst-dtype",
            "stationary-fmax",
            "moving-fmax",
            "tile-position",
            "matmul-mx-shape",
        ),
        cost=("matmul_mx",),
        semantics=S.nc_matmul_mx,
        min_generation=4,
    )
)
register(
    Instr(
        "nc_transpose",
        Engine.TENSOR,
        (
            out(memories={Engine.TENSOR: PS, Engine.VECTOR: ON_CHIP}),
            inp(DATA, memories={Engine.TENSOR: SB, Engine.VECTOR: ON_CHIP}),
        ),
        rules=("transpose-shape",),
        cost=("pe_transpose", "stream"),
        semantics=S.nc_transpose,
        engines=frozenset({Engine.TENSOR, Engine.VECTOR}),
        doc="Tensor engine (<=128x128) or Vector engine (<=32x32)",
    )
)

# =================================================================================================
# Scalar engine (activation)
# =================================================================================================

register(
    Instr(
        "activation",
        Engine.SCALAR,
        (
            out(ti=True),
            out(REDUCE_RES, shape=COLUMN, optional=True),
            inp(DATA, shape=SAME, ti=True),
            inp("bias", shape=COLUMN, optional=True),
            column("scale"),
        ),
        (_OP, _REDUCE_OP, _SCALAR_REDUCE_CMD),
        cost=("activation",),
        semantics=S.activation,
        in_order=True,  # the Scalar engine's reduce_regs (reduce_cmd)
        reads=ON_CHIP,
        writes=ON_CHIP,
    )
)
register(
    Instr(
        "activate2",
        Engine.SCALAR,
        (
            out(ti=True),
            out(REDUCE_RES, shape=COLUMN, optional=True),
            inp(DATA, shape=SAME, ti=True),
            column("imm0"),
            column("imm1"),
            column("relu_param"),
        ),
        (
            _OP,
            Attr("op0", str),
            Attr("op1", str),
            _REV0,
            _REV1,
            _REDUCE_OP,
            _SCALAR_REDUCE_CMD,
        ),
        cost=("activation",),
        semantics=S.activate2,
        in_order=True,  # the Scalar engine's reduce_regs (reduce_cmd)
        min_generation=4,
        reads=ON_CHIP,
        writes=ON_CHIP,
    )
)

# =================================================================================================
# Vector engine
# =================================================================================================

_V = {"reads": ON_CHIP, "writes": ON_CHIP}

register(
    Instr(
        "exponential",
        Engine.VECTOR,
        (
            out(ti=True),
            out(REDUCE_RES, shape=COLUMN, optional=True),
            inp(SRC, shape=SAME, ti=True),
            column("max_value"),
        ),
        (Attr("reduce_init", float, 0.0), _reduce_cmd("idle")),
        cost=("exponential",),
        semantics=S.exponential,
        min_generation=4,
        **_V,
    )
)
register(
    Instr(
        "tensor_tensor",
        Engine.VECTOR,
        (out(ti=True), inp("data1", shape=SAME, ti=True), inp("data2", shape=SAME, ti=True)),
        (_OP,),
        rules=("psum-inputs",),
        cost=("tensor_tensor",),
        semantics=S.tensor_tensor,
        engines=frozenset({Engine.VECTOR, Engine.GPSIMD}),
        **_V,
    )
)
register(
    Instr(
        "tensor_scalar",
        Engine.VECTOR,
        (out(ti=True), inp(DATA, shape=SAME, ti=True), column("operand0"), column("operand1")),
        (Attr("op0", str), _REV0, Attr("op1", (str, type(None)), None), _REV1),
        cost=("stream",),
        semantics=S.tensor_scalar,
        engines=frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD}),
        auto_engine=True,
        **_V,
    )
)
register(
    Instr(
        "tensor_reduce",
        Engine.VECTOR,
        (out(ti=True), inp(DATA, ti=True)),
        (
            _OP,
            Attr("axis", tuple),
            Attr("negate", bool, False),
            Attr("keepdims", bool, False),
        ),
        rules=("reduce-axis",),
        cost=("tensor_reduce",),
        semantics=S.tensor_reduce,
        **_V,
    )
)
register(
    Instr(
        "tensor_copy",
        Engine.VECTOR,
        # an SBUF/PSUM .ap(scalar_offset=...) view may be on one side (trnsim.core.indirect,
        # choice 7; the indirect-operand rule lets only that one through)
        (
            out(ti=True),
            inp(SRC, shape=SAME, ti=True),
            # the index tile of a TI view or of a dynamic offset (dtypes checked where made)
            inp(INDEX, optional=True),
        ),
        # dtype= as the official tutorials pass it: the values are cast to it on the way
        (Attr("dtype", (str, type(None)), None),),
        cost=("tensor_copy",),
        engines=frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD}),
        auto_engine=True,
        doc="bit-exact for equal formats, else via fp32 (no semantics function: a cast)",
        **_V,
    )
)
register(
    Instr(
        "tensor_copy_predicated",
        Engine.VECTOR,
        (
            out(ti=True),
            inp(SRC, shape=SAME, optional=True, scalar=True),
            inp(PREDICATE, shape=SAME, dtypes=frozenset({"uint8", "uint16", "uint32"}), ti=True),
        ),
        (Attr("reverse_pred", bool, False),),
        rules=("psum-inputs",),
        cost=("copy_predicated",),
        semantics=S.tensor_copy_predicated,
        **_V,
    )
)
register(
    Instr(
        "tensor_tensor_scan",
        Engine.VECTOR,
        (out(), inp("data0", shape=SAME), inp("data1", shape=SAME), column("initial")),
        (Attr("op0", str), Attr("op1", str), _REV0, _REV1),
        cost=("scan",),
        semantics=S.tensor_tensor_scan,
        **_V,
    )
)
register(
    Instr(
        "scalar_tensor_tensor",
        Engine.VECTOR,
        (
            out(),
            inp(DATA, shape=SAME),
            inp("operand1", shape=SAME),
            inp("operand0", optional=True, scalar=True),
        ),
        (Attr("op0", str), Attr("op1", str), _REV0, _REV1),
        cost=("scalar_tensor_tensor",),
        semantics=S.scalar_tensor_tensor,
        **_V,
    )
)
register(
    Instr(
        "memset",
        Engine.VECTOR,
        (out(),),
        (Attr("value", (int, float)),),
        rules=("memset-value",),
        cost=("memset",),
        engines=frozenset({Engine.VECTOR, Engine.GPSIMD}),
        doc="a fill (no semantics function)",
        reads=SB,
        writes=ON_CHIP,
    )
)
register(
    Instr(
        "bn_stats",
        Engine.VECTOR,
        (out(), inp(DATA)),
        rules=("bn-stats-shape",),
        cost=("stream",),
        semantics=S.bn_stats,
        reads=ON_CHIP,
        writes=SB,
    )
)
register(
    Instr(
        "bn_aggr",
        Engine.VECTOR,
        (out(), inp(DATA)),
        cost=("bn_aggr",),
        semantics=S.bn_aggr,
        reads=ON_CHIP,
        writes=SB,
    )
)
register(
    Instr(
        "reciprocal",
        Engine.VECTOR,
        (out(), inp(DATA, shape=SAME)),
        cost=("reciprocal",),
        semantics=S.reciprocal,
        **_V,
    )
)
register(
    Instr(
        "max8",
        Engine.VECTOR,
        (out(), inp(SRC)),
        rules=("max8-shape",),
        cost=("max8",),
        semantics=S.max8,
        **_V,
    )
)
register(
    Instr(
        "nc_find_index8",
        Engine.VECTOR,
        (out(dtypes=frozenset({"uint32", "int32", "uint16", "float32"})), inp(DATA), inp("vals")),
        cost=("max8",),
        semantics=S.nc_find_index8,
        **_V,
    )
)
register(
    Instr(
        "range_select",
        Engine.VECTOR,
        (
            out(),
            out(REDUCE_RES, shape=COLUMN, optional=True),
            inp("on_true_tile", shape=SAME),
            inp("bound0", shape=COLUMN),
            inp("bound1", shape=COLUMN),
        ),
        (
            Attr("comp_op0", str),
            Attr("comp_op1", str),
            Attr("range_start", float, 0.0),
            Attr("on_false_value", float),
            _reduce_cmd("reset_reduce"),
        ),
        rules=("range-select-fill",),
        cost=("stream",),
        semantics=S.range_select,
        min_generation=3,
        **_V,
    )
)
register(
    Instr(
        "select_reduce",
        Engine.VECTOR,
        (
            out(),
            out(REDUCE_RES, shape=COLUMN, optional=True),
            inp("on_true", shape=SAME),
            inp(PREDICATE, shape=SAME, dtypes=frozenset({"int8", "uint8", "int16", "uint16"})),
            column("on_false"),
        ),
        (
            Attr("reverse_pred", bool, False),
            Attr("reduce_cmd", str, "idle", ("idle", "reset_reduce", "reduce")),
        ),
        cost=("stream",),
        semantics=S.select_reduce,
        in_order=True,  # the Vector engine's max accumulator (reduce_cmd)
        **_V,
    )
)
register(
    Instr(
        "quantize_mx",
        Engine.VECTOR,
        (
            out(dtypes=frozenset({"float8_e5m2_x4", "float8_e4m3fn_x4"})),
            out(DST_SCALE, dtypes=MX_SCALE),
            inp(SRC, dtypes=frozenset({"float16", "bfloat16"})),
        ),
        rules=("quantize-mx-shape",),
        params=(DST, SRC, DST_SCALE),
        cost=("quantize_mx",),
        semantics=S.quantize_mx,
        min_generation=4,
    )
)
register(
    Instr(
        "rand2",
        Engine.VECTOR,
        (out(), column("min"), column("max")),
        rules=("rand2-range",),
        cost=("rand2",),
        semantics=S.rand2,
        min_generation=4,
        in_order=True,  # the Vector engine's XORWOW state
        reads=SB,
        writes=ON_CHIP,
    )
)
register(
    Instr(
        "rand_set_state",
        Engine.VECTOR,
        (inp(SRC_SEEDS, dtypes=frozenset({"uint32"})),),
        rules=("rng-state-shape", "vector-prng"),
        engines=frozenset({Engine.VECTOR, Engine.GPSIMD}),
        cost=("rng_state",),
        min_generation=4,  # on the Vector engine (v3 has it on GpSimd only, not modelled)
        in_order=True,
        reads=SB,
        writes=ON_CHIP,
        doc="loads the XORWOW state words (no semantics function: a state copy)",
    )
)
register(
    Instr(
        "rand_get_state",
        Engine.VECTOR,
        (out(dtypes=frozenset({"uint32"})),),
        rules=("rng-state-shape", "vector-prng"),
        engines=frozenset({Engine.VECTOR, Engine.GPSIMD}),
        cost=("rng_state",),
        min_generation=4,
        in_order=True,
        **_V,
        doc="stores the XORWOW state words (no semantics function: a state copy)",
    )
)

register(
    Instr(
        "dropout",
        Engine.VECTOR,
        (out(raw=True), inp(DATA, shape=SAME, raw=True), inp("prob", shape=COLUMN, scalar=True)),
        rules=("dropout-dtype",),
        cost=("stream",),
        cost_source="assumed: the generic VectorE streaming cost (the docstring gives none)",
        semantics=S.dropout,
        in_order=True,  # the Vector engine's XORWOW state
        run="generic",
        **_V,
    )
)
register(
    Instr(
        "rng",
        Engine.VECTOR,
        (out(dtypes=INT_DTYPES, raw=True),),
        rules=("vector-prng",),
        cost=("stream",),
        cost_source="assumed: the generic VectorE streaming cost (the docstring gives none)",
        semantics=S.rng,
        engines=frozenset({Engine.VECTOR, Engine.GPSIMD}),
        in_order=True,
        run="generic",
        reads=SB,
        writes=ON_CHIP,
    )
)
register(
    Instr(
        "set_rng_seed",
        Engine.VECTOR,
        (inp(SRC_SEEDS, dtypes=WORD32, shape=ONE, raw=True),),
        cost=("rng_state",),
        semantics=S.set_rng_seed,
        in_order=True,
        run="generic",
        reads=ON_CHIP,
        writes=ON_CHIP,
    )
)

# ---- issue 13: the rest of the NKI 0.6 Vector-engine ISA -------------------------------------

_ACC_CMDS = ("reset_reduce", "reduce", "load_reduce")
_ACC_OPS = ("add", "subtract", "multiply", "maximum", "minimum")
_CUMULATIVE_DTYPES = frozenset(
    {"bfloat16", "float16", "float32", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"}
    | {"uint8", "uint16", "int8", "int16"}
)
_MIN_II_DOC = "MIN_II ~ 64 engine cycles"

register(
    Instr(
        "tensor_scalar_reduce",
        Engine.VECTOR,
        (
            out(ti=True),
            out(REDUCE_RES, shape=COLUMN, optional=True),
            inp(DATA, shape=SAME, ti=True),
            column("operand0"),
            column("reduce_init"),
        ),
        (
            Attr("op0", str),
            Attr("reduce_op", str, None, ("add", "multiply", "maximum", "minimum")),
            Attr("reverse0", bool, False, modelled=False),
            Attr("reduce_cmd", str, "reset_reduce", _ACC_CMDS),
            Attr("reduce_res_negate", bool, False),
        ),
        rules=("arith-op0", "reduce-init"),
        params=(DST, DATA, "op0", "reduce_op", "operand0", REDUCE_RES, "reverse0"),
        cost=("activation",),
        cost_source=f"SDK-2.26 {_DOC} tensor_scalar_reduce: max(MIN_II, N) + MIN_II "
        f"({_MIN_II_DOC}); the activation rule's formula with a reduce_res",
        semantics=S.tensor_scalar_reduce,
        in_order=True,  # the Vector engine's accumulator registers (reduce_cmd)
        run="generic",
        **_V,
    )
)
register(
    Instr(
        "tensor_scalar_cumulative",
        Engine.VECTOR,
        (
            out(ti=True, dtypes=_CUMULATIVE_DTYPES),
            inp(SRC, shape=SAME, ti=True, dtypes=_CUMULATIVE_DTYPES),
            Role("imm0", shape=COLUMN, scalar=True),
            column("imm1"),
        ),
        (
            Attr("op0", str),
            Attr("op1", str, None, _ACC_OPS),
            Attr("reduce_cmd", str, "reset_reduce", _ACC_CMDS),
        ),
        rules=("arith-op0", "reduce-init"),
        params=(DST, SRC, "op0", "op1", "imm0", "imm1", "reduce_cmd"),
        cost=("stream",),
        cost_source="assumed: the tensor_scalar cost max(MIN_II, N) (one pass over the "
        f"partition's elements; the docstring gives none; {_MIN_II_DOC})",
        semantics=S.tensor_scalar_cumulative,
        in_order=True,  # the Vector engine's accumulator registers (reduce_cmd)
        run="generic",
        **_V,
    )
)
register(
    Instr(
        "nc_stream_shuffle",
        Engine.VECTOR,
        (out(raw=True), inp(SRC, raw=True)),
        (Attr("shuffle_mask", tuple),),
        rules=("stream-shuffle",),
        cost=("stream",),
        cost_source=f"SDK-2.26 {_DOC} nc_stream_shuffle: max(MIN_II, N) Vector cycles "
        f"({_MIN_II_DOC})",
        semantics=S.nc_stream_shuffle,
        run="generic",
        **_V,
    )
)
register(
    Instr(
        "nc_match_replace8",
        Engine.VECTOR,
        (
            out(),
            out("dst_idx", optional=True, dtypes=frozenset({"uint32", "int32"}), raw=True),
            inp(DATA, shape=SAME),
            inp("vals"),
        ),
        (Attr("imm", (int, float)),),
        rules=("match-replace8-shape",),
        params=(DST, DATA, "vals", "imm", "dst_idx"),
        cost=("max8",),
        cost_source=f"SDK-2.26 {_DOC} nc_match_replace8: 'min(MIN_II, N)' as printed, read "
        "as N per partition like max8 / nc_find_index8 (the max8 rule)",
        semantics=S.nc_match_replace8,
        run="generic",
        **_V,
    )
)

# =================================================================================================
# GpSimd engine
# =================================================================================================

register(
    Instr(
        "iota",
        Engine.GPSIMD,
        (out(),),
        (Attr("pattern", tuple), Attr("offset", int, 0), Attr("channel_multiplier", int, 0)),
        rules=("iota-shape",),
        cost=("gpsimd",),
        semantics=S.iota,
    )
)
register(
    Instr(
        "affine_select",
        Engine.GPSIMD,
        (out(), inp(DATA, shape=SAME)),
        (
            Attr("pattern", tuple),
            Attr("offset", int, 0),
            Attr("channel_multiplier", int, 0),
            Attr("cmp_op", str, "greater_equal"),
            Attr("on_false_value", float),
        ),
        cost=("gpsimd",),
        semantics=S.affine_select,
    )
)
register(
    Instr(
        "tensor_partition_reduce",
        Engine.GPSIMD,
        (out(), inp(DATA)),
        (_OP,),
        cost=("gpsimd",),
        semantics=S.tensor_partition_reduce,
        params=(DST, "op", DATA),
    )
)
register(
    Instr(
        "local_gather",
        Engine.GPSIMD,
        (out(), inp("src_buffer"), inp(INDEX)),
        (
            Attr("num_elem_per_idx", int, 1),
            Attr("group", _OPT_INT, None),
            Attr("num_valid_indices", (int, type(None)), None),
        ),
        rules=("local-gather-shape",),
        cost=("gpsimd",),
        semantics=S.local_gather,
    )
)

# ---- issue 13: the rest of the NKI 0.6 GpSimd ISA (all costed by the engine rule 'gpsimd') ---

_GPSIMD_COST = "the GpSimd engine rule: GPSIMD_START + N (trnsim.core.costs ENGINE_RULES)"

register(
    Instr(
        "nc_n_gather",
        Engine.GPSIMD,
        (out(raw=True), inp(DATA, raw=True), inp("indices", dtypes=frozenset({"uint32"}))),
        rules=("n-gather-shape",),
        cost=("gpsimd",),
        cost_source=_GPSIMD_COST,
        semantics=S.nc_n_gather,
        run="generic",
    )
)
register(
    Instr(
        "sequence_bounds",
        Engine.GPSIMD,
        (
            out(dtypes=frozenset({"float32", "int32"})),
            inp("segment_ids", dtypes=frozenset({"float32", "int32"})),
        ),
        rules=("sequence-bounds-shape",),
        cost=("gpsimd",),
        cost_source=_GPSIMD_COST,
        semantics=S.sequence_bounds,
        run="generic",
    )
)
register(
    Instr(
        "nonzero_with_count",
        Engine.GPSIMD,
        (
            out(dtypes=frozenset({"int32"}), raw=True),
            inp(SRC, dtypes=frozenset({"float32", "int32"})),
        ),
        (Attr("index_offset", int, 0), Attr("padding_val", int, -1)),
        rules=("nonzero-shape",),
        cost=("gpsimd",),
        cost_source=_GPSIMD_COST,
        semantics=S.nonzero_with_count,
        min_generation=3,
        run="generic",
    )
)

register(
    Instr(
        "topk",
        Engine.GPSIMD,
        (
            out("val_dst", dtypes=frozenset({"bfloat16"})),
            out("idx_dst", dtypes=frozenset({"uint32"}), raw=True),
            inp(SRC, dtypes=frozenset({"bfloat16"})),
        ),
        (Attr("n", int),),
        rules=("topk-shape",),
        params=("val_dst", "idx_dst", SRC, "n"),
        cost=("topk",),
        cost_source=f"SDK {_DOC} topk: 4*n + K GpSimd cycles per partition",
        semantics=S.topk,
        run="generic",
    )
)

# =================================================================================================
# DMA queues (costed in seconds by ``costs.dma_cost``, not by a cycle rule)
# =================================================================================================

_DMA = {"reads": DMA_MEM, "writes": DMA_MEM, "cost": ("dma",)}

register(
    Instr(
        "dma_copy",
        Engine.DMA,
        (out(ap=True), inp(SRC, ap=True), inp(INDEX, dtypes=INDEX_DTYPES, optional=True)),
        (
            Attr("dge_mode", str, "unknown", ("unknown", "swdge", "hwdge", "none")),
            Attr("oob_mode", str, "error", OOB_MODES),
            Attr("priority", _OPT_INT, None),
            Attr("dge_engine", (str, type(None)), None),
        ),
        rules=("dma-shape", "indirect", "dge-mode", "dma-dtype"),
        doc="bit-exact for equal formats, else via fp32 (no semantics function: a cast)",
        **_DMA,
    )
)
register(
    Instr(
        "dma_transpose",
        Engine.DMA,
        (out(), inp(SRC)),
        (
            Attr("axes", (tuple, type(None)), None),
            Attr("dge_mode", str, "unknown", ("unknown", "swdge", "hwdge", "none")),
            Attr("priority", _OPT_INT, None, modelled=False),
            Attr("oob_mode", str, "error", OOB_MODES, modelled=False),
        ),
        semantics=S.dma_transpose,
        **_DMA,
    )
)
register(
    Instr(
        "dma_compute",
        Engine.DMA,
        (out(), inp(SRC, variadic=True)),
        (
            Attr("reduce_op", str, "add"),
            # only a read-modify-write through vector_offset takes these (nki/isa.dma_compute)
            Attr("unique_indices", bool, True),
            Attr("oob_mode", str, "error", OOB_MODES),
        ),
        rules=("dma-shape",),
        semantics=S.alu,
        **_DMA,
    )
)

# ---- nki.collectives inside kernels (issue 13): recorded per (src, dst) pair on the DMA queues;
# the data is exchanged by the launcher (``trnsim.nki.collectives``) between the cores of the
# launch, the cost is ``costs.collective_cost`` (a ring over the DMA engines) ------------------

_CC_MEM = frozenset({HBM, SBUF})
_CC_HBM = frozenset({HBM})
_CC_COST = (
    "costs.collective_cost: ring steps x DMA fixed latency + the ring's bytes per rank "
    "(trnsim.fabric.collectives bus factors) over the core's DMA engines (trnsim.hw DmaSpec: "
    "NEURON_DMA_GUIDE)"
)
_CC_ATTRS = (
    Attr("ranks", tuple),
    Attr("priority", _OPT_INT, None, modelled=False),
)


def _collective(name: str, mem: frozenset[str], attrs: tuple[Attr, ...], sem: Any) -> None:
    register(
        Instr(
            name,
            Engine.DMA,
            (out(memories=mem), inp(SRC, memories=mem)),
            (*_CC_ATTRS, *attrs),
            rules=("collective",),
            cost=("dma",),
            cost_source=_CC_COST,
            semantics=sem,
            min_generation=3,
            reads=mem,
            writes=mem,
            doc="exchanged between the cores of the launch by trnsim.nki.collectives",
        )
    )


_CC_OP = Attr("op", str, None, S.COLLECTIVE_REDUCE_OPS)
_CC_DIM = Attr("collective_dim", int, 0, (0, 1))
_collective("all_reduce", _CC_MEM, (_CC_OP,), S.all_reduce)
_collective("all_gather", _CC_MEM, (_CC_DIM,), S.all_gather)
_collective(
    "reduce_scatter", _CC_MEM, (_CC_OP, Attr("collective_dim", int, 0, (0,))), S.reduce_scatter
)
_collective("all_to_all", _CC_HBM, (Attr("collective_dim", int, 0, (0,)),), S.all_to_all)
_collective("collective_permute", _CC_HBM, (Attr("pairs", tuple),), S.collective_permute)
# the ring permute: SBUF or HBM (the docstring names no memory; nki-library's fg_allgather and
# fgcc ring SBUF and HBM buffers); one instruction per channel
_collective(
    "collective_permute_implicit",
    _CC_MEM,
    (Attr("channel", int, 0),),
    S.collective_permute_implicit,
)

# the variable-length collectives: flat HBM buffers, counts and displacements in a uint32
# metadata tensor read when they run (rows: send counts, send displacements, received counts
# (written back unless recv_counts_known), received displacements with has_rdispls); the
# message cost is the whole dst (an upper bound: the counts are data)
for _name, _sem in (("all_gather_v", S.all_gather_v), ("all_to_all_v", S.all_to_all_v)):
    register(
        Instr(
            _name,
            Engine.DMA,
            (
                out(memories=_CC_HBM),
                inp(SRC, memories=_CC_HBM),
                inp("metadata", memories=_CC_MEM, dtypes=frozenset({"uint32"})),
            ),
            (
                *_CC_ATTRS,
                Attr("recv_counts_known", bool, False),
                Attr("has_rdispls", bool, False),
            ),
            rules=("collective-v",),
            cost=("dma",),
            cost_source=_CC_COST + "; the counts are data: the message is the whole dst",
            semantics=_sem,
            min_generation=3,
            reads=_CC_MEM,
            writes=_CC_MEM,
            doc="exchanged between the ranks by trnsim.nki.collectives",
        )
    )

# =================================================================================================
# Sync / inter-core (carried out by the launcher, ``trnsim.nki.simulate``)
# =================================================================================================

register(
    Instr(
        "core_barrier",
        Engine.SYNC,
        (),
        cost=("sync",),
        min_generation=3,
        reads=ANY_MEM,
        writes=ANY_MEM,
        doc="a barrier between the cores of an LNC=2 launch (no data)",
    )
)
register(
    Instr(
        "sendrecv",
        Engine.SYNC,
        (out(), inp(SRC)),
        (
            Attr("send_to_rank", int),
            Attr("recv_from_rank", int),
            Attr("pipe_id", int),
            Attr("dma_engine", str, "dma"),
        ),
        rules=("sendrecv",),
        cost=("sync",),
        min_generation=3,
        reads=ANY_MEM,
        writes=ANY_MEM,
        doc="moved by the launcher between the cores' SBUFs (bit-exact)",
    )
)


# ---- issue 13: virtual registers (engine sequencers; the value lives in the front end's
# ``VirtualRegister``, the instruction is recorded for the checker and the timing model) -------

_REGISTER_COST = (
    "assumed: 0 engine cycles (a sequencer register operation; register_alloc docstring: "
    "64 x 32-bit registers per engine sequencer; no cost documented)"
)
register(
    Instr(
        "register_load",
        Engine.SYNC,
        (inp(SRC, dtypes=INT_DTYPES),),
        rules=("register-scalar",),
        cost=("sync",),
        cost_source=_REGISTER_COST,
        semantics=S.register_load,
        run="generic",
        reads=DMA_MEM,
        writes=DMA_MEM,
    )
)
register(
    Instr(
        "register_store",
        Engine.SYNC,
        (out(dtypes=INT_DTYPES, raw=True),),
        (Attr("value", int),),
        rules=("register-scalar",),
        cost=("sync",),
        cost_source=_REGISTER_COST,
        semantics=S.register_store,
        run="generic",
        reads=DMA_MEM,
        writes=DMA_MEM,
    )
)
register(
    Instr(
        "register_move",
        Engine.SYNC,
        (),
        (Attr("value", int),),
        cost=("sync",),
        cost_source=_REGISTER_COST,
        semantics=S.register_move,
        run="generic",
    )
)
