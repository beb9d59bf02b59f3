"""Conformance cases: nki-library's token-generation norm subkernels (``core/subkernels``).

``rmsnorm_tkg`` and ``layernorm_tkg`` are subkernels (no ``@nki.jit`` in their files; the
runner launches them as kernels) that write a caller-given output buffer (``Case.out_args``),
as the library's own tests call them. References are written here from each docstring's
formula and pseudocode: normalise over H in float64, then lay the [BxS, H] result out as
[128, BxS, H // 128] per LNC shard of H (``t_c = result[:, c*H/L:(c+1)*H/L]`` reshaped to
[BxS, 128, H/128/L] and transposed to [128, BxS, H/128/L], the shards concatenated on the last
axis), or with ``hidden_dim_tp`` the H dim viewed as (H/128, 128). Inputs are fp16 as in the
library's tests; the kernels compute in fp32 and round once to fp16, so outputs are checked to
one fp16 ulp (2^-10 relative) of the float64 reference.
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Case
from trnsim.conformance.refs import f64, randn

REPO = "nki-library"
SUB = "src/nkilib_src/nkilib/core/subkernels/"
F16_ULP = 2.0**-10  # one fp16 ulp, relative to the binade's lower end


def _tkg_layout(y: np.ndarray, lnc: int, hidden_dim_tp: bool) -> np.ndarray:
    """[BxS, H] -> [128, BxS, H // 128] as the docstrings' pseudocode lays it out."""
    bxs, h = y.shape
    if hidden_dim_tp:  # "input H dimension view is (H/128, 128)"
        return y.reshape(bxs, h // 128, 128).transpose(2, 0, 1)
    shards = [
        y[:, c * h // lnc : (c + 1) * h // lnc]
        .reshape(bxs, 128, h // 128 // lnc)
        .transpose(1, 0, 2)
        for c in range(lnc)
    ]
    return np.concatenate(shards, axis=2)


def _rms_inputs(b: int, s: int, h: int, hidden_actual: int | None = None):
    def make(rng):
        x = randn(rng, (b, s, h), np.float16)
        if hidden_actual is not None:
            x[..., hidden_actual:] = 0  # the padding the argument describes
        gamma = randn(rng, (1, h), np.float16)
        out = np.zeros((128, b * s, h // 128), np.float16)
        return x, gamma, out

    return make


def _rms_ref(lnc: int):
    def ref(x, gamma, out, eps=1e-6, hidden_actual=None, hidden_dim_tp=False, **_):
        xf = f64(x).reshape(-1, x.shape[-1])
        n = x.shape[-1] if hidden_actual is None else hidden_actual
        y = xf / np.sqrt((xf * xf).sum(axis=-1, keepdims=True) / n + eps) * f64(gamma)
        return _tkg_layout(y, lnc, hidden_dim_tp).astype(np.float16)

    return ref


def _ln_inputs(b: int, s: int, h: int, beta: bool):
    def make(rng):
        x = randn(rng, (b, s, h), np.float16)
        gamma = randn(rng, (1, h), np.float16)
        out = np.zeros((128, b * s, h // 128), np.float16)
        if beta:
            return x, gamma, out, randn(rng, (1, h), np.float16)
        return x, gamma, out

    return make


def _ln_ref(lnc: int):
    """LayerNorm as the kernel documents its steps: statistics in fp32 (mean and E[x^2] over H,
    var = E[x^2] - mean^2, rsqrt(var + eps)), each step on the tile written to the output
    tile, whose dtype is the input's (fp16): x - mean, * gamma, * rsqrt, + beta, each rounded
    to fp16."""

    def ref(x, gamma, out, beta=None, eps=1e-6, **_):
        h = x.shape[-1]
        xf = f64(x).reshape(-1, h)
        mean = xf.mean(axis=-1, keepdims=True).astype(np.float32)
        mean_sq = (xf * xf).mean(axis=-1, keepdims=True).astype(np.float32)
        var = mean_sq - mean * mean
        rstd = (1 / np.sqrt(f64(var) + eps)).astype(np.float32)
        y = (xf - mean).astype(np.float16)
        y = (f64(y) * f64(gamma)).astype(np.float16)
        y = (f64(y) * rstd).astype(np.float16)
        if beta is not None:
            y = (f64(y) + f64(beta)).astype(np.float16)
        return _tkg_layout(f64(y), lnc, False).astype(np.float16)

    return ref


def _norm_case(
    name: str,
    file: str,
    kernel: str,
    inputs,
    ref,
    lnc: int,
    notes: str,
    rtol: float = F16_ULP,
    **kw,
) -> Case:
    return Case(
        name,
        REPO,
        SUB + file,
        kernel,
        inputs,
        ref,
        kwargs=kw,
        grid=(lnc,) if lnc > 1 else None,
        out_args=(2,),
        rtol=rtol,
        atol=2.0**-24,  # fp16's smallest subnormal: values that round to zero
        notes=notes,
    )


CASES: list[Case] = [
    _norm_case(
        "library/rmsnorm_tkg",
        "rmsnorm_tkg.py",
        "rmsnorm_tkg",
        _rms_inputs(1, 4, 2048),
        _rms_ref(1),
        1,
        "fp16 [1, 4, 2048], LNC=1: output [128, 4, 16]",
    ),
    _norm_case(
        "library/rmsnorm_tkg_lnc2",
        "rmsnorm_tkg.py",
        "rmsnorm_tkg",
        _rms_inputs(2, 8, 8192),
        _rms_ref(2),
        2,
        "fp16 [2, 8, 8192], LNC=2: each core's half of H laid out per the pseudocode",
    ),
    _norm_case(
        "library/rmsnorm_tkg_hidden_actual",
        "rmsnorm_tkg.py",
        "rmsnorm_tkg",
        _rms_inputs(1, 4, 2048, hidden_actual=1920),
        _rms_ref(1),
        1,
        "fp16 [1, 4, 2048] padded from 1920 (zeros past it): the mean divides by 1920",
        hidden_actual=1920,
    ),
    _norm_case(
        "library/rmsnorm_tkg_hidden_dim_tp",
        "rmsnorm_tkg.py",
        "rmsnorm_tkg",
        _rms_inputs(1, 1, 4096),
        _rms_ref(1),
        1,
        "fp16 [1, 1, 4096], hidden_dim_tp: H viewed as (H/128, 128)",
        hidden_dim_tp=True,
    ),
    _norm_case(
        "library/layernorm_tkg",
        "layernorm_tkg.py",
        "layernorm_tkg",
        _ln_inputs(1, 4, 2048, beta=True),
        _ln_ref(1),
        1,
        "fp16 [1, 4, 2048] with beta, LNC=1; 2 fp16 ulps: the reference replays the kernel's "
        "four fp16 roundings, but rsqrt's last fp32 bit is the hardware's (unspecified), and at "
        "a rounding midpoint of x_hat * rsqrt one ulp there becomes two after + beta "
        "(seed 0: 1 of 8192 values, y * rstd = -1.02197255 against the midpoint -1.02197266)",
        rtol=2 * F16_ULP,
    ),
    _norm_case(
        "library/layernorm_tkg_lnc2",
        "layernorm_tkg.py",
        "layernorm_tkg",
        _ln_inputs(2, 8, 4096, beta=False),
        _ln_ref(2),
        2,
        "fp16 [2, 8, 4096] without beta, LNC=2",
    ),
]
