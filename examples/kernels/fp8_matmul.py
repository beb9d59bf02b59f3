"""FP8 matmul with ``perf_mode=double_row`` (NeuronCore-v3+): two K rows per partition.

``result[M, N] = lhsT[K, M].T @ rhs[K, N]`` with fp8 (e4m3) inputs and an fp32 result. In
double-row mode each ``nc_matmul`` contracts 2 x 128 = 256 rows of K: the operands are tiles
``[128, 2, F]`` whose row ``(p, j)`` is K index ``2p + j`` of the chunk, which is just the
contiguous HBM rows ``k0 .. k0 + 256`` reshaped to ``[128, 2, F]``. K a multiple of 256,
M <= 128, N <= 512.

``trnsim run examples/kernels/fp8_matmul.py``.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

# fp8 x fp8 products are exact in fp32; only the fp32 summation order differs from the golden
TOLERANCE = {"rtol": 1e-5, "atol": 1e-4}


@nki.jit
def fp8_matmul_double_row(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    P = nl.tile_size.pmax
    KC = 2 * P  # K rows per double-row instruction
    assert K % KC == 0
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // KC):
        a = nl.ndarray((P, 2, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((P, 2, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * KC : (k + 1) * KC, :].reshape((P, 2, M)))
        nisa.dma_copy(dst=b, src=rhs[k * KC : (k + 1) * KC, :].reshape((P, 2, N)))
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, perf_mode=nisa.matmul_perf_mode.double_row)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=result, src=out)
    return result


def make_inputs(rng, K=1024, M=128, N=512):
    lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.float8_e4m3)
    rhs = rng.standard_normal((K, N)).astype(ml_dtypes.float8_e4m3)
    return lhsT, rhs


def golden(lhsT, rhs):
    """Exact float64 product of the fp8 values, rounded once to fp32."""
    return (lhsT.astype(np.float64).T @ rhs.astype(np.float64)).astype(np.float32)


if __name__ == "__main__":
    lhsT, rhs = make_inputs(np.random.default_rng(0))
    out = fp8_matmul_double_row(lhsT, rhs)
    print("fp8 double-row matmul max |err| vs golden:", np.abs(out - golden(lhsT, rhs)).max())
