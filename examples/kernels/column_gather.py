"""Column gather and scatter with Tensor Indirection (``NkiTensor.indirect``, NeuronCore-v4).

``topk_column_matmul(x [128, V] bf16, w [128, M] bf16, scores [1, V] fp32) -> [M, 8] fp32``:
``w.T @ x[:, top8]`` where ``top8`` are the columns of the 8 largest ``scores``, in descending
order -- found **on the device** (``max8`` + ``nc_find_index8``), so the gather offsets exist
only at run time. The matmul's ``moving`` operand is ``x_sb.indirect(idx, num_elem=8)``: the
Tensor engine reads its 8 columns through TI (no copy of the gathered columns).

``scatter_columns(x [128, F] fp32, dest [1, F] int32) -> [128, F]``: ``out[:, dest[i]] =
x[:, i]`` (``dest`` a permutation), one Vector-engine ``tensor_copy`` whose ``dst`` is
``out_sb.indirect(idx, num_elem=F)`` (a scatter).

The index tile layout is the documented snake per group of G partitions: offset ``i`` of a
group starting at partition ``s`` is ``idx[s + i % G, i // G]``, G = 32 on the Tensor engine
and 16 on the Vector engine (SDK ``NkiTensor.indirect`` docstring; NKI tensor-indirection
tutorial). Every partition here gathers the same columns, so each group holds the same
offsets: a DMA access pattern writes them straight into that layout. trnsim's rules for TI
(offset units, bounds, duplicates): ``trnsim.core.indirect``.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

KERNEL = "topk_column_matmul"
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}  # bf16 products, fp32 accumulation (order differs)
TOLERANCE_scatter_columns = {"rtol": 0.0, "atol": 0.0}  # a scatter is a bit-exact copy

TE_GROUP = 32  # Tensor-engine TI group size (NkiTensor.indirect docstring)
VE_GROUP = 16  # Vector-engine TI group size (same source)


@nki.jit
def topk_column_matmul(x, w, scores):
    K, V = x.shape
    M = w.shape[1]
    out = nl.ndarray((M, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((K, V), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    w_sb = nl.ndarray((K, M), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)

    # top-8 columns by score, on the device: values, then their positions (uint32 [1, 8])
    s = nl.ndarray((1, V), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=scores)
    best = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=best, src=s)
    cols = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=cols, data=s, vals=best)

    # index tile [K, 1]: offset i of each 32-partition group at idx[g*32 + i, 0] (i < 8)
    col_t = nl.ndarray((8, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=col_t, data=cols, engine=nisa.vector_engine)
    idx = nl.ndarray((K, 1), dtype=nl.uint32, buffer=nl.sbuf)
    for g in nl.static_range(K // TE_GROUP):
        nisa.dma_copy(dst=idx[g * TE_GROUP : g * TE_GROUP + 8, :], src=col_t)

    ps = nl.ndarray((M, 8), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=w_sb, moving=x_sb.indirect(idx, num_elem=8))
    res = nl.ndarray((M, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def scatter_columns(x, dest):
    P, F = x.shape
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    # idx[g*16 + j, c] = dest[c*16 + j] for every 16-partition group g: one strided DMA each
    idx = nl.ndarray((P, F // VE_GROUP), dtype=nl.int32, buffer=nl.sbuf)
    for g in nl.static_range(P // VE_GROUP):
        nisa.dma_copy(
            dst=idx[g * VE_GROUP : (g + 1) * VE_GROUP, :],
            src=dest.ap(pattern=[[1, VE_GROUP], [VE_GROUP, F // VE_GROUP]], offset=0),
        )
    out_sb = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_sb.indirect(idx, num_elem=F), src=x_sb, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out, src=out_sb)
    return out


def make_inputs_topk_column_matmul(rng, V=512, M=64):
    x = rng.standard_normal((128, V)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((128, M)).astype(ml_dtypes.bfloat16)
    scores = rng.permutation(V).astype(np.float32).reshape(1, V)  # distinct scores
    return x, w, scores


def golden_topk_column_matmul(x, w, scores):
    top8 = np.argsort(-scores[0], kind="stable")[:8]
    return w.astype(np.float32).T @ x[:, top8].astype(np.float32)


def make_inputs_scatter_columns(rng, F=256):
    x = rng.standard_normal((128, F)).astype(np.float32)
    dest = rng.permutation(F).astype(np.int32).reshape(1, F)
    return x, dest


def golden_scatter_columns(x, dest):
    out = np.empty_like(x)
    out[:, dest[0]] = x
    return out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    args = make_inputs_topk_column_matmul(rng)
    got = topk_column_matmul(*args)
    want = golden_topk_column_matmul(*args)
    print("top-k column matmul max abs err:", float(np.abs(got - want).max()))
    args = make_inputs_scatter_columns(rng)
    print("scatter exact:", np.array_equal(scatter_columns(*args), golden_scatter_columns(*args)))
