"""Conformance cases: the new-API (``import nki``) tutorials of aws-neuron/nki-samples.

Only the call shapes and the NumPy references are written here; the kernels are imported from
a local checkout (``trnsim conformance PATH/nki-samples``). The other tutorials use the legacy
``neuronxcc.nki`` API (``cases_legacy``).
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Case
from trnsim.conformance.refs import (
    bf16,
    f64,
    matmul_t,
    mx_decode,
    mx_quantized_values,
    mx_words,
    randn,
)

MATMUL = "src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py"


def _mm_inputs(k: int, m: int, n: int):
    return lambda rng: (randn(rng, (k, m), bf16), randn(rng, (k, n), bf16))


def _mm_ref(lhs_t, rhs, **_):
    # the tutorial accumulates in fp32 PSUM and stores the result in the inputs' dtype
    return matmul_t(lhs_t, rhs, lhs_t.dtype)


# bf16 outputs: one rounding of an fp32 sum. The kernel's fp32 sum differs from the exact one
# (a) in its last bits, which can move the bf16 rounding by one ulp (2^-7 relative), and (b) by
# the fp32 accumulation error, bounded by K * 2^-24 * sum_k |a_k b_k| (K = 256 standard-normal
# products: sum |a b| ~ 256 * 2/pi ~ 163, bound ~ 2.5e-3), which dominates where the sum cancels
# to near zero.
_MM = dict(reference=_mm_ref, rtol=2**-7, atol=2.5e-3)

CASES: list[Case] = [
    Case(
        "samples/matmul_basic",
        "nki-samples",
        MATMUL,
        "nki_matmul_basic_",
        _mm_inputs(128, 64, 512),
        notes="the only shape the kernel accepts (64x128x512)",
        **_MM,
    ),
    Case(
        "samples/matmul_tiled",
        "nki-samples",
        MATMUL,
        "nki_matmul_tiled_",
        _mm_inputs(256, 256, 1024),
        **_MM,
    ),
    Case(
        "samples/matmul_hoist_load",
        "nki-samples",
        MATMUL,
        "nki_matmul_hoist_load_",
        _mm_inputs(256, 256, 1024),
        **_MM,
    ),
    Case(
        "samples/matmul_block_free_dimension",
        "nki-samples",
        MATMUL,
        "nki_matmul_block_free_dimension_",
        _mm_inputs(256, 256, 2048),
        **_MM,
    ),
    Case(
        "samples/matmul_fully_optimized",
        "nki-samples",
        MATMUL,
        "nki_matmul_fully_optimized_",
        _mm_inputs(256, 256, 1024),
        kwargs={"TILES_IN_BLOCK_M": 2, "TILES_IN_BLOCK_N": 2, "TILES_IN_BLOCK_K": 2},
        notes="the documented block meta-parameters made small: K, M multiples of 256, N of 1024",
        **_MM,
    ),
]


# ---- MXFP tutorials (mxfp-matmul/mx_kernels.py; NeuronCore-v4) -------------------------------

MX = "src/nki_samples/tutorials/mxfp-matmul/mx_kernels.py"
_E5M2, _E5M2_X4 = "float8_e5m2", "float8_e5m2_x4"


def _mx_offline_inputs(rng):
    import trnsim.nki.language as nl

    a = randn(rng, (512, 128))  # stationary [K, M]
    b = randn(rng, (512, 512))  # moving [K, N]
    aw, as_ = mx_words(a, _E5M2, _E5M2_X4)
    bw, bs = mx_words(b, _E5M2, _E5M2_X4)
    return aw, as_, bw, bs, nl.float8_e5m2_x4


def _mx_offline_ref(aw, as_, bw, bs, mx_dtype):
    a = mx_decode(aw, as_, _E5M2, _E5M2_X4)
    b = mx_decode(bw, bs, _E5M2, _E5M2_X4)
    return (a.T @ b).astype(np.float32).astype(bf16)


def _mx_on_device_inputs(rng):
    import trnsim.nki.language as nl

    a = randn(rng, (512, 128))
    b = randn(rng, (512, 512)).astype(bf16)
    aw, as_ = mx_words(a, _E5M2, _E5M2_X4)
    # moving in the layout quantize_mx packs: mv[p, 4n + q] = B[4p + q, n]
    mv = np.ascontiguousarray(b.reshape(128, 4, 512).transpose(0, 2, 1).reshape(128, 2048))
    return aw, as_, mv, nl.float8_e5m2_x4, nl.float8_e5m2_x4


def _mx_on_device_ref(aw, as_, mv, st_dtype, mv_dtype):
    a = mx_decode(aw, as_, _E5M2, _E5M2_X4)
    b = mv.astype(np.float32).reshape(128, 512, 4).transpose(0, 2, 1).reshape(512, 512)
    return (a.T @ mx_quantized_values(b, _E5M2)).astype(np.float32).astype(bf16)


def _mx_strided_inputs(rng):
    import trnsim.nki.language as nl

    return randn(rng, (512, 128), bf16), randn(rng, (512, 512), bf16), nl.float8_e5m2_x4


def _mx_strided_ref(st, mv, mx_dtype, use_tensor_copy=True):
    """copy_data_strided puts K = 128 q + p at partition p, slot q: a quantization group (8
    partitions x 4 slots) is K = {128 q + p}. Reorder K so each group is 32 consecutive."""
    perm = np.arange(512).reshape(4, 16, 8).transpose(1, 2, 0).reshape(-1)  # (g, p%8, q)
    a = mx_quantized_values(st.astype(np.float32)[perm], _E5M2)
    b = mx_quantized_values(mv.astype(np.float32)[perm], _E5M2)
    return (f64(a).T @ f64(b)).astype(np.float32).astype(bf16)


# bf16 result of an fp32 sum of 512 exactly representable products: 1 bf16 ulp (2^-7) plus
# the fp32 accumulation bound 512 * 2^-24 * sum|ab| (~512 * 0.64 * 2^-24 * 512 ~ 1e-2 worst).
_MXTOL = dict(rtol=2**-7, atol=1e-2)

CASES += [
    Case(
        "samples/mx_offline_quantized_matmul",
        "nki-samples",
        MX,
        "kernel_offline_quantized_mx_matmul",
        _mx_offline_inputs,
        _mx_offline_ref,
        notes="MXFP8 e5m2 x e5m2, M=128, K=512, N=512 (the tutorial's max tile)",
        **_MXTOL,
    ),
    Case(
        "samples/mx_on_device_quantize_matmul",
        "nki-samples",
        MX,
        "kernel_on_device_quantize_matmul_mx",
        _mx_on_device_inputs,
        _mx_on_device_ref,
        notes="offline e5m2 stationary, bf16 moving quantized on device to e5m2",
        **_MXTOL,
    ),
    Case(
        "samples/mx_copy_strided_tensor_copy",
        "nki-samples",
        MX,
        "kernel_copy_strided_quantize_matmul_mx",
        _mx_strided_inputs,
        _mx_strided_ref,
        kwargs={"use_tensor_copy": True},
        **_MXTOL,
    ),
    Case(
        "samples/mx_copy_strided_dma",
        "nki-samples",
        MX,
        "kernel_copy_strided_quantize_matmul_mx",
        _mx_strided_inputs,
        _mx_strided_ref,
        kwargs={"use_tensor_copy": False},
        **_MXTOL,
    ),
]
