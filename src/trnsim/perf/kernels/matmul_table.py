"""The matmul kernel behind trnsim's compute tables (``trnsim.perf.tables``): the NKI matmul
tutorial's fully optimized blocking (``matmul_tutorial.optimized``), with tile and block sizes
adapted to the shape so that it runs the small and ragged per-rank shapes of tensor-parallel
LLM layers.

``result[P, Q] = a_t[K, P].T @ b[K, Q]``. ``a_t`` is the stationary operand (its P columns are
cut into tiles of at most 128, the array width), ``b`` the moving one (Q cut into tiles of at
most 512, one fp32 PSUM bank), K the contraction (tiles of 128 partitions; 256 with fp8
``double_row``, where each partition holds two K rows, NeuronCore-v3+).

An LLM matmul ``y[M, N] = x[M, K] @ W[K, N]`` runs either way round: tokens stationary
(``a_t = x.T``, ``b = W``; the tutorial's layout) or weights stationary (``a_t = W``,
``b = x.T``, result ``y.T``), which suits few tokens: a moving tile of M < 128 columns is
cheaper than streaming 512 weight columns past one token. The table generator times both.

Blocks: up to 16 stationary tiles x 2 moving tiles x 8 K tiles (the tutorial's 16 x 2 x 8),
fewer when the shape is smaller. Tiles are allocated inside the loops (double buffering, as
in ``matmul_tutorial``).

Ships in the package (tables rebuild from an installed trnsim); an NKI kernel file.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

MAX_TILE_P = 128  # stationary free size: nl.tile_size.gemm_stationary_fmax
MAX_TILE_Q = 512  # moving free size: nl.tile_size.gemm_moving_fmax (one fp32 PSUM bank)
PMAX = 128  # partitions: nl.tile_size.pmax
BLOCK_TILES = (16, 2, 8)  # stationary, moving, K tiles per block (the tutorial's blocking)


def tiles(P, Q, K, double_row=False):
    """(tile_p, tile_q, tile_k, block_p, block_q, block_k) in elements for a shape."""
    tp, tq = min(MAX_TILE_P, P), min(MAX_TILE_Q, Q)
    tk = min(PMAX, K) * (2 if double_row else 1)
    bp = tp * min(BLOCK_TILES[0], P // tp)
    bq = tq * min(BLOCK_TILES[1], Q // tq)
    bk = tk * min(BLOCK_TILES[2], K // tk)
    return tp, tq, tk, bp, bq, bk


@nki.jit
def blocked_matmul(a_t, b, double_row=False):
    K, P = a_t.shape
    _, Q = b.shape
    double_row = double_row and K >= 2 * PMAX  # a single K tile runs in the normal mode
    TP, TQ, TK, BP, BQ, BK = tiles(P, Q, K, double_row)
    rows = (2,) if double_row else ()  # K rows per partition beyond the first
    KP = TK // 2 if double_row else TK  # partitions used
    NTP, NTQ, NTK = BP // TP, BQ // TQ, BK // TK
    NBP, NBQ, NBK = P // BP, Q // BQ, K // BK
    mode = nisa.matmul_perf_mode.double_row if double_row else None
    out_dt = nl.bfloat16
    result = nl.ndarray((P, Q), dtype=out_dt, buffer=nl.shared_hbm)
    # The result of one Q block (all P blocks) kept in SBUF over the K loop.
    acc = nl.ndarray((TP, NBP, NTP, BQ), out_dt, nl.sbuf)
    for q in nl.affine_range(NBQ):
        nisa.memset(dst=acc, value=0.0)
        for kb in nl.sequential_range(NBK):
            b_tiles = nl.ndarray((KP, NTK, *rows, BQ), b.dtype, nl.sbuf)
            for bk in nl.affine_range(NTK):
                row = (kb * NTK + bk) * TK
                src = b[row : row + TK, q * BQ : (q + 1) * BQ]
                nisa.dma_copy(dst=b_tiles[:, bk], src=src.reshape((KP, *rows, BQ)))
            for p in nl.affine_range(NBP):
                a_tiles = nl.ndarray((KP, NTK, *rows, BP), a_t.dtype, nl.sbuf)
                for bk in nl.affine_range(NTK):
                    row = (kb * NTK + bk) * TK
                    src = a_t[row : row + TK, p * BP : (p + 1) * BP]
                    nisa.dma_copy(dst=a_tiles[:, bk], src=src.reshape((KP, *rows, BP)))
                for bq in nl.affine_range(NTQ):
                    for bp in nl.affine_range(NTP):
                        res_psum = nl.ndarray((TP, TQ), nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(NTK):
                            st = a_tiles[:, bk, ..., bp * TP : (bp + 1) * TP]
                            mv = b_tiles[:, bk, ..., bq * TQ : (bq + 1) * TQ]
                            nisa.nc_matmul(dst=res_psum, stationary=st, moving=mv, perf_mode=mode)
                        out = acc[:, p, bp, bq * TQ : (bq + 1) * TQ]
                        nisa.tensor_tensor(dst=out, data1=out, data2=res_psum, op=nl.add)
        for p in nl.affine_range(NBP):
            for bp in nl.affine_range(NTP):
                row = p * BP + bp * TP
                nisa.dma_copy(
                    dst=result[row : row + TP, q * BQ : (q + 1) * BQ], src=acc[:, p, bp, :]
                )
    return result


DTYPES = {"bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3}


def make_inputs(rng=None, P=256, K=512, Q=1024, dtype="bf16", empty=False):
    """``(a_t[K, P], b[K, Q])``; ``empty=True`` skips the data (timing-only runs)."""
    dt = DTYPES[dtype]
    if empty:
        return np.empty((K, P), dt), np.empty((K, Q), dt)
    rng = rng or np.random.default_rng(0)
    a_t = rng.standard_normal((K, P)).astype(dt)
    b = rng.standard_normal((K, Q)).astype(dt)
    return a_t, b


def golden(a_t, b):
    return (a_t.astype(np.float32).T @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)


KERNEL = "blocked_matmul"
TOLERANCE = {"rtol": 2**-6, "atol": 0.5}


if __name__ == "__main__":
    a_t, b = make_inputs(np.random.default_rng(0), P=64, K=384, Q=256)
    got = blocked_matmul(a_t, b).astype(np.float32)
    print("max |err| vs golden:", np.abs(got - golden(a_t, b).astype(np.float32)).max())
