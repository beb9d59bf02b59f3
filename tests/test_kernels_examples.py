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
    np.testing.assert_allclose(mod.rmsnorm(x, w), mod.golden_rmsnorm(x, w), rtol=1e-5, atol=1e-5)


def test_layernorm_multi_chunk():
    mod = load("norms")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((128, 1100)) * 3 + 1).astype(np.float32)  # 3 bn_stats chunks
    g = rng.standard_normal(1100).astype(np.float32)
    b = rng.standard_normal(1100).astype(np.float32)
    np.testing.assert_allclose(
        mod.layernorm(x, g, b), mod.golden_layernorm(x, g, b), rtol=1e-4, atol=1e-4
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
    a_t, b_t = mod.make_inputs(np.random.default_rng(6), M=128, K=512, N=256)
    A, B = mod.deinterleave_k(a_t), mod.deinterleave_k(b_t).T
    np.testing.assert_array_equal(mod.interleave_k(A), a_t)
    out = mod.mxfp8_matmul(a_t, b_t)
    np.testing.assert_allclose(out, mod.golden(a_t, b_t), rtol=1e-6, atol=1e-5)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(out - exact).max() < 0.1 * np.abs(exact).max()  # MXFP8 is lossy but close


def test_fp8_double_row_matmul_kernel():
    mod = load("fp8_matmul")
    lhsT, rhs = mod.make_inputs(np.random.default_rng(7), K=512, M=64, N=256)
    res = trnsim.nki.run(mod.fp8_matmul_double_row, lhsT, rhs)
    mm = [i for i in res.instructions if i.opcode.value == "nc_matmul"]
    assert len(mm) == 2 and all(i.attr("perf_mode") == "double_row" for i in mm)
    # independent golden: fp8 values decoded by ml_dtypes, float64 product
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(res.outputs, ref, rtol=1e-5, atol=1e-4)


def test_mxfp4_x_mxfp8_matmul_offline_quantization():
    from trnsim.numerics import mx

    mod = load("mxfp4_matmul")
    rng = np.random.default_rng(8)
    A = rng.standard_normal((128, 1024)).astype(np.float32)
    B = rng.standard_normal((1024, 256)).astype(np.float32)
    qa = mx.quantize(A, "float4_e2m1fn", axis=1, block=32)
    qb = mx.quantize(B, "float8_e4m3fn", axis=0, block=32)
    a_words, a_scales = mod.to_device_layout(qa, "float4_e2m1fn_x4")
    b_words, b_scales = mod.to_device_layout(qb, "float8_e4m3fn_x4")
    assert a_words.dtype == np.uint16 and b_words.dtype == np.uint32
    assert a_words.shape == (256, 128) and b_scales.shape == (256, 256)
    out = mod.mxfp4_mxfp8_matmul(a_words, a_scales, b_words, b_scales)
    # golden straight from the quantized operands (no trip through the device layout)
    np.testing.assert_allclose(out, mx.mx_matmul(qa, qb), rtol=1e-5, atol=1e-4)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    rel = np.linalg.norm(out - exact) / np.linalg.norm(exact)
    assert 0.02 < rel < 0.3  # MXFP4 is coarse: clearly lossy, still the same product


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("matmul", {"K": 2048, "M": 2048, "N": 1024}),
        ("bmm", {"B": 2, "K": 256, "M": 256, "N": 700}),
        ("lora", {"K": 512, "M": 256, "N": 2048, "R": 64}),
    ],
)
def test_legacy_full_size_kernels_at_small_shapes(name, shape):
    mod = load("legacy/full_size")
    args = mod.make_inputs(name, np.random.default_rng(5), **shape)
    out = mod.KERNELS[name](*args)
    want = mod.golden(name, *args)  # small integers: every product and sum exact
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(want, np.float32))
