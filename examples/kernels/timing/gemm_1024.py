"""A bf16 GEMM with both operands resident in SBUF: ``result[M, N] = lhsT[K, M].T @ rhs[K, N]``.

The kernel of the SCALE-Sim side-by-side (``benchmarks/bench_scalesim.py``): M = N = K = 1024.
Both operands fit in SBUF (2 x 16 KiB per partition), so each is loaded once, one
``[128, M]`` / ``[128, N]`` row block of K per DMA, and every output tile is a PSUM
accumulation group of ``K / 128`` matmuls (stationary ``[128, 128]`` of lhsT, moving
``[128, 512]`` of rhs: the largest tiles of ``nl.tile_size``). Each finished tile is copied
PSUM -> SBUF (bf16) by the Vector engine and stored to HBM. For 1024^3 that is
8 (M tiles) x 2 (N tiles) x 8 (K tiles) = 128 matmuls.

``trnsim profile examples/kernels/timing/gemm_1024.py --target gen2`` (the default inputs are
the 1024^3 shape).
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_K = 128  # partition (contraction) tile: nl.tile_size.pmax
TILE_M = 128  # stationary free size: nl.tile_size.gemm_stationary_fmax
TILE_N = 512  # moving free size: nl.tile_size.gemm_moving_fmax (one fp32 PSUM bank)

SHAPE = (1024, 1024, 1024)  # M, N, K of the side-by-side


@nki.jit
def gemm(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    NUM_K = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhsT_tiles = nl.ndarray((TILE_K, NUM_K, M), lhsT.dtype, nl.sbuf)
    rhs_tiles = nl.ndarray((TILE_K, NUM_K, N), rhs.dtype, nl.sbuf)
    for k in nl.affine_range(NUM_K):
        nisa.dma_copy(dst=lhsT_tiles[:, k, :], src=lhsT[k * TILE_K : (k + 1) * TILE_K, :])
        nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[k * TILE_K : (k + 1) * TILE_K, :])
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(NUM_K):
                nisa.nc_matmul(
                    dst=res_psum,
                    stationary=lhsT_tiles[:, k, m * TILE_M : (m + 1) * TILE_M],
                    moving=rhs_tiles[:, k, n * TILE_N : (n + 1) * TILE_N],
                )
            res_sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N],
                src=res_sb,
            )
    return result


def make_inputs(rng=None, M=SHAPE[0], N=SHAPE[1], K=SHAPE[2], empty=False):
    """``(lhsT[K, M], rhs[K, N])`` in bf16; ``empty=True`` skips the data (timing-only runs)."""
    if empty:
        return np.empty((K, M), ml_dtypes.bfloat16), np.empty((K, N), ml_dtypes.bfloat16)
    rng = rng or np.random.default_rng(0)
    lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    return lhsT, rhs


def golden(lhsT, rhs):
    return (lhsT.astype(np.float32).T @ rhs.astype(np.float32)).astype(ml_dtypes.bfloat16)


KERNEL = "gemm"


if __name__ == "__main__":
    lhsT, rhs = make_inputs(np.random.default_rng(0))
    got = gemm(lhsT, rhs).astype(np.float32)
    want = golden(lhsT, rhs).astype(np.float32)
    print(f"gemm 1024^3: max |err| vs golden = {np.abs(got - want).max():g}")
