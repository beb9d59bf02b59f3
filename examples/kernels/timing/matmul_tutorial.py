"""The four matmul kernels of the NKI matrix-multiplication tutorial, written for trnsim.

``result[M, N] = lhsT[K, M].T @ rhs[K, N]`` in bf16 with fp32 PSUM accumulation. The variants
follow the tutorial's descriptions (SDK-2.26 ``general/nki/tutorials/matrix_multiplication.rst``;
published Trn1 latencies in ``shared/calibration/trainium.md`` section A):

1. ``tiled``: 128x128 stationary, 512 moving; both tiles loaded inside the innermost loop.
2. ``hoisted``: the lhsT column of tiles is loaded once per M tile, the rhs column once per
   N tile (loads hoisted out of the K loop).
3. ``blocked``: the free dimensions are blocked (2 M tiles x 2 N tiles), so each loaded tile
   is reused by several output tiles.
4. ``optimized``: M, N and K are blocked (16 x 2 x 8 tiles) with the result block kept in SBUF
   and the K blocks accumulated into it.

Profile it: ``trnsim profile examples/kernels/timing/matmul_tutorial.py --kernel optimized``
(the default inputs are small; ``--full`` times the tutorial's M=4096, K=8192, N=8192).
Tiles are allocated inside the loops: trnsim's allocator frees a tile when its last reference
goes, so re-allocating in a loop gives two alternating buffers (double buffering), as the NKI
compiler would.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_K = 128  # partition (contraction) tile: nl.tile_size.pmax
TILE_M = 128  # stationary free size: nl.tile_size.gemm_stationary_fmax
TILE_N = 512  # moving free size: nl.tile_size.gemm_moving_fmax (one fp32 PSUM bank)


@nki.jit
def tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
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
            res_sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N],
                src=res_sb,
            )
    return result


@nki.jit
def hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    NUM_K = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # Two buffers of each kind (double buffering, as the compiler allocates them).
    lhsT_bufs = [nl.ndarray((TILE_K, NUM_K, TILE_M), lhsT.dtype, nl.sbuf) for _ in range(2)]
    rhs_bufs = [nl.ndarray((TILE_K, NUM_K, TILE_N), rhs.dtype, nl.sbuf) for _ in range(2)]
    out_bufs = [nl.ndarray((TILE_M, TILE_N), lhsT.dtype, nl.sbuf) for _ in range(2)]
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = lhsT_bufs[m % 2]
        for k in nl.affine_range(NUM_K):
            nisa.dma_copy(
                dst=lhsT_tiles[:, k, :],
                src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M],
            )
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = rhs_bufs[n % 2]
            for k in nl.affine_range(NUM_K):
                nisa.dma_copy(
                    dst=rhs_tiles[:, k, :],
                    src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N],
                )
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(NUM_K):
                nisa.nc_matmul(
                    dst=res_psum, stationary=lhsT_tiles[:, k, :], moving=rhs_tiles[:, k, :]
                )
            res_sb = out_bufs[n % 2]
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N],
                src=res_sb,
            )
    return result


@nki.jit
def blocked(lhsT, rhs, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    NUM_K = K // TILE_K
    BLOCK_M, BLOCK_N = TILE_M * TILES_IN_BLOCK_M, TILE_N * TILES_IN_BLOCK_N
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # One buffer per block: a second rhs block (128 KiB/partition) does not fit v2's SBUF.
    lhsT_tiles = nl.ndarray((TILE_K, TILES_IN_BLOCK_M, NUM_K, TILE_M), lhsT.dtype, nl.sbuf)
    rhs_tiles = nl.ndarray((TILE_K, TILES_IN_BLOCK_N, NUM_K, TILE_N), rhs.dtype, nl.sbuf)
    for m in nl.affine_range(M // BLOCK_M):
        for bm in nl.affine_range(TILES_IN_BLOCK_M):
            col = m * BLOCK_M + bm * TILE_M
            for k in nl.affine_range(NUM_K):
                nisa.dma_copy(
                    dst=lhsT_tiles[:, bm, k, :],
                    src=lhsT[k * TILE_K : (k + 1) * TILE_K, col : col + TILE_M],
                )
        for n in nl.affine_range(N // BLOCK_N):
            for bn in nl.affine_range(TILES_IN_BLOCK_N):
                col = n * BLOCK_N + bn * TILE_N
                for k in nl.affine_range(NUM_K):
                    nisa.dma_copy(
                        dst=rhs_tiles[:, bn, k, :],
                        src=rhs[k * TILE_K : (k + 1) * TILE_K, col : col + TILE_N],
                    )
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(NUM_K):
                        nisa.nc_matmul(
                            dst=res_psum,
                            stationary=lhsT_tiles[:, bm, k, :],
                            moving=rhs_tiles[:, bn, k, :],
                        )
                    res_sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=res_sb, src=res_psum)
                    row, col = m * BLOCK_M + bm * TILE_M, n * BLOCK_N + bn * TILE_N
                    nisa.dma_copy(dst=result[row : row + TILE_M, col : col + TILE_N], src=res_sb)
    return result


@nki.jit
def optimized(lhsT, rhs, TILES_IN_BLOCK_M=16, TILES_IN_BLOCK_N=2, TILES_IN_BLOCK_K=8):
    K, M = lhsT.shape
    _, N = rhs.shape
    BLOCK_M = TILE_M * TILES_IN_BLOCK_M
    BLOCK_N = TILE_N * TILES_IN_BLOCK_N
    BLOCK_K = TILE_K * TILES_IN_BLOCK_K
    NUM_BLOCK_M, NUM_BLOCK_N, NUM_BLOCK_K = M // BLOCK_M, N // BLOCK_N, K // BLOCK_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # The result block of one N block (every M block), kept in SBUF over the K loop, and two
    # buffers for each operand block (double buffering).
    acc = nl.ndarray((TILE_M, NUM_BLOCK_M, TILES_IN_BLOCK_M, BLOCK_N), lhsT.dtype, nl.sbuf)
    rhs_bufs = [nl.ndarray((TILE_K, TILES_IN_BLOCK_K, BLOCK_N), rhs.dtype, nl.sbuf) for _ in "ab"]
    lhsT_bufs = [nl.ndarray((TILE_K, TILES_IN_BLOCK_K, BLOCK_M), lhsT.dtype, nl.sbuf) for _ in "ab"]
    step = 0
    for n in nl.affine_range(NUM_BLOCK_N):
        nisa.memset(dst=acc, value=0.0)
        for kb in nl.sequential_range(NUM_BLOCK_K):
            rhs_tiles = rhs_bufs[kb % 2]
            for bk in nl.affine_range(TILES_IN_BLOCK_K):
                row = (kb * TILES_IN_BLOCK_K + bk) * TILE_K
                nisa.dma_copy(
                    dst=rhs_tiles[:, bk, :],
                    src=rhs[row : row + TILE_K, n * BLOCK_N : (n + 1) * BLOCK_N],
                )
            for m in nl.affine_range(NUM_BLOCK_M):
                lhsT_tiles = lhsT_bufs[step % 2]
                step += 1
                for bk in nl.affine_range(TILES_IN_BLOCK_K):
                    row = (kb * TILES_IN_BLOCK_K + bk) * TILE_K
                    nisa.dma_copy(
                        dst=lhsT_tiles[:, bk, :],
                        src=lhsT[row : row + TILE_K, m * BLOCK_M : (m + 1) * BLOCK_M],
                    )
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    for bm in nl.affine_range(TILES_IN_BLOCK_M):
                        res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(TILES_IN_BLOCK_K):
                            nisa.nc_matmul(
                                dst=res_psum,
                                stationary=lhsT_tiles[:, bk, bm * TILE_M : (bm + 1) * TILE_M],
                                moving=rhs_tiles[:, bk, bn * TILE_N : (bn + 1) * TILE_N],
                            )
                        out = acc[:, m, bm, bn * TILE_N : (bn + 1) * TILE_N]
                        nisa.tensor_tensor(dst=out, data1=out, data2=res_psum, op=nl.add)
        for m in nl.affine_range(NUM_BLOCK_M):
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                row = m * BLOCK_M + bm * TILE_M
                nisa.dma_copy(
                    dst=result[row : row + TILE_M, n * BLOCK_N : (n + 1) * BLOCK_N],
                    src=acc[:, m, bm, :],
                )
    return result


VARIANTS = {"tiled": tiled, "hoisted": hoisted, "blocked": blocked, "optimized": optimized}
FULL_SHAPE = (4096, 8192, 8192)  # M, K, N of the tutorial


def make_inputs(rng=None, M=2048, K=1024, N=2048, empty=False):
    """``(lhsT[K, M], rhs[K, N])`` in bf16; ``empty=True`` skips the data (timing-only runs)."""
    if empty:
        return np.empty((K, M), ml_dtypes.bfloat16), np.empty((K, N), ml_dtypes.bfloat16)
    rng = rng or np.random.default_rng(0)
    lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    return lhsT, rhs


def golden(lhsT, rhs):
    return (lhsT.astype(np.float32).T @ rhs.astype(np.float32)).astype(ml_dtypes.bfloat16)


KERNEL = "optimized"


if __name__ == "__main__":
    lhsT, rhs = make_inputs(np.random.default_rng(0), M=2048, K=1024, N=2048)
    want = golden(lhsT, rhs).astype(np.float32)
    for name, kernel in VARIANTS.items():
        got = kernel(lhsT, rhs).astype(np.float32)
        print(f"{name:>10}: max |err| vs golden = {np.abs(got - want).max():g}")
