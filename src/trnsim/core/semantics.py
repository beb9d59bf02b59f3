"""The specification of every instruction: one plain NumPy function each.

**The slow, obvious path is the specification.** Each function below takes the operands
already decoded to float32 (or raw integers for bit-exact ops) as ``[partition, free...]``
arrays plus the instruction's attributes, and returns float32 results; the machine
(``trnsim.core.machine``) does the decoding, the PSUM accumulation bookkeeping and the cast on
write (RNE or stochastic rounding through ``trnsim.numerics``). Any faster path must be tested
against these functions.

Choices where the hardware is not specified (documented, per DESIGN rule 3):

- Matmul accumulation inside the array is fp32 in an unspecified order; here it is NumPy's
  float32 ``matmul`` (pairwise/blocked), products of <= 16-bit inputs being exact in fp32.
- Activation functions are exact float32 NumPy functions, not the hardware's piecewise
  polynomial approximations (whose coefficients are not public).

Sources: the docstrings of ``nki/api/nki/isa/__init__.py`` (aws-neuron-sdk), summarised in
nki-notes.md section 1.4.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from trnsim.numerics.mx import floor_log2

F32 = np.float32

# ---------------------------------------------------------------------------------------------
# ALU operators (nki "aluop" table) and activation functions, as data
# ---------------------------------------------------------------------------------------------


def _f(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return fn


ARITH_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": lambda a, b: np.power(np.asarray(a, np.float64), np.asarray(b, np.float64)).astype(
        F32
    ),
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "equal": lambda a, b: (a == b).astype(F32),
    "not_equal": lambda a, b: (a != b).astype(F32),
    "greater": lambda a, b: (a > b).astype(F32),
    "greater_equal": lambda a, b: (a >= b).astype(F32),
    "less": lambda a, b: (a < b).astype(F32),
    "less_equal": lambda a, b: (a <= b).astype(F32),
    "logical_and": lambda a, b: np.logical_and(a, b).astype(F32),
    "logical_or": lambda a, b: np.logical_or(a, b).astype(F32),
    "logical_xor": lambda a, b: np.logical_xor(a, b).astype(F32),
    "fmod": np.fmod,
    "mod": np.mod,
}
# Bitvec operators work on raw integer bit patterns (no conversion).
BITVEC_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}
# Unary operators usable as tensor_scalar op0 (operand ignored).
UNARY_ALU_OPS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "square": np.square,
    "relu": lambda x: np.maximum(x, F32(0)),
    "rsqrt": lambda x: F32(1) / np.sqrt(x),
    "reciprocal": lambda x: F32(1) / x,
}
REDUCE_OPS: dict[str, Callable[..., np.ndarray]] = {
    "add": np.sum,
    "multiply": np.prod,
    "maximum": np.max,
    "minimum": np.min,
    "abs_max": lambda x, axis, keepdims: np.max(np.abs(x), axis=axis, keepdims=keepdims),
    "abs_min": lambda x, axis, keepdims: np.min(np.abs(x), axis=axis, keepdims=keepdims),
    "bitwise_and": np.bitwise_and.reduce,
    "bitwise_or": np.bitwise_or.reduce,
    "bitwise_xor": np.bitwise_xor.reduce,
}
REDUCE_IDENTITY: dict[str, float] = {
    "add": 0.0,
    "multiply": 1.0,
    "maximum": -np.inf,
    "minimum": np.inf,
    "abs_max": 0.0,
    "abs_min": np.inf,
}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(F32)


def _f64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """``fn`` evaluated in float64 and rounded once to fp32. The transcendental functions
    are computed so (trnsim's choice: the hardware's approximations are not public): NumPy's
    float32 ``exp``/``tanh``/... differ from the correctly rounded value by up to 2 ulps
    depending on the host CPU's SIMD path and NumPy's version (measured: 39 % of float32
    ``exp`` values off by 1-2 ulps with NumPy 2.4 on AVX-512), which would make a kernel's
    output depend on the machine; float64 then one rounding is correctly rounded except in
    vanishingly rare double-rounding cases, on any host."""

    def f(x: np.ndarray) -> np.ndarray:
        return fn(np.asarray(x, dtype=np.float64)).astype(F32)

    return f


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x * x * x)))


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_sigmoid = _f64(_sigmoid64)


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx x * Phi(x) = Phi(x) + x * phi(x) (float64 in, the caller rounds)."""
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(
        2.0 * math.pi
    )


def _sigmoid_gate_dx(x: np.ndarray, a: float) -> np.ndarray:
    """d/dx x * sigmoid(a x) = s + a x s (1 - s), s = sigmoid(a x) (silu: a = 1); float64
    in and out (the caller rounds once)."""
    s = _sigmoid64(a * x)
    return s + a * x * s * (1.0 - s)


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "exp": _f64(np.exp),
    "log": _f64(np.log),
    "sqrt": np.sqrt,
    "rsqrt": lambda x: F32(1) / np.sqrt(x),
    "reciprocal": lambda x: F32(1) / x,
    "square": np.square,
    "abs": np.abs,
    "negative": np.negative,
    "sign": np.sign,
    "tanh": _f64(np.tanh),
    "sin": _f64(np.sin),
    "cos": _f64(np.cos),
    "tan": _f64(np.tan),
    "arctan": _f64(np.arctan),
    "ceil": np.ceil,
    "floor": np.floor,
    "trunc": np.trunc,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, F32(0)),
    # PReLU with its slope 0 (activation has no relu_param); activate2 passes relu_param
    "prelu": lambda x: np.maximum(x, F32(0)),
    "silu": _f64(lambda x: x * _sigmoid64(x)),
    "gelu": _gelu,
    "gelu_apprx_tanh": _f64(_gelu_tanh),
    "gelu_apprx_sigmoid": _f64(lambda x: x * _sigmoid64(1.702 * x)),
    "softplus": _f64(lambda x: np.logaddexp(0.0, x)),
    "mish": _f64(lambda x: x * np.tanh(np.logaddexp(0.0, x))),
    "erf": lambda x: _erf(x.astype(np.float64)).astype(F32),
    # the derivatives the activation table lists (SDK nki/api/nki.api.shared.rst, "Gelu
    # Derivative", "Silu Derivative", ...): the calculus of the functions above
    "gelu_dx": lambda x: _gelu_dx(x.astype(np.float64)).astype(F32),
    "gelu_apprx_sigmoid_dx": _f64(lambda x: _sigmoid_gate_dx(x, 1.702)),
    "silu_dx": _f64(lambda x: _sigmoid_gate_dx(x, 1.0)),
    "erf_dx": lambda x: (2.0 / math.sqrt(math.pi) * np.exp(-(x.astype(np.float64) ** 2))).astype(
        F32
    ),
}


def alu(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One binary ALU operator in fp32 (bitvec operators on the raw integers)."""
    if op in BITVEC_OPS:
        return BITVEC_OPS[op](a, b)
    with np.errstate(all="ignore"):
        return np.asarray(ARITH_OPS[op](a, b))


# ---------------------------------------------------------------------------------------------
# Tensor engine
# ---------------------------------------------------------------------------------------------


def nc_matmul(
    stationary: np.ndarray,
    moving: np.ndarray,
    double_row: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``dst[M, N] = stationary[K, M].T @ moving[K, N]`` in fp32.

    ``double_row``: stationary ``[K, 2, M]`` and moving ``[K, 2, N]`` contract over K x 2.
    ``out``: a C-contiguous float32 ``[M, N]`` array to hold the result (the same BLAS call).
    """
    if double_row:
        k = stationary.shape[0]
        stationary = stationary.reshape(k * 2, -1)
        moving = moving.reshape(k * 2, -1)
    else:
        stationary = stationary.reshape(stationary.shape[0], -1)
        moving = moving.reshape(moving.shape[0], -1)
    # contiguous fp32 copies keep NumPy on its BLAS path (strided views fall off it)
    return np.matmul(
        np.ascontiguousarray(stationary.T, F32), np.ascontiguousarray(moving, F32), out=out
    )


def nc_transpose(data: np.ndarray) -> np.ndarray:
    """``dst[F, P] = data[P, F]`` (free dims flattened first)."""
    return np.ascontiguousarray(data.reshape(data.shape[0], -1).T)


def mx_scale_rows(partitions: int) -> np.ndarray:
    """Scale-tile partition of each 8-partition group of an MX data tile of ``partitions``.

    Group ``g`` (partitions ``8g..8g+7``) has its scales at partition ``(g // 4) * 32 + g % 4``:
    four scale rows at the start of each 32-partition quadrant (``quantize_mx`` docstring).
    """
    g = np.arange(partitions // 8)
    return (g // 4) * 32 + g % 4


def nc_matmul_mx(
    stationary: np.ndarray,
    moving: np.ndarray,
    stationary_scale: np.ndarray,
    moving_scale: np.ndarray,
) -> np.ndarray:
    """MX matmul: ``stationary [K, M, 4]`` and ``moving [K, N, 4]`` decoded element values
    (x4 words unpacked along the last axis); scales ``[K/8 groups, M]`` / ``[K/8, N]`` as
    exponents already decoded to powers of two. Each 8-partition x 4-element group shares one
    scale. ``dst[M, N] = sum_{k, q} stat[k, m, q] * s_stat[k//8, m] * mov[k, n, q] * s_mov``.
    """
    ks = stationary.shape[0]
    s_stat = np.repeat(stationary_scale, 8, axis=0)[:ks, :, None]
    s_mov = np.repeat(moving_scale, 8, axis=0)[:ks, :, None]
    a = (stationary * s_stat).astype(np.float64)
    b = (moving * s_mov).astype(np.float64)
    return np.einsum("kiq,kjq->ij", a, b).astype(F32)


def quantize_mx(src: np.ndarray, emax: int, element_max: float) -> tuple[np.ndarray, np.ndarray]:
    """MX quantization of ``src [P, F]`` over groups of 8 partitions x 4 elements.

    Returns (values scaled into the element range, still fp32, shape ``[P, F]``; scale
    exponents as e8m0 codes, shape ``[P/8, F/4]``). NKI's rule (0.5.0+, ``quantize_mx``
    docstring): ``scale = 2^(floor(log2(amax)) - (emax - 1))``, i.e. 2x the OCP scale; an
    all-zero group gets code 0 (2^-127). Values are divided by the scale; the cast to the
    element format (RNE, saturating) is done on write.
    """
    p, f = src.shape
    groups = np.abs(src.astype(F32)).reshape(p // 8, 8, f // 4, 4)
    amax = groups.max(axis=(1, 3))
    # floor(log2(amax)) exactly (numerics.mx.floor_log2, as numerics.mx.quantize's scale rule);
    # np.log2 rounds values just below a power of two up to it (a scale 2x too large)
    finite = np.isfinite(amax) & (amax > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(finite, floor_log2(np.where(finite, amax, 1.0)), np.log2(amax))
    exp = np.where(amax > 0, e - (emax - 1), -127.0)
    exp = np.clip(exp, -127, 127)
    codes = (exp + 127).astype(np.uint8)
    scale = np.exp2(np.repeat(np.repeat(exp, 8, axis=0), 4, axis=1)).astype(np.float64)
    scaled = np.clip(src.astype(np.float64) / scale, -element_max, element_max)
    return scaled.astype(F32), codes


# ---------------------------------------------------------------------------------------------
# Scalar engine
# ---------------------------------------------------------------------------------------------


def activation(
    op: str,
    data: np.ndarray,
    bias: np.ndarray | None = None,
    scale: float | np.ndarray = 1.0,
    reduce_op: str | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``out = op(data * scale + bias)`` with scale a constant or ``[P, 1]``, bias ``[P, 1]``;
    optionally a free-dim reduction of ``out`` (``[P, 1]``)."""
    x = data.reshape(data.shape[0], -1).astype(F32)
    x = x * (np.asarray(scale, dtype=F32).reshape(-1, 1) if np.ndim(scale) else F32(scale))
    if bias is not None:
        x = x + bias.reshape(-1, 1).astype(F32)
    with np.errstate(all="ignore"):
        out = ACTIVATIONS[op](x).astype(F32)
    red = None
    if reduce_op is not None:
        red = REDUCE_OPS[reduce_op](out, axis=1, keepdims=True).astype(F32)
    return out, red


def activate2(
    op: str,
    data: np.ndarray,
    op0: str,
    imm0: float | np.ndarray,
    op1: str,
    imm1: float | np.ndarray,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op: str | None = None,
    relu_param: float | np.ndarray = 0.0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``out = op((data op0 imm0) op1 imm1)``; ``bypass`` skips a stage. ``relu_param``: the
    negative slope of ``prelu`` (a constant or ``[P, 1]``): ``x`` where ``x >= 0``, else
    ``relu_param * x`` (``activate2`` docstring, "parameterized activation functions (e.g.,
    PReLU)")."""
    x = data.reshape(data.shape[0], -1).astype(F32)
    for o, imm, rev in ((op0, imm0, reverse0), (op1, imm1, reverse1)):
        if o == "bypass":
            continue
        v = np.asarray(imm, dtype=F32).reshape(-1, 1) if np.ndim(imm) else F32(imm)
        x = alu(o, v, x) if rev else alu(o, x, v)
    with np.errstate(all="ignore"):
        if op == "prelu":
            a = (
                np.asarray(relu_param, dtype=F32).reshape(-1, 1)
                if np.ndim(relu_param)
                else F32(relu_param)
            )
            out = np.where(x >= 0, x, (a * x).astype(F32)).astype(F32)
        else:
            out = ACTIVATIONS[op](x.astype(F32)).astype(F32)
    red = REDUCE_OPS[reduce_op](out, axis=1, keepdims=True) if reduce_op else None
    return out, red


# ---------------------------------------------------------------------------------------------
# Vector engine
# ---------------------------------------------------------------------------------------------


def exponential(
    src: np.ndarray, max_value: float | np.ndarray = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """``dst = exp(src - max_value)`` (max a constant or ``[P, 1]``); also the row sums."""
    x = src.reshape(src.shape[0], -1).astype(F32)
    m = np.asarray(max_value, dtype=F32).reshape(-1, 1) if np.ndim(max_value) else F32(max_value)
    with np.errstate(all="ignore"):
        out = ACTIVATIONS["exp"](x - m)
    return out, out.sum(axis=1, keepdims=True, dtype=F32)


def tensor_tensor(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return alu(op, a, b)


def tensor_scalar(
    data: np.ndarray,
    op0: str,
    operand0: float | np.ndarray | None,
    reverse0: bool = False,
    op1: str | None = None,
    operand1: float | np.ndarray | None = None,
    reverse1: bool = False,
) -> np.ndarray:
    """``(data op0 operand0) op1 operand1``; operands are constants or ``[P, 1]`` vectors."""
    x = data.reshape(data.shape[0], -1)
    for o, v, rev in ((op0, operand0, reverse0), (op1, operand1, reverse1)):
        if o is None:
            continue
        if o in UNARY_ALU_OPS:
            with np.errstate(all="ignore"):
                x = UNARY_ALU_OPS[o](x)
            continue
        if np.ndim(v):
            w = np.asarray(v).reshape(-1, 1)
        else:
            w = np.asarray(v, dtype=x.dtype if o in BITVEC_OPS else F32)
        x = alu(o, w, x) if rev else alu(o, x, w)
    return x


def tensor_reduce(
    op: str, data: np.ndarray, axes: tuple[int, ...], negate: bool = False, keepdims: bool = False
) -> np.ndarray:
    out = np.asarray(REDUCE_OPS[op](data, axis=axes, keepdims=keepdims))
    return -out if negate else out


def tensor_partition_reduce(op: str, data: np.ndarray) -> np.ndarray:
    """Reduce across partitions: ``[P, F] -> [1, F]``."""
    return np.asarray(REDUCE_OPS[op](data, axis=0, keepdims=True))


def tensor_tensor_scan(
    data0: np.ndarray,
    data1: np.ndarray,
    initial: np.ndarray | float,
    op0: str,
    op1: str,
    reverse0: bool = False,
    reverse1: bool = False,
) -> np.ndarray:
    """Per partition, along the free dim (``tensor_tensor_scan`` docstring):
    ``acc = op1(op0(data0[i], acc), data1[i])``; ``reverse0`` swaps the operands of op0
    (``op0(acc, data0[i])``), ``reverse1`` those of op1 (``op1(data1[i], ...)``)."""
    d0 = data0.reshape(data0.shape[0], -1).astype(F32)
    d1 = data1.reshape(d0.shape).astype(F32)
    acc = np.broadcast_to(np.asarray(initial, dtype=F32).reshape(-1), (d0.shape[0],)).copy()
    out = np.empty_like(d0)
    for i in range(d0.shape[1]):
        t = alu(op0, acc, d0[:, i]) if reverse0 else alu(op0, d0[:, i], acc)
        acc = (alu(op1, d1[:, i], t) if reverse1 else alu(op1, t, d1[:, i])).astype(F32)
        out[:, i] = acc
    return out


def scalar_tensor_tensor(
    data: np.ndarray,
    op0: str,
    operand0: float | np.ndarray,
    op1: str,
    operand1: np.ndarray,
    reverse0: bool = False,
    reverse1: bool = False,
) -> np.ndarray:
    """``(data op0 operand0) op1 operand1`` with operand1 a full tensor."""
    x = tensor_scalar(data, op0, operand0, reverse0)
    o1 = operand1.reshape(x.shape)
    return alu(op1, o1, x) if reverse1 else alu(op1, x, o1)


def reciprocal(data: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (F32(1) / data.astype(F32)).astype(F32)


def iota(
    partitions: int, pattern: list[tuple[int, int]], offset: int, channel_multiplier: int
) -> np.ndarray:
    """``value[p, i...] = offset + p * channel_multiplier + sum(i_k * step_k)`` in int32."""
    val = np.full((partitions, *(n for _, n in pattern)), offset, dtype=np.int64)
    val += (np.arange(partitions) * channel_multiplier).reshape(-1, *([1] * len(pattern)))
    for k, (step, n) in enumerate(pattern):
        shape = [1] * (len(pattern) + 1)
        shape[k + 1] = n
        val += (np.arange(n) * step).reshape(shape)
    return val.astype(np.int32)


def bn_stats(data: np.ndarray) -> np.ndarray:
    """``[P, F] -> [P, 6]``: (count, mean, count*var) of the even and of the odd elements."""
    x = data.reshape(data.shape[0], -1).astype(np.float64)
    out = []
    for part in (x[:, 0::2], x[:, 1::2]):
        n = part.shape[1]
        mean = part.mean(axis=1) if n else np.zeros(x.shape[0])
        m2 = ((part - mean[:, None]) ** 2).sum(axis=1)
        out += [np.full(x.shape[0], n, dtype=np.float64), mean, m2]
    return np.stack(out, axis=1).astype(F32)


def bn_aggr(stats: np.ndarray) -> np.ndarray:
    """``[P, 6k] -> [P, 2]``: (mean, variance) of all the groups of ``bn_stats`` output."""
    s = stats.reshape(stats.shape[0], -1, 3).astype(np.float64)
    n, mean, m2 = s[..., 0], s[..., 1], s[..., 2]
    total = n.sum(axis=1)
    mu = (n * mean).sum(axis=1) / total
    var = (m2 + n * (mean - mu[:, None]) ** 2).sum(axis=1) / total
    return np.stack([mu, var], axis=1).astype(F32)


def max8(src: np.ndarray) -> np.ndarray:
    """The 8 largest values of each partition, in descending order."""
    x = src.reshape(src.shape[0], -1)
    return -np.sort(-x, axis=1)[:, :8]


def nc_find_index8(data: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Index of the first occurrence of each of the 8 ``vals`` in each partition of ``data``;
    all-ones (0xFFFFFFFF) where a value does not occur (NKI 0.6.0 release notes). A value
    given in several slots takes its successive occurrences, in ascending order across the
    slots (the ``nc_match_replace8`` docstring: find_index8 "pairs duplicate vals with their
    matching positions in ascending order across dst_idx columns"); slots past the last
    occurrence are unmatched."""
    x = data.reshape(data.shape[0], -1)
    v = vals.reshape(vals.shape[0], -1)[:, :8]
    out = np.full(v.shape, 0xFFFFFFFF, dtype=np.uint32)
    for p in range(x.shape[0]):
        taken: dict[float, int] = {}
        for j in range(v.shape[1]):
            hits = np.flatnonzero(x[p] == v[p, j])
            n = taken.get(v[p, j].item(), 0)
            if n < hits.size:
                out[p, j] = hits[n]
            taken[v[p, j].item()] = n + 1
    return out


def affine_select(
    data: np.ndarray,
    pattern: list[tuple[int, int]],
    offset: int,
    channel_multiplier: int,
    cmp_op: str,
    on_false_value: float,
) -> np.ndarray:
    """Keep ``data`` where ``(iota value) cmp_op 0`` holds, else ``on_false_value``."""
    idx = iota(data.shape[0], pattern, offset, channel_multiplier).astype(F32)
    keep = alu(cmp_op, idx.reshape(data.shape[0], -1), F32(0)).astype(bool)
    return np.where(keep, data.reshape(keep.shape), F32(on_false_value)).astype(F32)


def range_select(
    data: np.ndarray,
    comp_op0: str,
    comp_op1: str,
    bound0: np.ndarray,
    bound1: np.ndarray,
    range_start: float,
    fill: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``range_select`` docstring's NumPy equivalent; reduction is max along the free dim."""
    x = data.reshape(data.shape[0], -1).astype(F32)
    idx = (F32(range_start) + np.arange(x.shape[1], dtype=F32))[None, :]
    mask = alu(comp_op0, idx, bound0.reshape(-1, 1)).astype(bool) & alu(
        comp_op1, idx, bound1.reshape(-1, 1)
    ).astype(bool)
    out = np.where(mask, x, F32(fill)).astype(F32)
    return out, out.max(axis=1, keepdims=True)


def tensor_copy_predicated(
    dst: np.ndarray, src: np.ndarray, predicate: np.ndarray, reverse: bool = False
) -> np.ndarray:
    """``dst`` with ``src`` copied in where ``predicate`` is non-zero (zero if ``reverse``)."""
    pred = predicate.reshape(dst.shape) != 0
    if reverse:
        pred = ~pred
    return np.where(pred, np.broadcast_to(src, dst.shape) if np.ndim(src) else src, dst)


def select_reduce(
    predicate: np.ndarray,
    on_true: np.ndarray,
    on_false: float | np.ndarray,
    reverse_pred: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``select_reduce`` docstring: ``where(predicate != 0, on_true, on_false)`` (predicate
    negated if ``reverse_pred``; ``on_false`` a constant or ``[P, 1]``) and its row max."""
    t = on_true.reshape(on_true.shape[0], -1).astype(F32)
    pred = predicate.reshape(t.shape) != 0
    if reverse_pred:
        pred = ~pred
    f = np.asarray(on_false, dtype=F32).reshape(-1, 1) if np.ndim(on_false) else F32(on_false)
    out = np.where(pred, t, f).astype(F32)
    return out, out.max(axis=1, keepdims=True)


# ---- XORWOW PRNG (rand2 / rand_set_state / rand_get_state) ----------------------------------
# NeuronCore-v4 Vector engine: 4 XORWOW generators per lane (partition), 6 uint32 of state each
# (nki-notes 5; rand_set_state docstring: 24 elements per partition on Vector). XORWOW is
# Marsaglia's (2003, "Xorshift RNGs", p. 5): five xorshift words x, y, z, w, v and a Weyl
# counter d += 362437; output v + d. Not public, chosen by trnsim: state order
# (x, y, z, w, v, d) per generator, generator-major (element 6g + j of a lane); element i of a
# lane's output comes from generator i % 4; a uniform float is (u >> 8) * 2^-24 in [0, 1)
# mapped to [min, max) as min + f * (max - min).
XORWOW_GENERATORS = 4
XORWOW_WORDS = 6
XORWOW_WEYL = np.uint32(362437)


def xorwow_step(state: np.ndarray) -> np.ndarray:
    """Advance every generator of ``state [..., 6]`` (uint32) by one draw, in place; return the
    32-bit outputs ``[...]``."""
    x = state[..., 0]
    t = x ^ (x >> np.uint32(2))
    state[..., 0:4] = state[..., 1:5]
    v = state[..., 4]
    v = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
    state[..., 4] = v
    state[..., 5] += XORWOW_WEYL
    return state[..., 4] + state[..., 5]


def xorwow_seed_state(seed: int, core: int, partitions: int) -> np.ndarray:
    """The power-on PRNG state ``[partitions, 4, 6]`` uint32 of a core: splitmix64 of (seed,
    core, lane, generator, word), with x..v never all zero. Deterministic per (seed, core)."""
    idx = np.arange(partitions * XORWOW_GENERATORS * XORWOW_WORDS, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(core) << np.uint64(48))
        z = z + (idx + np.uint64(1)) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    st = (z & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    st = st.reshape(partitions, XORWOW_GENERATORS, XORWOW_WORDS)
    st[..., 0] |= np.uint32(1)  # x != 0: the xorshift part never sticks at zero
    return st


def xorwow_bits(state: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` 32-bit draws per lane from the XORWOW ``state [P, 4, 6]``: element ``i`` of a lane
    from generator ``i % 4``; returns (bits ``[P, n]`` uint32, the advanced state)."""
    st = state.copy()
    p = st.shape[0]
    draws = -(-n // XORWOW_GENERATORS)
    bits = np.empty((p, draws, XORWOW_GENERATORS), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for i in range(draws):
            bits[:, i, :] = xorwow_step(st)
    return bits.reshape(p, -1)[:, :n], st


def xorwow_uniform(state: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform floats ``(u >> 8) * 2^-24`` in [0, 1) per lane (float64), and the state."""
    u, st = xorwow_bits(state, n)
    return (u >> np.uint32(8)).astype(np.float64) * 2.0**-24, st


def rand2(
    state: np.ndarray, n: int, lo: float | np.ndarray, hi: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform floats per lane in ``[lo, hi)`` (constants or ``[P, 1]``) from the XORWOW
    ``state [P, 4, 6]``; returns (values ``[P, n]`` fp32, the advanced state)."""
    f, st = xorwow_uniform(state, n)
    lo64 = np.asarray(lo, dtype=np.float64).reshape(-1, 1) if np.ndim(lo) else float(lo)
    hi64 = np.asarray(hi, dtype=np.float64).reshape(-1, 1) if np.ndim(hi) else float(hi)
    return (lo64 + f * (hi64 - lo64)).astype(F32), st


def rng(state: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``nisa.rng``: 32 random bits per element of a ``[P, F]`` dst from the Vector engine's
    XORWOW ``state`` (the draw order of ``rand2``); the dst keeps the least significant bits of
    each (the write's integer truncation). Returns (bits uint32, the advanced state)."""
    return xorwow_bits(state, shape[1])


def dropout(
    data: np.ndarray, prob: float | np.ndarray, state: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``nisa.dropout``: each element of ``data [P, F]`` (raw values, any dtype) becomes zero
    with probability ``prob`` (a constant or ``[P, 1]``), else keeps its bits. trnsim's choice:
    element ``(p, i)`` is dropped when the ``i``-th uniform draw of lane ``p`` (``xorwow_uniform``,
    in [0, 1)) is below ``prob``, so ``prob`` 0 keeps every element and 1 drops every one.
    Returns (values, the advanced state)."""
    f, st = xorwow_uniform(state, data.shape[1])
    p = np.asarray(prob, dtype=np.float64)
    drop = f < (p.reshape(-1, 1) if p.ndim else float(p))
    return np.where(drop, np.zeros((), data.dtype), data), st


def set_rng_seed(src_seeds: np.ndarray, state: np.ndarray) -> np.ndarray:
    """``nisa.set_rng_seed``: the Vector engine's whole XORWOW state from one 32-bit seed
    (``src_seeds [1, 1]``, its bits as uint32), by ``xorwow_seed_state(seed, 0, lanes)``
    (trnsim's choice: the same seed gives the same sequence on every core)."""
    seed = int(np.ascontiguousarray(src_seeds).reshape(-1)[:1].view(np.uint32)[0])
    return xorwow_seed_state(seed, 0, state.shape[0])


def local_gather(
    src: np.ndarray,
    index: np.ndarray,
    group: int,
    elem_per_idx: int,
    num_valid: int | None = None,
) -> np.ndarray:
    """GpSimd gather: each core serves ``group`` (16) contiguous partitions independently.

    A core flattens its partitions' index slice partition-dim first (column-major) and keeps
    the first ``num_valid`` indices (default: all of them). Each index is an element offset
    into a partition's own free dims (flattened); it picks ``elem_per_idx`` consecutive
    elements there. Every partition of the group gathers with the same indices from its own
    data: the result is ``(P, num_valid * elem_per_idx)``. Source: SDK ``nki.isa.local_gather``
    docstring and its NumPy reference ``nki/test/test_nki_isa_local_gather.py``.
    """
    p = src.shape[0]
    x = src.reshape(p, -1)
    idx = index.reshape(index.shape[0], -1).astype(np.int64)
    per_core = group * idx.shape[1]
    n = per_core if num_valid is None else int(num_valid)
    if not 0 < n <= per_core:
        raise ValueError(f"num_valid_indices {n} outside 1..{per_core} (indices per core)")
    out = np.empty((p, n * elem_per_idx), dtype=x.dtype)
    for g0 in range(0, p, group):
        ids = idx[g0 : g0 + group].reshape(-1, order="F")[:n]
        picks = (ids[:, None] + np.arange(elem_per_idx)).reshape(-1)
        out[g0 : g0 + group] = x[g0 : g0 + group][:, picks]
    return out


def dma_transpose(src: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(src, axes))


# ---- issue 13: the rest of the NKI 0.6 ISA (docstrings of nki/api/nki/isa/__init__.py) --------


def _acc_start(
    cmd: str, op: str, rows: int, acc: np.ndarray | None, init: float | np.ndarray | None
) -> np.ndarray:
    """The accumulator a ``reduce_cmd`` starts from: reset to the identity of ``op``, loaded
    from ``init`` (a constant or ``[P, 1]``), or continued (``reduce``: the one left by the
    previous accumulating Vector instruction, which must cover the same partitions)."""
    from trnsim.core.argrules import broken

    if cmd == "reset_reduce":
        ident = 0.0 if op == "subtract" else REDUCE_IDENTITY[op]  # cumulative docstring
        return np.full((rows, 1), ident, dtype=F32)
    if cmd == "load_reduce":
        if init is None:
            raise broken(
                "reduce-init-value", "reduce_cmd=load_reduce needs an initial value, got None"
            )
        return np.broadcast_to(np.asarray(init, dtype=F32).reshape(-1, 1), (rows, 1)).copy()
    if acc is None or acc.shape != (rows, 1):
        have = "none" if acc is None else f"{acc.shape[0]} partitions"
        raise broken(
            "reduce-continue",
            f"reduce_cmd=reduce continues the Vector engine's accumulation over {rows} "
            f"partitions, but the accumulator holds {have} (reset_reduce or load_reduce first)",
        )
    return acc.astype(F32)


def scalar_reduce_regs(
    cmd: str, op: str | None, red: np.ndarray | None, regs: np.ndarray | None, rows: int
) -> np.ndarray | None:
    """The Scalar engine's ``reduce_regs`` (one fp32 register per partition) after an
    ``activation`` / ``activate2`` with ``reduce_cmd`` ``cmd`` (``activation`` docstring):
    ``reset`` zeroes them; ``reset_reduce`` zeroes them and stores this instruction's free-dim
    reduction ``red``; ``reduce`` reduces ``red`` onto them with ``op`` (the docstring's text,
    "reduce activated data over existing values"; its pseudocode's ``reduce_regs += result``
    with ``result`` already holding ``reduce_regs`` would count them twice); ``idle`` leaves
    them. ``reduce`` needs registers over the same partitions."""
    from trnsim.core.argrules import broken

    if cmd == "idle":
        return regs
    if cmd == "reset":
        return np.zeros((rows, 1), dtype=F32)
    if red is None or op is None:
        raise broken(
            "scalar-reduce-op", f"reduce_cmd={cmd} reduces the activated data: give reduce_op"
        )
    if cmd == "reset_reduce":
        return red.astype(F32)
    if regs is None or regs.shape != (rows, 1):
        have = "none" if regs is None else f"{regs.shape[0]} partitions"
        raise broken(
            "scalar-reduce-continue",
            f"reduce_cmd=reduce continues the Scalar engine's reduce_regs over {rows} "
            f"partitions, but they hold {have} (reset or reset_reduce first)",
        )
    return REDUCE_OPS[op](np.concatenate([regs, red], axis=1), axis=1, keepdims=True).astype(F32)


def _imm(x: float | np.ndarray | None) -> float | np.ndarray:
    return F32(0) if x is None else (np.asarray(x, F32).reshape(-1, 1) if np.ndim(x) else F32(x))


def tensor_scalar_reduce(
    data: np.ndarray,
    operand0: float | np.ndarray | None,
    op0: str,
    reduce_op: str,
    reduce_cmd: str,
    reduce_init: float | np.ndarray | None,
    reduce_res_negate: bool,
    acc: np.ndarray | None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``tensor_scalar_reduce``: ``dst = data <op0> operand0`` (``operand0`` a constant or
    ``[P, 1]``; a unary ``op0`` ignores it) and the accumulators ``acc = reduce_op(acc,
    reduce_op over the free axis of dst)`` from the start ``reduce_cmd`` selects;
    ``reduce_res`` gets ``acc`` (negated if ``reduce_res_negate``, the accumulators not).
    Returns ({dst, reduce_res}, the new accumulators)."""
    x = data.astype(F32)
    if op0 in UNARY_ALU_OPS:
        out = UNARY_ALU_OPS[op0](x).astype(F32)
    else:
        out = alu(op0, x, _imm(operand0)).astype(F32)
    start = _acc_start(reduce_cmd, reduce_op, x.shape[0], acc, reduce_init)
    part = REDUCE_OPS[reduce_op](out, axis=1, keepdims=True).astype(F32)
    new = alu(reduce_op, start, part).astype(F32)
    return {"dst": out, "reduce_res": -new if reduce_res_negate else new}, new


def tensor_scalar_cumulative(
    src: np.ndarray,
    imm0: float | np.ndarray | None,
    imm1: float | np.ndarray | None,
    op0: str,
    op1: str,
    reduce_cmd: str,
    acc: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``tensor_scalar_cumulative``: per partition, ``reg`` starts as ``reduce_cmd`` says
    (the identity of ``op1``, ``imm1``, or the accumulator left before), then for each
    element ``i`` in order ``reg = op1(op0(src[i], imm0), reg)`` and ``dst[i] = reg`` (the
    docstring's pseudocode, operands in its order). Returns (dst, the final ``reg``)."""
    x = alu(op0, src.astype(F32), _imm(imm0)).astype(F32)
    reg = _acc_start(reduce_cmd, op1, x.shape[0], acc, imm1)[:, 0]
    out = np.empty_like(x)
    for i in range(x.shape[1]):
        reg = alu(op1, x[:, i], reg).astype(F32)
        out[:, i] = reg
    return out, reg.reshape(-1, 1).copy()


STREAM_SHUFFLE_QUADRANT = 32
"""Partitions a stream shuffle permutes within (nc_stream_shuffle docstring)."""
STREAM_SHUFFLE_KEEP = 255
"""The mask value that leaves a destination partition unmodified."""


def nc_stream_shuffle(
    src: np.ndarray, shuffle_mask: tuple[int, ...], old: np.ndarray
) -> np.ndarray:
    """``nc_stream_shuffle``: in each quadrant ``q`` of 32 partitions, destination partition
    ``32q + i`` copies source partition ``32q + shuffle_mask[i]`` (raw bits), or keeps its
    value where ``shuffle_mask[i] == 255``; the same mask in every quadrant."""
    out = old.copy()
    q = STREAM_SHUFFLE_QUADRANT
    for p in range(out.shape[0]):
        m = int(shuffle_mask[p % q])
        if m != STREAM_SHUFFLE_KEEP:
            out[p] = src[(p // q) * q + m]
    return out


NONZERO_STRIDE = 16
"""nonzero_with_count reads and writes every 16th partition only (one per GpSimd core)."""


def nonzero_with_count(
    src: np.ndarray, index_offset: int, padding_val: int, old: np.ndarray
) -> np.ndarray:
    """``nonzero_with_count``: on partitions 0, 16, 32, ... of ``src [P, T]``, the positions
    (plus ``index_offset``) of its nonzero elements in order, ``padding_val`` for the rest of
    the first ``T`` slots, and the count in slot ``T``; other partitions keep ``old``."""
    out = old.astype(np.int64)
    t = src.shape[1]
    for p in range(0, src.shape[0], NONZERO_STRIDE):
        nz = np.flatnonzero(src[p] != 0)
        row = np.full(t + 1, padding_val, dtype=np.int64)
        row[: nz.size] = nz + index_offset
        row[t] = nz.size
        out[p] = row
    return out


def sequence_bounds(segment_ids: np.ndarray) -> np.ndarray:
    """``sequence_bounds``: for each element of ``segment_ids [1, n]``, the start and the end
    (exclusive) of the run of equal ids it belongs to; padding (id 0) gets start ``n`` and
    end ``-1``. Returns ``[1, 2 * n]`` (starts, then ends)."""
    ids = segment_ids.reshape(-1)
    n = ids.size
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = ids[1:] != ids[:-1]
    run = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], n)
    pad = ids == 0
    lo = np.where(pad, n, starts[run])
    hi = np.where(pad, -1, ends[run])
    return np.concatenate([lo, hi]).astype(F32).reshape(1, -1)


def nc_match_replace8(
    data: np.ndarray, vals: np.ndarray, imm: float, dsts: frozenset[str]
) -> dict[str, np.ndarray]:
    """``nc_match_replace8``: per partition, for ``vals[i]`` taken in the order i = 7..0,
    the first element of ``data`` equal to it and not matched before is replaced by ``imm``
    and its position written to ``dst_idx[i]`` (so duplicate vals pair with ascending
    positions from the highest slot down, the docstring's example). A value without an
    unmatched occurrence replaces nothing; with ``dst_idx`` wanted it is refused
    (``not-implemented``: the docstring does not say what ``dst_idx`` then holds)."""
    from trnsim.core.argrules import broken

    want_idx = "dst_idx" in dsts
    x = data.astype(F32).copy()
    v = vals.reshape(vals.shape[0], -1).astype(F32)
    idx = np.zeros(v.shape, dtype=np.int64)
    for p in range(x.shape[0]):
        taken = np.zeros(x.shape[1], dtype=bool)
        for i in range(v.shape[1] - 1, -1, -1):
            hit = np.flatnonzero((x[p] == v[p, i]) & ~taken)
            if hit.size:
                taken[hit[0]] = True
                idx[p, i] = hit[0]
            elif want_idx:
                raise broken(
                    "match-replace8-unmatched",
                    f"nc_match_replace8: vals[{p}, {i}] = {v[p, i]} has no unmatched "
                    "occurrence in data; the docstring does not say what dst_idx then holds",
                )
        x[p, taken] = F32(imm)
    return {"dst": x, "dst_idx": idx}


def nc_n_gather(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``nc_n_gather``: per partition, ``dst[p, j] = data[p, indices[p, j]]`` over the
    flattened free dimensions (raw values; dst has data's dtype)."""
    from trnsim.core.argrules import broken

    idx = indices.reshape(indices.shape[0], -1).astype(np.int64)
    bad = np.argwhere(idx >= data.shape[1])
    if bad.size:
        p, j = (int(v) for v in bad[0])
        raise broken(
            "n-gather-index",
            f"nc_n_gather indices[{p}, {j}] = {idx[p, j]} outside [0, {data.shape[1]}) "
            f"(data's elements per partition); {len(bad)} such indices",
        )
    return np.take_along_axis(data, idx, axis=1)


def register_store(value: int) -> np.ndarray:
    """``register_store``: the register's 32-bit value as the one element of ``dst``."""
    return np.array([[value]], dtype=np.int64)


def register_load(src: np.ndarray) -> dict[str, np.ndarray]:
    """``register_load``: no memory is written (the front end keeps the register's value)."""
    return {}


def register_move() -> dict[str, np.ndarray]:
    """``register_move``: no memory is touched (the front end keeps the register's value)."""
    return {}


# ---- nki.collectives inside kernels (SDK nki/api/nki/collectives/__init__.py) ----------------
# Each function takes the source values of every rank of one replica group, in the group's
# order, and returns what rank ``i`` of the group receives. Reductions are in float32 (trnsim's
# choice; the docstrings do not say) and written with the dst's cast.

COLLECTIVE_REDUCE_OPS = ("add", "minimum", "maximum")
"""The reductions all_reduce / reduce_scatter accept (docstrings: nl.add, nl.minimum,
nl.maximum)."""


def _reduce_all(op: str, parts: list[np.ndarray]) -> np.ndarray:
    acc = parts[0].astype(F32)
    for x in parts[1:]:
        acc = alu(op, acc, x.astype(F32)).astype(F32)
    return acc


def all_reduce(parts: list[np.ndarray], i: int, op: str) -> np.ndarray:
    """``all_reduce``: every rank gets the element-wise ``op`` of all ranks' sources."""
    return _reduce_all(op, parts)


def all_gather(parts: list[np.ndarray], i: int, dim: int) -> np.ndarray:
    """``all_gather``: every rank gets the sources concatenated along ``dim`` in group order."""
    return np.concatenate(parts, axis=dim)


def reduce_scatter(parts: list[np.ndarray], i: int, op: str, dim: int) -> np.ndarray:
    """``reduce_scatter``: rank ``i`` gets chunk ``i`` (of ``len(parts)`` equal chunks along
    ``dim``) of the element-wise ``op`` of all ranks' sources."""
    return np.split(_reduce_all(op, parts), len(parts), axis=dim)[i]


def all_to_all(parts: list[np.ndarray], i: int, dim: int) -> np.ndarray:
    """``all_to_all``: rank ``i`` gets chunk ``i`` of every rank's source (split along
    ``dim``), concatenated along ``dim`` in group order."""
    n = len(parts)
    return np.concatenate([np.split(p, n, axis=dim)[i] for p in parts], axis=dim)


def _v_chunk(src: np.ndarray, displ: int, count: int, who: str) -> np.ndarray:
    from trnsim.core.argrules import broken

    if count < 0 or displ < 0 or displ + count > src.size:
        raise broken(
            "collective-v-bounds",
            f"{who}: send_displ {displ} + send_count {count} runs past the source's "
            f"{src.size} elements",
        )
    return src[displ : displ + count]


def _v_place(
    writes: list[tuple[int, np.ndarray]], at: int, chunk: np.ndarray, end: int, who: str
) -> None:
    from trnsim.core.argrules import broken

    if at < 0 or at + chunk.size > end:
        raise broken(
            "collective-v-bounds",
            f"{who}: {chunk.size} elements at {at} run past {end} (the chunk's slot in dst)",
        )
    writes.append((at, chunk))


def all_gather_v(
    parts: list[tuple[np.ndarray, np.ndarray]], i: int, dst_size: int
) -> tuple[list[tuple[int, np.ndarray]], np.ndarray]:
    """``all_gather_v`` (docstring, ``has_rdispls=False``): ``parts[s]`` is rank ``s``'s flat
    source and its metadata ``[rows, n]`` (row 0 send_count, row 1 send_displ: first column
    only); every rank receives ``src_s[displ : displ + count]`` from each ``s`` at
    ``dst[s * dst_size / n :]``. Returns the writes ``(offset, values)`` into rank ``i``'s flat
    dst and its row 2, the counts received from each rank."""
    n = len(parts)
    slot = dst_size // n
    writes: list[tuple[int, np.ndarray]] = []
    recv = np.zeros(n, np.uint32)
    for s, (src, meta) in enumerate(parts):
        chunk = _v_chunk(src, int(meta[1, 0]), int(meta[0, 0]), f"all_gather_v rank {s}")
        _v_place(writes, s * slot, chunk, (s + 1) * slot, f"all_gather_v to rank {i}")
        recv[s] = chunk.size
    return writes, recv


def all_to_all_v(
    parts: list[tuple[np.ndarray, np.ndarray]], i: int, dst_size: int, rdispls: np.ndarray | None
) -> tuple[list[tuple[int, np.ndarray]], np.ndarray]:
    """``all_to_all_v`` (docstring): rank ``s`` sends ``src_s[send_displs[i] :
    send_displs[i] + send_counts[i]]`` (its metadata rows 1 and 0, column ``i``) to rank ``i``,
    which writes it at ``recv_displs[s]`` (its own row 3 with ``has_rdispls``, else
    ``s * dst_size / n``). Returns rank ``i``'s writes and the counts it received."""
    n = len(parts)
    slot = dst_size // n
    writes: list[tuple[int, np.ndarray]] = []
    recv = np.zeros(n, np.uint32)
    for s, (src, meta) in enumerate(parts):
        chunk = _v_chunk(src, int(meta[1, i]), int(meta[0, i]), f"all_to_all_v rank {s} to {i}")
        at = int(rdispls[s]) if rdispls is not None else s * slot
        end = dst_size if rdispls is not None else (s + 1) * slot
        _v_place(writes, at, chunk, end, f"all_to_all_v to rank {i}")
        recv[s] = chunk.size
    return writes, recv


def collective_permute(parts: dict[int, np.ndarray], me: int, pairs: tuple) -> np.ndarray | None:
    """``collective_permute``: rank ``t`` receives the source of ``s`` for each pair
    ``(s, t)``; a rank that is no pair's target receives nothing (``None``)."""
    for s, t in pairs:
        if t == me:
            return parts[s]
    return None


def collective_permute_implicit(parts: list[np.ndarray], i: int) -> np.ndarray:
    """``collective_permute_implicit``: "each rank sends data to its successor and receives
    from its predecessor in the ring": rank ``i`` of the group gets the source of ``i - 1``
    (wrapping)."""
    return parts[(i - 1) % len(parts)]


def ring_rank(group: tuple[int, ...], i: int, iteration: int) -> int:
    """``collective_permute_implicit_current_processing_rank_id``: the rank whose data rank
    ``i`` of the ring ``group`` holds after ``iteration`` steps ("at iteration 0, ... the
    current rank's own ID ... in subsequent iterations, the rank ID of data received from
    predecessors, progressing around the ring")."""
    return group[(i - iteration) % len(group)]


TOPK_SNAKE = 16
"""Partitions of topk's input snake (topk docstring)."""


def topk(src: np.ndarray, n: int, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """``topk``: each group of 16 partitions holds one snake of ``n`` elements (element ``e``
    at partition ``e % 16``, column ``e // 16``, the docstring's layout); every partition of
    the group gets the snake's ``k`` largest values in ascending order (``val_dst``) and their
    snake positions (``idx_dst``). trnsim's reading where the docstring is silent: all 16
    partitions of a group receive the same result, and among equal values the lower position
    counts as larger. ``shape``: val_dst's ``[P, K]``."""
    p, k = src.shape[0], shape[1]
    vals = np.empty((p, k), F32)
    idx = np.empty((p, k), np.int64)
    for g in range(0, p, TOPK_SNAKE):
        snake = src[g : g + TOPK_SNAKE].T.reshape(-1)[:n].astype(F32)
        best = np.argsort(-snake, kind="stable")[:k][::-1]
        vals[g : g + TOPK_SNAKE] = snake[best]
        idx[g : g + TOPK_SNAKE] = best
    return {"val_dst": vals, "idx_dst": idx}
