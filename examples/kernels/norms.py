"""RMSNorm and LayerNorm over the last dim of ``x [N, D]`` (N a multiple of 128), fp32.

``trnsim run examples/kernels/norms.py [--kernel layernorm]``.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

KERNEL = "rmsnorm"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    N, D = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    w_tile = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=w.reshape((1, D)).broadcast(0, P))
    for i in nl.affine_range(N // P):
        xt = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * P : (i + 1) * P, :])
        sq = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ss)
        ms = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=ms, data=ss, op0=nl.multiply, operand0=1.0 / D, op1=nl.add, operand1=eps
        )
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        y = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=xt, op0=nl.multiply, operand0=rstd)
        yo = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yo, data1=y, data2=w_tile, op=nl.multiply)
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=yo)
    return out


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    N, D = x.shape
    P = nl.tile_size.pmax
    FMAX = nl.tile_size.bn_stats_fmax
    chunks = (D + FMAX - 1) // FMAX
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.reshape((1, D)).broadcast(0, P))
    nisa.dma_copy(dst=b, src=beta.reshape((1, D)).broadcast(0, P))
    for i in nl.affine_range(N // P):
        xt = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * P : (i + 1) * P, :])
        stats = nl.ndarray((P, chunks, 6), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(chunks):
            hi = min(D, (c + 1) * FMAX)
            nisa.bn_stats(dst=stats[:, c, :], data=xt[:, c * FMAX : hi])
        mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=rstd, data=mv[:, 1:2], op0=nl.add, operand0=eps, op1=nl.rsqrt, operand1=None
        )
        y = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=y, data=xt, op0=nl.subtract, operand0=mv[:, 0:1], op1=nl.multiply, operand1=rstd
        )
        nisa.tensor_tensor(dst=y, data1=y, data2=g, op=nl.multiply)
        yo = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=yo, data1=y, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=yo)
    return out


def golden_rmsnorm(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    return (x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + eps) * w).astype(x.dtype)


def golden_layernorm(x, gamma, beta, eps=1e-5):
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    return ((x64 - mu) / np.sqrt(var + eps) * gamma + beta).astype(x.dtype)


def make_inputs_rmsnorm(rng, N=256, D=768):
    x = rng.standard_normal((N, D)).astype(np.float32)
    w = rng.standard_normal(D).astype(np.float32)
    return x, w


def make_inputs_layernorm(rng, N=128, D=1100):
    x = (rng.standard_normal((N, D)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(D).astype(np.float32)
    b = rng.standard_normal(D).astype(np.float32)
    return x, g, b


if __name__ == "__main__":
    x, w = make_inputs_rmsnorm(np.random.default_rng(0))
    print("rmsnorm max |err|:", np.abs(rmsnorm(x, w) - golden_rmsnorm(x, w)).max())
