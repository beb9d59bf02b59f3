"""The format table: derived figures against ml_dtypes.finfo, lookups, error messages."""

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import UnknownNameError
from trnsim.numerics import ALIASES, ALL_FORMATS, FORMATS, Format, get_format

ML_FLOATS = [f for f in ALL_FORMATS if f.kind == "float" and f.name != "tfloat32"]


def test_table_keys_are_names_and_cover_the_issue():
    assert list(FORMATS) == [f.name for f in ALL_FORMATS]
    expected = {
        "float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e4m3fn",
        "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu", "int8", "int16", "int32", "uint8",
        "uint16", "uint32", "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4",
    }  # fmt: skip
    assert set(FORMATS) == expected


@pytest.mark.parametrize("fmt", ML_FLOATS, ids=lambda f: f.name)
def test_derived_figures_match_ml_dtypes_finfo(fmt: Format):
    fi = ml_dtypes.finfo(fmt.dtype)
    assert fmt.max == float(fi.max)
    assert fmt.min_normal == float(fi.smallest_normal)
    assert fmt.min_subnormal == float(fi.smallest_subnormal)
    assert fmt.man_bits == fi.nmant
    assert fmt.exp_bits == fi.nexp
    assert fmt.bits == fi.bits


def test_tf32_is_fp32_range_with_10_mantissa_bits():
    tf32, fp32 = get_format("tf32"), get_format("fp32")
    assert tf32.dtype == np.float32 and tf32.man_bits == 10
    assert tf32.min_normal == fp32.min_normal
    assert tf32.max == (2 - 2**-10) * 2.0**127


def test_mx_element_emax_values_from_ocp_spec():
    # OCP MX v1.0 table: emax_elem = 8 (E4M3), 15 (E5M2), 2 (E2M1)
    assert get_format("float8_e4m3fn").emax == 8
    assert get_format("float8_e5m2").emax == 15
    assert get_format("float4_e2m1fn").emax == 2


def test_special_value_encodings():
    assert get_format("float8_e4m3").has_inf and get_format("float8_e4m3").max == 240
    assert not get_format("float8_e4m3fn").has_inf
    assert get_format("float8_e4m3fn").nan_encoding == "all_ones_mantissa"
    assert get_format("float4_e2m1fn").nan_encoding == "none"
    e8m0 = get_format("float8_e8m0fnu")
    assert not e8m0.signed and e8m0.nan_encoding == "all_ones" and e8m0.min == 2.0**-127


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32])
def test_integer_formats_match_iinfo(dt):
    f = get_format(np.dtype(dt))
    info = np.iinfo(dt)
    assert (f.max, f.min, f.signed) == (info.max, info.min, info.min < 0)


def test_packed_formats_word_sizes_and_elements():
    # nc_matmul_mx docstring: fp8 x4 elements are 32-bit, fp4 x4 elements 16-bit
    for name, elem, word in [
        ("float8_e4m3fn_x4", "float8_e4m3fn", np.uint32),
        ("float8_e5m2_x4", "float8_e5m2", np.uint32),
        ("float4_e2m1fn_x4", "float4_e2m1fn", np.uint16),
    ]:
        f = get_format(name)
        assert f.kind == "packed" and f.element is FORMATS[elem]
        assert f.elements_per_word == 4 and f.dtype == np.dtype(word)
        assert f.bits == 4 * f.element.bits
        assert f.max == f.element.max


@pytest.mark.parametrize("alias,name", sorted(ALIASES.items()))
def test_aliases_resolve(alias, name):
    assert get_format(alias) is FORMATS[name]
    assert get_format(alias.upper()) is FORMATS[name]


def test_lookup_by_dtype_and_passthrough():
    assert get_format(np.float32).name == "float32"
    assert get_format(ml_dtypes.bfloat16).name == "bfloat16"
    assert get_format(np.dtype(ml_dtypes.float8_e8m0fnu)).name == "float8_e8m0fnu"
    f = FORMATS["float16"]
    assert get_format(f) is f


def test_unknown_name_lists_valid_names():
    with pytest.raises(UnknownNameError) as info:
        get_format("float7_e3m3")
    msg = str(info.value)
    assert "float7_e3m3" in msg and "float8_e4m3fn" in msg and "bf16" in msg
    with pytest.raises(UnknownNameError):
        get_format(np.complex64)


def test_format_is_frozen_and_hashable():
    f = FORMATS["bfloat16"]
    with pytest.raises(AttributeError):
        f.bias = 1  # type: ignore[misc]
    assert {f: 1}[FORMATS["bfloat16"]] == 1
