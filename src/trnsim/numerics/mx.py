"""OCP Microscaling (MX) v1.0: MXFP8 / MXFP4 quantize, dequantize and the matmul golden.

A block of ``block`` (32) consecutive elements along one axis shares one E8M0 scale
``X = 2^(code - 127)``; each element is stored in the element format (float8_e4m3fn,
float8_e5m2 or float4_e2m1fn). Sources: OCP Microscaling Formats (MX) Specification v1.0
(section 5: formats, section 6.3: conversion from scalar floats); the reference code of the
spec's authors, microsoft/microxcaling ``mx/mx_ops.py`` (``_shared_exponents``,
``_quantize_mx``); NKI ``quantize_mx`` / ``nc_matmul_mx`` (aws-neuron-sdk
``nki/api/nki/isa/__init__.py``, ``nki/deep-dives/mxfp-matmul.rst``, release notes 0.5.0).

Scale rule, with ``amax`` the block's largest magnitude and ``emax_elem`` the exponent of the
element format's largest normal (8 for E4M3, 15 for E5M2, 2 for E2M1):

- ``"ocp"``: ``shared_exp = floor(log2(amax)) - emax_elem`` (OCP MX v1.0 section 6.3).
  Scaled elements can exceed the element max (e.g. 1.9 * 2^8 > 448); they saturate.
- ``"nki"``: ``shared_exp = floor(log2(amax)) - (emax_elem - 1)``, one more: a scale 2x
  larger, so ``amax / X < 2^emax_elem`` never saturates. This is NKI ``quantize_mx`` since
  NKI 0.5.0 (the older SAMPLES golden ``quantize_mx_golden`` subtracts ``emax_elem``).

Special blocks (as microxcaling does; the spec leaves the conversion of these open):

- all-zero block (``amax == 0``): ``log2`` of zero is replaced by that of fp32's smallest
  normal (2^-126), so ``shared_exp`` clamps to -127: scale code 0 (X = 2^-127), elements 0.
  NKI ``quantize_mx`` also gives an all-zero group X = 2^-127.
- ``shared_exp < -127``: clamped to -127 (code 0); such elements underflow towards zero.
- ``shared_exp > 127`` (float64 inputs only) and blocks holding Inf or NaN: scale NaN
  (code 0xFF). Per OCP MX section 5.3 a NaN scale makes every element of the block NaN,
  whatever its code; trnsim stores the element format's NaN code (0 for E2M1, which has no
  NaN) so the data is well defined.

Elements: ``V / X`` (exact: X is a power of two) rounded to the element format by ``cast``
(RNE or stochastic) with saturation to +-element max (OCP MX section 6.3: "clamped to the
maximum normal").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from trnsim.errors import NumericsError
from trnsim.numerics.formats import Format, get_format
from trnsim.numerics.rng import StochasticRng
from trnsim.numerics.rounding import cast, nan_code, to_float32

MX_ELEMENT_FORMATS = ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn")
SCALE_RULES = ("ocp", "nki")
SCALE_BIAS = 127  # E8M0 bias (OCP MX v1.0 section 5.4.1)
SCALE_NAN = 0xFF
ACCUMULATIONS = ("fp32", "exact")


@dataclass(frozen=True, slots=True, eq=False)
class MXArray:
    """An MX-quantized array: ``data`` (element codes in the element format's storage dtype,
    same shape as the input) and ``scales`` (uint8 E8M0 codes; the block axis divided by
    ``block``). ``axis`` is normalised to be non-negative."""

    data: np.ndarray
    scales: np.ndarray
    fmt: Format
    axis: int
    block: int = 32
    scale_rule: str = "ocp"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


def mx_element_format(fmt: str | Format) -> Format:
    """The MX element format for a name, alias, or packed x4 name (its element)."""
    f = get_format(fmt)
    if f.kind == "packed" and f.element is not None:
        f = f.element
    if f.name not in MX_ELEMENT_FORMATS:
        raise NumericsError(
            f"{f.name} is not an MX element format; valid: {', '.join(MX_ELEMENT_FORMATS)}"
        )
    return f


def _blocks(x: np.ndarray, axis: int, block: int) -> tuple[np.ndarray, int]:
    """Move ``axis`` last and split it into (n_blocks, block)."""
    if block < 1:
        raise NumericsError(f"MX block size must be >= 1, got {block}")
    ax = axis % x.ndim if x.ndim else 0
    if x.ndim == 0 or x.shape[ax] % block:
        length = x.shape[ax] if x.ndim else "a scalar"
        raise NumericsError(
            f"MX quantize: axis {axis} has length {length}, not a multiple of the block size "
            f"{block} (trnsim does not pad)"
        )
    moved = np.moveaxis(x, ax, -1)
    return moved.reshape(*moved.shape[:-1], moved.shape[-1] // block, block), ax


def floor_log2(a: ArrayLike) -> np.ndarray:
    """``floor(log2(a))`` exactly (int64) for finite positive ``a``: ``frexp`` gives
    ``a = f * 2^e`` with ``f`` in [0.5, 1). (``np.floor(np.log2(a))`` is not exact: for ``a``
    just below a power of two, e.g. fp32 ``127.99999``, the rounded logarithm is 7.0.)"""
    _, e = np.frexp(np.asarray(a, dtype=np.float64))
    return e.astype(np.int64) - 1


def shared_exponents(amax: np.ndarray, elem: Format, scale_rule: str) -> np.ndarray:
    """E8M0 scale codes (uint8) for block maxima ``amax`` (see module docstring)."""
    if scale_rule not in SCALE_RULES:
        raise NumericsError(f"unknown scale_rule {scale_rule!r}; valid: {', '.join(SCALE_RULES)}")
    a = np.asarray(amax, dtype=np.float64)
    finite = np.isfinite(a)
    safe = np.where(finite & (a > 0), a, 2.0**-126)
    offset = elem.emax - (1 if scale_rule == "nki" else 0)
    shared = floor_log2(safe) - offset
    shared = np.maximum(shared, -SCALE_BIAS)
    code = np.where(finite & (shared <= SCALE_BIAS), shared + SCALE_BIAS, SCALE_NAN)
    return code.astype(np.uint8)


def scale_values(scales: ArrayLike) -> np.ndarray:
    """float64 value 2^(code - 127) of E8M0 scale codes (NaN for 0xFF)."""
    s = np.asarray(scales)
    if s.dtype != np.uint8:
        s = s.view(np.uint8) if s.dtype.itemsize == 1 else s.astype(np.uint8)
    v = np.ldexp(1.0, s.astype(np.int32) - SCALE_BIAS)
    return np.where(s == SCALE_NAN, np.nan, v)


def quantize(
    x: ArrayLike,
    fmt: str | Format,
    axis: int = -1,
    block: int = 32,
    scale_rule: str = "ocp",
    rounding: str = "rne",
    rng: StochasticRng | int | None = None,
) -> MXArray:
    """Quantize ``x`` to MX with blocks of ``block`` consecutive elements along ``axis``.

    ``fmt`` is the element format (float8_e4m3fn, float8_e5m2, float4_e2m1fn, an alias, or a
    packed x4 name). Vectorised NumPy; the element cast is ``rounding.cast`` with saturation.
    """
    elem = mx_element_format(fmt)
    arr = np.asarray(x)
    work = np.float64 if arr.dtype == np.float64 else np.float32
    try:
        v = arr.astype(work, copy=False)  # bf16 / fp16 / fp8 widen exactly
    except (TypeError, ValueError) as exc:
        raise NumericsError(f"MX quantize: cannot read input of dtype {arr.dtype}") from exc
    blocks, ax = _blocks(v, axis, block)
    with np.errstate(invalid="ignore"):
        amax = np.max(np.abs(blocks), axis=-1)  # NaN propagates
    codes = shared_exponents(amax, elem, scale_rule)
    bad = codes == SCALE_NAN
    # 1 / X as a power of two of the working dtype (exact); NaN blocks get 0 for now
    exps = np.where(bad, 0, SCALE_BIAS - codes.astype(np.int32))
    inv = np.ldexp(work(1.0), exps.astype(np.int32)).astype(work)
    scaled = blocks * inv[..., None]
    if bad.any():
        scaled[bad] = 0
    data = cast(scaled, elem, rounding=rounding, saturate=True, rng=rng)
    if bad.any():
        fill = nan_code(elem) if elem.has_nan else 0
        data.view(np.uint8)[bad] = fill
    data = np.moveaxis(data.reshape(*data.shape[:-2], -1), -1, ax)
    scales = np.moveaxis(codes, -1, ax)
    return MXArray(
        data=np.ascontiguousarray(data),
        scales=np.ascontiguousarray(scales),
        fmt=elem,
        axis=ax,
        block=block,
        scale_rule=scale_rule,
    )


def dequantize(mx: MXArray) -> np.ndarray:
    """float32 values ``element * 2^(scale - 127)`` (NaN throughout a NaN-scale block)."""
    elems = to_float32(mx.data, mx.fmt).astype(np.float64)
    scales = np.repeat(scale_values(mx.scales), mx.block, axis=mx.axis)
    with np.errstate(over="ignore", invalid="ignore"):
        return (elems * scales).astype(np.float32)


def mx_matmul(a: MXArray, b: MXArray, accumulation: str = "fp32") -> np.ndarray:
    """Golden of ``nc_matmul_mx``: ``A[M, K] @ B[K, N]`` with MX blocks along K in both.

    ``a`` holds A with ``axis == 1`` and ``b`` holds B with ``axis == 0``, both with the same
    block size; element formats may differ (MXFP8 x MXFP4 is allowed on NeuronCore-v4).
    ``out[m, n] = sum_b (sum_{k in b} a[m, k] * b[k, n]) * 2^(sa[m, b] - 127) * 2^(sb[b, n] - 127)``
    (NKI golden ``nc_matmul_mx_golden``: ``einsum("kiq,kjq->ij", stat * 2^(s_stat - 127),
    mov * 2^(s_mov - 127))``).

    The summation order inside the systolic array is not public. ``accumulation="fp32"``
    (default): each block's dot product is formed exactly (products of 8-bit floats are exact
    and a block of 32 sums exactly in float64 for E4M3 / E2M1; E5M2 to within float64
    rounding), scaled, rounded to fp32, and the blocks are accumulated in fp32 in K order, as
    PSUM accumulates in fp32. ``"exact"``: everything in float64, one rounding to fp32 at the
    end.

    Layout note for the core: on hardware an MX group is 8 partitions x 4 packed elements; a
    logical K index ``k = 4 * p + q`` (partition p, element q of the x4 word) makes each such
    group 32 consecutive K, which is what this function expects.
    """
    if accumulation not in ACCUMULATIONS:
        raise NumericsError(
            f"unknown accumulation {accumulation!r}; valid: {', '.join(ACCUMULATIONS)}"
        )
    if a.data.ndim != 2 or b.data.ndim != 2 or a.axis != 1 or b.axis != 0:
        raise NumericsError(
            "mx_matmul expects A[M, K] quantized along axis 1 and B[K, N] along axis 0; got "
            f"A{a.shape} axis {a.axis}, B{b.shape} axis {b.axis}"
        )
    if a.shape[1] != b.shape[0] or a.block != b.block:
        raise NumericsError(
            f"mx_matmul: K mismatch or block mismatch: A{a.shape} block {a.block}, "
            f"B{b.shape} block {b.block}"
        )
    m, k = a.shape
    n = b.shape[1]
    nb = k // a.block
    av = to_float32(a.data, a.fmt).astype(np.float64).reshape(m, nb, a.block)
    bv = to_float32(b.data, b.fmt).astype(np.float64).reshape(nb, b.block, n)
    partial = np.einsum("mbk,bkn->bmn", av, bv)  # exact per-block dot products (see above)
    scale = scale_values(a.scales).T[:, :, None] * scale_values(b.scales)[:, None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        blocks = partial * scale  # exact: powers of two
        if accumulation == "exact":
            return blocks.sum(axis=0).astype(np.float32)
        blocks32 = blocks.astype(np.float32)
        out = np.zeros((m, n), dtype=np.float32)
        for i in range(nb):
            out += blocks32[i]
    return out
