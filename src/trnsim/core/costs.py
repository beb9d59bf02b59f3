"""Instruction costs per NeuronCore generation: a table of rules, each with its source.

A rule maps an instruction (opcode, engine, operands, attributes) to a number of **engine
cycles** for which the instruction occupies its engine (its initiation interval). Seconds are
cycles over the engine clock from ``trnsim.hw``. DMA transfers are costed in seconds
(``dma_cost``): a fixed latency plus bytes over a bandwidth, see below.

Every constant is either a ``trnsim.hw`` figure (clocks, array size, dtype rates, DMA engine
bandwidth and latency, ``min_ii_cycles``) or a named constant here with its source, which is
a path in the public NKI documentation as digested in ``shared/reference/nki-notes.md``
(section 4.4 for engine instructions, 4.2-4.3 for DMA and engine modes). ``N`` is the number
of elements per partition (the free size) of the instruction's main operand.

Derivations beside formulas:

- Matmul: the moving tensor streams through the array one column (128 elements) per cycle, so
  an ``[K, N_moving]`` moving tile takes ``N_moving`` cycles; loading the ``[K, N_stationary]``
  stationary tile ("LoadStationary") overlaps the previous multiply but costs at least
  ``min(MIN_II, N_stationary)`` cycles when the moving tile is short. Hence
  ``max(min(MIN_II, N_st), N_mv)``; fp32 runs at 1/4 rate (``tensor.rate["fp32"]``), FP8
  ``double_row`` at 2x on v3/v4 (``tensor.rate["fp8"]``). ``nc_matmul_mx`` packs 4 values of
  K per word, so the same cycle count does 4x the work (the 4x MX rate falls out of the
  operand shapes rather than being applied twice).
- Vector/Scalar: ``max(MIN_II, N / speedup)``; the speedup is 1 on v2 and the documented
  performance modes on v3/v4 (bf16 SBUF contiguous: 4x for copy/tensor_scalar; 2x with a PSUM
  side or non-contiguous access; 2x tensor_tensor all-bf16 SBUF; v4 ScalarE 2x bf16). The
  speedups are read from ``EngineSpec.elems_per_cycle`` ("fast" / "other" over the lanes).
- GpSimd: ``GPSIMD_START + N`` (a software sequencer start-up, then one element per cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import ceil

from trnsim.core.collops import canonical_op
from trnsim.core.instruction import Instruction, Operand
from trnsim.core.isa import Engine, Op
from trnsim.core.spec import DATA, INDEX, MOVING, REDUCE_RES, SPECS, STATIONARY
from trnsim.hw import ChipSpec, CoreSpec

NOTES = "shared/reference/nki-notes.md"
DMA_COST = "dma"
"""The cost name of DMA instructions in ``spec`` entries: seconds from ``dma_cost``."""
ISA_DOC = "SDK-2.26 general/nki/api/nki/isa/__init__.py (instruction docstrings)"

# ---- named constants not in trnsim.hw (each with its source) ---------------------------------

MIN_II_DYNAMIC_CYCLES = 600
"""The minimum initiation interval of a copy with a dynamic (runtime) source or destination
offset within each partition (``MIN_II_DYNAMIC``), cycles. Source: ISA_DOC
``tensor_copy_dynamic_src`` / ``tensor_copy_dynamic_dst`` ("roughly 600 engine cycles")."""

GPSIMD_START_CYCLES = 150
"""GpSimd instruction start-up (``GPSIMD_START``), cycles. Source: ISA_DOC ``iota`` /
``affine_select`` cost ``150 + N`` (nki-notes 4.4)."""

MIN_II_DYNAMIC_CYCLES = 600
"""Initiation interval with a dynamic (register) source address (``MIN_II_DYNAMIC``), cycles.
Source: ISA_DOC ``tensor_copy_dynamic_src`` (nki-notes 4.4)."""

EXPONENTIAL_SPEEDUP = 4
"""v4 ``nisa.exponential`` on VectorE is 4x faster than the ScalarE exp. Source: SDK
``release-notes/components/nki.rst`` 0.3.0 (nki-notes 4.4 'Generation multipliers', 5)."""

RECIPROCAL_FACTOR = 8
"""VectorE ``reciprocal`` costs ``max(MIN_II, 8N)``. Source: ISA_DOC (nki-notes 4.4) and the
current SDK's engine-selection page (``nki/api/nki.api.shared.rst``: "about 8x lower than
Scalar Engine for large input tiles", ``max(MIN_II, 8*N)``). Reviewed for issue 27, which
reports 2-3N from held-out measurements: the public trn2 profiles (``hw.sources.TKF_PROFILES``)
time VectorE reciprocals of 4 and 8 fp32 elements per partition at 173 and 202 ns (medians),
7.3 ns per element, about 7 VectorE cycles, as 8N predicts (2-3N would add 2-3 ns per
element); kept at 8 until a public measurement says otherwise."""

BN_AGGR_FACTOR = 13 / 3
"""``bn_aggr`` costs ``max(MIN_II, 13 * N / 3)``. Source: ISA_DOC (nki-notes 4.4)."""

QUANTIZE_MX_ELEMS_PER_CYCLE = 4
"""v4 ``quantize_mx``: 4 elements per partition per cycle. Source: SDK trainium3_arch.rst
(nki-notes 4.4 'Generation multipliers')."""

RAND2_ELEMS_PER_CYCLE = 4
"""v4 ``rand2`` XORWOW: 4 x 32-bit values per lane per cycle. Source: SDK trainium3_arch.rst
(nki-notes 5)."""

DMA_PARTITIONS_PER_ENGINE_SOURCE = "nki-notes 4.3: each DMA engine serves 128/16 = 8 partitions"
"""A transfer touching P partitions of SBUF is served by ceil(P / (partitions / engines))
engines, so partial-partition transfers get that fraction of the core's DMA bandwidth."""

SHORT_ROW_BYTES = 512
"""Rows shorter than this are reported as 'short-row' DMAs in profiles (a diagnostic; the cost
comes from ``DmaSpec.descriptor_s``). Source: NEURON_DMA_GUIDE minimum recommended payload of
2 KiB per partition, perf guide (nki-notes 4.3)."""

# ---- dtype classes -----------------------------------------------------------------------------


def dtype_class(fmt: str) -> str:
    """The rate class of a format name: fp32, tf32, bf16, fp16, fp8, mxfp8, mxfp4 or int."""
    if fmt == "float32":
        return "fp32"
    if fmt == "tfloat32":
        return "tf32"
    if fmt == "bfloat16":
        return "bf16"
    if fmt == "float16":
        return "fp16"
    if fmt.startswith("float4") and fmt.endswith("_x4"):
        return "mxfp4"
    if fmt.startswith("float8") and fmt.endswith("_x4"):
        return "mxfp8"
    if fmt.startswith("float8"):
        return "fp8"
    return "int"


_NARROW = frozenset({"bf16", "fp16", "fp8"})


def _narrow(ops: tuple[Operand, ...]) -> bool:
    return all(dtype_class(o.dtype) in _NARROW for o in ops)


def _contiguous(o: Operand) -> bool:
    return not o.pattern or o.pattern[-1][0] == 1


def _free(instr: Instruction) -> int:
    """N: elements per partition of the largest operand (the data the engine streams)."""
    ops = instr.src + instr.dst
    return max((o.free_size for o in ops if o.memory != "hbm"), default=1)


# ---- the rule table ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CostRule:
    """One row of the cost table: which instructions it covers, its formula, its source."""

    name: str
    engines: frozenset[Engine]
    formula: Callable[[Instruction, CoreSpec], float]
    text: str
    source: str

    @property
    def ops(self) -> frozenset[Op]:
        """The instructions whose ``spec`` entry names this rule (all, for an engine rule)."""
        if self.name in ENGINE_RULES.values():
            return frozenset(Op)
        return frozenset(Op(e.name) for e in SPECS.values() if self.name in e.cost)


FP32_SINGLE_PASS_SOURCE = (
    f"{ISA_DOC} nc_matmul: is_stationary_onezero / is_moving_onezero 'could lead to 2x better "
    "performance' for a float32 operand; SDK nki/guides/architecture/trainium2_arch.rst 'Built-in "
    "Transpose Support': NeuronCore-v3 transpose mode gives a '2x speedup in FP32 transpose'; SDK "
    "tools/neuron-explorer/profile-schema-reference.rst (raw_flops): 'each FP32 matmul lowers to "
    "two FP32_LO_HI instructions'. Measured (hw.sources.TKF_PROFILES, baseline_fp32_s1024): "
    "FP32_LO_HI matmul passes issue every 109 ns per 128 columns (429 ns per 512), two per "
    "nc_matmul; TRANSPOSE instructions every 109 ns per 128 columns, one per nc_transpose"
)
"""Why an fp32 TensorE operation that needs one of the two FP32_LO_HI passes costs half."""


def fp32_single_pass(instr: Instruction, spec: CoreSpec) -> bool:
    """An fp32 TensorE instruction that runs as one FP32_LO_HI pass instead of two (half the
    fp32 cost): a transpose on NeuronCore-v3 or later (its transpose mode: ``nc_transpose``
    on TensorE, ``nc_matmul(is_transpose=True)``), or an ``nc_matmul`` whose fp32 operand is
    hinted to hold only ones and zeros (``is_stationary_onezero`` / ``is_moving_onezero``),
    any generation. Source: ``FP32_SINGLE_PASS_SOURCE``."""
    if instr.opcode is Op.NC_TRANSPOSE or instr.attr("is_transpose"):
        return spec.generation >= 3
    for role, hint in ((STATIONARY, "is_stationary_onezero"), (MOVING, "is_moving_onezero")):
        o = instr.operand(role)
        if instr.attr(hint) and o is not None and dtype_class(o.dtype) == "fp32":
            return True
    return False


def _mm_cycles(instr: Instruction, spec: CoreSpec) -> float:
    st, mv = instr.operand(STATIONARY), instr.operand(MOVING)
    if st is None or mv is None:
        return float(spec.min_ii_cycles)
    rate = spec.tensor.rate
    cls = {dtype_class(st.dtype), dtype_class(mv.dtype)}
    if "fp32" in cls:
        factor = 1 / rate["fp32"]  # x4 for fp32 (rate 0.25): two FP32_LO_HI passes
        if fp32_single_pass(instr, spec):
            factor /= 2  # one pass
    elif instr.attr("perf_mode") == "double_row" and cls <= {"fp8"} and "fp8" in rate:
        factor = 1 / rate["fp8"]  # FP8 double-row: 2x on v3/v4, 1x on v2
    else:
        factor = 1.0
    return max(min(spec.min_ii_cycles, st.free_size), mv.free_size * factor)


def _mm_mx_cycles(instr: Instruction, spec: CoreSpec) -> float:
    st, mv = instr.operand(STATIONARY), instr.operand(MOVING)
    if st is None or mv is None:
        return float(spec.min_ii_cycles)
    return max(min(spec.min_ii_cycles, st.free_size), mv.free_size)


def _pe_transpose_cycles(instr: Instruction, spec: CoreSpec) -> float:
    data = instr.operand(DATA) or instr.src[0]
    factor = 1 / spec.tensor.rate["fp32"] if dtype_class(data.dtype) == "fp32" else 1.0
    if factor > 1 and fp32_single_pass(instr, spec):
        factor /= 2  # v3+ transpose mode: one FP32_LO_HI pass
    return max(data.partitions, min(spec.min_ii_cycles, data.free_size)) * factor


def _speedup(instr: Instruction, spec: CoreSpec) -> float:
    """Documented VectorE/ScalarE performance modes (1 on v2, where fast == other == lanes)."""
    eng = spec.vector if instr.engine is Engine.VECTOR else spec.scalar
    fast = eng.elems_per_cycle["fast"] / eng.lanes
    other = eng.elems_per_cycle["other"] / eng.lanes
    ops = instr.src + instr.dst
    if not _narrow(ops):
        return 1.0
    if instr.engine is Engine.SCALAR:  # v4 ScalarE: 2x bf16 tensor_scalar / tensor_copy
        return fast if instr.opcode in (Op.TENSOR_SCALAR, Op.TENSOR_COPY) else 1.0
    in_sbuf = all(o.memory == "sbuf" for o in ops)
    if instr.opcode in (Op.TENSOR_COPY, Op.TENSOR_SCALAR):
        if in_sbuf and all(_contiguous(o) for o in ops):
            return fast  # v3/v4: 4x
        return other  # 2x with a PSUM side or a non-contiguous access
    if instr.opcode is Op.TENSOR_TENSOR and in_sbuf:
        return other  # v3/v4: 2x all-bf16 SBUF
    return 1.0


def _stream(factor: float = 1.0) -> Callable[[Instruction, CoreSpec], float]:
    def f(instr: Instruction, spec: CoreSpec) -> float:
        return max(spec.min_ii_cycles, factor * _free(instr) / _speedup(instr, spec))

    return f


def _tensor_copy(instr: Instruction, spec: CoreSpec) -> float:
    """``stream`` (``gpsimd`` on GpSimd); with a dynamic offset (``trnsim.core.indirect``
    choice 7) ``max(MIN_II_DYNAMIC, N)``, N the elements per partition of the static side (the
    record names the whole dynamically indexed tensor)."""
    side = instr.attr("dynamic")
    if side is not None:
        static = instr.operand("src" if side == "dst" else "dst")
        n = static.free_size if static is not None else _free(instr)
        return float(max(MIN_II_DYNAMIC_CYCLES, n))
    if instr.engine is Engine.GPSIMD:
        return _gpsimd(instr, spec)
    return _stream()(instr, spec)


def _tensor_tensor(instr: Instruction, spec: CoreSpec) -> float:
    mems = {o.memory for o in instr.src}
    one_psum = "psum" in mems and "sbuf" in mems
    cheap_op = instr.attr("op") in ("add", "subtract", "multiply", "sub", "mul")
    fast_sbuf = (
        mems == {"sbuf"} and _narrow(instr.src) and cheap_op and all(map(_contiguous, instr.src))
    )
    factor = 1.0 if one_psum or fast_sbuf else 2.0
    return max(spec.min_ii_cycles, factor * _free(instr) / _speedup(instr, spec))


def _tensor_reduce(instr: Instruction, spec: CoreSpec) -> float:
    bf16 = all(dtype_class(o.dtype) == "bf16" for o in instr.src + instr.dst)
    half = bf16 and instr.attr("op") in ("add", "max")
    return max(spec.min_ii_cycles, _free(instr) / (2 if half else 1))


def _memset(instr: Instruction, spec: CoreSpec) -> float:
    zero_half = instr.attr("value") in (0, 0.0) and _narrow(instr.dst)
    return max(spec.min_ii_cycles, _free(instr) / (2 if zero_half else 1))


def _scalar_tensor_tensor(instr: Instruction, spec: CoreSpec) -> float:
    n = _free(instr)
    bf16 = all(dtype_class(o.dtype) == "bf16" for o in instr.src + instr.dst)
    return n if bf16 and n % 2 == 0 else 2 * n


def _copy_predicated(instr: Instruction, spec: CoreSpec) -> float:
    both_sbuf = all(o.memory == "sbuf" for o in instr.src + instr.dst)
    return max(spec.min_ii_cycles, (2 if both_sbuf else 1) * _free(instr))


def _activation(instr: Instruction, spec: CoreSpec) -> float:
    extra = spec.min_ii_cycles if instr.operand(REDUCE_RES) is not None else 0
    return max(spec.min_ii_cycles, _free(instr)) + extra


def _exponential(instr: Instruction, spec: CoreSpec) -> float:
    return max(spec.min_ii_cycles, _free(instr) / EXPONENTIAL_SPEEDUP)


def _per_cycle(k: float) -> Callable[[Instruction, CoreSpec], float]:
    def f(instr: Instruction, spec: CoreSpec) -> float:
        return max(spec.min_ii_cycles, _free(instr) / k)

    return f


def _plain(instr: Instruction, spec: CoreSpec) -> float:
    return float(_free(instr))


def _gpsimd(instr: Instruction, spec: CoreSpec) -> float:
    factor = 2.0 if instr.opcode is Op.TENSOR_TENSOR else 1.0
    return GPSIMD_START_CYCLES + factor * _free(instr)


def _topk(instr: Instruction, spec: CoreSpec) -> float:
    val = instr.operand("val_dst")
    return 4.0 * (instr.attr("n") or 0) + (val.free_size if val is not None else 0)


def _sync(instr: Instruction, spec: CoreSpec) -> float:
    return 0.0


_ALL = frozenset(Engine)
_V, _S, _G, _T = (
    frozenset({Engine.VECTOR}),
    frozenset({Engine.SCALAR}),
    frozenset({Engine.GPSIMD}),
    frozenset({Engine.TENSOR}),
)
_VS = _V | _S

RULES: tuple[CostRule, ...] = (
    CostRule(
        "matmul",
        _T,
        _mm_cycles,
        "max(min(MIN_II, N_st), N_mv) x 4 (fp32; x 2 with a one/zero fp32 operand or a v3+ "
        "transpose) / 2 (fp8 double_row, v3+)",
        f"{ISA_DOC} nc_matmul; perf guide Opt #7 (LoadStationary overlap); nki-notes 4.4; "
        "fp32 single pass: FP32_SINGLE_PASS_SOURCE",
    ),
    CostRule(
        "matmul_mx",
        _T,
        _mm_mx_cycles,
        "max(min(MIN_II, N_st), N_mv) words; 4 K-values per word (4x bf16 work)",
        "SDK trainium3_arch.rst MX 4x BF16; nc_matmul_mx docstring; nki-notes 4.4, 5",
    ),
    CostRule(
        "pe_transpose",
        _T,
        _pe_transpose_cycles,
        "max(P, min(MIN_II, F)) x 4 for fp32 data on v2, x 2 on v3+ (transpose mode)",
        f"{ISA_DOC} nc_transpose; fp32 x4: v2 arch guide (TensorE fp32 'roughly 4x' the bf16 "
        "cost); v3+: one FP32_LO_HI pass, FP32_SINGLE_PASS_SOURCE (an fp32 128x128 transpose "
        "issues every 109 ns on trn2, as one of the two passes of an fp32 matmul does)",
    ),
    CostRule(
        "activation",
        _VS,
        _activation,
        "max(MIN_II, N) (+ MIN_II with a reduction); scale and bias free",
        f"{ISA_DOC} activation / activation_reduce; nki-notes 4.4",
    ),
    CostRule(
        "exponential",
        _VS,
        _exponential,
        "max(MIN_II, N / 4) (v4 fast exp, 4x ScalarE)",
        "SDK release-notes nki.rst 0.3.0; nki-notes 4.4, 5",
    ),
    CostRule(
        "tensor_tensor",
        _VS,
        _tensor_tensor,
        "max(MIN_II, N) if PSUM+SBUF or bf16 SBUF add/mul/sub contiguous, else 2N; / perf mode",
        f"{ISA_DOC} tensor_tensor; SDK trainium2_arch.rst; nki-notes 4.2, 4.4",
    ),
    CostRule(
        "stream",
        _VS,
        _stream(),
        "max(MIN_II, N / perf mode speedup)",
        f"{ISA_DOC}; SDK trainium2_arch.rst (v3 perf mode 4x/2x), trainium3_arch.rst "
        "(v4 ScalarE 2x bf16); nki-notes 4.2, 4.4",
    ),
    CostRule(
        "tensor_copy",
        _VS | _G,
        _tensor_copy,
        "stream (GpSimd: its engine rule); dynamic offset: max(MIN_II_DYNAMIC, N)",
        f"{ISA_DOC} tensor_copy, tensor_copy_dynamic_src/dst (MIN_II_DYNAMIC ~ 600)",
    ),
    CostRule(
        "tensor_reduce",
        _VS,
        _tensor_reduce,
        "max(MIN_II, N/2) bf16 add/max, else N",
        f"{ISA_DOC} tensor_reduce",
    ),
    CostRule(
        "memset",
        _VS,
        _memset,
        "max(MIN_II, N/2) zero fill of 16-bit, else N",
        f"{ISA_DOC} memset",
    ),
    CostRule(
        "reciprocal",
        _VS,
        _stream(RECIPROCAL_FACTOR),
        "max(MIN_II, 8N)",
        f"{ISA_DOC} reciprocal; nki.api.shared.rst (8x ScalarE); trn2 profiles: 7.3 ns per "
        "element at N=4..8 (hw.sources.TKF_PROFILES)",
    ),
    CostRule(
        "scan",
        _VS,
        _stream(2.0),
        "max(MIN_II, 2N)",
        f"{ISA_DOC} tensor_tensor_scan",
    ),
    CostRule(
        "scalar_tensor_tensor",
        _VS,
        _scalar_tensor_tensor,
        "N for bf16 with even N, else 2N",
        f"{ISA_DOC} scalar_tensor_tensor",
    ),
    CostRule(
        "copy_predicated",
        _VS,
        _copy_predicated,
        "max(MIN_II, N) SBUF/PSUM mix, else 2N",
        f"{ISA_DOC} tensor_copy_predicated",
    ),
    CostRule(
        "bn_aggr",
        _VS,
        _stream(BN_AGGR_FACTOR),
        "max(MIN_II, 13 N / 3)",
        f"{ISA_DOC} bn_aggr",
    ),
    CostRule(
        "max8",
        _VS,
        _plain,
        "N",
        f"{ISA_DOC} max8 / nc_find_index8",
    ),
    CostRule(
        "quantize_mx",
        _VS,
        _per_cycle(QUANTIZE_MX_ELEMS_PER_CYCLE),
        "max(MIN_II, N / 4)",
        "SDK trainium3_arch.rst (nki-notes 4.4)",
    ),
    CostRule(
        "rand2",
        _VS,
        _per_cycle(RAND2_ELEMS_PER_CYCLE),
        "max(MIN_II, N / 4)",
        "SDK trainium3_arch.rst XORWOW (nki-notes 5)",
    ),
    CostRule(
        "rng_state",
        _V,
        _stream(),
        "max(MIN_II, N) with N = 24 state words per lane (= MIN_II)",
        "assumed: the generic VectorE streaming cost of ISA_DOC (nki-notes 4.4); the "
        "rand_set_state / rand_get_state docstrings give no cost",
    ),
    CostRule(
        "gpsimd",
        _G,
        _gpsimd,
        "GPSIMD_START + N (2N for tensor_tensor)",
        f"{ISA_DOC} iota / affine_select (GPSIMD_START ~ 150); nki-notes 4.4",
    ),
    CostRule(
        "topk",
        _G,
        _topk,
        "4 n + K (n: snake elements, K: val_dst elements per partition)",
        "SDK nki/api/nki/isa/__init__.py topk (estimated instruction cost)",
    ),
    CostRule(
        "sync",
        _ALL,
        _sync,
        "0 (a barrier: waits for every earlier instruction of the kernel)",
        "assumed; nki-notes 4.2 (LNC)",
    ),
)
"""The cost rules. Which instructions a rule covers is written in the instructions' ``spec``
entries (``cost``: rule names, the first whose engines include the instruction's engine
applies), except for the engine rules of ``ENGINE_RULES``."""

ENGINE_RULES: dict[Engine, str] = {Engine.GPSIMD: "gpsimd"}
"""Engines whose every instruction is costed by one rule (GpSimd: a software sequencer)."""

_BY_NAME: dict[str, CostRule] = {r.name: r for r in RULES}
_BY_KEY: dict[tuple[Op, Engine], CostRule] = {}
for _eng, _name in ENGINE_RULES.items():
    for _op in Op:
        _BY_KEY[(_op, _eng)] = _BY_NAME[_name]
for _entry in SPECS.values():
    for _name in _entry.cost:
        if _name == DMA_COST:
            continue
        for _eng in _BY_NAME[_name].engines:
            _BY_KEY.setdefault((Op(_entry.name), _eng), _BY_NAME[_name])


_BY_KEY[(Op.TOPK, Engine.GPSIMD)] = _BY_NAME["topk"]  # its documented cost, not the engine rule
# a dynamic-offset copy has its own documented cost on every engine
_BY_KEY[(Op.TENSOR_COPY, Engine.GPSIMD)] = _BY_NAME["tensor_copy"]


# ---- engine placement of instructions given no engine ----------------------------------------

SCALAR_TENSOR_SCALAR_OPS = frozenset({("multiply", "add"), ("multiply", None), ("add", None)})
"""The ``(op0, op1)`` combinations ScalarE runs for ``tensor_scalar``. Source: ISA_DOC
``tensor_scalar`` ("The Scalar Engine on trn2 only supports a subset of the operator
combination"), SDK-2.26 and NKI 0.6 docstrings."""

AUTO_ENGINE_SOURCE = (
    "ISA_DOC tensor_copy: engine=unknown (default) 'compiler selects best engine based on engine "
    "workload'; measured: neuron-profile of trainium-kernel-fusion's attention kernels on trn2 "
    "(hw.sources.TKF_PROFILES) runs their engine-less PSUM-to-SBUF tensor_copy calls on ScalarE "
    "(100) and VectorE (42), alternating"
)


def auto_engines(instr: Instruction) -> tuple[Engine, ...]:
    """The engines the compiler may place ``instr`` on when the kernel gave none (its record
    has ``AUTO_ENGINE_ATTR``): ScalarE first, then VectorE, for a ``tensor_copy`` of floats
    and an arithmetic ``tensor_scalar`` ScalarE supports (``SCALAR_TENSOR_SCALAR_OPS``, no
    reversed operand); otherwise only the recorded engine. GpSimd is never picked (it cannot
    reach PSUM and streams slower). The timing model takes the one that finishes first
    (``trnsim.core.timing``; a tie goes to ScalarE, as the measured profiles show).
    Source: ``AUTO_ENGINE_SOURCE``."""
    from trnsim.core.isa import AUTO_ENGINE_ATTR

    if not instr.attr(AUTO_ENGINE_ATTR) or instr.attr("dynamic") or instr.attr("tensor_indirect"):
        return (instr.engine,)
    ops = instr.src + instr.dst
    if any(dtype_class(o.dtype) == "int" for o in ops):
        return (instr.engine,)
    if instr.opcode is Op.TENSOR_SCALAR:
        pair = (instr.attr("op0"), instr.attr("op1"))
        if pair not in SCALAR_TENSOR_SCALAR_OPS or instr.attr("reverse0") or instr.attr("reverse1"):
            return (instr.engine,)
    elif instr.opcode is not Op.TENSOR_COPY:
        return (instr.engine,)
    return (Engine.SCALAR, Engine.VECTOR)


def rule_for(instr: Instruction) -> CostRule:
    """The cost rule that covers ``instr`` (KeyError-free: a missing rule is a ConfigError)."""
    rule = _BY_KEY.get((instr.opcode, instr.engine))
    if rule is None:
        from trnsim.errors import ConfigError

        raise ConfigError(
            f"no cost rule for {instr.opcode.value} on {instr.engine.value}; rules: "
            f"{', '.join(r.name for r in RULES)}"
        )
    return rule


def engine_clock(spec: CoreSpec, engine: Engine) -> float:
    """The clock (Hz) of an engine; DMA and sync queues have none (costed in seconds)."""
    return {
        Engine.TENSOR: spec.tensor.clock_hz,
        Engine.VECTOR: spec.vector.clock_hz,
        Engine.SCALAR: spec.scalar.clock_hz,
        Engine.GPSIMD: spec.gpsimd.clock_hz,
    }.get(engine, spec.tensor.clock_hz)


def instruction_cycles(instr: Instruction, spec: CoreSpec) -> float:
    """Engine cycles ``instr`` occupies its engine for (not for DMA: see ``dma_cost``)."""
    return rule_for(instr).formula(tensor_indirect_access(instr), spec)


def tensor_indirect_access(instr: Instruction) -> Instruction:
    """``instr`` with each tensor-indirection operand (``.indirect``, attribute
    ``tensor_indirect``) as the ``(P, num_elem)`` access the engine streams: the record names
    the whole indexed view (a conservative dependency region, ``trnsim.core.indirect``), but
    the op is costed by its normal formula on the elements it moves. Assumption: TI adds no
    cycles (no public figure) and its data-dependent addresses count as a **non-contiguous**
    access, so the VectorE perf modes that need contiguous operands do not apply; the index
    read is free."""
    ti = instr.attr("tensor_indirect")
    if not ti:
        return instr
    n = {role: num_elem for role, _, num_elem in ti}

    def access(o: Operand) -> Operand:
        return o._replace(pattern=((0, n[o.role]),)) if o.role in n else o

    return instr._replace(dst=tuple(map(access, instr.dst)), src=tuple(map(access, instr.src)))


def instruction_seconds(instr: Instruction, spec: CoreSpec, model: DmaModel | None = None) -> float:
    """Seconds ``instr`` takes alone on an idle core (DMA: latency + bytes / bandwidth)."""
    if instr.engine is Engine.DMA:
        cost = dma_cost(instr, model or DmaModel.for_core(spec))
        return cost.latency_s + max(cost.occupancy_s, cost.duration_s)
    return instruction_cycles(instr, spec) / engine_clock(spec, instr.engine)


# ---- matmul work ------------------------------------------------------------------------------


def matmul_flops(instr: Instruction) -> float:
    """Useful FLOPs: 2 x K x M x N (x4 K-values per word for MX); transposes count none.

    FP8 ``double_row`` operands are ``[K / r, r, M]`` and ``[K / r, r, N]``: each partition holds
    r K-rows, so K = partitions x r while the free sizes count M x r and N x r elements.
    """
    instr = tensor_indirect_access(instr)
    if instr.opcode is Op.NC_MATMUL and not instr.attr("is_transpose"):
        st, mv = instr.operand(STATIONARY), instr.operand(MOVING)
        if st is not None and mv is not None:
            double_row = instr.attr("perf_mode") == "double_row" and len(st.shape) >= 3
            rows = st.shape[1] if double_row else 1  # [K / r, r, ...M]: the rule checks r
            return 2.0 * st.partitions * st.free_size * mv.free_size / rows
    if instr.opcode is Op.NC_MATMUL_MX:
        st, mv = instr.operand(STATIONARY), instr.operand(MOVING)
        if st is not None and mv is not None:
            return 2.0 * 4 * st.partitions * st.free_size * mv.free_size
    return 0.0


HARDWARE_FLOPS_SOURCE = (
    "aws-neuron-sdk tools/neuron-explorer/profile-schema-reference.rst (hardware_flops: 2 x "
    "active rows x active columns x elements per matmul instruction; transpose_flops: those of "
    "transposes); fp32 x2 measured: hw.sources.TKF_PROFILES (an fp32 nc_matmul issues as two "
    "MATMUL passes, fp32_mode=LOW_HIGH, and hardware_flops counts both; an fp32 transpose is one "
    "pass)"
)


def is_pe_transpose(instr: Instruction) -> bool:
    """A transpose on the Tensor engine (``nc_transpose``, or ``nc_matmul`` with
    ``is_transpose``)."""
    return instr.engine is Engine.TENSOR and (
        instr.opcode is Op.NC_TRANSPOSE
        or (instr.opcode is Op.NC_MATMUL and bool(instr.attr("is_transpose")))
    )


def hardware_flops(instr: Instruction) -> tuple[float, float]:
    """``(hardware FLOPs, transpose FLOPs)`` of one instruction, counted as neuron-profile
    counts them (``HARDWARE_FLOPS_SOURCE``): a matmul ``2 K M N`` (``matmul_flops``), twice
    that when an operand is fp32 (two passes); a Tensor-engine transpose of a ``[P, F]`` tile
    ``2 P F P`` (a pass against a ``P x P`` identity), in both figures. Other engines: none."""
    if instr.engine is not Engine.TENSOR:
        return 0.0, 0.0
    if is_pe_transpose(instr):
        instr = tensor_indirect_access(instr)
        data = instr.operand(DATA) or instr.operand(STATIONARY) or instr.src[0]
        t = 2.0 * data.partitions * data.free_size * data.partitions
        return t, t
    f = matmul_flops(instr)
    if f and any(dtype_class(o.dtype) == "fp32" for o in instr.src):
        f *= 2
    return f, 0.0


def dma_hbm_split(instr: Instruction, cost: DmaCost) -> tuple[int, int]:
    """``(HBM bytes read, HBM bytes written)`` of a DMA whose cost is ``cost``: its HBM
    sources and destinations (of the bytes moved: ``cost.hbm_bytes`` split by side)."""
    srcs = sum(1 for o in instr.src if o.memory == "hbm" and o.role != INDEX)
    dsts = sum(1 for o in instr.dst if o.memory == "hbm")
    if not srcs + dsts:
        return 0, 0
    if instr.attr("indirect") is None and instr.attr("ranks") is None:
        read = sum(o.nbytes for o in instr.src if o.memory == "hbm" and o.role != INDEX)
        return read, cost.hbm_bytes - read
    per = cost.hbm_bytes / (srcs + dsts)  # moved bytes on each HBM side (indirect, collectives)
    return int(per * srcs), cost.hbm_bytes - int(per * srcs)


def matmul_rate_class(instr: Instruction) -> str:
    """The tensor.rate key whose peak a matmul should be compared with (for MFU)."""
    st = instr.operand(STATIONARY)
    mv = instr.operand(MOVING)
    classes = {dtype_class(o.dtype) for o in (st, mv) if o is not None}
    if instr.opcode is Op.NC_MATMUL_MX:
        return "mxfp4" if classes == {"mxfp4"} else "mxfp8"
    if "fp32" in classes:
        return "fp32"
    if classes == {"fp8"} and instr.attr("perf_mode") == "double_row":
        return "fp8"
    return "bf16"


# ---- DMA ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DmaModel:
    """The DMA figures of one core in one chip, for one run.

    ``engines``, ``queues``, ``engine_bw``, ``fixed_latency_s`` and ``descriptor_s`` come from
    ``DmaSpec`` (the DMA bandwidth guide and the measured descriptor cost); ``efficiency``
    scales the engines' streaming rate (1.0: the documents' figures; a toolchain whose DMA
    reached less, such as the one the SDK 2.20 matmul tutorial was measured with, has its own
    fitted value in ``trnsim.core.calibration``); ``hbm_share``: HBM bandwidth available to this
    core (chip ``hbm_bw`` / cores active on the chip: HBM is shared by all cores of a chip).
    """

    engines: int
    queues: int
    engine_bw: float
    fixed_latency_s: float
    descriptor_s: float
    partitions: int
    efficiency: float
    hbm_share: float
    element_s: float = 0.0

    @property
    def core_bw(self) -> float:
        """Derived: engines x engine bandwidth x efficiency (streaming, long rows)."""
        return self.engines * self.engine_bw * self.efficiency

    def engine_seconds(self, nbytes: float, descriptors: int, row_s: float | None = None) -> float:
        """Engine time of ``descriptors`` descriptors moving ``nbytes`` in all: each pays
        ``descriptor_s`` (``row_s`` instead when given: an element-strided access's
        ``element_s`` per element), every byte ``1 / (engine_bw x efficiency)``."""
        each = self.descriptor_s if row_s is None else row_s
        return descriptors * each + nbytes / (self.engine_bw * self.efficiency)

    @staticmethod
    def for_core(
        spec: CoreSpec,
        chip: ChipSpec | None = None,
        active_cores: int = 1,
        efficiency: float | None = None,
    ) -> DmaModel:
        from trnsim.core.calibration import chip_of

        chip = chip or chip_of(spec)
        return DmaModel(
            engines=spec.dma.engines,
            queues=spec.dma.queues_per_engine,
            engine_bw=spec.dma.engine_bw,
            fixed_latency_s=spec.dma.fixed_latency_s,
            descriptor_s=spec.dma.descriptor_s,
            partitions=spec.partitions,
            efficiency=1.0 if efficiency is None else efficiency,
            hbm_share=chip.hbm_bw / max(1, active_cores),
            element_s=spec.dma.element_s,
        )


@dataclass(frozen=True, slots=True)
class DmaCost:
    """One transfer: ``latency_s`` before data moves (fixed cost), ``occupancy_s`` of the core's
    DMA bandwidth, ``duration_s`` of its own data phase (longer when few engines serve it),
    ``hbm_s`` of the chip's HBM bandwidth share, and the byte counts."""

    latency_s: float
    occupancy_s: float
    duration_s: float
    hbm_s: float
    nbytes: int
    hbm_bytes: int
    row_bytes: int
    engines: int

    @property
    def data_s(self) -> float:
        """Seconds from the start of the data phase to completion."""
        return max(self.duration_s, self.occupancy_s, self.hbm_s)


def contiguous_bytes(o: Operand) -> int:
    """Bytes of the innermost contiguous run of an operand (merging contiguous outer dims)."""
    run = 1
    for stride, size in reversed(o.pattern):
        if size == 1:
            continue
        if stride != run:
            break
        run *= size
    else:
        if o.memory == "hbm" and o.partition_pattern[0] == run:
            run *= o.partitions
    return run * o.itemsize


def element_strided(ops: tuple[Operand, ...]) -> bool:
    """A transposing (element-strided) access: an HBM operand contiguous for one element only
    (``contiguous_bytes`` == its item size) while an on-chip operand's partition rows hold
    more than one contiguous element, as ``nl.load_transpose2d`` makes. One descriptor holds
    the whole stride pattern (SDK ``nki-dge.rst``: a descriptor gives "the source address,
    destination address, transfer shape, and stride pattern"), so the engine pays
    ``DmaSpec.element_s`` per element, not a descriptor per element. A one-element-per-
    partition column (``[P, 1]``) is not element-strided: each partition is its own row."""
    hbm = [o for o in ops if o.memory == "hbm"]
    onchip = [o for o in ops if o.memory != "hbm"]
    return (
        any(contiguous_bytes(o) == o.itemsize for o in hbm)
        and bool(onchip)
        and all(contiguous_bytes(o) > o.itemsize for o in onchip)
    )


def dma_cost(instr: Instruction, model: DmaModel) -> DmaCost:
    """Cost of one DMA transfer (the DMA bandwidth guide's model, NEURON_DMA_GUIDE).

    A transfer is cut into descriptors, one per contiguous row (``row``: the shortest
    contiguous run of its operands, in practice the bytes per partition), spread over the
    engines that serve its partitions: ``engines_used = ceil(P / 8)`` of the 16 for a transfer
    touching P SBUF partitions. Each descriptor costs its engine ``descriptor_s`` plus its
    bytes over ``engine_bw x efficiency``, so bandwidth follows the guide's curve in the bytes
    per partition (``DmaSpec.row_efficiency``: about 68% at 256 B, 94% at 2 KiB, 97% at 4 KiB
    on v3). Then:
    ``latency = dma.fixed_latency_s`` (semaphore to first byte: ~1.3 us; a latency, the engines
    are free meanwhile);
    ``work = rows x descriptor_s + bytes / (engine_bw x efficiency)`` (engine-seconds);
    ``occupancy = work / engines`` of the core's DMA bandwidth (what queues share);
    ``duration = work / engines_used`` (the transfer's own data phase);
    ``hbm = hbm_bytes / hbm_share`` (reads plus writes of HBM).
    Indirect (gather/scatter) transfers: see ``indirect_dma_cost``.
    """
    if instr.attr("indirect") is not None:
        return indirect_dma_cost(instr, model)
    if instr.attr("ranks") is not None:
        return collective_cost(instr, model)
    nbytes = max((o.nbytes for o in instr.dst + instr.src), default=0)
    ops = instr.dst + instr.src
    row = min((contiguous_bytes(o) for o in ops), default=nbytes) or 1
    hbm = sum(o.nbytes for o in ops if o.memory == "hbm")
    strided = model.element_s and element_strided(ops)
    return _transfer(ops, nbytes, row, hbm, model, model.element_s if strided else None)


_CC_KIND = {
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all",
    "collective_permute": "permute",
    "all_gather_v": "all-gather",
    "all_to_all_v": "all-to-all",
    "collective_permute_implicit": "permute",
}
"""nki.collectives instruction -> the collective of ``trnsim.fabric.collectives`` (its bus
factor: bytes each rank moves per byte of the message)."""
COLLECTIVE_OPS = frozenset(Op(k) for k in _CC_KIND)
"""The ``nki.collectives`` instructions (every core of the launch issues each one)."""


def collective_cost(instr: Instruction, model: DmaModel) -> DmaCost:
    """Cost of one ``nki.collectives`` call on one rank (the cores of one launch): a ring over
    the replica group's ``n`` ranks, each step a DMA between the cores.

    ``latency = steps x dma.fixed_latency_s`` (a step waits for its semaphore like any DMA:
    ``2(n-1)`` steps for all-reduce, ``n-1`` for all-gather / reduce-scatter / all-to-all, 1
    for a permute); the data phase moves ``bus_factor(n) x message bytes`` (the message: the
    larger of src and dst) through ``_transfer`` (the core's DMA engines, rows, HBM share).
    Sources: ring factors ``trnsim.core.collops.OPS``; DMA figures ``trnsim.hw``
    (NEURON_DMA_GUIDE). The chip's collective-communication cores are not modelled apart
    from the DMA engines they drive (``trnsim.hw`` catalog note ``cc_cores``)."""
    n = max(1, len(instr.attr("ranks") or ()))
    kind = _CC_KIND[instr.opcode.value]
    ops = instr.dst + instr.src
    message = max((o.nbytes for o in ops), default=0)
    moved = int(canonical_op(kind).bus_factor(n) * message) if n > 1 else 0
    steps = 1 if kind == "permute" else (2 * (n - 1) if kind == "all-reduce" else n - 1)
    row = min((contiguous_bytes(o) for o in ops), default=message) or 1
    hbm = moved * sum(1 for o in ops if o.memory == "hbm")
    t = _transfer(ops, moved, row, hbm, model)
    return DmaCost(
        latency_s=max(1, steps) * model.fixed_latency_s,
        occupancy_s=t.occupancy_s,
        duration_s=t.duration_s,
        hbm_s=t.hbm_s,
        nbytes=moved,
        hbm_bytes=hbm,
        row_bytes=row,
        engines=t.engines,
    )


def indirect_dma_cost(instr: Instruction, model: DmaModel) -> DmaCost:
    """Cost of an indirect ``dma_copy`` (``.ap(vector_offset=...)`` gather/scatter or
    ``scalar_offset``): the static formula of ``dma_cost`` applied to the bytes actually moved.

    The recorded indexed operand names the whole indexed tensor (a conservative dependency
    region, ``trnsim.core.indirect``), so the moved bytes are those of the other side (the
    data operand). Assumption: **one DMA descriptor per gathered/scattered row** (per
    contiguous run of the static pattern inside one indexed row, attribute
    ``indirect_run_bytes``), each paying ``descriptor_s`` like the rows of a static
    transfer -- the DGE builds one descriptor per dynamic address (SDK ``nki-dge.rst``: a
    descriptor holds one source/destination address and stride pattern). The SWDGE descriptor
    generation time on GpSimd and the read of the index tile (4 bytes per index) are not
    modelled (no public figure). HBM traffic: the moved bytes on the indexed side, plus the
    data side's if it is in HBM too.
    """
    side = instr.attr("indirect")
    rmw = instr.attr("rmw_data")  # a dma_compute read-modify-write: its data source's role
    data = instr.operand(rmw or ("dst" if side == "src" else "src"))
    assert data is not None
    nbytes = data.nbytes
    run = instr.attr("indirect_run_bytes") or nbytes
    row = min(contiguous_bytes(data), run) or 1
    hbm_bytes = nbytes + (nbytes if data.memory == "hbm" else 0)
    if rmw is not None and side == "dst":  # a scatter RMW also reads the rows it rewrites
        hbm_bytes += nbytes
    return _transfer((data,), nbytes, row, hbm_bytes, model)


def _transfer(
    ops: tuple[Operand, ...],
    nbytes: int,
    row: int,
    hbm_bytes: int,
    model: DmaModel,
    row_s: float | None = None,
) -> DmaCost:
    """The formula of ``dma_cost`` for ``nbytes`` moved in contiguous rows of ``row`` bytes;
    ``ops`` give the SBUF partition count (partial-partition penalty). ``row_s``: the engine
    time of one row when it is not a descriptor's (an element-strided access's
    ``element_s``)."""
    rows = ceil(nbytes / row) if nbytes else 0
    work = model.engine_seconds(nbytes, rows, row_s)
    per_engine = model.partitions // model.engines
    onchip = [o.partitions for o in ops if o.memory != "hbm"]
    used = min(model.engines, ceil(max(onchip) / per_engine)) if onchip else model.engines
    return DmaCost(
        latency_s=model.fixed_latency_s,
        occupancy_s=work / model.engines,
        duration_s=work / used,
        hbm_s=hbm_bytes / model.hbm_share,
        nbytes=nbytes,
        hbm_bytes=hbm_bytes,
        row_bytes=row,
        engines=used,
    )
