"""Tiled bf16 matmul kernels (NKI matmul tutorial style): a basic tiled one and a fully
blocked one. ``result[M, N] = lhsT[K, M].T @ rhs[K, N]``.

Run unmodified on trnsim: ``trnsim run examples/kernels/matmul.py [--kernel matmul_tiled]``.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

KERNEL = "matmul_blocked"
# one bf16 rounding of an fp32 sum: within 1 bf16 ulp of the golden
TOLERANCE = {"rtol": 2**-7, "atol": 1e-3}


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M, TILE_K, TILE_N = (
        nl.tile_size.gemm_stationary_fmax,
        nl.tile_size.pmax,
        nl.tile_size.gemm_moving_fmax,
    )
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=lhsT_tile,
                    src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M],
                )
                nisa.dma_copy(
                    dst=rhs_tile,
                    src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N],
                )
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N], src=res_sb
            )
    return result


@nki.jit
def matmul_blocked(lhsT, rhs, TILES_IN_BLOCK_M=4, TILES_IN_BLOCK_N=2):
    """Blocks M and N: each block's lhsT and rhs tiles are loaded once (with one DMA per
    block row) and reused for every output tile of the block."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_M, TILE_K, TILE_N = (
        nl.tile_size.gemm_stationary_fmax,
        nl.tile_size.pmax,
        nl.tile_size.gemm_moving_fmax,
    )
    BLOCK_M, BLOCK_N = TILE_M * TILES_IN_BLOCK_M, TILE_N * TILES_IN_BLOCK_N
    assert M % BLOCK_M == 0 and N % BLOCK_N == 0 and K % TILE_K == 0
    NUM_K = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BLOCK_M):
        # lhsT block: [TILE_K, NUM_K, BLOCK_M], one DMA per K tile
        lhsT_block = nl.ndarray((TILE_K, NUM_K, BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(NUM_K):
            nisa.dma_copy(
                dst=lhsT_block[:, k, :],
                src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * BLOCK_M : (m + 1) * BLOCK_M],
            )
        for n in nl.affine_range(N // BLOCK_N):
            rhs_block = nl.ndarray((TILE_K, NUM_K, BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(NUM_K):
                nisa.dma_copy(
                    dst=rhs_block[:, k, :],
                    src=rhs[k * TILE_K : (k + 1) * TILE_K, n * BLOCK_N : (n + 1) * BLOCK_N],
                )
            out_block = nl.ndarray(
                (TILE_M, TILES_IN_BLOCK_M, BLOCK_N), dtype=result.dtype, buffer=nl.sbuf
            )
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(NUM_K):
                        nisa.nc_matmul(
                            dst=res_psum,
                            stationary=lhsT_block[:, k, bm * TILE_M : (bm + 1) * TILE_M],
                            moving=rhs_block[:, k, bn * TILE_N : (bn + 1) * TILE_N],
                        )
                    nisa.tensor_copy(
                        dst=out_block[:, bm, bn * TILE_N : (bn + 1) * TILE_N], src=res_psum
                    )
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                row = m * BLOCK_M + bm * TILE_M
                nisa.dma_copy(
                    dst=result[row : row + TILE_M, n * BLOCK_N : (n + 1) * BLOCK_N],
                    src=out_block[:, bm, :],
                )
    return result


def make_inputs(rng, K=256, M=512, N=1024):
    lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    return lhsT, rhs


def golden(lhsT, rhs):
    """fp32 matmul of the bf16 inputs, rounded to bf16 (RNE)."""
    return (lhsT.astype(np.float32).T @ rhs.astype(np.float32)).astype(ml_dtypes.bfloat16)


if __name__ == "__main__":
    lhsT, rhs = make_inputs(np.random.default_rng(0))
    out = matmul_blocked(lhsT, rhs)
    err = np.abs(out.astype(np.float32) - golden(lhsT, rhs).astype(np.float32)).max()
    print(f"matmul_blocked {lhsT.shape} x {rhs.shape}: max |err| vs golden = {err:g}")
