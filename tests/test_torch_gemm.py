"""trnsim.torch.gemm: bit-identical to the same GEMM run as NKI kernels on the emulator.

The kernels are examples/kernels/trn_gemm.py (convert, gemm, gemm_mx). Stochastic rounding:
each kernel launch gets the seed of its role (``role_seed``), as the eager mode's GEMM draws.
No PyTorch here (the GEMM is NumPy), so these run without the torch extra too.
"""

import importlib.util
import pathlib

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki
from trnsim.numerics import get_format
from trnsim.torch.gemm import gemm, mx_device_layout, prepare
from trnsim.torch.numerics import numerics, role_seed

ROOT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "kernels"


def _kernels():
    trnsim.nki.install()
    spec = importlib.util.spec_from_file_location("example_trn_gemm", ROOT / "trn_gemm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


K = _kernels()
SHAPES = [(200, 300, 600), (128, 512, 64)]  # ragged M/K/N tiles; exact tiles


def _emulated(a, b, policy, out_dtype, seed):
    """The three launches on the emulator: convert A, convert B, gemm (or MX quantisation on
    the host, then gemm_mx)."""
    rounding = policy.rounding
    if policy.mx:
        qa = prepare(a, policy, seed, 0, k_axis=1).quantized
        qb = prepare(b, policy, seed, 1, k_axis=0).quantized
        packed = {"mxfp8": "float8_e4m3fn_x4", "mxfp4": "float4_e2m1fn_x4"}[policy.operands]
        aw, asc = mx_device_layout(qa, packed)
        bw, bsc = mx_device_layout(qb, packed)
        fmt = packed
        return trnsim.nki.simulate(K.gemm_mx, rounding=rounding, seed=role_seed(seed, 2))(
            aw, asc, bw, bsc, fmt, fmt, out_dtype
        )
    op_dtype = get_format(policy.operands).dtype
    conv = [
        trnsim.nki.simulate(K.convert, rounding=rounding, seed=role_seed(seed, r))(x, op_dtype)
        for r, x in ((0, a), (1, b))
    ]
    aT = np.ascontiguousarray(conv[0].T)
    return trnsim.nki.simulate(K.gemm, rounding=rounding, seed=role_seed(seed, 2))(
        aT, conv[1], out_dtype
    )


@pytest.mark.parametrize("policy", ["bf16", "fp8", "fp8_e5m2", "mxfp8", "mxfp4"])
@pytest.mark.parametrize("rounding", ["rne", "stochastic"])
def test_gemm_is_the_emulated_kernels_bit_for_bit(policy, rounding):
    pol = numerics(policy, rounding=rounding, seed=7)
    rng = np.random.default_rng(3)
    shapes = SHAPES[:1] if rounding == "stochastic" else SHAPES
    for M, Kd, N in shapes:
        a = (rng.standard_normal((M, Kd)) * 3).astype(np.float32)
        b = rng.standard_normal((Kd, N)).astype(np.float32)
        out_dtype = ml_dtypes.bfloat16
        seed = 12345
        ours = gemm(a, b, pol, "bfloat16", seed=seed)
        emu = _emulated(a, b, pol, out_dtype, seed)
        assert ours.dtype == emu.dtype == out_dtype
        assert np.array_equal(ours.view(np.uint16), emu.view(np.uint16)), (policy, M, Kd, N)
        # and a sanity check against an independent fp32 product (could fail: wrong tiling)
        ref = a @ b
        err = np.abs(ours.astype(np.float32) - ref).max() / np.abs(ref).max()
        assert err < {"mxfp4": 0.35, "fp8_e5m2": 0.15, "mxfp8": 0.1, "fp8": 0.1}.get(policy, 0.02)


def test_stochastic_rounding_changes_bits_and_is_reproducible():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 64)).astype(np.float32)
    sr = numerics("bf16", rounding="stochastic")
    one, two = gemm(a, b, sr, "bfloat16", seed=1), gemm(a, b, sr, "bfloat16", seed=1)
    other = gemm(a, b, sr, "bfloat16", seed=2)
    rne = gemm(a, b, numerics("bf16"), "bfloat16", seed=1)
    assert np.array_equal(one.view(np.uint16), two.view(np.uint16))
    assert not np.array_equal(one.view(np.uint16), other.view(np.uint16))
    assert not np.array_equal(one.view(np.uint16), rne.view(np.uint16))


def test_fp32_gemm_accumulates_in_k_tile_order():
    """K = 256: two K tiles; the result is tile0 + tile1 in fp32, not one 256-long sum."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((4, 256)).astype(np.float32)
    b = rng.standard_normal((256, 4)).astype(np.float32)
    out = gemm(a, b, numerics("fp32"))
    expect = (a[:, :128] @ b[:128]) + (a[:, 128:] @ b[128:])
    assert np.array_equal(out, expect)


def test_a_format_the_tensor_engine_lacks_is_refused():
    from trnsim.errors import ConfigError

    a = np.ones((2, 2), np.float64)
    with pytest.raises(ConfigError, match="no float64 matmul"):
        gemm(a, a, numerics("native"))


def test_device_quantize_mx_scale_is_the_host_rule_near_powers_of_two():
    """quantize_mx (core semantics) and numerics.mx.quantize (NKI rule) pick the same scale,
    also for block maxima just below a power of two (np.log2 rounded those up before)."""
    from trnsim.core import semantics as S
    from trnsim.numerics import mx

    rng = np.random.default_rng(1)
    for fmt in ("float8_e4m3fn", "float4_e2m1fn", "float8_e5m2"):
        f = get_format(fmt)
        for e in range(-40, 40, 7):
            x = (rng.standard_normal((8, 4)) * 2.0**e).astype(np.float32)
            x[0, 0] = np.float32(2.0 ** (e + 3)) * np.float32(1 - 2**-24)  # 2^n - 1 ulp
            _, codes = S.quantize_mx(x, f.emax, f.max)
            host = mx.quantize(x.reshape(1, 32), fmt, axis=1, scale_rule="nki")
            assert codes[0, 0] == host.scales[0, 0], (fmt, e)


@pytest.mark.parametrize("policy", ["mxfp8", "mxfp4"])
def test_mx_float64_blas_path_is_the_specification(policy):
    """The dgemm shortcut of gemm's MX path equals nc_matmul_mx tile by tile, on ordinary
    data (shortcut taken) and on data whose bit span forbids it (fallback taken)."""
    from trnsim.torch import gemm as G

    rng = np.random.default_rng(4)
    block_scale = np.repeat(np.exp2(rng.integers(-30, 30, 19)), 32)[:600]  # per 32-block
    wide = rng.standard_normal((130, 600)) * block_scale
    wide = wide.astype(np.float32)
    for a in (rng.standard_normal((130, 600)).astype(np.float32), wide):
        b = rng.standard_normal((600, 520)).astype(np.float32)
        pol = numerics(policy)
        qa = prepare(a[None], pol, 0, 0, 2).quantized
        qb = prepare(b[None], pol, 0, 1, 1).quantized
        k_pad = 640
        (av,), (asv,) = G._mx_tiles(qa, k_pad)
        (bv,), (bsv,) = G._mx_tiles(qb, k_pad)
        a64 = G._scaled(av[None], asv[None], 0, 512)
        b64 = G._scaled(bv[None], bsv[None], 0, 512)
        inexact = list(G._inexact_tiles(a64, b64, 512, qa.fmt, qb.fmt))
        assert bool(inexact) == (a is wide)  # the fallback is exercised (could fail)
        spec = np.zeros((130, 520), np.float32)
        for k0 in range(0, k_pad, 512):
            kt = min(512, k_pad - k0)
            prod = np.empty((130, 520), np.float32)
            for m0 in range(0, 130, 128):
                for n0 in range(0, 520, 512):
                    ms, ns = slice(m0, m0 + 128), slice(n0, n0 + 512)
                    prod[ms, ns] = G.mx_tile_product(av, asv, bv, bsv, ms, ns, k0, kt,
                                                     k0 // 32, (k0 + kt) // 32)  # fmt: skip
            spec = prod if k0 == 0 else spec + prod
        assert np.array_equal(gemm(a, b, pol), spec)


def test_batched_gemm_is_each_gemm_with_one_convert_stream():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 40, 70)).astype(np.float32)
    b = rng.standard_normal((3, 70, 20)).astype(np.float32)
    for pol in (numerics("bf16"), numerics("mxfp8"), numerics("fp32")):
        out = gemm(a, b, pol, "bfloat16")
        for g in range(3):
            assert np.array_equal(out[g].view(np.uint16),
                                  gemm(a[g], b[g], pol, "bfloat16").view(np.uint16))  # fmt: skip
