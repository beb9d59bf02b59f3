"""Conformance cases: nki-library's MoE blockwise backward (``experimental/moe/bwd``).

``blockwise_mm_bwd`` is the gradient of the blockwise MoE MLP whose forward is the
``bwmm_*`` cases: per block ``b`` of ``B`` token positions routed to expert ``e``,
``g, u = x_b @ Wgu[e, :, 0], x_b @ Wgu[e, :, 1]``, ``m = act(g) * u``, ``d = m @ Wd[e]`` and
``y[t] += aff[t, e] * d[t]``. The kernel takes the forward's checkpoints (``g, u`` transposed
as ``[N, 2, I, B]`` and ``d`` as ``[N, B, H]``) and the upstream gradient ``dy``, and returns
(the chain rule, written here from the docstrings of the kernel's steps):

- ``d_aff[t, e] = sum_h dy[t, h] * d[t, h]`` (``_compute_down_projection_output_grad``);
- ``dd = aff[t, e] * dy[t]``; ``dWd[e] += m.T @ dd``; ``dm = dd @ Wd[e].T``;
- ``dg = dm * u * act'(g)``, ``du = dm * act(g)``;
- ``dWgu[e] += x_b.T @ [dg | du]`` and ``dx[t] += [dg | du] @ Wgu[e].T``.

Token positions past an expert's tokens point at the zero row ``T`` that the caller appends
to ``x``, ``dy`` and the affinities (the library tests' layout: the kernel's ``T`` is the
real token count plus one), so they add nothing.
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, f64, randn

REPO = "nki-library"
F32 = np.dtype(np.float32)
BWD = "src/nkilib_src/nkilib/experimental/moe/bwd/blockwise_mm_backward.py"
SHARD_I = "src/nkilib_src/nkilib/core/moe/moe_cte/bwmm_shard_on_I.py"
TRANSFORMER = "src/nkilib_src/nkilib/experimental/transformer/transformer_tkg.py"


SWISH_ALPHA = 1.702  # nl.gelu_apprx_sigmoid: x * sigmoid(1.702 x)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _act(z: np.ndarray, name: str) -> np.ndarray:
    """SiLU ``z * sigmoid(z)`` or Swish (``gelu_apprx_sigmoid``) ``z * sigmoid(1.702 z)``."""
    a = SWISH_ALPHA if name == "Swish" else 1.0
    return z * _sigmoid(a * z)


def _act_dx(z: np.ndarray, name: str) -> np.ndarray:
    """d/dz of ``z * sigmoid(a z)``: ``s + a z s (1 - s)``, ``s = sigmoid(a z)``."""
    a = SWISH_ALPHA if name == "Swish" else 1.0
    sg = _sigmoid(a * z)
    return sg + a * z * sg * (1.0 - sg)


def _clamp_mask(v: np.ndarray, lower, upper) -> np.ndarray:
    """1 where ``lower < v < upper`` (a bound of None is absent): the gradient of a clip."""
    keep = np.ones(v.shape, bool)
    if lower is not None:
        keep &= v > lower
    if upper is not None:
        keep &= v < upper
    return keep.astype(np.float64)


def _routing(rng: np.random.Generator, t: int, e: int, k: int, b: int):
    """Top-k routing of ``t`` tokens to ``e`` experts, laid out as blocks of ``b`` = 256
    positions: the first 128-token tile of each of an expert's blocks holds its tokens below
    ``(t + 1) // 2``, the second tile the others; the rest of a tile points at the zero row
    ``t``. Returns (mask [t, e], token_position_to_id [N*b], block_to_expert [N, 1]).

    Why split by token: with LNC=2 each core zeroes half of ``expert_affinities_masked_grad``
    (core c: tokens [c*T/2, (c+1)*T/2) of the [T, E] layout) and then, with no barrier in
    between, writes the affinity gradients of its own tile of each block; a token of the other
    core's half is then zeroed by one core and written by the other in either order (a
    write-write race in the kernel, refused by trnsim as ``lnc-race``; on hardware the zeroing
    almost surely lands first). Keeping each core's tokens in its own half avoids it; padding
    positions write 0 over 0 (the same value from both cores: no race)."""
    assert b == 256, "one 128-token tile per core"
    tile = b // 2
    half = (t + 1) // 2
    mask = np.zeros((t, e), bool)
    for tok in range(t):
        mask[tok, rng.choice(e, k, replace=False)] = True
    positions, experts = [], []
    for ex in range(e):
        ids = np.flatnonzero(mask[:, ex])
        lo, hi = ids[ids < half], ids[ids >= half]
        nblk = max(1, -(-len(lo) // tile), -(-len(hi) // tile))
        for j in range(nblk):
            pos = np.full(b, t, np.int32)
            part_lo, part_hi = lo[j * tile : (j + 1) * tile], hi[j * tile : (j + 1) * tile]
            pos[: len(part_lo)] = part_lo
            pos[tile : tile + len(part_hi)] = part_hi
            positions.append(pos)
            experts.append(ex)
    return (
        mask,
        np.concatenate(positions).astype(np.int32),
        np.array(experts, np.int32).reshape(-1, 1),
    )


def _bwd_forward(x, gup, down, perm, bte, b, act: str, clamp: tuple | None):
    """The forward's checkpoints, in float64: gate/up pre-activations [N, 2, I, B] (after the
    forward's clips: up to the linear limits, gate to the non-linear ones) and the down
    projection outputs [N, B, H]."""
    n = len(perm) // b
    gu_t = np.zeros((n, 2, gup.shape[-1], b))
    dn = np.zeros((n, b, x.shape[1]))
    for blk in range(n):
        ex = int(bte[blk, 0])
        xs = f64(x)[perm[blk * b : (blk + 1) * b]]
        g = xs @ f64(gup[ex, :, 0, :])
        u = xs @ f64(gup[ex, :, 1, :])
        if clamp is not None:  # ClampLimits(linear upper, linear lower, non-linear upper, lower)
            u = np.clip(u, clamp[1], clamp[0])
            g = np.clip(g, clamp[3], clamp[2])
        gu_t[blk, 0], gu_t[blk, 1] = g.T, u.T
        dn[blk] = (_act(g, act) * u) @ f64(down[ex])
    return gu_t, dn


def _bwd_inputs(
    t: int,
    h: int,
    e: int,
    i: int,
    b: int,
    k: int,
    dtype,
    act: str = "SiLU",
    clamp: tuple | None = None,
    bias: bool = False,
):
    def make(rng):
        from nkilib.experimental.moe.bwd.moe_bwd_parameters import ActFnType, ClampLimits

        mask, perm, bte = _routing(rng, t, e, k, b)
        x = np.zeros((t + 1, h), np.float32)
        x[:t] = rng.uniform(0.0, 1.0, (t, h))
        dy = np.zeros((t + 1, h), np.float32)
        dy[:t] = rng.uniform(-1.0, 1.0, (t, h))
        aff = np.zeros((t + 1, e), np.float32)
        aff[:t] = rng.uniform(0.0, 1.0, (t, e)) * mask
        gup = rng.uniform(-0.1, 0.1, (e, h, 2, i)).astype(np.float32)
        down = rng.uniform(-0.1, 0.1, (e, i, h)).astype(np.float32)
        x, dy, aff, gup, down = (a.astype(dtype) for a in (x, dy, aff, gup, down))
        gu_t, dn = _bwd_forward(x, gup, down, perm, bte, b, act, clamp)
        kw = {"compute_dtype": dtype, "is_tensor_update_accumulating": k > 1}
        if act != "SiLU":
            kw["activation_type"] = ActFnType[act]
        if clamp is not None:
            kw["clamp_limits"] = ClampLimits(*clamp)
        if bias:
            kw["bias"] = True
        args = (x, aff.reshape(-1, 1), gup, down, gu_t.astype(dtype), dn.astype(dtype))
        return Call((*args, perm, bte, dy, b), kw)

    return make


def _bwd_ref(
    x,
    aff,
    gup,
    down,
    gu_t,
    dn,
    perm,
    bte,
    dy,
    b,
    compute_dtype=None,
    activation_type=None,
    clamp_limits=None,
    bias=False,
    **_,
):
    """(dx, d_aff, dWgu, dWd[, d_bias_gu, d_bias_down]) from the checkpoints, in float64,
    in the inputs' dtypes (the bias gradients in ``compute_dtype``). The block intermediates
    the kernel's steps return in HBM in ``compute_dtype`` (``dd``, the down projection output
    grad; ``m``, the gate-up product; ``[dg | du]``, the gate/up output grad) are rounded to
    it as those steps document. A clip passes the gradient only strictly inside its limits
    (the library's reference: mask ``lower < v < upper`` on the clipped checkpoint)."""

    def r(v):
        return f64(v.astype(compute_dtype)) if compute_dtype is not None else v

    act = "SiLU" if activation_type is None else activation_type.name
    e, h, _, i = gup.shape
    aff2 = f64(aff).reshape(-1, e)
    dx = np.zeros(x.shape)
    daff = np.zeros(aff2.shape)
    dwgu = np.zeros(gup.shape)
    dwd = np.zeros(down.shape)
    dbgu = np.zeros((e, 2, i))
    dbd = np.zeros((e, h))
    cl = clamp_limits
    for blk in range(len(perm) // b):
        ex = int(bte[blk, 0])
        ids = perm[blk * b : (blk + 1) * b]
        g, u = f64(gu_t[blk, 0]).T, f64(gu_t[blk, 1]).T
        dyb = f64(dy)[ids]
        daff[ids, ex] = (dyb * f64(dn[blk])).sum(axis=1)
        dd = r(dyb * aff2[ids, ex][:, None])
        m = r(_act(g, act) * u)
        dwd[ex] += m.T @ dd
        dbd[ex] += dd.sum(axis=0)
        dm = dd @ f64(down[ex]).T
        dg = dm * u * _act_dx(g, act)
        du = dm * _act(g, act)
        if cl is not None:
            dg = dg * _clamp_mask(
                g, cl.non_linear_clamp_lower_limit, cl.non_linear_clamp_upper_limit
            )
            du = du * _clamp_mask(u, cl.linear_clamp_lower_limit, cl.linear_clamp_upper_limit)
        dgu = r(np.concatenate([dg, du], axis=1))  # [B, 2I]
        dwgu[ex] += (f64(x)[ids].T @ dgu).reshape(h, 2, i)
        dbgu[ex] += dgu.sum(axis=0).reshape(2, i)
        np.add.at(dx, ids, dgu @ f64(gup[ex]).reshape(h, 2 * i).T)
    out = (
        dx.astype(x.dtype),
        daff.reshape(-1, 1).astype(aff.dtype),
        dwgu.astype(gup.dtype),
        dwd.astype(down.dtype),
    )
    if bias:
        out += (dbgu.astype(compute_dtype), dbd.astype(compute_dtype))
    return out


# ---- blockwise_mm_baseline_shard_intermediate_hybrid (forward, static + dynamic loop) -------


def _hybrid_inputs(
    counts: tuple[int, ...],
    h: int,
    i: int,
    b: int,
    pad_blocks: int,
    static: int,
    dtype=F32,
    clamp: tuple[float, float, float, float] | None = None,
):
    """Top-1 routing of ``sum(counts)`` tokens, expert ``ex`` taking ``counts[ex]`` of them
    (its last block partly padded), then ``pad_blocks`` all-padding blocks (expert E-1, as the
    library's tests lay them out). ``conditions`` [N+1]: 1 for each block holding tokens, 0
    for the padding blocks and the final entry. Padding positions point at the zero row T of
    ``hidden_states`` [T+1, H] (the docstring's layout)."""

    def make(rng):
        from nkilib.core.utils.common_types import ExpertAffinityScaleMode

        e, t = len(counts), sum(counts)
        ids = rng.permutation(t)
        positions, experts = [], []
        start = 0
        for ex, c in enumerate(counts):
            mine = np.sort(ids[start : start + c])
            start += c
            nblk = -(-c // b)
            pos = np.full(nblk * b, t, np.int32)
            pos[:c] = mine
            positions.append(pos)
            experts += [ex] * nblk
        real = len(experts)
        positions.append(np.full(pad_blocks * b, t, np.int32))
        experts += [e - 1] * pad_blocks
        perm = np.concatenate(positions).astype(np.int32)
        bte = np.array(experts, np.int32).reshape(-1, 1)
        conditions = np.zeros(len(experts) + 1, np.int32)
        conditions[:real] = 1
        x = np.zeros((t + 1, h), np.float32)
        x[:t] = randn(rng, (t, h))
        gup = (randn(rng, (e, h, 2, i)) / np.float32(np.sqrt(h))).astype(np.float32)
        down = (randn(rng, (e, i, h)) / np.float32(np.sqrt(i))).astype(np.float32)
        aff = np.zeros(((t + 1) * e, 1), np.float32)
        tok = perm[: real * b]
        blk_ex = np.repeat(bte[:real, 0], b)
        keep = tok < t
        aff[tok[keep] * e + blk_ex[keep], 0] = rng.uniform(0.1, 1.0, keep.sum())
        x, aff, gup, down = (a.astype(dtype) for a in (x, aff, gup, down))
        kw = {
            "num_static_block": static,
            "compute_dtype": dtype,
            "expert_affinities_scaling_mode": ExpertAffinityScaleMode.POST_SCALE,
        }
        if clamp is not None:
            kw.update(zip(_CLAMPS, clamp, strict=True))
        return Call((conditions, x, aff, gup, down, b, perm, bte), kw)

    return make


_CLAMPS = (
    "gate_clamp_lower_limit",
    "gate_clamp_upper_limit",
    "up_clamp_lower_limit",
    "up_clamp_upper_limit",
)


def _hybrid_ref(conditions, x, aff, gup, down, b, perm, bte, **kw):
    """The docstring's pseudocode: the blocks that hold tokens (the static loop, then the
    dynamic loop up to ``sum(conditions)``), each as the baseline kernel computes it: per
    block, g = h Wg and u = h Wu (clamped to the given limits), silu(g) * u @ Wd, scaled by
    the token's affinity for the block's expert (post-scale) and added to the token's row;
    the skipped padding blocks would add nothing (every position points at the zero row)."""
    e = gup.shape[0]
    out = np.zeros(x.shape)
    for blk in range(int(np.sum(conditions))):
        ex = int(bte[blk, 0])
        ids = perm[blk * b : (blk + 1) * b]
        hs = f64(x)[ids]
        g = hs @ f64(gup[ex, :, 0, :])
        u = hs @ f64(gup[ex, :, 1, :])
        if kw.get("gate_clamp_lower_limit") is not None:
            g = np.clip(g, kw["gate_clamp_lower_limit"], kw["gate_clamp_upper_limit"])
        if kw.get("up_clamp_lower_limit") is not None:
            u = np.clip(u, kw["up_clamp_lower_limit"], kw["up_clamp_upper_limit"])
        y = (_act(g, "SiLU") * u) @ f64(down[ex])
        np.add.at(out, ids, y * f64(aff)[ids * e + ex])
    return out.astype(x.dtype)


# ---- transformer_tkg (attention block + MLP per layer, token generation) -----------------


def _tkg_inputs(layers: int, b: int, h: int, d: int, q_heads: int, i: int, s_ctx: int, dtype):
    """Per-layer weights and KV caches as lists (the documented ``List[nl.ndarray]``), S_tkg=1,
    one KV head, fan-in-scaled weights (scores of O(1), as the library's tests draw them).
    Batch ``b`` has a context of ``ctx[b]`` tokens: the mask [S_ctx, B, q_heads, 1] admits
    positions below it and the last position (the active token's), and ``position_ids`` [B, 1]
    (uint32) writes the new K/V at ``ctx[b]``. No replica groups (tensor parallel degree 1: no
    all-reduce)."""

    def make(rng):
        def w(shape, fan_in):
            return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32).astype(dtype)

        def uni(shape, lo=-1.0, hi=1.0):
            return rng.uniform(lo, hi, shape).astype(np.float32).astype(dtype)

        qkv = d * (q_heads + 2)
        per_layer = [
            [w((h, qkv), h) for _ in range(layers)],
            [w((q_heads * d, h), q_heads * d) for _ in range(layers)],
            [w((h, i), h) for _ in range(layers)],
            [w((h, i), h) for _ in range(layers)],
            [w((i, h), i) for _ in range(layers)],
            [uni((1, h), 0.5, 1.5) for _ in range(layers)],
            [uni((1, h), 0.5, 1.5) for _ in range(layers)],
            [uni((b, 1, d, s_ctx)) for _ in range(layers)],
            [uni((b, 1, s_ctx, d)) for _ in range(layers)],
        ]
        ctx = s_ctx // 2 + 7 * np.arange(b)
        mask = np.zeros((s_ctx, b, q_heads, 1), np.uint8)
        for bi in range(b):
            mask[: ctx[bi], bi] = 1
        mask[s_ctx - 1] = 1
        cos, sin = uni((d // 2, b, 1)), uni((d // 2, b, 1))
        pos = ctx.reshape(b, 1).astype(np.uint32)
        x = uni((b, 1, h))
        return Call((x, *per_layer, cos, sin, mask, None, pos), {"num_layers": layers})

    return make


def _rms(x: np.ndarray, gamma, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * f64(gamma).reshape(-1)


def _rope_halves(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """RoPE on contiguous halves (``rope_contiguous_layout=True``): (x1, x2) ->
    (x1 cos - x2 sin, x1 sin + x2 cos)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def _tkg_ref(
    x,
    w_qkvs,
    w_outs,
    w_gates,
    w_ups,
    w_downs,
    g_qkvs,
    g_mlps,
    k_caches,
    v_caches,
    cos,
    sin,
    mask,
    mask_active,
    position_ids,
    num_layers,
    eps=1e-6,
    **_,
):
    """The docstring's pseudocode, per layer: attention block (RMSNorm, QKV = x W_qkv with Q
    heads, then K, then V; RoPE on Q and K; Q / sqrt(d); softmax over the S_ctx window of the
    cache, the active token's K/V taking its last position, masked where ``mask`` is 0; the
    heads' outputs concatenated @ W_out), residual, MLP (RMSNorm, silu(x Wg) * (x Wu) @ Wd),
    residual. The KV caches are read as given (the kernel's own update writes each batch's
    new token at ``position_ids``, which the next layer's caches do not see)."""
    bsz, s, _ = x.shape
    cur = f64(x)
    for layer in range(num_layers):
        kc, vc = f64(k_caches[layer]), f64(v_caches[layer])
        d, s_ctx = kc.shape[2], kc.shape[3]
        heads = w_qkvs[layer].shape[1] // d - 2
        qkv = (_rms(cur, g_qkvs[layer], eps) @ f64(w_qkvs[layer])).reshape(bsz, s, heads + 2, d)
        att = np.zeros((bsz, s, heads * d))
        for bi in range(bsz):
            c, sn = f64(cos)[:, bi, :].T, f64(sin)[:, bi, :].T  # [S, d/2]
            q = _rope_halves(qkv[bi, :, :heads], c[:, None], sn[:, None]) / np.sqrt(d)
            k = kc[bi, 0].T.copy()  # [S_ctx, d]
            v = vc[bi, 0].copy()
            k[s_ctx - s :] = _rope_halves(qkv[bi, :, heads], c, sn)
            v[s_ctx - s :] = qkv[bi, :, heads + 1]
            scores = np.einsum("shd,td->hst", q, k)
            scores = np.where(np.transpose(mask[:, bi], (1, 2, 0)) != 0, scores, -np.inf)
            p = np.exp(scores - scores.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            att[bi] = np.einsum("hst,td->shd", p, v).reshape(s, heads * d)
        cur = cur + att @ f64(w_outs[layer])
        xn = _rms(cur, g_mlps[layer], eps)
        g = xn @ f64(w_gates[layer])
        cur = cur + (_act(g, "SiLU") * (xn @ f64(w_ups[layer]))) @ f64(w_downs[layer])
    return cur.astype(x.dtype)


BF16_ULP = 2.0**-7  # one bf16 ulp relative to the binade's lower end

CASES: list[Case] = [
    Case(
        "library/blockwise_mm_bwd_fp32",
        REPO,
        BWD,
        "blockwise_mm_bwd",
        _bwd_inputs(255, 256, 2, 128, 256, 1, np.dtype(np.float32)),
        _bwd_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-5,
        notes="fp32 everything (compute_dtype fp32), T=255 tokens + the zero row, H=256, E=2, "
        "I_TP=128, B=256 (the smallest block with one 128-token tile per core: with B=128 "
        "the LNC=2 split of B tiles gives core tiles of 0 and the gradients stay unwritten), "
        "top-1, overwrite mode; fp32 sums of <= 256 products: 1e-4 relative, 1e-5 absolute",
    ),
    Case(
        "library/blockwise_mm_bwd_fp32_top2",
        REPO,
        BWD,
        "blockwise_mm_bwd",
        _bwd_inputs(255, 256, 4, 128, 256, 2, np.dtype(np.float32)),
        _bwd_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-5,
        notes="as blockwise_mm_bwd_fp32 with E=4, top-2: every token in two blocks, the hidden "
        "gradient accumulated (is_tensor_update_accumulating)",
    ),
    Case(
        "library/blockwise_mm_bwd_bf16",
        REPO,
        BWD,
        "blockwise_mm_bwd",
        _bwd_inputs(255, 256, 4, 128, 256, 2, bf16),
        _bwd_ref,
        grid=(2,),
        rtol=2 * BF16_ULP,
        atol=2.0**-5,
        notes="bf16 inputs and compute_dtype (the library tests' dtype), E=4, top-2. The "
        "reference rounds the block intermediates the steps store in bf16 (dd, m, [dg | du]); "
        "the kernel's other bf16 temporaries (act(g), act'(g), their products) add up to one "
        "more bf16 ulp to a [dg | du] element (|.| up to ~4: 2^-6..2^-5), which reaches every "
        "dWgu[e, h, :, i] times x <= 1 and every dx[t] times |Wgu| <= 0.1; so 2 bf16 ulps "
        "relative plus 2^-5 absolute (observed: <= 0.4% of each output's largest value)",
    ),
    Case(
        "library/blockwise_mm_bwd_swish_clamp_bias",
        REPO,
        BWD,
        "blockwise_mm_bwd",
        _bwd_inputs(
            255, 256, 2, 128, 256, 1, np.dtype(np.float32), "Swish", (1.0, -1.0, 0.5, -0.5), True
        ),
        _bwd_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-5,
        notes="fp32, Swish (gelu_apprx_sigmoid), clamp limits up to [-1, 1] and gate to "
        "[-0.5, 0.5] (pre-activations of std ~0.9: many clipped, their gradient masked), bias "
        "gradients (sums of dd and [dg | du] over the block's tokens); tolerance as _fp32",
    ),
    Case(
        "library/bwmm_shard_on_I_hybrid",
        REPO,
        SHARD_I,
        "blockwise_mm_baseline_shard_intermediate_hybrid",
        _hybrid_inputs((300, 212), 512, 256, 256, 1, 1),
        _hybrid_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="fp32 compute, 512 tokens top-1 over E=2 (300 + 212: blocks 1 and 2 partly "
        "padded), H=512 (the kernel's minimum), I_TP=256, B=256, one all-padding block; "
        "num_static_block=1, so blocks 1 and 2 run in the dynamic loop (register-bounded "
        "dynamic_range up to sum(conditions) = 3); post-scale; tolerance as bwmm_shard_on_I",
    ),
    Case(
        "library/bwmm_shard_on_I_hybrid_bf16_clamp",
        REPO,
        SHARD_I,
        "blockwise_mm_baseline_shard_intermediate_hybrid",
        _hybrid_inputs((300, 212), 512, 256, 256, 1, 1, bf16, (-1.0, 1.0, -0.5, 0.5)),
        _hybrid_ref,
        grid=(2,),
        rtol=2 * BF16_ULP,
        atol=2.0**-6,
        notes="as bwmm_shard_on_I_hybrid in bf16 (inputs and compute_dtype, the library's "
        "default) with the gate clamped to [-1, 1] and up to [-0.5, 0.5] (pre-activations of "
        "std ~1: many clipped); bf16 intermediates between fp32 matmuls: 2 bf16 ulps plus 2^-6",
    ),
    Case(
        "library/transformer_tkg",
        REPO,
        TRANSFORMER,
        "transformer_tkg",
        _tkg_inputs(2, 2, 512, 128, 2, 256, 256, np.dtype(np.float32)),
        _tkg_ref,
        grid=(2,),
        rtol=1e-4,
        atol=1e-4,
        notes="fp32, 2 layers, B=2, S_tkg=1, H=512, d_head=128, 2 Q heads + 1 KV head, I=256, "
        "S_ctx=256, LNC=2, HBM residual path, no replica groups; fp32 sums of <= 512 terms. "
        "External at d2ad3a5: experimental/transformer/__init__.py imports torch, and "
        "core/mlp/mlp.py:203 is an IndentationError (a docstring fragment pasted twice)",
    ),
    Case(
        "library/transformer_tkg_bf16",
        REPO,
        TRANSFORMER,
        "transformer_tkg",
        _tkg_inputs(1, 2, 512, 128, 2, 256, 256, bf16),
        _tkg_ref,
        grid=(2,),
        rtol=2 * BF16_ULP,
        atol=2.0**-6,
        notes="as transformer_tkg in bf16 (the library tests' dtype), 1 layer: bf16 "
        "intermediates (normed x, QKV, probabilities, MLP activations) between fp32 matmuls; "
        "outputs of |.| < 4 to 2 bf16 ulps plus 2^-6",
    ),
]
