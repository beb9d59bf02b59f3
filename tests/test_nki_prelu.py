"""``nl.prelu`` through ``nisa.activate2(..., relu_param=)`` (NKI 0.6: the activation table of
``nki.api.shared.rst`` lists PReLU; ``activate2``'s ``relu_param`` is "scalar or vector
parameter for parameterized activation functions (e.g., PReLU)"): ``x`` where ``x >= 0``, else
``relu_param * x``, after the two tensor-scalar stages."""

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@pytest.mark.parametrize("per_partition", [False, True])
def test_prelu_slope_scalar_or_per_partition(per_partition):
    def k(x, alpha):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        a = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=alpha)
        slope = a if per_partition else 0.25
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        # (x * 2) + 1, then PReLU
        nisa.activate2(o, nl.prelu, t, 2.0, 1.0, nl.multiply, nl.add, relu_param=slope)
        nisa.dma_copy(dst=out, src=o)
        return out

    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    alpha = rng.uniform(0.05, 0.5, (8, 1)).astype(np.float32)
    got = nki.run(k, x, alpha).outputs
    y = x * np.float32(2) + np.float32(1)
    a = alpha if per_partition else np.float32(0.25)
    np.testing.assert_array_equal(got, np.where(y >= 0, y, (a * y).astype(np.float32)))
    assert (got < 0).any() and (got > 0).any()


def test_prelu_without_slope_is_relu_on_activation():
    def k(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.activation(t, nl.prelu, t)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
    np.testing.assert_array_equal(nki.run(k, x).outputs, np.maximum(x, 0))
