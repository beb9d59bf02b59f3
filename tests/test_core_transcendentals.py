"""Transcendental activations are correctly rounded fp32 on any host (``core.semantics._f64``):
NumPy's float32 ``exp`` / ``tanh`` / ... differ from the correctly rounded value by 1-2 ulps
on some CPUs (AVX-512 paths), which would make a kernel's output depend on the machine."""

import numpy as np
import pytest

from trnsim.core import semantics as S

RNG = np.random.default_rng(7)


@pytest.mark.parametrize(
    "op,ref,lo,hi",
    [
        ("exp", np.exp, -80.0, 80.0),
        ("log", np.log, 1e-30, 1e30),
        ("tanh", np.tanh, -10.0, 10.0),
        ("sin", np.sin, -100.0, 100.0),
        ("arctan", np.arctan, -50.0, 50.0),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), -40.0, 40.0),
        ("silu", lambda x: x / (1 + np.exp(-x)), -40.0, 40.0),
        ("softplus", lambda x: np.logaddexp(0.0, x), -40.0, 40.0),
    ],
)
def test_activation_is_the_float64_value_rounded_once(op, ref, lo, hi):
    x = RNG.uniform(lo, hi, 20000).astype(np.float32)
    got, _ = S.activation(op, x.reshape(100, 200))
    want = ref(x.astype(np.float64)).astype(np.float32).reshape(100, 200)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_exponential_and_power_are_rounded_once_too():
    x = RNG.uniform(-20, 5, (64, 128)).astype(np.float32)
    out, _ = S.exponential(x, 1.5)
    want = np.exp((x - np.float32(1.5)).astype(np.float64)).astype(np.float32)  # fp32 subtract
    np.testing.assert_array_equal(out, want)
    a = RNG.uniform(0.1, 10, 4096).astype(np.float32)
    b = RNG.uniform(-3, 3, 4096).astype(np.float32)
    got = S.alu("power", a, b)
    np.testing.assert_array_equal(got, np.power(a.astype(np.float64), b).astype(np.float32))
