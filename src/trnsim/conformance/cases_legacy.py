"""Legacy (``neuronxcc.nki``) conformance cases: every legacy tutorial and documentation example
of aws-neuron/nki-samples and of the SDK 2.26 docs, run unmodified against NumPy references
written here from what the tutorials specify (their docstrings and text; no code copied).

Tolerances: fp32 kernels compare at rtol 1e-4 (transcendentals on the Scalar engine and
reassociated reductions); bf16 outputs at rtol 1e-2 (one bf16 rounding, 2^-8 relative).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from trnsim.conformance.case import Case
from trnsim.conformance.refs import GAMMA_U32, Bounds, gamma

BF16 = ml_dtypes.bfloat16
F32 = np.float32

SDK_EX = "general/nki/examples"
SAMPLES = "src/nki_samples/tutorials"


# ---- references -------------------------------------------------------------------------------


def ref_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b


def ref_transpose2d(a: np.ndarray, shape2d: tuple[int, int]) -> np.ndarray:
    """Each row of ``a`` holds an (X, Y) matrix, row-major; the output holds its transpose."""
    p = a.shape[0]
    x, y = shape2d
    return a.reshape(p, x, y).transpose(0, 2, 1).reshape(p, x * y)


def ref_avgpool(a: np.ndarray, pool: int) -> np.ndarray:
    c, h, w = a.shape
    return a.reshape(c, h // pool, pool, w // pool, pool).mean(axis=(2, 4), dtype=np.float64)


def ref_maxpool(a: np.ndarray, pool: int) -> np.ndarray:
    c, h, w = a.shape
    return a.reshape(c, h // pool, pool, w // pool, pool).max(axis=(2, 4))


def ref_matmul_t(lhs_t: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``lhsT.T @ rhs`` in float64, then rounded to the inputs' dtype (the output's)."""
    out = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    return out.astype(lhs_t.dtype)


def ref_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)


def ref_layernorm(x: np.ndarray, eps: float, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + eps) * gamma + beta).astype(x.dtype)


def ref_rmsnorm(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    a64 = a.astype(np.float64)
    return (a64 / np.sqrt((a64 * a64).mean(axis=1, keepdims=True)) * g).astype(a.dtype)


def ref_mamba(delta: Any, u: Any, a: Any, b: Any, c: Any) -> np.ndarray:
    """The selective scan: state_t = exp(delta_t * A) * state_{t-1} + delta_t * B_t * u_t,
    out_t = sum over the state dim of C_t * state_t (tutorial text)."""
    d, uu, aa, bb, cc = (x.astype(np.float64) for x in (delta, u, a, b, c))
    da = np.exp(d[:, :, None, :] * aa[None, :, :, None])
    dbu = d[:, :, None, :] * bb[:, None, :, :] * uu[:, :, None, :]
    state = np.zeros(da.shape[:-1])
    out = np.empty(da.shape)
    for t in range(da.shape[-1]):
        state = da[..., t] * state + dbu[..., t]
        out[..., t] = state
    return (cc[:, None, :, :] * out).sum(axis=2).astype(delta.dtype)


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_sd_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, **_: Any) -> np.ndarray:
    """softmax(0.125 * q @ k.T) @ v (the tutorial's softmax scale for d_head 64)."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    return (_softmax(0.125 * q64 @ k64.T) @ v64).astype(q.dtype)


def ref_attention_dk(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The attention tutorial: q, k, v are (d_head, seqlen); out = softmax(q.T k) v.T."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    return (_softmax(q64.T @ k64) @ v64.T).astype(q.dtype)


def ref_attention_dk_bf16(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Bounds:
    """As ``ref_attention_dk``, with what attn_fwd_v7+ keep in bf16 (their docstrings): ``v``
    and the unnormalised ``exp`` scores are rounded to bf16 before the PV matmul; the row sums
    are taken in fp32 before that rounding.

    As bounds (``refs.Bounds``): the scores ``s = q.T k`` are fp32 sums of K products in an
    order the docs do not fix, so ``s`` is within ``gamma_K * sum|q k|`` of the exact value
    (and the row max with it); ``exp(s - max)`` is then known to an interval, and where that
    interval straddles a bf16 rounding midpoint the bf16 score is either neighbour. The row
    sums (N fp32 terms) and the PV products (N terms) carry their own gamma bounds."""
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    d, n = q.shape[0], k.shape[1]
    s = q64.T @ k64
    ds = gamma(d) * (np.abs(q64).T @ np.abs(k64))  # fp32 accumulation, any order
    m = s.max(axis=-1, keepdims=True)
    dx = ds + ds.max(axis=-1, keepdims=True) + GAMMA_U32 * np.abs(s - m)  # s - max in fp32
    x = s - m
    e_lo = np.exp(x - dx) * (1 - GAMMA_U32)  # fp32 exp: one more rounding
    e_hi = np.exp(x + dx) * (1 + GAMMA_U32)
    t_lo = e_lo.sum(axis=-1, keepdims=True) * (1 - gamma(n))
    t_hi = e_hi.sum(axis=-1, keepdims=True) * (1 + gamma(n))
    b_lo = e_lo.astype(np.float32).astype(BF16).astype(np.float64)  # RN is monotone
    b_hi = e_hi.astype(np.float32).astype(BF16).astype(np.float64)
    v16 = v.astype(BF16).astype(np.float64).T  # [n, d]
    pos, neg = np.maximum(v16, 0), np.minimum(v16, 0)
    num_lo = b_lo @ pos + b_hi @ neg
    num_hi = b_hi @ pos + b_lo @ neg
    slack = gamma(n) * (np.maximum(b_lo, b_hi) @ np.abs(v16))  # fp32 PV accumulation
    num_lo, num_hi = num_lo - slack, num_hi + slack
    lo = np.where(num_lo >= 0, num_lo / t_hi, num_lo / t_lo)
    hi = np.where(num_hi >= 0, num_hi / t_lo, num_hi / t_hi)
    return Bounds(lo, hi)


def _attention_reference(version: str):
    base = ref_attention_dk_bf16 if version in BF16_ATTENTION else ref_attention_dk
    if version not in BF16_OUT:
        return base

    def bf16_out(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Any:
        b = base(q, k, v)  # the output's bf16 rounding is monotone: round both ends
        return Bounds(*(x.astype(np.float32).astype(BF16).astype(np.float64) for x in (b.lo, b.hi)))

    return bf16_out


def ref_split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a[:, 0::2].copy(), a[:, 1::2].copy()


def ref_exp(a: np.ndarray) -> np.ndarray:
    return np.exp(a.astype(np.float64)).astype(a.dtype)


# ---- inputs ------------------------------------------------------------------------------------


def _u(shape: tuple[int, ...], dtype: Any = F32, lo: float = -1.0, hi: float = 1.0):
    return lambda rng: (rng.uniform(lo, hi, shape).astype(dtype),)


def _two(shape: tuple[int, ...], dtype: Any = F32):
    return lambda rng: (
        rng.uniform(-1, 1, shape).astype(dtype),
        rng.uniform(-1, 1, shape).astype(dtype),
    )


def _mm(k: int, m: int, n: int, dtype: Any = BF16):
    return lambda rng: (
        rng.uniform(-1, 1, (k, m)).astype(dtype),
        rng.uniform(-1, 1, (k, n)).astype(dtype),
    )


def _layernorm_inputs(rng: np.random.Generator) -> tuple[Any, ...]:
    return (
        rng.uniform(0, 1, (256, 512)).astype(F32),
        1e-5,
        rng.uniform(0, 1, 512).astype(F32),
        rng.uniform(0, 1, 512).astype(F32),
    )


def _mamba_inputs(rng: np.random.Generator) -> tuple[Any, ...]:
    b, ch, s, n = 1, 256, 512, 16
    return (
        rng.uniform(0, 0.1, (b, ch, s)).astype(F32),
        rng.uniform(-1, 1, (b, ch, s)).astype(F32),
        -rng.uniform(0, 1, (ch, n)).astype(F32),
        rng.uniform(-1, 1, (b, n, s)).astype(F32),
        rng.uniform(-1, 1, (b, n, s)).astype(F32),
    )


def _attn(d: int, s: int, dtype: Any = F32):
    return lambda rng: tuple(rng.uniform(-1, 1, (d, s)).astype(dtype) for _ in range(3))


def _sd(s: int, d: int):
    return lambda rng: tuple(rng.uniform(0, 1, (s, d)).astype(F32) for _ in range(3))


def _transpose_inputs(rng: np.random.Generator) -> tuple[Any, ...]:
    return (np.arange(5 * 3 * 4, dtype=np.int8).reshape(5, 12), (3, 4))


# ---- the cases ---------------------------------------------------------------------------------

BF16_ATTENTION = {"v7", "v8", "v8a", "v9", "v10", "v11"}
"""The attention tutorial versions that keep ``v`` and the exp scores in bf16."""
BF16_OUT = {"v8a", "v9", "v10", "v11"}
"""... and those whose output tensor is bf16."""
MM = "matrix_multiplication/matrix_multiplication_nki_kernels.py"
FP32_NOTE = "fp32 in and out; rtol 1e-4 covers reassociated sums and Scalar-engine functions"
BF16_NOTE = "bf16 output: one bf16 rounding of an fp32-accumulated result (rtol 2^-8 ~ 4e-3)"


def _both(name: str, path: str, kernel: str, **kw: Any) -> list[Case]:
    """The same tutorial in the SDK 2.26 docs and in nki-samples."""
    return [
        Case(f"legacy/sdk226/{name}", "sdk226", f"{SDK_EX}/{path}", kernel, api="legacy", **kw),
        Case(
            f"legacy/samples/{name}", "nki-samples", f"{SAMPLES}/{path}", kernel, api="legacy", **kw
        ),
    ]


CASES: list[Case] = [
    *_both(
        "tensor_add_spmd",
        "tensor_addition/spmd_tensor_addition_nki_kernels.py",
        "nki_tensor_add_kernel_",
        inputs=_two((256, 1024)),
        reference=ref_add,
        grid=(2, 2),
        notes="one 128x512 tile per program of a 2x2 SPMD grid",
    ),
    *_both(
        "tensor_add_nc2",
        "tensor_addition/spmd_multiple_nc_tensor_addition_nki_kernels.py",
        "nki_tensor_add_nc2",
        inputs=_two((512, 2048)),
        reference=ref_add,
        target="gen3",
        notes="nl.spmd_dim(nl.nc(2), ...) grid over the two cores of a Trn2 LNC",
    ),
    *_both(
        "transpose2d",
        "transpose2d/transpose2d_nki_kernels.py",
        "tensor_transpose2D_kernel_",
        inputs=_transpose_inputs,
        reference=ref_transpose2d,
        rtol=0.0,
        atol=0.0,
        notes="int8 data movement: exact",
    ),
    *_both(
        "avgpool2d",
        "average_pool2d/average_pool2d_nki_kernels.py",
        "tensor_avgpool_kernel",
        inputs=lambda rng: (rng.uniform(-1, 1, (2, 8, 8)).astype(F32), 2),
        reference=ref_avgpool,
        rtol=1e-5,
        atol=1e-6,
        notes=FP32_NOTE,
    ),
    Case(
        "legacy/sdk226/matmul_basic",
        "sdk226",
        f"{SDK_EX}/{MM}",
        "nki_matmul_basic_",
        api="legacy",
        inputs=_mm(128, 64, 512, F32),
        reference=ref_matmul_t,
        rtol=1e-4,
        atol=1e-4,
        notes=FP32_NOTE + " (nki-samples' matrix multiplication moved to the new API)",
    ),
    *[
        Case(
            f"legacy/sdk226/{k.strip('_').removeprefix('nki_')}",
            "sdk226",
            f"{SDK_EX}/{MM}",
            k,
            api="legacy",
            inputs=_mm(1024, 2048, 1024) if "fully" in k else _mm(256, 256, 1024),
            reference=ref_matmul_t,
            rtol=1e-2,
            atol=1e-2,
            notes=BF16_NOTE
            + ("; the smallest M its blocking asserts allow" if "fully" in k else ""),
        )
        for k in (
            "nki_matmul_tiled_",
            "nki_matmul_hoist_load_",
            "nki_matmul_block_free_dimension_",
            "nki_matmul_fully_optimized_",
        )
    ],
    *[
        c
        for v in ("v1", "v2", "v3")
        for c in _both(
            f"mamba_{v}",
            "fused_mamba/mamba_nki_kernels.py",
            f"mamba_{v}",
            inputs=_mamba_inputs,
            reference=ref_mamba,
            rtol=1e-4,
            atol=1e-4,
            notes=FP32_NOTE,
        )
    ],
    Case(
        "legacy/sdk226/getting_started_baremetal",
        "sdk226",
        f"{SDK_EX}/getting_started_baremetal.py",
        "nki_tensor_add_kernel",
        api="legacy",
        inputs=_two((128, 512)),
        reference=ref_add,
    ),
    *[
        Case(
            f"legacy/sdk226/layernorm_{v}",
            "sdk226",
            f"{SDK_EX}/layernorm/layernorm_nki_kernel.py",
            f"nki_layernorm_kernel_{v}",
            api="legacy",
            inputs=_layernorm_inputs,
            reference=ref_layernorm,
            rtol=1e-4,
            atol=1e-4,
            notes=FP32_NOTE,
        )
        for v in ("v1", "v2")
    ],
    Case(
        "legacy/sdk226/rmsnorm",
        "sdk226",
        f"{SDK_EX}/rmsnorm/rmsnorm_nki_kernels.py",
        "nki_rmsnorm_kernel",
        api="legacy",
        inputs=lambda rng: (
            rng.uniform(0, 1, (256, 512)).astype(F32),
            rng.uniform(0, 1, 512).astype(F32),
        ),
        reference=ref_rmsnorm,
        rtol=1e-4,
        atol=1e-4,
        notes=FP32_NOTE,
    ),
    Case(
        "legacy/sdk226/sd_attention",
        "sdk226",
        f"{SDK_EX}/sd_attention/sd_attention_nki_kernels.py",
        "fused_self_attn_for_SD_small_head_size",
        api="legacy",
        inputs=_sd(1024, 64),
        reference=ref_sd_attention,
        rtol=1e-3,
        atol=1e-4,
        notes="fp32 in/out with bf16 matmuls (mixed_precision=True): rtol 1e-3 as the tutorial",
    ),
    *[
        Case(
            f"legacy/sdk226/mm_{api}_spmd",
            "sdk226",
            f"{SDK_EX}/mm-{api}-spmd.py",
            "matmul_128x128x512_spmd",
            api="legacy",
            inputs=(
                (
                    lambda rng: (
                        rng.uniform(-1, 1, (512, 128)).astype(F32),
                        rng.uniform(-1, 1, (128, 1024)).astype(F32),
                    )
                )
                if api == "nl"
                else _mm(128, 512, 1024, F32)
            ),
            reference=ref_matmul if api == "nl" else ref_matmul_t,
            grid=(4, 2),
            rtol=1e-4,
            atol=1e-4,
            notes=FP32_NOTE,
        )
        for api in ("nl", "nisa")
    ],
    Case(
        "legacy/sdk226/index_split",
        "sdk226",
        f"{SDK_EX}/index-case-1.py",
        "tensor_split_kernel_",
        api="legacy",
        inputs=_u((128, 256)),
        reference=ref_split,
        rtol=0.0,
        atol=0.0,
    ),
    Case(
        "legacy/sdk226/index_maxpool",
        "sdk226",
        f"{SDK_EX}/index-case-3.py",
        "tensor_maxpool_kernel_",
        api="legacy",
        inputs=lambda rng: (rng.uniform(-1, 1, (8, 12, 12)).astype(F32), 3),
        reference=ref_maxpool,
        rtol=0.0,
        atol=0.0,
    ),
    *[
        Case(
            f"legacy/sdk226/{name}",
            "sdk226",
            f"{SDK_EX}/{name}.py",
            "tensor_exp_kernel_",
            api="legacy",
            inputs=_u((128, 512)) if name != "layout-dynamic-loop" else _u((100, 512)),
            reference=ref_exp,
            rtol=1e-5,
            atol=1e-6,
            notes=FP32_NOTE + "; layout-dynamic-loop returns inside its loop (as published), so "
            "it covers one masked 128-row tile: 100 rows",
        )
        for name in ("layout-pass", "layout-loop", "layout-dynamic-loop")
    ],
    *[
        Case(
            f"legacy/samples/attention_{v}",
            "nki-samples",
            f"{SAMPLES}/attention_fwd_performance/attention_kernels.py",
            f"attn_fwd_{v}",
            api="legacy",
            inputs=_attn(128, 128 if v in ("v1", "v2") else 512),
            reference=_attention_reference(v),
            rtol=2.0**-22 if v in BF16_ATTENTION else 1e-3,
            atol=0.0 if v in BF16_ATTENTION else 1e-4,
            notes="fp32 q/k/v (d_head 128); softmax on the Scalar engine"
            + (
                "; bf16 exp scores and v: checked against bounds (ref_attention_dk_bf16), "
                "within 2^-22 relative (the last fp32 division)"
                if v in BF16_ATTENTION
                else ""
            )
            + ("; bf16 output: one bf16 rounding, both bounds rounded" if v in BF16_OUT else ""),
        )
        for v in ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v8a", "v9", "v10", "v11")
    ],
]
"""Every case; ``trnsim conformance`` (or ``tests/test_nki_legacy_conformance.py``) runs them."""
