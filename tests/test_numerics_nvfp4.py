"""NVFP4 (E2M1 in 16-blocks with E4M3 scales and an fp32 tensor scale): the recipe's
invariants, exact round trips of representable values, special cases."""

import numpy as np
import pytest

from trnsim.errors import NumericsError
from trnsim.numerics import mx, nvfp4
from trnsim.numerics.formats import get_format
from trnsim.numerics.rounding import to_float32

E2M1 = to_float32(np.arange(16, dtype=np.uint8), get_format("float4_e2m1fn"))  # every code
E4M3 = to_float32(np.arange(256, dtype=np.uint8), get_format("float8_e4m3fn"))
E4M3_POS = np.unique(E4M3[np.isfinite(E4M3) & (E4M3 > 0)])


def test_representable_values_round_trip_exactly():
    # A tensor whose amax is 6 x 448 has s_enc = 1; a block holding +-6c (c an E4M3 value) has
    # the scale c exactly, so every E2M1 value times c is exact.
    rng = np.random.default_rng(0)
    rows = []
    for c in rng.choice(E4M3_POS[E4M3_POS >= 2**-6], 40):
        vals = rng.choice(E2M1, 16)
        vals[0] = 6.0
        rows.append(vals * c)
    amax_row = np.zeros(16)
    amax_row[0] = 6.0 * 448.0  # the tensor amax, in a block of its own (scale 448)
    x = np.array([amax_row, *rows], dtype=np.float32)
    q = nvfp4.quantize(x)
    assert q.encode_scale == 1.0
    assert np.array_equal(nvfp4.dequantize(q), x)


def test_every_e2m1_code_decodes_through_a_unit_scale():
    x = np.tile(E2M1, (1, 1)).astype(np.float32)  # the 16 codes form one block, amax 6
    q = nvfp4.quantize(x, amax=6.0 * 448.0)  # s_enc = 1, block scale e4m3(6/6) = 1
    assert np.array_equal(nvfp4.dequantize(q), x)


def test_error_is_within_half_the_widest_e2m1_gap_per_block():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 256)) * np.exp(rng.normal(0, 2, (64, 1)))).astype(np.float32)
    q = nvfp4.quantize(x)
    err = np.abs(nvfp4.dequantize(q) - x).reshape(64, 16, 16)
    amax = np.abs(x).reshape(64, 16, 16).max(axis=-1, keepdims=True)
    # E2M1's widest gap is 2 (4 -> 6) at unit scale = amax / 6; the E4M3 scale rounding
    # (relative 2^-4) can widen it slightly
    assert np.all(err <= amax / 6 * (1 + 2**-3) + 1e-30)


def test_nvfp4_is_more_accurate_than_mxfp4_on_gaussian_data():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    e_nv = np.mean((nvfp4.dequantize(nvfp4.quantize(x)) - x) ** 2)
    e_mx = np.mean((mx.dequantize(mx.quantize(x, "float4_e2m1fn")) - x) ** 2)
    assert e_nv < e_mx  # finer blocks and fractional (E4M3) scales


def test_zero_tensor_and_underflowing_blocks_are_zero():
    z = nvfp4.quantize(np.zeros((2, 32), np.float32))
    assert z.encode_scale == 1.0 and not nvfp4.dequantize(z).any()
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 1e6
    x[0, 16:] = 1e-30  # amax_b / 6 x s_enc underflows E4M3
    assert not nvfp4.dequantize(nvfp4.quantize(x))[0, 16:].any()


def test_bad_inputs_are_refused():
    with pytest.raises(NumericsError, match="multiple of the block size 16"):
        nvfp4.quantize(np.ones((2, 20)))
    with pytest.raises(NumericsError, match="NaN or Inf"):
        nvfp4.quantize(np.array([np.nan] + [1.0] * 15))


def test_stochastic_rounding_is_unbiased_in_expectation():
    x = np.full((1, 16), 5.0, np.float32)  # between E2M1's 4 and 6 at scale 1
    x[0, 0] = 6.0
    outs = [
        nvfp4.dequantize(nvfp4.quantize(x, amax=6 * 448, rounding="stochastic", rng=s))[0, 1:]
        for s in range(200)
    ]
    assert abs(np.mean(outs) - 5.0) < 0.1
