"""Conformance cases: the kernels of aws-neuron/nki-library (new ``nki`` API).

Only the call shapes and the NumPy references are written here, from each kernel's documented
arguments and semantics (its docstring is the spec); the kernels are imported unmodified from a
local checkout (``trnsim conformance PATH/nki-library``). Tolerances follow the dtypes: fp32
work is checked to a few fp32 ulps, bf16 outputs to one or two bf16 ulps (2^-7 relative) of a
float64 reference, with the kernel's documented internal dtype noted where it matters.
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, f64, randn

LIB = "src/nkilib_src/nkilib/"
REPO = "nki-library"


def _path(rel: str) -> str:
    return LIB + rel


# ---- cumsum --------------------------------------------------------------------------------


def _cumsum_ref(x, axis=-1):
    return np.cumsum(f64(x), axis=-1).astype(x.dtype)


# ---- cascaded max --------------------------------------------------------------------------


def _cascaded_max_ref(x):
    x2 = f64(x).reshape(-1, x.shape[-1])
    vals = x2.max(axis=-1)
    idx = x2.argmax(axis=-1)
    shape = (*x.shape[:-1], 1)
    return vals.astype(x.dtype).reshape(shape), idx.astype(np.uint32).reshape(shape)


# ---- RoPE ----------------------------------------------------------------------------------


def _rope_ref(x, cos, sin, lnc_shard=False, contiguous_layout=True, relayout_in_sbuf=False):
    """x [d, B, H, S], cos/sin [d/2, B, S]: the rotation of each (first-half, second-half)
    pair (contiguous layout) or (even, odd) pair (interleaved layout) of the head dim."""
    xf = f64(x)
    c, s = f64(cos)[:, :, None, :], f64(sin)[:, :, None, :]
    half = x.shape[0] // 2
    if contiguous_layout:
        x1, x2 = xf[:half], xf[half:]
    else:
        x1, x2 = xf[0::2], xf[1::2]
    o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
    out = np.empty_like(xf)
    if contiguous_layout:
        out[:half], out[half:] = o1, o2
    else:
        out[0::2], out[1::2] = o1, o2
    return out.astype(x.dtype)


def _rope_inputs(d: int, b: int, h: int, s: int):
    def make(rng):
        x = randn(rng, (d, b, h, s), np.float32)
        ang = rng.uniform(0, 2 * np.pi, (d // 2, b, s))
        return x, np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)

    return make


def _rope_hf_ref(q, k, q_out, k_out, cos=None, sin=None, rope_cache=None, backward=False):
    """HuggingFace rotate_half: out = x * cos + rotate_half(x) * sin with cos/sin [S, D]
    (the backward pass rotates the other way: sin negated)."""

    def rot(x):
        xf = f64(x)
        half = x.shape[-1] // 2
        r = np.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
        sgn = -1.0 if backward else 1.0
        return (xf * f64(cos) + sgn * r * f64(sin)).astype(x.dtype)

    return rot(q), rot(k)


def _rope_hf_inputs(b: int, hq: int, hk: int, s: int, d: int):
    def make(rng):
        q = randn(rng, (b, hq, s, d))
        k = randn(rng, (b, hk, s, d))
        ang = rng.uniform(0, 2 * np.pi, (s, d // 2))
        ang = np.concatenate([ang, ang], axis=-1)
        return (
            q,
            k,
            np.zeros_like(q),
            np.zeros_like(k),
            np.cos(ang).astype(np.float32),
            np.sin(ang).astype(np.float32),
        )

    return make


# ---- dynamic elementwise add ---------------------------------------------------------------


def _dyn_add_inputs(m: int, h: int):
    def make(rng):
        n = np.array([[m // 128]], np.int32)
        return randn(rng, (m, h), bf16), randn(rng, (m, h), bf16), n

    return make


def _dyn_add_ref(a, b, n):
    rows = int(n[0, 0]) * 128
    assert rows == a.shape[0], "the case processes every tile (the rest is left unwritten)"
    return (f64(a) + f64(b)).astype(a.dtype)


# ---- cross entropy -------------------------------------------------------------------------


def _ce_inputs(n: int, v: int):
    def make(rng):
        return randn(rng, (n, v)), rng.integers(0, v, n).astype(np.int32)

    return make


def _ce_fwd_ref(logits, targets, positions_per_batch=32, chunk_size=32768, dtype=None):
    x = f64(logits)
    m = x.max(axis=-1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=-1))
    loss = lse - x[np.arange(len(targets)), targets]
    return loss.astype(np.float32), lse.astype(np.float32)


def _ce_bwd_inputs(n: int, v: int):
    def make(rng):
        logits, targets = _ce_inputs(n, v)(rng)
        x = f64(logits)
        m = x.max(axis=-1)
        lse = (m + np.log(np.exp(x - m[:, None]).sum(axis=-1))).astype(np.float32)
        return logits, targets, lse

    return make


def _ce_bwd_ref(logits, targets, lse, reduction="mean", dtype=None, inplace=True, **_):
    """grad = scale * (softmax(logits) - onehot(target)), softmax from the saved LSE."""
    x = f64(logits)
    g = np.exp(x - f64(lse)[:, None])
    g[np.arange(len(targets)), targets] -= 1.0
    scale = 1.0 / len(targets) if reduction == "mean" else 1.0
    return (g * scale).astype(np.float32)


# ---- indexed flatten -----------------------------------------------------------------------


def _flatten_inputs(e: int, t: int, f_len: int, out_len: int):
    def make(rng):
        x = rng.integers(0, 1000, (e, t)).astype(np.int32)
        blocks = out_len // f_len
        per_row = t // f_len
        # rows do not overlap (the kernel merges the LNC halves with a max); the last row
        # starts half a row before the end, so half its blocks are skipped (out of bounds)
        starts = np.arange(0, blocks - 2 * per_row + 1, per_row)
        offs = np.empty(e, np.int32)
        offs[:-1] = rng.choice(starts, e - 1, replace=False)
        offs[-1] = blocks - per_row // 2
        return x, f_len, out_len, offs

    return make


def _flatten_ref(x, f_len, out_len, row_offsets, row_offsets_start=None, padding_val=-1):
    """The documented pseudocode: each row's f_len-blocks land at its block offset onwards;
    blocks past the end are skipped; the rest holds padding_val."""
    out = np.full(out_len, padding_val, x.dtype)
    blocks = out.reshape(out_len // f_len, f_len)
    e, t = x.shape
    for r in range(e):
        for p in range(t // f_len):
            b = int(row_offsets[r]) + p
            if b < out_len // f_len:
                blocks[b] = x[r, p * f_len : (p + 1) * f_len]
    return out


# ---- nonzero indices -----------------------------------------------------------------------


def _nonzero_inputs(t: int, c: int):
    def make(rng):
        x = (rng.random((t, c)) < 0.3).astype(np.float32) * randn(rng, (t, c))
        return (x,)

    return make


def _nonzero_ref(x, col_start_id=None, n_cols=None, chunk_size=None, index_dtype=np.int32):
    t, c = x.shape
    idx = np.full((c, t), -1, np.int32)
    counts = np.zeros(c, np.int32)
    for j in range(c):
        nz = np.nonzero(x[:, j])[0]
        idx[j, : len(nz)] = nz
        counts[j] = len(nz)
    return idx, counts


def _nonzero_count_ref(x):
    nz = np.nonzero(x[0])[0]
    out = np.full((1, x.shape[1] + 1), -1, np.int32)
    out[0, : len(nz)] = nz
    out[0, -1] = len(nz)
    return out


# ---- convolutions --------------------------------------------------------------------------


def _conv1d_ref(x, w, bias=None, stride=1, padding=(0, 0), dilation=1, **_):
    """y[b, o, l] = sum_{k, c} w[k, c, o] * xpad[b, c, l*stride + k*dilation] (+ bias[o])."""
    xp = np.pad(f64(x), ((0, 0), (0, 0), tuple(padding)))
    k = w.shape[0]
    l_out = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
    y = np.zeros((x.shape[0], w.shape[2], l_out))
    for kk in range(k):
        cols = xp[:, :, kk * dilation : kk * dilation + stride * (l_out - 1) + 1 : stride]
        y += np.einsum("bcl,co->bol", cols, f64(w[kk]))
    if bias is not None:
        y += f64(bias)[None, :, None]
    return y.astype(x.dtype)


def _conv1d_inputs(b: int, c_in: int, c_out: int, length: int, k: int):
    def make(rng):
        w = randn(rng, (k, c_in, c_out)) / np.float32(np.sqrt(c_in * k))
        return randn(rng, (b, c_in, length)), w.astype(np.float32)

    return make


def _dw_ref(img, filt, padding=((0, 0), (0, 0)), stride=(1, 1), **_):
    """Depthwise: y[n, c, 0, q] = sum_s f[c, 0, 0, s] * xpad[n, c, 0, q*stride_w + s]."""
    x = np.pad(f64(img), ((0, 0), (0, 0), (0, 0), tuple(padding[1])))
    s = filt.shape[-1]
    q = (x.shape[-1] - s) // stride[1] + 1
    y = np.zeros((*img.shape[:3], q))
    for j in range(s):
        w = f64(filt)[:, 0, 0, j][None, :, None, None]
        y += x[..., j : j + stride[1] * (q - 1) + 1 : stride[1]] * w
    return y.astype(img.dtype)


# ---- attention (context encoding) ------------------------------------------------------------


def _attn_inputs(b: int, sq: int, skv: int, d: int):
    def make(rng):
        q = randn(rng, (b, sq, d))  # tp_q=True layout
        k = randn(rng, (b, d, skv))  # tp_k=False layout
        v = randn(rng, (b, skv, d))
        return q, k, v

    return make


def _attn_ref(q, k, v, scale=1.0, causal_mask=True, **_):
    """softmax(scale * q @ k) @ v with a causal mask (query i sees keys j <= i), computed as
    the kernel documents ("float32 for softmax and bfloat16 for other operations"): q, k, v
    and the unnormalised probabilities in bf16, the max, exp and row sums in fp32."""
    qb, kb, vb = (f64(a.astype(bf16)) for a in (q, k, v))
    s = scale * np.einsum("bqd,bdk->bqk", qb, kb)
    if causal_mask:
        qi = np.arange(q.shape[1])[:, None]
        kj = np.arange(k.shape[2])[None, :]
        s = np.where(kj <= qi, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = f64(e.astype(np.float32).astype(bf16))
    return ((p @ vb) / e.sum(axis=-1, keepdims=True)).astype(q.dtype)


# ---- output projections --------------------------------------------------------------------


def _oproj_tkg_inputs(d: int, b: int, n: int, s: int, h: int):
    def make(rng):
        att = randn(rng, (d, b, n, s))
        w = (randn(rng, (n * d, h)) / np.float32(np.sqrt(n * d))).astype(np.float32)
        bias = randn(rng, (1, h))
        return att, w, bias

    return make


def _oproj_tkg_ref(att, w, bias=None, **_):
    """out[b * S + s, h] = sum_{n, d} att[d, b, n, s] * w[n * D + d, h] + bias[0, h]."""
    d, b, n, s = att.shape
    x = f64(att).transpose(1, 3, 2, 0).reshape(b * s, n * d)
    out = x @ f64(w) + (0 if bias is None else f64(bias))
    return out.astype(att.dtype)


def _oproj_cte_inputs(b: int, n: int, d: int, s: int, h: int):
    def make(rng):
        att = randn(rng, (b, n, d, s))
        w = (randn(rng, (n * d, h)) / np.float32(np.sqrt(n * d))).astype(np.float32)
        return att, w, randn(rng, (1, h))

    return make


def _oproj_cte_ref(att, w, bias=None, **_):
    """out[b, s, h] = sum_{n, d} att[b, n, d, s] * w[n * D + d, h] + bias[0, h]."""
    b, n, d, s = att.shape
    x = f64(att).transpose(0, 3, 1, 2).reshape(b, s, n * d)
    out = x @ f64(w) + (0 if bias is None else f64(bias))
    return out.astype(att.dtype)


# ---- MLP -------------------------------------------------------------------------------------


def _mlp_inputs(b: int, s: int, h: int, i: int):
    def make(rng):
        x = randn(rng, (b, s, h))
        wg = (randn(rng, (h, i)) / np.float32(np.sqrt(h))).astype(np.float32)
        wu = (randn(rng, (h, i)) / np.float32(np.sqrt(h))).astype(np.float32)
        wd = (randn(rng, (i, h)) / np.float32(np.sqrt(i))).astype(np.float32)
        return x, wg, wu, wd

    return make


def _mlp_ref(x, wg, wu, wd, **_):
    """The documented flow without norm or bias: (silu(x @ Wg) * (x @ Wu)) @ Wd."""
    xf = f64(x)
    g = xf @ f64(wg)
    act = g / (1.0 + np.exp(-g))
    return ((act * (xf @ f64(wu))) @ f64(wd)).astype(x.dtype)


# ---- QKV projection --------------------------------------------------------------------------


def _qkv_inputs(b: int, s: int, h: int, heads: int, kv_heads: int, d: int):
    def make(rng):
        i = (heads + 2 * kv_heads) * d
        x = randn(rng, (b, s, h))
        w = (randn(rng, (h, i)) / np.float32(np.sqrt(h))).astype(np.float32)
        return Call((x, w), {"bias": randn(rng, (1, i))})

    return make


def _qkv_ref(x, w, bias=None, **_):
    """The documented step 3 in the BSD layout: qkv[b, s, :] = x[b, s] @ W + bias."""
    return (f64(x) @ f64(w) + (0 if bias is None else f64(bias))).astype(x.dtype)


def _qkv_cte_ref(x, w, bias=None, **_):
    """Context encoding documents that fp32 inputs are computed in bf16 (qkv_cte_utils: "Even if
    inputs are fp32 or fp8, computations will be done with bf16"): x and W rounded to bf16, the
    product accumulated in fp32 plus the bias (held in a bf16 tile too), each output row held in
    a bf16 tile."""
    b = 0 if bias is None else f64(bias.astype(bf16))
    y = f64(x.astype(bf16)) @ f64(w.astype(bf16)) + b
    return y.astype(bf16).astype(x.dtype)


# ---- top-k -----------------------------------------------------------------------------------


def _topk_inputs(bxs: int, v: int, k: int):
    def make(rng):
        from nkilib.core.topk.rotational_topk_utils import (
            create_rotational_topk_config,
            create_topk_config,
        )

        x = randn(rng, (bxs, v))
        cfg = create_topk_config((bxs, v), np.float32, k, sorted=True, num_programs=2)
        return x, create_rotational_topk_config((bxs, v), cfg)

    return make


def _topk_ref(x, config):
    """The k largest values of each row, in descending order, and their indices."""
    k = config.topk_config.k
    idx = np.argsort(-f64(x), axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, axis=-1), idx.astype(np.uint32)


# ---- RMSNorm + FP8 row quantization --------------------------------------------------------

FP8_E4M3_RANGE = 240.0  # the kernel's documented range (rmsnorm_quant_constants.py)
MIN_DEQUANT_SCALE = 1e-6  # the kernel's documented clamp (rmsnorm_quant_constants.py)


def _rmsq_inputs(b: int, s: int, h: int):
    def make(rng):
        from nkilib.core.rmsnorm.rmsnorm_quant import RmsNormQuantKernelArgs

        args = RmsNormQuantKernelArgs(eps=1e-6)
        return randn(rng, (b, s, h), bf16), randn(rng, (1, h), bf16), args

    return make


def _rmsq_decode(out):
    """[.., H + 4] float8_e4m3 -> (the H quantized values, the fp32 dequantization scale)."""
    out = np.asarray(out)
    data = out[..., :-4].astype(np.float32)
    scale = np.ascontiguousarray(out[..., -4:]).view(np.uint8).view(np.float32)
    return data, scale


def _rmsq_ref(x, w, kargs, input_dequant_scale=None):
    """The documented row quantization of y = x / sqrt(mean(x^2) + eps) * w, with the kernel's
    documented dtypes (``rmsnorm_quant_constants``: compute dtype bf16, fp8 e4m3 output of
    range 240, dequant scales clamped to at least 1e-6): y is held in bf16; per row the fp32
    dequant scale is max|y| * (1 / 240), clamped; the data are fp8(y * fp32(1 / scale))."""
    import ml_dtypes

    xf = f64(x)
    y = xf / np.sqrt((xf * xf).mean(axis=-1, keepdims=True) + kargs.eps) * f64(w).reshape(-1)
    yb = y.astype(ml_dtypes.bfloat16).astype(np.float32)
    amax = np.abs(yb).max(axis=-1, keepdims=True)
    scale = np.maximum(amax * np.float32(1 / FP8_E4M3_RANGE), np.float32(MIN_DEQUANT_SCALE))
    q = (yb * (np.float32(1) / scale)).astype(ml_dtypes.float8_e4m3).astype(np.float32)
    return q, scale


# ---- MoE top-k reduce (after all_to_all_v) ----------------------------------------------------


def _topk_reduce_inputs(t: int, k: int, n_src: int, h: int):
    def make(rng):
        rows = n_src * t
        data = randn(rng, (rows, h), bf16)
        tokens = np.full(rows, -1, np.int32)  # padding rows match no token
        slots = rng.choice(rows, t * k, replace=False)
        tokens[slots] = np.repeat(np.arange(t, dtype=np.int32), k)
        packed = tokens.reshape(rows, 1).view(np.uint16).view(bf16)  # int32 as 2 bf16 words
        return np.ascontiguousarray(np.concatenate([data, packed], axis=1)), t, k

    return make


def _topk_reduce_ref(x, t, k):
    """output[token] = sum of the rows whose packed int32 index (last 2 columns) is token."""
    tokens = np.ascontiguousarray(x[:, -2:]).view(np.int32).reshape(-1)
    data = f64(x[:, :-2])
    out = np.stack([data[tokens == i].sum(axis=0) for i in range(t)])
    return out.astype(x.dtype)


# ---- attention backward (flash) --------------------------------------------------------------

_LSE_TILE = 128


def _attn_fwd_parts(q, k, scale, causal):
    """P [bs, h, Sq, Sk] and lse [bs, h, Sq] for q [bs, h, d, Sq], k [bs, h, d, Sk]."""
    s = scale * np.einsum("bhdi,bhdj->bhij", f64(q), f64(k))
    if causal:
        i = np.arange(q.shape[-1])[:, None]
        j = np.arange(k.shape[-1])[None, :]
        s = np.where(j <= i, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True))
    return np.exp(s - lse), lse[..., 0]


def _attn_bwd_inputs(bs: int, h: int, d: int, sq: int):
    def make(rng):
        q, k, v, dy = (randn(rng, (bs, h, d, sq)) for _ in range(4))
        p, lse = _attn_fwd_parts(q, k, 1.0 / np.sqrt(d), True)
        o = np.einsum("bhij,bhdj->bhdi", p, f64(v)).astype(np.float32)
        # lse[b, h, i, t] is query t * tile + i (tile = partition dim)
        lse_t = lse.reshape(bs, h, sq // _LSE_TILE, _LSE_TILE).transpose(0, 1, 3, 2)
        return Call(
            (q, k, v, o, dy, np.ascontiguousarray(lse_t, dtype=np.float32)),
            {"use_causal_mask": True},
        )

    return make


def _attn_bwd_ref(q, k, v, o, dy, lse, use_causal_mask=False, softmax_scale=None, **_):
    """The attention backward pass: dV = P^T dY, dS = P * (dP - rowsum(dY * O)),
    dQ = scale * dS K, dK = scale * dS^T Q (softmax scale 1/sqrt(d) by default)."""
    scale = softmax_scale if softmax_scale is not None else 1.0 / np.sqrt(q.shape[2])
    p, _ = _attn_fwd_parts(q, k, scale, use_causal_mask)
    dyf, vf, qf, kf = f64(dy), f64(v), f64(q), f64(k)
    dv = np.einsum("bhij,bhdi->bhdj", p, dyf)
    dp = np.einsum("bhdi,bhdj->bhij", dyf, vf)
    dsum = (dyf * f64(o)).sum(axis=2)[..., None]  # [bs, h, Sq, 1]
    ds = p * (dp - dsum)
    dq = scale * np.einsum("bhij,bhdj->bhdi", ds, kf)
    dk = scale * np.einsum("bhij,bhdi->bhdj", ds, qf)
    return tuple(x.astype(q.dtype) for x in (dq, dk, dv))


# ---- MoE blockwise matmul (context encoding) -------------------------------------------------


def _bwmm_inputs(t: int, h: int, b: int, e: int, i: int):
    def make(rng):
        x = randn(rng, (t, h))
        gup = (randn(rng, (e, h, 2, i)) / np.float32(np.sqrt(h))).astype(np.float32)
        down = (randn(rng, (e, i, h)) / np.float32(np.sqrt(i))).astype(np.float32)
        # top-1 routing with every block full: expert k gets tokens perm[k*B : (k+1)*B]
        perm = rng.permutation(t).astype(np.int32)
        block_to_expert = (np.arange(t // b) % e).astype(np.int32).reshape(-1, 1)
        aff = np.zeros(((t + 1) * e, 1), np.float32)
        for blk in range(t // b):
            ids = perm[blk * b : (blk + 1) * b]
            aff[ids * e + block_to_expert[blk, 0], 0] = rng.uniform(0.1, 1.0, b)
        from nkilib.core.utils.common_types import ExpertAffinityScaleMode

        return Call(
            (x, aff, gup, down, b, perm, block_to_expert),
            {
                "compute_dtype": np.float32,
                "is_tensor_update_accumulating": False,
                "expert_affinities_scaling_mode": ExpertAffinityScaleMode.POST_SCALE,
            },
        )

    return make


def _bwmm_ref(x, aff, gup, down, b, token_position_to_id, block_to_expert, **_):
    """The documented pseudocode: per block, silu(h @ Wg) * (h @ Wu) @ Wd, scaled by the
    token's affinity for the block's expert, added into the token's output row."""
    e = gup.shape[0]
    out = np.zeros((x.shape[0], x.shape[1]))
    for blk in range(len(token_position_to_id) // b):
        ex = int(block_to_expert[blk, 0])
        ids = token_position_to_id[blk * b : (blk + 1) * b]
        hs = f64(x)[ids]
        g = hs @ f64(gup[ex, :, 0, :])
        u = hs @ f64(gup[ex, :, 1, :])
        y = (g / (1.0 + np.exp(-g)) * u) @ f64(down[ex])
        out[ids] += y * f64(aff)[ids * e + ex]
    return out.astype(x.dtype)


def _moe_cte_inputs(t: int, h: int, b: int, e: int, i: int):
    """moe_cte's argument order (token map and block map before the block size) and a
    shard_on_block spec."""

    def make(rng):
        from nkilib.core.moe.moe_cte.moe_cte import MoECTEImplementation, MoECTESpec

        c = _bwmm_inputs(t, h, b, e, i)(rng)
        x, aff, gup, down, blk, perm, bte = c.args
        spec = MoECTESpec(implementation=MoECTEImplementation.shard_on_block)
        return Call((x, aff, gup, down, perm, bte, blk, spec), c.kwargs)

    return make


def _moe_cte_ref(x, aff, gup, down, perm, bte, blk, spec, **kw):
    return _bwmm_ref(x, aff, gup, down, blk, perm, bte, **kw)


def _bwmm_dropping_ref(*args, **kwargs):
    """(output, gate_up_activations_T, down_activations): the saved activations are the
    kernel's own checkpoint layout, not checked (None)."""
    return _bwmm_ref(*args, **kwargs), None, None


# ---- collectives across the two cores of a kernel[2] launch ------------------------------


def _allgather_inputs(h: int, w: int, tiled: bool = False):
    def make(rng):
        from nki.collectives import ReplicaGroup

        return randn(rng, (h, w)), ReplicaGroup([[0, 1]]), 2

    return make


def _allgather_ref(inp, replica_groups, tp_degree):
    """out = [data_0 | data_1 | ...] along the last dim (the docstring's example). In a
    kernel[2] launch the ranks are the two cores, which see the same HBM input, so every
    rank contributes ``inp``."""
    return np.concatenate([inp] * tp_degree, axis=1)


CASES: list[Case] = [
    Case(
        "library/cumsum_2d",
        REPO,
        _path("core/cumsum/cumsum.py"),
        "cumsum",
        lambda rng: (randn(rng, (256, 1024)),),
        _cumsum_ref,
        rtol=1e-5,
        atol=1e-4,
        notes="fp32 [B, H]; fp32 accumulation of up to 1024 terms (atol: fp32 sum error)",
    ),
    Case(
        "library/cumsum_3d",
        REPO,
        _path("core/cumsum/cumsum.py"),
        "cumsum",
        lambda rng: (randn(rng, (4, 3, 640)),),
        _cumsum_ref,
        rtol=1e-5,
        atol=1e-4,
        notes="fp32 [B, S, H] with H not a multiple of 512",
    ),
    Case(
        "library/cascaded_max",
        REPO,
        _path("core/max/cascaded_max.py"),
        "cascaded_max",
        lambda rng: (randn(rng, (2, 2, 4096)),),
        _cascaded_max_ref,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="fp32 [B, S, V], LNC=2 (documented as required for BxS > 1); max is exact",
    ),
    Case(
        "library/rope_contiguous",
        REPO,
        _path("core/embeddings/rope.py"),
        "RoPE",
        _rope_inputs(128, 2, 2, 128),
        _rope_ref,
        rtol=1e-5,
        atol=1e-5,
    ),
    Case(
        "library/rope_interleaved",
        REPO,
        _path("core/embeddings/rope.py"),
        "RoPE",
        _rope_inputs(64, 1, 2, 128),
        _rope_ref,
        kwargs={"contiguous_layout": False},
        rtol=1e-5,
        atol=1e-5,
    ),
    Case(
        "library/rope_hf",
        REPO,
        _path("core/embeddings/rope_hf.py"),
        "rope_hf",
        _rope_hf_inputs(1, 2, 1, 128, 64),
        _rope_hf_ref,
        rtol=1e-5,
        atol=1e-5,
    ),
    Case(
        "library/dynamic_elementwise_add",
        REPO,
        _path("experimental/dynamic_shapes/dynamic_elementwise_add.py"),
        "dynamic_elementwise_add",
        _dyn_add_inputs(256, 1024),
        _dyn_add_ref,
        rtol=2**-8,
        atol=0.0,
        notes="bf16: one rounding of the exact sum (half an ulp)",
    ),
    Case(
        "library/cross_entropy_forward",
        REPO,
        _path("experimental/loss/cross_entropy.py"),
        "cross_entropy_forward",
        _ce_inputs(64, 2048),
        _ce_fwd_ref,
        kwargs={"positions_per_batch": 32, "chunk_size": 1024, "dtype": np.float32},
        grid=(2,),
        rtol=1e-5,
        atol=1e-4,
        notes="fp32 internal dtype, two vocab chunks (the online log-sum-exp path), LNC=2",
    ),
    Case(
        "library/cross_entropy_backward",
        REPO,
        _path("experimental/loss/cross_entropy.py"),
        "cross_entropy_backward",
        _ce_bwd_inputs(64, 2048),
        _ce_bwd_ref,
        kwargs={
            "positions_per_batch": 32,
            "chunk_size": 1024,
            "dtype": np.float32,
            "inplace": False,
        },
        grid=(2,),
        rtol=1e-5,
        atol=1e-8,
        notes="fp32, mean reduction, LSE from the float64 forward",
    ),
    Case(
        "library/indexed_flatten",
        REPO,
        _path("core/subkernels/indexed_flatten.py"),
        "indexed_flatten",
        _flatten_inputs(4, 512, 32, 4096),
        _flatten_ref,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="int32 data moved exactly; LNC=2 (documented requirement); one row partly OOB",
    ),
    Case(
        "library/find_nonzero_indices",
        REPO,
        _path("core/subkernels/find_nonzero_indices.py"),
        "find_nonzero_indices",
        _nonzero_inputs(256, 16),
        _nonzero_ref,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
    ),
    Case(
        "library/find_nonzero_indices_with_count",
        REPO,
        _path("experimental/benchmark/find_nonzero_indices_with_count.py"),
        "find_nonzero_indices_with_count",
        lambda rng: ((rng.random((1, 512)) < 0.3).astype(np.float32),),
        _nonzero_count_ref,
        rtol=0.0,
        atol=0.0,
    ),
    Case(
        "library/conv1d",
        REPO,
        _path("experimental/conv/conv1d.py"),
        "conv1d",
        _conv1d_inputs(2, 64, 96, 200, 3),
        _conv1d_ref,
        kwargs={"padding": (1, 1)},
        rtol=1e-4,
        atol=1e-4,
        notes="fp32; K=3 'same' padding; fp32 matmul accumulation over K*C_in=192 terms",
    ),
    Case(
        "library/depthwise_conv1d",
        REPO,
        _path("experimental/conv/depthwise_conv1d.py"),
        "depthwise_conv1d_implicit_gemm",
        lambda rng: (randn(rng, (1, 8, 1, 256)), randn(rng, (8, 1, 1, 4))),
        _dw_ref,
        kwargs={"feature_group_count": 8},
        grid=(2,),
        rtol=1e-5,
        atol=1e-5,
        notes="fp32, LNC=2 (documented channel sharding), S=4, stride 1",
    ),
    Case(
        "library/attention_cte_causal",
        REPO,
        _path("core/attention/attention_cte.py"),
        "attention_cte",
        _attn_inputs(1, 256, 256, 64),
        _attn_ref,
        kwargs={"scale": 0.125},
        rtol=2**-8,
        atol=2e-4,
        notes="fp32 q [B, Sq, d] (tp_q), k [B, d, Skv], v [B, Skv, d]; causal; two query "
        "tiles; fp32 softmax, bf16 operands and probabilities as documented",
    ),
    Case(
        "library/output_projection_tkg",
        REPO,
        _path("core/output_projection/output_projection_tkg.py"),
        "output_projection_tkg",
        _oproj_tkg_inputs(64, 2, 2, 4, 512),
        _oproj_tkg_ref,
        rtol=1e-4,
        atol=1e-5,
        notes="fp32 attention [D, B, N, S], weight [N*D, H], bias; out [B*S, H]",
    ),
    Case(
        "library/output_projection_cte",
        REPO,
        _path("core/output_projection/output_projection_cte/output_projection_cte.py"),
        "output_projection_cte",
        _oproj_cte_inputs(1, 2, 64, 512, 512),
        _oproj_cte_ref,
        rtol=1e-4,
        atol=1e-5,
        notes="fp32 attention [B, N, D, S], weight [N*D, H], bias; out [B, S, H]",
    ),
    Case(
        "library/mlp_cte",
        REPO,
        _path("core/mlp/mlp.py"),
        "mlp",
        _mlp_inputs(1, 256, 512, 1024),
        _mlp_ref,
        rtol=1e-4,
        atol=1e-4,
        notes="fp32, context encoding (S=256), SiLU, no norm/bias/quantization",
    ),
    Case(
        "library/mlp_tkg",
        REPO,
        _path("core/mlp/mlp.py"),
        "mlp",
        _mlp_inputs(1, 4, 512, 1024),
        _mlp_ref,
        rtol=1e-4,
        atol=1e-4,
        notes="fp32, token generation (S=4), SiLU, no norm/bias/quantization",
    ),
    Case(
        "library/qkv_cte",
        REPO,
        _path("core/qkv/qkv.py"),
        "qkv",
        _qkv_inputs(1, 256, 512, 4, 2, 64),
        _qkv_cte_ref,
        rtol=2**-7,
        atol=1e-4,
        notes="fp32 [B, S, H] x [H, (4 + 2 * 2) * 64] + bias, BSD output, context encoding; "
        "computed in bf16 as the kernel documents, so checked to one bf16 ulp",
    ),
    Case(
        "library/qkv_tkg",
        REPO,
        _path("core/qkv/qkv.py"),
        "qkv",
        _qkv_inputs(2, 2, 512, 4, 2, 64),
        _qkv_ref,
        rtol=1e-4,
        atol=1e-4,
        notes="fp32, token generation (B*S = 4), BSD output",
    ),
    Case(
        "library/rotational_topk",
        REPO,
        _path("core/topk/rotational_topk.py"),
        "rotational_topk",
        _topk_inputs(4, 4096, 8),
        _topk_ref,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="fp32 [BxS, V], k=8 sorted, LNC=2; values and indices exact (no ties)",
    ),
    Case(
        "library/rmsnorm_quant_row",
        REPO,
        _path("core/rmsnorm/rmsnorm_quant.py"),
        "rmsnorm_quant_kernel",
        _rmsq_inputs(1, 128, 512),
        _rmsq_ref,
        decode=_rmsq_decode,
        rtol=0.0,
        atol=0.0,
        notes="bf16 [B, S, H] (with fp32 input the kernel pairs a bf16 ones-vector with fp32 "
        "gamma in nc_matmul, which the docs forbid), RMS norm then fp8 e4m3 row quantization; "
        "exact: the reference holds y in the documented bf16 compute dtype and quantizes as "
        "documented (with y in float64, 2.3 % of the fp8 values sat one ulp away)",
    ),
    Case(
        "library/topk_reduce",
        REPO,
        _path("experimental/collectives/topk_reduce.py"),
        "topk_reduce",
        _topk_reduce_inputs(16, 4, 8, 256),
        _topk_reduce_ref,
        grid=(2,),
        rtol=2**-7,
        atol=0.03,
        notes="bf16 [8 * 16, 256 + 2], T=16, K=4, LNC=2 on H; a bf16 sum of K=4 rows: up to 3 "
        "bf16 roundings of partial sums |s| < ~4 (3 * 2^-9 * 4 ~ 0.025) on top of 1 ulp",
    ),
    Case(
        "library/attention_bwd_causal",
        REPO,
        _path("core/attention/attention_bwd.py"),
        "attention_bwd",
        _attn_bwd_inputs(1, 1, 64, 256),
        _attn_bwd_ref,
        rtol=1e-4,
        atol=1e-4,
        notes="fp32 q, k, v, o, dY [1, 1, 64, 256], causal, scale 1/sqrt(d); lse from float64",
    ),
    Case(
        "library/bwmm_shard_on_block",
        REPO,
        _path("core/moe/moe_cte/bwmm_shard_on_block.py"),
        "bwmm_shard_on_block",
        _bwmm_inputs(256, 512, 128, 2, 256),
        _bwmm_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="fp32 compute, T=256, H=512, B=128, E=2, I_TP=256, top-1, full blocks, LNC=2 "
        "(the block distribution reads block_to_expert with a stride of 2 shards)",
    ),
    Case(
        "library/bwmm_shard_on_I",
        REPO,
        _path("core/moe/moe_cte/bwmm_shard_on_I.py"),
        "blockwise_mm_baseline_shard_intermediate",
        _bwmm_inputs(512, 512, 256, 2, 256),
        _bwmm_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="T=512, B=256 (the kernel needs blocks of 256), E=2, sharded on the "
        "intermediate dim, post-scale",
    ),
    Case(
        "library/bwmm_shard_on_I_dropping",
        REPO,
        _path("core/moe/moe_cte/bwmm_shard_on_I.py"),
        "blockwise_mm_shard_intermediate_dropping",
        _bwmm_inputs(2048, 512, 1024, 2, 256),
        _bwmm_dropping_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="T=2048, B=1024 (the kernel tiles blocks by 1024: smaller blocks run no tile and "
        "leave the output zero), H=512, E=2, I=256; every block full, post-scale",
    ),
    Case(
        "library/bwmm_shard_on_H",
        REPO,
        _path("experimental/moe/forward/bwmm_shard_on_H.py"),
        "blockwise_mm_baseline_shard_hidden",
        _bwmm_inputs(256, 512, 128, 2, 256),
        _bwmm_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="as bwmm_shard_on_block, sharded on the hidden dim (LNC all-reduce), post-scale",
    ),
    Case(
        "library/moe_cte_shard_on_block",
        REPO,
        _path("core/moe/moe_cte/moe_cte.py"),
        "moe_cte",
        _moe_cte_inputs(256, 512, 128, 2, 256),
        _moe_cte_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="the moe_cte entry point with a shard_on_block spec (same problem as bwmm)",
    ),
    Case(
        "library/allgather_sb2sb",
        REPO,
        _path("experimental/collectives/sb2sb_allgather.py"),
        "allgather_sb2sb",
        _allgather_inputs(128, 64),
        _allgather_ref,
        grid=(2,),
        rtol=0.0,
        atol=0.0,
        notes="fp32 [H, W] all-gathered across the 2 ranks of a kernel[2] launch (exact copy)",
    ),
]
