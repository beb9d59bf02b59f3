"""Where the legacy ``neuronxcc.nki`` API (NKI <= 0.1, Neuron <= 2.26) differs from the new
``nki`` API (NKI 0.3 - 0.6), written once, as data. The legacy front end reads these tables;
everything else it does is a call of the new API's instruction (``trnsim.nki.isa``).

Sources: SDK 2.26 ``general/nki/api/nki/isa/__init__.py`` (enums, signatures),
``api/nki.api.shared.rst`` ("NKI Type Promotion", "Weakly Typed Scalar Type Inference"),
``api/nki/language/__init__.py`` (signatures, default dtypes); SDK HEAD
``nki/api/nki/isa/__init__.py`` (the new enums).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from trnsim.core.memory import HBM, PSUM, SBUF

# ---- enum numbering: legacy member -> (value in the legacy API, the new API member's name) ----

ENGINE = {
    "unknown": (0, "unknown"),
    "tensor": (1, "tensor"),
    "scalar": (2, "scalar"),
    "gpsimd": (3, "gpsimd"),
    "vector": (5, "vector"),
    "sync": (6, "sync"),
}
"""``nisa.engine``: same numbering in both APIs (the legacy one has no ``dma``)."""

DGE_MODE = {
    "none": (0, "none"),
    "swdge": (1, "swdge"),
    "hwdge": (2, "hwdge"),
    "unknown": (3, "unknown"),
}
"""``nisa.dge_mode``: legacy ``none=0 ... unknown=3``; new ``unknown=0 ... none=3``."""

REDUCE_CMD = {
    "idle": (0, "idle"),
    "reset": (1, "reset"),
    "reduce": (2, "reduce"),
    "reset_reduce": (3, "reset_reduce"),
    "load_reduce": (4, "load_reduce"),
}
"""``nisa.reduce_cmd``: same numbering. ``load_reduce`` is the SDK main branch's, which its
``nki/test`` files use through ``neuronxcc.nki.isa`` (``test_nki_isa_tensor_scalar_cumulative``);
2.26 has the first four."""

OOB_MODE = {"error": (0, "error"), "skip": (1, "skip")}

NC_VERSION = {"gen2": (2, "gen2"), "gen3": (3, "gen3")}
"""``nisa.nc_version``: the legacy API knows Trn1/Inf2 (gen2) and Trn2 (gen3) only; a gen4
target reports the new API's ``gen4``."""

# ---- buffers: legacy name -> core memory ----------------------------------------------------

BUFFERS = {
    "sbuf": SBUF,
    "psum": PSUM,
    "hbm": HBM,
    "shared_hbm": HBM,
    "private_hbm": HBM,
}

# ---- returned tiles: where a legacy call puts the tile it returns -----------------------------
#   memory of the new tile; dtype rule ("input": first tensor operand's, "promote": the type
#   promotion below, "fp32": float32, "bool": nl.bool_ (uint8)); memories the instruction may
#   write when its result is assigned straight into a target (else: issue, then copy); whether
#   it converts dtypes on the way.

RETURNS = {
    # call: (memory, dtype rule, direct-write memories, converts dtype)
    "nl.load": (SBUF, "input", (SBUF,), False),
    "nl.copy": (SBUF, "input", (SBUF, PSUM), True),
    "nl.matmul": (PSUM, "fp32", (PSUM,), True),
    "nisa.nc_matmul": (PSUM, "fp32", (PSUM,), True),
    "nl.transpose": (PSUM, "input", (PSUM, SBUF), True),
    "nisa.nc_transpose": (PSUM, "input", (PSUM, SBUF), True),
    # on the Tensor engine (more than 32x32, or engine=tensor) the result is a PSUM tile; an
    # assignment into SBUF copies it there (only the Vector engine writes SBUF directly)
    "nisa.nc_transpose@tensor": (PSUM, "input", (PSUM,), True),
    "elementwise": (SBUF, "promote", (SBUF, PSUM), True),
    "comparison": (SBUF, "bool", (SBUF, PSUM), True),
    "activation": (SBUF, "input", (SBUF, PSUM), True),
    "reduce": (SBUF, "input", (SBUF, PSUM), True),
    "iota": (SBUF, "given", (SBUF,), True),
    "memset": (SBUF, "given", (SBUF, PSUM), True),
    "bn_stats": (SBUF, "fp32", (SBUF,), True),
}

# ---- dtype promotion (legacy "NKI Type Promotion") ----------------------------------------------

_BF16 = np.dtype(ml_dtypes.bfloat16)
_F8E4 = np.dtype(ml_dtypes.float8_e4m3)
_F8E5 = np.dtype(ml_dtypes.float8_e5m2)
_F8E4FN = np.dtype(ml_dtypes.float8_e4m3fn)
F32 = np.dtype(np.float32)

PROMOTE_WIDENED = {
    frozenset({np.dtype(np.float16), _BF16}): F32,
    frozenset({_F8E4, _F8E5}): _BF16,
    frozenset({_F8E4FN, _F8E5}): _BF16,
    frozenset({np.dtype(np.int8), np.dtype(np.uint8)}): np.dtype(np.int16),
    frozenset({np.dtype(np.int8), np.dtype(np.uint16)}): np.dtype(np.int32),
    frozenset({np.dtype(np.int16), np.dtype(np.uint16)}): np.dtype(np.int32),
    frozenset({np.dtype(np.int32), np.dtype(np.uint32)}): F32,
}
"""Pairs whose promoted type is a new, wider type (the docs' "new widened type" rows)."""

FLOAT_WIDTH = {_F8E4: 1, _F8E5: 1, _F8E4FN: 1, np.dtype(np.float16): 2, _BF16: 2, F32: 4}

WEAK_SCALAR = {bool: np.dtype(np.uint8), int: np.dtype(np.int32), float: F32}
"""A Python scalar's dtype in promotion (legacy: the widest the hardware supports)."""

COMPARISON_DTYPE = np.dtype(np.uint8)
"""``nl.equal`` etc. default ``dtype=bool``: stored as uint8 (trnsim's ``nl.bool_``)."""


def _is_float(d: np.dtype) -> bool:
    return d in FLOAT_WIDTH or d.kind == "f"


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The legacy promoted dtype of two operand dtypes."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    widened = PROMOTE_WIDENED.get(frozenset({a, b}))
    if widened is not None:
        return widened
    fa, fb = _is_float(a), _is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        return a if FLOAT_WIDTH.get(a, a.itemsize) >= FLOAT_WIDTH.get(b, b.itemsize) else b
    # int, int: the wider; same width and mixed sign handled by PROMOTE_WIDENED
    if a.itemsize != b.itemsize:
        return a if a.itemsize > b.itemsize else b
    return np.promote_types(a, b)


def scalar_dtype(x: object) -> np.dtype:
    """A weakly typed scalar's dtype; a NumPy scalar keeps its own."""
    if isinstance(x, np.generic):
        return x.dtype
    for t in (bool, int, float):
        if isinstance(x, t):
            return WEAK_SCALAR[t]
    raise TypeError(type(x).__name__)


# ---- operator aliases: legacy names that are NumPy functions in the legacy docs -----------------

NUMPY_OPS = {
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "divide": "divide",
    "true_divide": "divide",
    "maximum": "maximum",
    "minimum": "minimum",
    "amax": "maximum",
    "amin": "minimum",
    "max": "maximum",
    "min": "minimum",
    "sum": "add",
    "power": "power",
    "equal": "equal",
    "not_equal": "not_equal",
    "greater": "greater",
    "greater_equal": "greater_equal",
    "less": "less",
    "less_equal": "less_equal",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
    "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "left_shift": "left_shift",
    "right_shift": "right_shift",
    "mod": "mod",
    "fmod": "fmod",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "abs": "abs",
    "absolute": "abs",
    "negative": "negative",
    "square": "square",
    "sign": "sign",
    "sin": "sin",
    "cos": "cos",
    "reciprocal": "reciprocal",
}
"""Legacy kernels pass NumPy functions as ALU operators (``op=np.add``, ``reduce_op=np.amax``,
``cmp_op=np.greater_equal``): NumPy name -> trnsim operator name."""

CMP_NAMES = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal",
             "==": "equal", "!=": "not_equal"}  # fmt: skip
"""A mask comparison -> the ALU comparison ``affine_select`` evaluates against 0."""

# ---- operands the legacy compiler moves for you ----------------------------------------------

STAGED = {
    "nl.store of a PSUM tile": "tensor_copy to a new SBUF tile, then dma_copy (DMA reads no PSUM)",
    "nl.matmul / nc_matmul of a PSUM operand": "tensor_copy to SBUF first (PE reads SBUF only)",
    "nl.matmul(transpose_x=False)": "nc_transpose of x to PSUM, tensor_copy to SBUF, then matmul",
    "partition broadcast [1, F] -> [P, F]": "float tiles: nc_matmul of a [1, P] row of ones by "
    "the row into PSUM, tensor_copy to SBUF (neuron-profile counts such 'partition broadcasts' "
    "as compiler-inserted matmuls); integer tiles: dma_copy to HBM scratch and back with "
    "stride 0",
    "on-chip [P] tile beside [P, F]": "treated as [P, 1] (broadcast along the free dims)",
    "t[i, ...] = x at a start partition compute engines refuse": "memset / tensor_copy into a "
    "new SBUF tile at partition 0, then dma_copy into place (DMA has no start-partition rule)",
}
"""Where the new API would refuse an operand and the legacy compiler inserts instructions; the
legacy front end issues the same instructions (so they are timed)."""

IGNORED_OPTIONS = {
    "save_neff_name": "written as trnsim's instruction summary (JSON), not a NEFF",
    "save_trace_name": "written as a Perfetto trace (JSON)",
    "additional_compile_opt": "no compiler on trnsim",
    "artifacts_dir": "no compiler on trnsim",
}
"""Options legacy kernels and scripts pass that have no effect on trnsim, and why."""

# ---- which new-API instruction (and engine) a legacy call becomes --------------------------------

LOWERING = {
    "nl.load / nl.store / nisa.dma_copy": ("dma_copy", "dma"),
    "nl.<unary math> (exp, tanh, ...)": ("activation", "scalar"),
    "nl.<binary> (add, multiply, ...) of two tiles": ("tensor_tensor", "unknown: core picks"),
    "nl.<binary> of a tile and a scalar or a [P, 1] tile": ("tensor_scalar", "unknown"),
    "nl.copy / nisa.tensor_copy": ("tensor_copy", "unknown: core picks"),
    "nl.sum / max / min / prod / all": ("tensor_reduce", "vector"),
    "nl.mean": ("tensor_reduce + tensor_scalar", "vector"),
    "nl.var": ("bn_stats + bn_aggr + tensor_copy", "vector"),
    "nl.matmul / nisa.nc_matmul": ("nc_matmul", "tensor"),
    "nisa.nc_matmul(is_transpose=True) on NeuronCore-v2": (
        "nc_matmul without the flag (2.26 docstring: a compiler hint; the Tensor engine's "
        "transpose mode starts at v3, so v2 computes stationary.T @ moving)",
        "tensor",
    ),
    "nl.transpose": ("nc_transpose", "tensor"),
    "nisa.nc_transpose": (
        "nc_transpose (engine= checked, then ignored, as the compilers before NKI 0.4.0 did)",
        "the core's choice by shape and output buffer",
    ),
    "nl.zeros / full in SBUF": ("memset", "unknown"),
    "nl.zeros in PSUM, then psum += matmul": ("(folded: the first nc_matmul overwrites)", "-"),
    "nl.where": ("tensor_copy + tensor_copy_predicated", "vector"),
    "nl.loop_reduce": ("tensor_tensor into the assigned tile (a copy if it is empty)", "vector"),
    "nl.softmax": ("tensor_reduce, activation (exp, sum), reciprocal, mult", "vector / scalar"),
    "psum_fp32[...] = nisa.nc_transpose(bf16)": ("nc_matmul of the data by an identity", "tensor"),
    "nisa.tensor_scalar_reduce": ("tensor_scalar + tensor_reduce", "vector"),
    "nl.rand": ("rand2 (min 0, max 1)", "vector"),
}
"""Legacy call -> (new-API instruction(s), engine). "unknown" passes ``engine.unknown`` and the
core chooses, as the legacy ``unknown_engine`` default lets the compiler choose."""
