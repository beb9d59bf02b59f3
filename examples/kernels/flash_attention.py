"""Causal flash-attention forward (one head, online softmax), fp32.

Inputs: ``q_t [d, S]`` and ``k_t [d, S]`` (transposed, head dim d <= 128 on partitions),
``v [S, d]``; output ``o [S, d] = softmax(q k^T * scale + causal mask) v``. S is a multiple
of 128. Each 128-row query tile keeps a running max ``m``, a running sum ``l`` and an
accumulator ``acc``; key tiles past the diagonal are skipped, the diagonal tile is masked
with ``affine_select``.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


@nki.jit
def flash_attention_fwd(q_t, k_t, v, softmax_scale=None):
    d, S = q_t.shape
    T = nl.tile_size.pmax
    scale = softmax_scale if softmax_scale is not None else 1.0 / np.sqrt(d)
    out = nl.ndarray((S, d), dtype=v.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(S // T):
        q = nl.ndarray((d, T), dtype=q_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q, src=q_t[:, i * T : (i + 1) * T])
        m = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        l = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        acc = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=m, value=-3.0e38)
        nisa.memset(dst=l, value=0.0)
        nisa.memset(dst=acc, value=0.0)
        for j in range(i + 1):  # causal: key tiles up to the diagonal
            k = nl.ndarray((d, T), dtype=k_t.dtype, buffer=nl.sbuf)
            vt = nl.ndarray((T, d), dtype=v.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=k, src=k_t[:, j * T : (j + 1) * T])
            nisa.dma_copy(dst=vt, src=v[j * T : (j + 1) * T, :])
            s_psum = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum, stationary=q, moving=k)
            s = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=s, data=s_psum, op0=nl.multiply, operand0=scale)
            if j == i:  # keep key index <= query index: p - f >= 0
                nisa.affine_select(
                    dst=s,
                    pattern=[[-1, T]],
                    on_true_tile=s,
                    on_false_value=-3.0e38,
                    cmp_op=nl.greater_equal,
                    offset=0,
                    channel_multiplier=1,
                )
            row_max = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=s, axis=1, keepdims=True)
            m_new = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=m_new, data1=m, data2=row_max, op=nl.maximum)
            neg_m = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-1.0)
            p = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.sbuf)
            p_sum = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(
                dst=p, op=nl.exp, data=s, bias=neg_m, reduce_op=nl.add, reduce_res=p_sum
            )
            corr = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=corr, op=nl.exp, data=m, bias=neg_m)
            # l = l * corr + p_sum ; m = m_new
            nisa.scalar_tensor_tensor(
                dst=l, data=l, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=p_sum
            )
            nisa.tensor_copy(dst=m, src=m_new)
            # acc = acc * corr + p @ v
            p_t_psum = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=p_t_psum, data=p, engine=nisa.engine.tensor)
            p_t = nl.ndarray((T, T), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=p_t, src=p_t_psum)
            pv = nl.ndarray((T, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=pv, stationary=p_t, moving=vt)
            nisa.scalar_tensor_tensor(
                dst=acc, data=acc, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=pv
            )
        r = nl.ndarray((T, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=l)
        o = nl.ndarray((T, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=r)
        nisa.dma_copy(dst=out[i * T : (i + 1) * T, :], src=o)
    return out


def golden(q_t, k_t, v, softmax_scale=None):
    d, S = q_t.shape
    scale = softmax_scale if softmax_scale is not None else 1.0 / np.sqrt(d)
    s = (q_t.astype(np.float64).T @ k_t.astype(np.float64)) * scale
    s = np.where(np.tril(np.ones((S, S), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return ((p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)).astype(v.dtype)


def make_inputs(rng, S=256, d=64):
    q_t = rng.standard_normal((d, S)).astype(np.float32)
    k_t = rng.standard_normal((d, S)).astype(np.float32)
    v = rng.standard_normal((S, d)).astype(np.float32)
    return q_t, k_t, v


if __name__ == "__main__":
    args = make_inputs(np.random.default_rng(0))
    print("flash attention max |err|:", np.abs(flash_attention_fwd(*args) - golden(*args)).max())
