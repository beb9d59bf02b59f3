"""The attention kernel behind ``trnsim microbench`` (``trnsim.perf.microbench``): one head of
flash-style attention forward in bf16, online softmax, scores kept on chip.

``o[S, d] = softmax(q k^T * scale (+ causal mask)) v`` with ``q_t [d, S]`` and ``k_t [d, S]``
(transposed, head dim d <= 128 on partitions) and ``v [S, d]``, bf16; S a multiple of 128 (and
of 512 above 512). K and V are loaded into SBUF once per head. Per 128-row query tile: a
running max ``m`` (kept on the unscaled scores), sum ``l`` and fp32 accumulator ``acc``; per
block of 512 keys (one fp32 PSUM bank): the scores in PSUM (one ``nc_matmul``), masked where
the block crosses the diagonal (``affine_select``), exponentiated as ``exp(scale x s - scale x
max)`` straight from PSUM (Scalar engine, with the row sum), the probabilities cast to bf16
(``bf16_psum``: NeuronCore-v3+; fp32 through the transpose on v2, whose PSUM holds no bf16),
transposed on the Tensor engine 128 keys at a time and multiplied by ``v``, the products
accumulated in one PSUM group. ``attention_fwd`` is causal (key blocks past the diagonal
skipped); ``attention_full`` sees every key.

Ships in the package (an installed trnsim can time it); an NKI kernel file.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}


@nki.jit
def attention_fwd(q_t, k_t, v, bf16_psum=True):
    """Causal attention (key blocks past the diagonal skipped)."""
    return _attention(q_t, k_t, v, True, bf16_psum)


@nki.jit
def attention_full(q_t, k_t, v, bf16_psum=True):
    """Bidirectional attention: every key block."""
    return _attention(q_t, k_t, v, False, bf16_psum)


def _attention(q_t, k_t, v, causal, bf16_psum):
    d, S = q_t.shape
    T = nl.tile_size.pmax  # 128 queries per tile, 128 keys per transpose / P.V matmul
    KB = min(nl.tile_size.gemm_moving_fmax, S)  # keys per score tile (one PSUM bank)
    NB = KB // T
    scale = 1.0 / np.sqrt(d)
    # the probabilities are transposed on the Tensor engine, whose output dtype is its input's:
    # bf16 where PSUM holds bf16 (NeuronCore-v3+), else fp32
    p_dt = v.dtype if bf16_psum else nl.float32
    out = nl.ndarray((S, d), dtype=v.dtype, buffer=nl.shared_hbm)
    # K and V stay in SBUF for the whole head (S x d x 2 bytes each: 2 MiB at S = 8192)
    k_all = nl.ndarray((d, S), dtype=k_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=k_all, src=k_t)
    v_all = nl.ndarray((T, S // T, d), dtype=v.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(S // T):
        nisa.dma_copy(dst=v_all[:, t, :], src=v[t * T : (t + 1) * T, :])
    for i in nl.affine_range(S // T):
        q = nl.ndarray((d, T), dtype=q_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q, src=q_t[:, i * T : (i + 1) * T])
        m = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        l = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        acc = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=m, value=-3.0e38)
        nisa.memset(dst=l, value=0.0)
        nisa.memset(dst=acc, value=0.0)
        last = (i * T + T - 1) // KB if causal else S // KB - 1  # key blocks this tile sees
        for j in range(last + 1):
            s_psum = nl.ndarray((T, KB), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum, stationary=q, moving=k_all[:, j * KB : (j + 1) * KB])
            s = s_psum  # raw scores q.k; the scale is applied inside the exponential
            if causal and (j + 1) * KB > i * T:  # keep key <= query: p - f + offset >= 0
                s = nl.ndarray((T, KB), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=s, src=s_psum)  # GpSimd cannot read PSUM
                nisa.affine_select(
                    dst=s,
                    pattern=[[-1, KB]],
                    on_true_tile=s,
                    on_false_value=-3.0e38,
                    cmp_op=nl.greater_equal,
                    offset=i * T - j * KB,
                    channel_multiplier=1,
                )
            row_max = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=s, axis=1, keepdims=True)
            m_new = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=m_new, data1=m, data2=row_max, op=nl.maximum)
            neg_m = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)  # -scale x max
            nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-scale)
            p = nl.ndarray((T, KB), dtype=p_dt, buffer=nl.sbuf)
            p_sum = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(
                dst=p,
                op=nl.exp,
                data=s,
                bias=neg_m,
                scale=scale,
                reduce_op=nl.add,
                reduce_res=p_sum,
            )
            corr = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=corr, op=nl.exp, data=m, bias=neg_m, scale=scale)
            nisa.scalar_tensor_tensor(
                dst=l, data=l, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=p_sum
            )
            nisa.tensor_copy(dst=m, src=m_new)
            pv = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.psum)
            for b in range(NB):  # P.V: accumulate the key sub-tiles in one PSUM group
                p_t_psum = nl.ndarray((T, T), dtype=p_dt, buffer=nl.psum)
                nisa.nc_transpose(
                    dst=p_t_psum, data=p[:, b * T : (b + 1) * T], engine=nisa.engine.tensor
                )
                p_t = nl.ndarray((T, T), dtype=v.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=p_t, src=p_t_psum)
                nisa.nc_matmul(dst=pv, stationary=p_t, moving=v_all[:, j * NB + b, :])
            nisa.scalar_tensor_tensor(
                dst=acc, data=acc, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=pv
            )
        r = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=l)
        o = nl.ndarray((T, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=r)
        nisa.dma_copy(dst=out[i * T : (i + 1) * T, :], src=o)
    return out


def golden_attention_fwd(q_t, k_t, v):
    return _golden(q_t, k_t, v, True)


def golden_attention_full(q_t, k_t, v):
    return _golden(q_t, k_t, v, False)


def _golden(q_t, k_t, v, causal):
    d, S = q_t.shape
    s = (q_t.astype(np.float64).T @ k_t.astype(np.float64)) / np.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((S, S), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return ((p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)).astype(v.dtype)


def make_inputs(rng=None, S=256, d=128, empty=False):
    """``(q_t[d, S], k_t[d, S], v[S, d])`` in bf16; ``empty=True`` skips the data."""
    bf16 = ml_dtypes.bfloat16
    if empty:
        return np.empty((d, S), bf16), np.empty((d, S), bf16), np.empty((S, d), bf16)
    rng = rng or np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype(bf16) for s in ((d, S), (d, S), (S, d)))


KERNEL = "attention_fwd"
