"""A GEMM as the Trainium3 Tensor engine computes it, tile by tile (NumPy; no PyTorch here).

``gemm(a, b, policy, out_format)`` computes ``C[M, N] = A[M, K] @ B[K, N]`` with the same
functions the emulator runs for an NKI matmul kernel, in the same order, so the result is bit
for bit that of ``examples/kernels/trn_gemm.py`` run on the emulator (tests/test_torch_gemm.py):

1. **Operands.** Each operand is rounded to the policy's operand format by
   ``trnsim.numerics.cast`` (a convert kernel: ``tensor_copy`` of 128-row blocks), A first, then
   B, each in row-major order of its logical shape (``[M, K]``, ``[K, N]``); MX policies
   quantise A along K (axis 1) and B along K (axis 0) with ``trnsim.numerics.mx.quantize``
   (NKI scale rule, blocks of 32). With ``native`` operands nothing is rounded.
2. **Tiles.** The output is cut into tiles of ``TILE_M = 128`` rows (the stationary free size,
   ``nc_matmul``'s M <= 128) by ``TILE_N = 512`` columns (one 2 KiB PSUM bank of fp32 per
   partition); tiles run in row-major order (m outer, n inner). For each, K is cut into tiles of
   128 (the partitions; ``nc_matmul``) or 512 (128 partitions x 4 MX elements of an x4 word;
   ``nc_matmul_mx``), taken in increasing K order: the first K tile's product overwrites the PSUM
   tile, each later one is added to it in fp32 (``trnsim.core.machine._psum_accumulate``). Each
   product is ``trnsim.core.semantics.nc_matmul`` / ``nc_matmul_mx`` (the specification), on
   tiles laid out as the emulator reads them (stationary = ``A[m, k].T``). MX: K is padded with
   zeros to a multiple of 128 (``nc_matmul_mx`` needs a multiple of 32 partitions); zero blocks
   add nothing.
3. **Result.** Each fp32 PSUM tile is written in ``out_format`` (``tensor_copy`` from PSUM)
   by ``cast``, RNE or stochastic, tiles in the order above (row-major inside a tile); an fp32
   result is the PSUM value.

Stochastic rounding: operand A draws from ``StochasticRng(role_seed(seed, 0))``, B from
``role_seed(seed, 1)`` and the result from ``role_seed(seed, 2)``: the seeds of the three kernel
launches (convert A, convert B, the matmul) that compute the same thing on the emulator.

No batched shortcut: NumPy's sgemm does not sum an element in the same order for every way of
cutting M and N (edge tiles take other kernels), so only the tile-by-tile calls the kernel
makes give its bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trnsim.core import semantics as S
from trnsim.core.rules import FLOAT_MATMUL_IN
from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw import core as core_spec
from trnsim.numerics import StochasticRng, cast, get_format, mx, to_float32
from trnsim.torch.numerics import MX_OPERANDS, SCALE_RULE, Numerics, role_seed

_V4 = core_spec("gen4")
TILE_K = _V4.partitions  # 128 partitions: nc_matmul's contraction per instruction
TILE_M = _V4.tensor.stationary_fmax  # 128: the stationary free size
TILE_N = _V4.psum_bank_bytes // 4  # 512 fp32 per partition: one PSUM bank
MX_PACK = 4  # elements per x4 word: an MX K tile is TILE_K x 4 = 512
TILE_K_MX = TILE_K * MX_PACK
MX_K_MULTIPLE = (_V4.partitions // 4) * MX_PACK  # nc_matmul_mx: partitions a multiple of 32

OPERAND_FORMATS = frozenset(FLOAT_MATMUL_IN | {"float8_e4m3fn"})
"""Formats ``nc_matmul`` takes on NeuronCore-v4 (``trnsim.core.rules`` matmul-dtype)."""


@dataclass(frozen=True, slots=True)
class Operand:
    """A prepared operand: fp32 values (of the operand format) or, for MX, the quantised
    array (blocks along K)."""

    values: np.ndarray | None
    quantized: mx.MXArray | None
    fmt: str


def _rng(policy: Numerics, seed: int, role: int) -> StochasticRng | None:
    return StochasticRng(role_seed(seed, role)) if policy.stochastic else None


def operand_format(policy: Numerics, dtype: np.dtype) -> str:
    """The format an operand of ``dtype`` is multiplied in under ``policy``."""
    if policy.operands is not None:
        return policy.operands
    try:
        return get_format(dtype).name
    except UnknownNameError:
        return np.dtype(dtype).name


def prepare(x: np.ndarray, policy: Numerics, seed: int, role: int, k_axis: int) -> Operand:
    """Round operand ``role`` (0: A, 1: B) to the policy's operand format (step 1)."""
    fmt = operand_format(policy, x.dtype)
    if fmt in MX_OPERANDS:
        vals = np.asarray(x, dtype=np.float32)
        short = -vals.shape[k_axis] % 32
        if short:  # K padded with zeros to whole 32-blocks (as a zero-filled SBUF tile)
            pad = [(0, 0)] * vals.ndim
            pad[k_axis] = (0, short)
            vals = np.pad(vals, pad)
        q = mx.quantize(
            vals,
            MX_OPERANDS[fmt],
            axis=k_axis,
            block=32,
            scale_rule=SCALE_RULE,
            rounding=policy.rounding,
            rng=_rng(policy, seed, role),
        )
        return Operand(None, q, fmt)
    if fmt not in OPERAND_FORMATS:
        raise ConfigError(
            f"the Tensor engine has no {fmt} matmul; it multiplies "
            f"{', '.join(sorted(OPERAND_FORMATS))} and MX (mxfp8, mxfp4)"
        )
    if get_format(x.dtype).name == fmt:
        vals = to_float32(x)
    else:
        vals = to_float32(cast(x, fmt, rounding=policy.rounding, rng=_rng(policy, seed, role)))
    return Operand(vals, None, fmt)


def _mx_tiles(q: mx.MXArray, k_pad: int) -> tuple[np.ndarray, np.ndarray]:
    """A batched MX operand -> (element values ``[G, F, K']`` fp32, scale values
    ``[G, F, K'/32]`` float64), K padded with zero blocks to ``k_pad`` (F the non-K dim)."""
    codes = q.data if q.axis == 2 else q.data.swapaxes(1, 2)
    scales = q.scales if q.axis == 2 else q.scales.swapaxes(1, 2)
    vals = to_float32(codes, q.fmt)
    sv = mx.scale_values(scales)
    k = vals.shape[2]
    if k_pad > k:
        g, f = vals.shape[:2]
        vals = np.concatenate([vals, np.zeros((g, f, k_pad - k), np.float32)], axis=2)
        sv = np.concatenate([sv, np.full((g, f, (k_pad - k) // 32), 2.0**-127)], axis=2)
    return vals, sv


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    policy: Numerics,
    out_format: str = "float32",
    seed: int = 0,
) -> np.ndarray:
    """``A[M, K] @ B[K, N]`` as the Tensor engine computes it (module docstring), or a batch
    ``A[G, M, K] @ B[G, K, N]`` (each operand rounded as one ``[G * rows, cols]`` matrix, the
    G products in order, the results written batch after batch); returns an array of
    ``out_format``'s storage dtype. ``seed`` is the op's stochastic-rounding seed
    (``trnsim.torch.numerics.op_seed``)."""
    two_d = a.ndim == 2
    if two_d:
        a, b = a[None], b[None]
    if a.ndim != 3 or b.ndim != 3 or a.shape[2] != b.shape[1] or a.shape[0] != b.shape[0]:
        raise ConfigError(f"gemm: cannot multiply {list(a.shape)} by {list(b.shape)}")
    G, M, K = a.shape
    N = b.shape[2]
    pa = prepare(a, policy, seed, 0, k_axis=2)
    pb = prepare(b, policy, seed, 1, k_axis=1)
    if (pa.fmt in ("float32", "tfloat32")) != (pb.fmt in ("float32", "tfloat32")):
        raise ConfigError(f"nc_matmul pairs fp32 only with fp32; got {pa.fmt} and {pb.fmt}")
    acc = np.zeros((G, M, N), np.float32)
    if K and pa.quantized is not None:
        assert pb.quantized is not None
        _products_mx(pa.quantized, pb.quantized, acc)
    elif K:
        assert pa.values is not None and pb.values is not None
        for g in range(G):
            for m0 in range(0, M, TILE_M):
                ms = slice(m0, min(M, m0 + TILE_M))
                for n0 in range(0, N, TILE_N):
                    ns = slice(n0, min(N, n0 + TILE_N))
                    for i, k0 in enumerate(range(0, K, TILE_K)):
                        ks = slice(k0, min(K, k0 + TILE_K))
                        prod = S.nc_matmul(pa.values[g, ms, ks].T, pb.values[g, ks, ns])
                        if i == 0:
                            acc[g, ms, ns] = prod
                        else:
                            acc[g, ms, ns] += prod
    out = _write(acc, get_format(out_format), _rng(policy, seed, 2), policy)
    return out[0] if two_d else out


def _write(
    acc: np.ndarray, out_fmt: Any, out_rng: StochasticRng | None, policy: Numerics
) -> np.ndarray:
    """Step 3: the fp32 PSUM results written in ``out_fmt``, tile by tile in tile order (the
    order of the stochastic draws), batch after batch."""
    if out_fmt.name == "float32":
        return acc
    if out_rng is None:
        return cast(acc, out_fmt)
    G, M, N = acc.shape
    out = np.empty((G, M, N), dtype=out_fmt.dtype)
    for g in range(G):
        for m0 in range(0, M, TILE_M):
            for n0 in range(0, N, TILE_N):
                ms, ns = slice(m0, m0 + TILE_M), slice(n0, n0 + TILE_N)
                tile = np.ascontiguousarray(acc[g, ms, ns])
                out[g, ms, ns] = cast(tile, out_fmt, rounding=policy.rounding, rng=out_rng)
    return out


def _products_mx(qa: mx.MXArray, qb: mx.MXArray, acc: np.ndarray) -> None:
    """The MX products into ``acc [G, M, N]``: per K tile of 512 (increasing), the fp32 product
    of every output tile, accumulated in fp32 (step 2). Each K tile is computed for the whole
    output by one float64 BLAS call where that is provably ``nc_matmul_mx``'s result
    (``_inexact_tiles``); the other output tiles run the specification."""
    K = qa.shape[2]
    k_pad = -(-K // MX_K_MULTIPLE) * MX_K_MULTIPLE
    av, asv = _mx_tiles(qa, k_pad)  # [G, M, K'], [G, M, K'/32]
    bv, bsv = _mx_tiles(qb, k_pad)  # [G, N, K'], [G, N, K'/32]
    for i, k0 in enumerate(range(0, k_pad, TILE_K_MX)):
        kt = min(TILE_K_MX, k_pad - k0)
        g0, g1 = k0 // 32, (k0 + kt) // 32  # one scale per 8 partitions = 32 K
        real = min(kt, max(0, K - k0))  # the K of this tile that is not padding
        a = _scaled(av, asv, k0, real)
        b = _scaled(bv, bsv, k0, real)
        prod = np.matmul(a, b.swapaxes(-1, -2)).astype(np.float32)
        for g, ms, ns in _inexact_tiles(a, b, kt, qa.fmt, qb.fmt):
            prod[g, ms, ns] = mx_tile_product(av[g], asv[g], bv[g], bsv[g], ms, ns, k0, kt, g0, g1)
        if i == 0:
            acc[...] = prod
        else:
            acc += prod


def _scaled(v: np.ndarray, sv: np.ndarray, k0: int, real: int) -> np.ndarray:
    """Element values times their block scales, float64 (exact: scales are powers of two)."""
    x = v[..., k0 : k0 + real].astype(np.float64)
    shape = x.shape
    blocks = x.reshape(*shape[:-1], real // 32, 32)
    blocks *= sv[..., k0 // 32 : (k0 + real) // 32, None]
    return blocks.reshape(shape)


def mx_tile_product(av, asv, bv, bsv, ms, ns, k0, kt, g0, g1) -> np.ndarray:
    """One ``nc_matmul_mx`` (the specification): operands ``[p, F, 4]`` with partition ``p``
    holding K = 4p..4p+3 of the K tile (the x4 word), scales one per 8 partitions."""
    p = kt // MX_PACK
    st = av[ms, k0 : k0 + kt].reshape(-1, p, MX_PACK).transpose(1, 0, 2)
    mv = bv[ns, k0 : k0 + kt].reshape(-1, p, MX_PACK).transpose(1, 0, 2)
    return S.nc_matmul_mx(st, mv, asv[ms, g0:g1].T, bsv[ns, g0:g1].T)


def _row_spans(v: np.ndarray, man_bits: int) -> np.ndarray:
    """Per row (last axis): (exponent of the largest magnitude + 1) - (exponent of the lowest
    bit the smallest nonzero magnitude can hold); 0 for all-zero rows. A non-finite row
    gets a span no bound accepts."""
    a = np.abs(v)
    big = a.max(axis=-1)
    small = np.where(a > 0, a, np.inf).min(axis=-1)
    rows = big > 0
    span = np.zeros(big.shape, np.int64)
    hi = np.frexp(np.where(rows, big, 1.0))[1]
    lo = np.frexp(np.where(rows, small, 1.0))[1] - 1 - man_bits
    span[rows] = (hi - lo)[rows]
    span[~np.isfinite(big)] = 10**6
    return span


def _inexact_tiles(a: np.ndarray, b: np.ndarray, kt: int, fa: Any, fb: Any):
    """The (batch, m slice, n slice) output tiles for which a float64 BLAS product of ``a``
    ``[G, M, k]`` and ``b`` ``[G, N, k]`` is not provably ``nc_matmul_mx``'s result.

    ``nc_matmul_mx`` forms every product exactly in float64 (an element has at most 4
    significant bits, a scale is a power of two) and sums them in float64, then rounds to
    fp32. If every partial sum is exact in float64, any summation order gives the same exact
    sum, so the BLAS result is the specification's bits. For a row of A spanning ``sa`` bits
    (``_row_spans``: magnitudes below ``2^hi``, every bit at or above ``2^lo``) and a column of
    B spanning ``sb``, products are multiples of ``2^(lo_a + lo_b)`` below ``2^(hi_a + hi_b)``,
    and any partial sum of ``kt`` of them is below ``2^(hi_a + hi_b + ceil(log2 kt))``: exact
    when ``sa + sb + ceil(log2 kt) <= 53``. An output tile is checked with its rows' and
    columns' largest spans (tests/test_torch_gemm.py checks both paths agree)."""
    G, M, _ = a.shape
    N = b.shape[1]
    if a.shape[-1] == 0:
        return
    sa = _row_spans(a, fa.man_bits)  # [G, M]
    sb = _row_spans(b, fb.man_bits)  # [G, N]
    room = 53 - int(np.ceil(np.log2(kt)))
    if sa.max() + sb.max() <= room:
        return
    for g in range(G):
        for m0 in range(0, M, TILE_M):
            ms = slice(m0, min(M, m0 + TILE_M))
            for n0 in range(0, N, TILE_N):
                ns = slice(n0, min(N, n0 + TILE_N))
                if sa[g, ms].max() + sb[g, ns].max() > room:
                    yield g, ms, ns


def mx_device_layout(q: mx.MXArray, packed_fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """An MX operand (blocks along K) in ``nc_matmul_mx``'s SBUF layout, K padded as ``gemm``
    pads it: (x4 words ``[K'/4, F]``, scale tile ``[K'/4, F]`` uint8 with group ``g`` of each
    128-partition K tile at partition ``trnsim.core.semantics.mx_scale_rows``)."""
    from trnsim.numerics import pack_x4

    codes = q.data if q.axis == 1 else q.data.T  # [F, K]
    scales = q.scales if q.axis == 1 else q.scales.T  # [F, K/32]
    f, k = codes.shape
    k_pad = -(-k // MX_K_MULTIPLE) * MX_K_MULTIPLE
    if k_pad > k:
        zero = np.zeros((f, k_pad - k), codes.dtype)
        codes = np.concatenate([codes, zero], axis=1)
        scales = np.concatenate([scales, np.zeros((f, (k_pad - k) // 32), np.uint8)], axis=1)
    words = pack_x4(codes.reshape(f, k_pad // 4, 4).transpose(1, 0, 2), packed_fmt)[..., 0]
    scale_tile = np.zeros((k_pad // 4, f), dtype=np.uint8)
    for t0 in range(0, k_pad // 4, TILE_K):
        parts = min(TILE_K, k_pad // 4 - t0)
        groups = scales[:, t0 // 8 : (t0 + parts) // 8]  # one per 8 partitions
        scale_tile[t0 + S.mx_scale_rows(parts), :] = groups.T
    return words, scale_tile
