"""Conformance cases: the new-API (``import nki``) tutorials of aws-neuron/nki-samples.

Only the call shapes and the NumPy references are written here; the kernels are imported from
a local checkout (``trnsim conformance PATH/nki-samples``). The other tutorials use the legacy
``neuronxcc.nki`` API (``cases_legacy``).
"""

from __future__ import annotations

from trnsim.conformance.case import Case
from trnsim.conformance.refs import bf16, matmul_t, randn

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
