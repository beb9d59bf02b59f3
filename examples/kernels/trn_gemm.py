"""The GEMM of ``trnsim.torch`` as NKI kernels: a convert kernel, a matmul kernel and an MX one.

These are the kernels whose emulated run the PyTorch front end's eager matmul reproduces bit
for bit (``trnsim.torch.gemm``; tests/test_torch_gemm.py):

- ``convert(x, dtype)``: ``x [R, C]`` fp32 rounded to ``dtype`` by ``tensor_copy``, 128 rows
  at a time (RNE, or stochastic with ``NEURON_RT_STOCHASTIC_ROUNDING_EN=1`` / ``rounding=``);
- ``gemm(aT, b, out_dtype)``: ``C[M, N] = aT[K, M].T @ b[K, N]`` in output tiles of 128 x 512
  (row-major), K tiles of 128 accumulated in one fp32 PSUM bank, each tile written in
  ``out_dtype`` by ``tensor_copy``;
- ``gemm_mx(a_words, a_scales, b_words, b_scales, a_fmt, b_fmt, out_dtype)`` (the formats
  are x4 dtype names, e.g. ``"float8_e4m3fn_x4"``): the same with ``nc_matmul_mx``
  on MX operands in the device layout (``trnsim.torch.gemm.mx_device_layout``), K tiles of 512.

``trnsim run examples/kernels/trn_gemm.py`` runs ``gemm`` on bf16 inputs.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

KERNEL = "gemm"
TOLERANCE = {"rtol": 2**-7, "atol": 1e-3}  # one bf16 rounding of an fp32 sum

P, TILE_M, TILE_N = 128, 128, 512


@nki.jit
def convert(x, dtype):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=dtype, buffer=nl.shared_hbm)
    for r0 in range(0, R, P):
        rows = min(P, R - r0)
        src = nl.ndarray((rows, C), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x[r0 : r0 + rows, :])
        dst = nl.ndarray((rows, C), dtype=dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dst, src=src)
        nisa.dma_copy(dst=out[r0 : r0 + rows, :], src=dst)
    return out


@nki.jit
def gemm(aT, b, out_dtype=nl.bfloat16):
    K, M = aT.shape
    _, N = b.shape
    result = nl.ndarray((M, N), dtype=out_dtype, buffer=nl.shared_hbm)
    for m0 in range(0, M, TILE_M):
        mt = min(TILE_M, M - m0)
        for n0 in range(0, N, TILE_N):
            nt = min(TILE_N, N - n0)
            acc = nl.ndarray((mt, nt), dtype=nl.float32, buffer=nl.psum)
            for k0 in range(0, K, P):
                kt = min(P, K - k0)
                st = nl.ndarray((kt, mt), dtype=aT.dtype, buffer=nl.sbuf)
                mv = nl.ndarray((kt, nt), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=st, src=aT[k0 : k0 + kt, m0 : m0 + mt])
                nisa.dma_copy(dst=mv, src=b[k0 : k0 + kt, n0 : n0 + nt])
                nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
            out = nl.ndarray((mt, nt), dtype=out_dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m0 : m0 + mt, n0 : n0 + nt], src=out)
    return result


@nki.jit(platform_target="trn3")
def gemm_mx(a_words, a_scales, b_words, b_scales, a_fmt, b_fmt, out_dtype=nl.float32):
    KP, M = a_words.shape
    _, N = b_words.shape
    a_fmt, b_fmt = getattr(nl, a_fmt), getattr(nl, b_fmt)  # x4 dtype names
    result = nl.ndarray((M, N), dtype=out_dtype, buffer=nl.shared_hbm)
    for m0 in range(0, M, TILE_M):
        mt = min(TILE_M, M - m0)
        for n0 in range(0, N, TILE_N):
            nt = min(TILE_N, N - n0)
            acc = nl.ndarray((mt, nt), dtype=nl.float32, buffer=nl.psum)
            for p0 in range(0, KP, P):
                pt = min(P, KP - p0)
                st = nl.ndarray((pt, mt), dtype=a_fmt, buffer=nl.sbuf)
                mv = nl.ndarray((pt, nt), dtype=b_fmt, buffer=nl.sbuf)
                ss = nl.ndarray((pt, mt), dtype=nl.uint8, buffer=nl.sbuf)
                ms = nl.ndarray((pt, nt), dtype=nl.uint8, buffer=nl.sbuf)
                nisa.dma_copy(dst=st, src=a_words[p0 : p0 + pt, m0 : m0 + mt].view(a_fmt))
                nisa.dma_copy(dst=mv, src=b_words[p0 : p0 + pt, n0 : n0 + nt].view(b_fmt))
                nisa.dma_copy(dst=ss, src=a_scales[p0 : p0 + pt, m0 : m0 + mt])
                nisa.dma_copy(dst=ms, src=b_scales[p0 : p0 + pt, n0 : n0 + nt])
                nisa.nc_matmul_mx(
                    dst=acc, stationary=st, moving=mv, stationary_scale=ss, moving_scale=ms
                )
            out = nl.ndarray((mt, nt), dtype=out_dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m0 : m0 + mt, n0 : n0 + nt], src=out)
    return result


def make_inputs(rng, K=384, M=200, N=600):
    aT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    return aT, b


def golden(aT, b):
    """fp32 matmul of the bf16 inputs, rounded to bf16 (RNE)."""
    return (aT.astype(np.float32).T @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
