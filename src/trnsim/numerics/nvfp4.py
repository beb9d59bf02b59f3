"""NVIDIA NVFP4: FP4 (E2M1) elements in blocks of 16 with an FP8 (E4M3) scale each, and one
fp32 scale per tensor: quantize and dequantize, bit-exact to the published recipe.

Source: NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149), section 2
and appendix B ("NVFP4 quantization"), as NVIDIA TransformerEngine and Model Optimizer
implement it for Blackwell's FP4 tensor cores. With ``amax_x`` the tensor's largest magnitude
and ``amax_b`` a block's:

- tensor encode scale ``s_enc = (6 x 448) / amax_x`` (fp32; 6 = E2M1's largest value, 448 =
  E4M3's), so that the block scales use E4M3's whole range; decode scale ``1 / s_enc``;
- block decode scale ``amax_b / 6``, stored as ``e4m3(amax_b / 6 x s_enc)`` (round to nearest
  even, saturating at 448);
- elements ``e2m1(x x s_enc / fp32(scale_b))`` (round to nearest even, or stochastic rounding
  as the recipe uses for gradients; saturating at +-6: rounding the scale down can push the
  block's largest element slightly past 6);
- dequantize: ``e2m1 x fp32(scale_b) / s_enc``.

Special cases (the recipe leaves them open; as TransformerEngine does): an all-zero tensor has
``s_enc = 1`` and zero scales; a block whose E4M3 scale is zero (its amax underflows E4M3) is
all zeros. NVFP4 has no NaN or Inf: a non-finite input is refused. Trainium has no NVFP4
matmul (its 4-bit format is OCP MXFP4, ``trnsim.numerics.mx``); this is for numerics research
and for the performance model's ``nvfp4`` precision of NVIDIA Blackwell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from trnsim.errors import NumericsError
from trnsim.numerics.formats import Format, get_format
from trnsim.numerics.rng import StochasticRng
from trnsim.numerics.rounding import cast, to_float32

NVFP4_BLOCK = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0
ELEMENT = "float4_e2m1fn"
SCALE = "float8_e4m3fn"


@dataclass(frozen=True, slots=True, eq=False)
class NVFP4Array:
    """An NVFP4-quantized array: ``data`` (E2M1 element codes, the input's shape), ``scales``
    (E4M3 block scales; the block axis divided by 16) and ``encode_scale`` (the tensor's fp32
    ``s_enc``); ``axis`` is non-negative."""

    data: np.ndarray
    scales: np.ndarray
    encode_scale: float
    axis: int
    block: int = NVFP4_BLOCK

    @property
    def element_format(self) -> Format:
        return get_format(ELEMENT)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


def _blocks(x: np.ndarray, axis: int, block: int) -> tuple[np.ndarray, int]:
    ax = axis % x.ndim if x.ndim else 0
    if x.ndim == 0 or x.shape[ax] % block:
        length = x.shape[ax] if x.ndim else "a scalar"
        raise NumericsError(
            f"NVFP4 quantize: axis {axis} has length {length}, not a multiple of the block size "
            f"{block} (trnsim does not pad)"
        )
    moved = np.moveaxis(x, ax, -1)
    return moved.reshape(*moved.shape[:-1], moved.shape[-1] // block, block), ax


def encode_scale(amax: float) -> np.float32:
    """The tensor encode scale ``s_enc = 6 x 448 / amax`` (1 for an all-zero tensor)."""
    a = np.float32(amax)
    return np.float32(1.0) if a == 0 else np.float32(E2M1_MAX * E4M3_MAX) / a


def quantize(
    x: ArrayLike,
    axis: int = -1,
    rounding: str = "rne",
    rng: StochasticRng | int | None = None,
    amax: float | None = None,
) -> NVFP4Array:
    """Quantize ``x`` to NVFP4 with blocks of 16 consecutive elements along ``axis``.

    ``amax``: the tensor amax to scale by (default: ``x``'s own; a delayed-scaling recipe
    passes a history's). ``rounding``: of the elements (``rne`` or ``stochastic`` with ``rng``);
    the block scales always round to nearest even. fp32 arithmetic, as the recipe.
    """
    arr = np.asarray(x)
    try:
        v = arr.astype(np.float32)
    except (TypeError, ValueError) as exc:
        raise NumericsError(f"NVFP4 quantize: cannot read input of dtype {arr.dtype}") from exc
    if not np.all(np.isfinite(v)):
        raise NumericsError("NVFP4 quantize: the input holds NaN or Inf (NVFP4 has neither)")
    blocks, ax = _blocks(v, axis, NVFP4_BLOCK)
    t_amax = np.float32(np.max(np.abs(v))) if amax is None else np.float32(amax)
    if not (np.isfinite(t_amax) and t_amax >= 0):
        raise NumericsError(f"NVFP4 quantize: amax must be finite and >= 0, got {amax!r}")
    s_enc = encode_scale(t_amax)
    b_amax = np.max(np.abs(blocks), axis=-1)
    scales = cast(b_amax / np.float32(E2M1_MAX) * s_enc, SCALE, saturate=True)
    dec = to_float32(scales, get_format(SCALE))
    with np.errstate(divide="ignore", invalid="ignore"):
        enc_b = np.where(dec > 0, s_enc / dec, np.float32(0)).astype(np.float32)
    data = cast(blocks * enc_b[..., None], ELEMENT, rounding=rounding, saturate=True, rng=rng)
    data = np.moveaxis(data.reshape(*data.shape[:-2], -1), -1, ax)
    return NVFP4Array(
        data=np.ascontiguousarray(data),
        scales=np.ascontiguousarray(np.moveaxis(scales, -1, ax)),
        encode_scale=float(s_enc),
        axis=ax,
    )


def dequantize(q: NVFP4Array) -> np.ndarray:
    """float32 values ``e2m1 x e4m3_scale / s_enc``."""
    elems = to_float32(q.data, get_format(ELEMENT)).astype(np.float64)
    scales = np.repeat(to_float32(q.scales, get_format(SCALE)).astype(np.float64), q.block,
                       axis=q.axis)  # fmt: skip
    return (elems * scales / np.float64(q.encode_scale)).astype(np.float32)
