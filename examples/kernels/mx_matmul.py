"""MXFP8 matmul on NeuronCore-v4 with on-device ``quantize_mx``.

``C[M, N] = A[M, K] @ B[K, N]`` with both operands quantized on device to MXFP8 (e4m3fn,
32-element blocks along K) and multiplied by ``nc_matmul_mx``. The contraction runs over
partitions x the 4 values of each x4 word, so the kernel takes the operands in the
"K-interleaved" layout ``a_t[p, 4m + q] = A[m, 4p + q]`` (and likewise for B): each
8-partition x 4-element quantization group is then one 32-long block of K.
K = 512 (128 partitions x 4), M <= 128, N <= 512.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

# the kernel and the golden quantize identically; only fp32 accumulation order differs
TOLERANCE = {"rtol": 1e-6, "atol": 1e-5}


@nki.jit(platform_target="trn3")
def mxfp8_matmul(a_t, b_t):
    P, M4 = a_t.shape
    _, N4 = b_t.shape
    M, N = M4 // 4, N4 // 4
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((P, M4), dtype=a_t.dtype, buffer=nl.sbuf)
    b = nl.ndarray((P, N4), dtype=b_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=a_t)
    nisa.dma_copy(dst=b, src=b_t)
    a_q = nl.ndarray((P, M), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    b_q = nl.ndarray((P, N), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    a_s = nl.ndarray((P, M), dtype=nl.uint8, buffer=nl.sbuf)
    b_s = nl.ndarray((P, N), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=a_q, src=a, dst_scale=a_s)
    nisa.quantize_mx(dst=b_q, src=b, dst_scale=b_s)
    c_psum = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(
        dst=c_psum, stationary=a_q, moving=b_q, stationary_scale=a_s, moving_scale=b_s
    )
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=c_psum)
    nisa.dma_copy(dst=out, src=c)
    return out


def interleave_k(x_mk):
    """``[M, K] -> [K/4, 4M]`` with ``out[p, 4m + q] = x[m, 4p + q]``."""
    m, k = x_mk.shape
    return np.ascontiguousarray(
        x_mk.reshape(m, k // 4, 4).transpose(1, 0, 2).reshape(k // 4, 4 * m)
    )


def deinterleave_k(x_t):
    """Inverse of ``interleave_k``: ``[K/4, 4M] -> [M, K]``."""
    p, m4 = x_t.shape
    return np.ascontiguousarray(
        x_t.reshape(p, m4 // 4, 4).transpose(1, 0, 2).reshape(m4 // 4, 4 * p)
    )


def make_inputs(rng, M=128, K=512, N=256):
    """(a_t, b_t): A [M, K] and B [K, N] (bf16) in the K-interleaved layout."""
    A = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    return interleave_k(A), interleave_k(B.T)


def golden(a_t, b_t):
    """MX quantization (NKI scale rule, blocks of 32 along K) by trnsim.numerics.mx, then an
    exact float64 product of the dequantized operands."""
    from trnsim.numerics import mx

    A, B = deinterleave_k(a_t), deinterleave_k(b_t).T

    qa = mx.quantize(A.astype(np.float32), "float8_e4m3fn", axis=1, block=32, scale_rule="nki")
    qb = mx.quantize(B.astype(np.float32), "float8_e4m3fn", axis=0, block=32, scale_rule="nki")
    return (mx.dequantize(qa).astype(np.float64) @ mx.dequantize(qb).astype(np.float64)).astype(
        np.float32
    )


if __name__ == "__main__":
    a_t, b_t = make_inputs(np.random.default_rng(0))
    out = mxfp8_matmul(a_t, b_t)
    print("mxfp8 matmul max |err| vs MX golden:", np.abs(out - golden(a_t, b_t)).max())
