"""NumPy references shared by the conformance cases (written here from the documentation).

Each computes in float64 (or float32 where the kernel's documented accumulation is fp32) and
returns the output in the kernel's documented output dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

bf16 = np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class Bounds:
    """A reference output given as an interval per element: the kernel's value must lie in
    ``[lo, hi]`` (then within the case's ``rtol`` / ``atol`` of it). For kernels that round an
    intermediate to a narrow format after an fp32 accumulation whose order the documentation
    does not fix: an fp32 sum may land on either side of a rounding midpoint, so each such
    intermediate is one of its two neighbouring values; the interval is what every
    admissible choice gives (derived from error bounds, never fitted to the run)."""

    lo: np.ndarray
    hi: np.ndarray


GAMMA_U32 = 2.0**-24
"""The unit roundoff of fp32."""


def gamma(n: int, u: float = GAMMA_U32) -> float:
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of an n-term sum (or dot
    product) in precision u, in any order."""
    return n * u / (1 - n * u)


def randn(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Standard normal values, rounded to ``dtype``."""
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def matmul_t(lhs_t: np.ndarray, rhs: np.ndarray, dtype: Any) -> np.ndarray:
    """``lhsT.T @ rhs`` with fp32-exact products, rounded once to ``dtype``."""
    return (f64(lhs_t).T @ f64(rhs)).astype(np.float32).astype(dtype)


# ---- MX (the MXFP tutorials): device layouts written from the nc_matmul_mx / quantize_mx docs --


def mx_scale_partitions(groups: int) -> np.ndarray:
    """SBUF partition of each 8-partition MX scale group: group g's scales sit in quadrant
    g // 4 (32 partitions each), row g % 4 (``nc_matmul_mx`` / ``quantize_mx`` docstrings)."""
    g = np.arange(groups)
    return (g // 4) * 32 + g % 4


def mx_words(x_kf: np.ndarray, elem: str, packed: str) -> tuple[np.ndarray, np.ndarray]:
    """Quantize ``x[K, F]`` (OCP MX, 32-blocks of consecutive K) into the device layout:
    words ``[K/4, F]`` (word ``(p, f)`` packs K = 4p..4p+3) and contiguous scales
    ``[K/32, F]`` (row g: the block of partitions 8g..8g+7)."""
    from trnsim.numerics import mx
    from trnsim.numerics.packing import pack_x4

    q = mx.quantize(np.asarray(x_kf, np.float32), elem, axis=0, block=32)
    k, f = q.data.shape
    codes = q.data.reshape(k // 4, 4, f).transpose(0, 2, 1)  # [K/4, F, 4]
    return pack_x4(codes, packed)[..., 0], np.ascontiguousarray(q.scales)


def mx_decode(words: np.ndarray, scales: np.ndarray, elem: str, packed: str) -> np.ndarray:
    """Values ``[K, F]`` of device-layout words ``[K/4, F]`` and scales ``[K/32, F]``:
    element * 2^(scale - 127), one scale per 8 partitions x 4 elements."""
    from trnsim.numerics import get_format
    from trnsim.numerics.mx import scale_values
    from trnsim.numerics.packing import unpack_x4

    codes = unpack_x4(words[..., None], packed)  # [K/4, F, 4] element codes
    fmt = get_format(elem)
    vals = codes.view(fmt.dtype).astype(np.float64)
    kp, f, _ = vals.shape
    x = vals.transpose(0, 2, 1).reshape(kp * 4, f)
    return x * np.repeat(scale_values(scales), 32, axis=0)


def mx_quantized_values(x_kf: np.ndarray, elem: str) -> np.ndarray:
    """The values ``quantize_mx`` produces for ``x[K, F]`` with 32-blocks of consecutive K:
    the NKI scale rule (one more than OCP's, NKI 0.5.0; ``trnsim.numerics.mx``)."""
    from trnsim.numerics import mx

    q = mx.quantize(np.asarray(x_kf, np.float32), elem, axis=0, block=32, scale_rule="nki")
    return mx.dequantize(q)
