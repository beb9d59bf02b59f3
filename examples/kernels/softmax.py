"""Row softmax of ``x [N, D]`` (N a multiple of 128), fp32, numerically stable."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TOLERANCE = {"rtol": 1e-5, "atol": 1e-7}


@nki.jit
def softmax(x):
    N, D = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(N // P):
        xt = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * P : (i + 1) * P, :])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=1, negate=True, keepdims=True)
        e = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=xt, bias=neg_max, reduce_op=nl.add, reduce_res=s)
        r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=s)
        y = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=r)
        nisa.dma_copy(dst=out[i * P : (i + 1) * P, :], src=y)
    return out


def make_inputs(rng, N=256, D=1000):
    return (rng.standard_normal((N, D)) * 5).astype(np.float32)


def golden(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


if __name__ == "__main__":
    x = make_inputs(np.random.default_rng(0))
    print("softmax max |err|:", np.abs(softmax(x) - golden(x)).max())
