"""Example kernels (examples/kernels/) against independent NumPy goldens."""

import importlib.util
import pathlib

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki

ROOT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "kernels"


def load(name: str):
    trnsim.nki.install()
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kernel", ["matmul_tiled", "matmul_blocked"])
def test_bf16_matmul(kernel):
    mod = load("matmul")
    lhsT, rhs = mod.make_inputs(np.random.default_rng(1), K=256, M=512, N=1024)
    out = getattr(mod, kernel)(lhsT, rhs)
    ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    assert out.dtype == ml_dtypes.bfloat16
    # one bf16 rounding of an fp32 sum: within 1 bf16 ulp (2^-7 relative) of the fp32 product
    np.testing.assert_array_less(np.abs(out.astype(np.float32) - ref), np.abs(ref) * 2**-7 + 1e-3)
    assert np.mean(out == mod.golden(lhsT, rhs)) > 0.95


def test_rmsnorm():
    mod = load("norms")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((256, 300)).astype(np.float32)
    w = rng.standard_normal(300).astype(np.float32)
    np.testing.assert_allclose(mod.rmsnorm(x, w), mod.rmsnorm_golden(x, w), rtol=1e-5, atol=1e-5)


def test_layernorm_multi_chunk():
    mod = load("norms")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((128, 1100)) * 3 + 1).astype(np.float32)  # 3 bn_stats chunks
    g = rng.standard_normal(1100).astype(np.float32)
    b = rng.standard_normal(1100).astype(np.float32)
    np.testing.assert_allclose(
        mod.layernorm(x, g, b), mod.layernorm_golden(x, g, b), rtol=1e-4, atol=1e-4
    )


def test_softmax():
    mod = load("softmax")
    x = (np.random.default_rng(4).standard_normal((256, 777)) * 5).astype(np.float32)
    out = mod.softmax(x)
    np.testing.assert_allclose(out, mod.golden(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


def test_flash_attention_causal():
    mod = load("flash_attention")
    args = mod.make_inputs(np.random.default_rng(5), S=384, d=64)
    out = mod.flash_attention_fwd(*args)
    np.testing.assert_allclose(out, mod.golden(*args), rtol=1e-4, atol=1e-5)
    # row 0 attends only to key 0
    np.testing.assert_allclose(out[0], args[2][0], rtol=1e-5)


def test_mxfp8_matmul_on_device_quantize():
    mod = load("mx_matmul")
    a_t, b_t, A, B = mod.make_inputs(np.random.default_rng(6), M=128, K=512, N=256)
    out = mod.mxfp8_matmul(a_t, b_t)
    np.testing.assert_allclose(out, mod.golden(A, B), rtol=1e-6, atol=1e-5)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(out - exact).max() < 0.1 * np.abs(exact).max()  # MXFP8 is lossy but close
