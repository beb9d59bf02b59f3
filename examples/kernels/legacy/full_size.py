"""Full-size kernels in the legacy API (``neuronxcc.nki``), written for trnsim in the shapes
public kernels use, for the speed benchmark of issue 27 (``benchmarks/bench_legacy_full.py``):

- ``matmul``: ``out[M, N] = lhsT[K, M].T @ rhs[K, N]`` in bf16 with fp32 accumulation, blocked
  as the SDK 2.26 matrix-multiplication tutorial's last step describes (M, N and K blocks, the
  result block kept in SBUF and the K blocks added into it); 4096 x 12288 x 5120 in the
  benchmark.
- ``bmm``: ``out[b] = a[b].T @ x[b]`` as a compiler's NKI emitter writes a batched matmul: block
  tensors over the batch, lazily zeroed PSUM accumulators, affine masks on a ragged last column
  tile.
- ``lora``: ``out[M, N] = W[K, M].T @ X[K, N] + alpha * B[R, M].T @ (A[K, R].T @ X)``, the LoRA
  update added into the base matmul's PSUM accumulation group.

``make_inputs(name, ...)`` and ``golden(name, ...)`` (NumPy, float64 accumulation) go with each.
"""

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

BF16 = ml_dtypes.bfloat16
TK, TM, TN = 128, 128, 512  # contraction (partitions), stationary free, moving free


@nki.jit
def matmul(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    BM, BN, BK = min(16, M // TM), min(2, N // TN), min(8, K // TK)  # tiles per block
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // (TN * BN)):
        for m in nl.affine_range(M // (TM * BM)):
            res = nl.zeros((BM, BN, nl.par_dim(TM), TN), dtype=nl.float32, buffer=nl.sbuf)
            for k in nl.affine_range(K // (TK * BK)):
                lt = nl.ndarray((BK, nl.par_dim(TK), BM * TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rt = nl.ndarray((BK, nl.par_dim(TK), BN * TN), dtype=rhs.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(BK):
                    k0 = (k * BK + bk) * TK
                    lt[bk] = nl.load(lhsT[k0 : k0 + TK, m * BM * TM : (m + 1) * BM * TM])
                    rt[bk] = nl.load(rhs[k0 : k0 + TK, n * BN * TN : (n + 1) * BN * TN])
                for bm in nl.affine_range(BM):
                    for bn in nl.affine_range(BN):
                        ps = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(BK):
                            ps += nl.matmul(
                                lt[bk, :, bm * TM : (bm + 1) * TM],
                                rt[bk, :, bn * TN : (bn + 1) * TN],
                                transpose_x=True,
                            )
                        res[bm, bn] = nl.loop_reduce(ps, op=np.add, loop_indices=[k])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    r0, c0 = (m * BM + bm) * TM, (n * BN + bn) * TN
                    nl.store(out[r0 : r0 + TM, c0 : c0 + TN], value=nl.copy(res[bm, bn]))
    return out


@nki.jit
def bmm(a, x):
    nb, k, m = a.shape
    n = x.shape[2]
    kt, mt, nt = k // TK, m // TM, (n + TN - 1) // TN
    out = nl.ndarray((nb, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((nb, kt, nl.par_dim(TK), m), dtype=a.dtype, buffer=nl.sbuf)
    x_sb = nl.ndarray((nb, kt, nl.par_dim(TK), nt * TN), dtype=x.dtype, buffer=nl.sbuf)
    ps = nl.zeros(
        (nb, mt, nt, nl.par_dim(TM), TN), dtype=nl.float32, buffer=nl.psum,
        lazy_initialization=True,
    )  # fmt: skip
    res = nl.ndarray((nb, mt, nt, nl.par_dim(TM), TN), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_m = nl.mgrid[0:TK, 0:m]
    j_p, j_f = nl.mgrid[0:TK, 0:TN]
    for i0 in nl.affine_range(nb):
        for i1 in nl.affine_range(kt):
            a_sb[i0, i1, i_p, i_m] = nl.load(a[i0, i1 * TK + i_p, i_m])
            for i2 in nl.affine_range(nt):
                x_sb[i0, i1, j_p, i2 * TN + j_f] = nl.load(
                    x[i0, i1 * TK + j_p, i2 * TN + j_f], mask=(i2 * TN + j_f < n)
                )
        for i3 in nl.affine_range(mt):
            for i2 in nl.affine_range(nt):
                for i1 in nl.affine_range(kt):
                    ps[i0, i3, i2, j_p, j_f] += nisa.nc_matmul(
                        a_sb[i0, i1, j_p, i3 * TM + nl.arange(TM)[None, :]],
                        x_sb[i0, i1, j_p, i2 * TN + j_f],
                        mask=(i2 * TN + j_f < n),
                    )
                res[i0, i3, i2, j_p, j_f] = nl.copy(
                    ps[i0, i3, i2, j_p, j_f], dtype=nl.float32, mask=(i2 * TN + j_f < n)
                )
                nl.store(
                    out[i0, i3 * TM + j_p, i2 * TN + j_f],
                    value=res[i0, i3, i2, j_p, j_f],
                    mask=(i2 * TN + j_f < n),
                )
    return out


@nki.jit
def lora(x, w, a, b, alpha):
    K, N = x.shape
    M = w.shape[1]
    R = a.shape[1]
    BN = min(4, N // TN)
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // (TN * BN)):
        xt = nl.ndarray((K // TK, nl.par_dim(TK), BN * TN), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TK):
            xt[k] = nl.load(x[k * TK : (k + 1) * TK, n * BN * TN : (n + 1) * BN * TN])
        # the LoRA down projection A.T @ X, scaled by alpha, once per column block
        ax = nl.ndarray((BN, nl.par_dim(R), TN), dtype=x.dtype, buffer=nl.sbuf)
        for bn in nl.affine_range(BN):
            pa = nl.zeros((R, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                at = nl.load(a[k * TK : (k + 1) * TK, :])
                pa += nisa.nc_matmul(at, xt[k, :, bn * TN : (bn + 1) * TN])
            ax[bn] = nl.multiply(pa, alpha, dtype=x.dtype)
        bt = nl.load(b)
        for m in nl.affine_range(M // TM):
            wt = nl.ndarray((K // TK, nl.par_dim(TK), TM), dtype=w.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TK):
                wt[k] = nl.load(w[k * TK : (k + 1) * TK, m * TM : (m + 1) * TM])
            for bn in nl.affine_range(BN):
                ps = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // TK):
                    ps += nisa.nc_matmul(wt[k], xt[k, :, bn * TN : (bn + 1) * TN])
                ps += nisa.nc_matmul(bt[:, m * TM : (m + 1) * TM], ax[bn])  # the LoRA update
                c0 = (n * BN + bn) * TN
                nl.store(out[m * TM : (m + 1) * TM, c0 : c0 + TN], value=nl.copy(ps, dtype=x.dtype))
    return out


SHAPES = {
    "matmul": {"K": 12288, "M": 4096, "N": 5120},
    "bmm": {"B": 16, "K": 512, "M": 2048, "N": 2000},
    "lora": {"K": 4096, "M": 4096, "N": 4096, "R": 64},
}
"""The benchmark's full sizes."""


def make_inputs(name: str, rng=None, empty: bool = False, **shape):
    """Inputs of kernel ``name`` (``SHAPES`` unless given); ``empty``: uninitialised arrays
    (a timing-only run reads none of them)."""
    s = {**SHAPES[name], **shape}

    def arr(*dims, dtype=BF16):
        if empty:
            return np.empty(dims, dtype)
        return rng.integers(-2, 3, dims).astype(dtype)  # exact in bf16 and in fp32 sums

    if name == "matmul":
        return arr(s["K"], s["M"]), arr(s["K"], s["N"])
    if name == "bmm":
        return arr(s["B"], s["K"], s["M"]), arr(s["B"], s["K"], s["N"])
    return arr(s["K"], s["N"]), arr(s["K"], s["M"]), arr(s["K"], s["R"]), arr(s["R"], s["M"]), 0.5


def golden(name: str, *args):
    """NumPy (float64) of kernel ``name``'s result, cast as the kernel casts it."""
    f = [np.asarray(x, np.float64) if isinstance(x, np.ndarray) else x for x in args]
    if name == "matmul":
        return (f[0].T @ f[1]).astype(BF16)
    if name == "bmm":
        return np.matmul(f[0].transpose(0, 2, 1), f[1]).astype(np.float32)
    x, w, a, b, alpha = f
    ax = ((a.T @ x) * alpha).astype(BF16).astype(np.float64)
    return (w.T @ x + b.T @ ax).astype(BF16)


KERNELS = {"matmul": matmul, "bmm": bmm, "lora": lora}
