"""Conformance cases: nki-library's MoE token-generation kernels (``core/moe/moe_tkg`` and
``core/moe_block``).

``moe_tkg`` runs each expert's MLP and sums the outputs: the all-expert path runs every local
expert on every token, the selective path only each token's top-K. References follow the
docstring's pseudocode, in float64: per expert, gate = x @ Wg (+ gate bias, then clamped from
above), up = x @ Wu (+ up bias, clamped to [lower, upper]), y = (act(gate) * up) @ Wd (+ down
bias); with POST_SCALE y is weighted by the token's affinity to the expert; the weighted y are
summed (the parameter docs: the biases and clamp limits act on the projection results; the
activations are ``nl.silu``, ``nl.gelu``, ``nl.gelu_apprx_sigmoid`` as the library maps
``ActFnType``). All-expert with affinity scaling first slices the global [T, E] affinities at
``rank_id * E_L`` and, with ``mask_unselected_experts``, zeroes a token's affinity to an
expert not in its ``expert_index`` row (``mask_expert_affinities``' docstring). FP8 row
quantization dequantizes each weight column by its fp32 scale.

``moe_block_tkg`` is RMSNorm, then ``router_topk``, then ``moe_tkg`` on the normalised input
(its pseudocode): the reference normalises in float64 and rounds to the input dtype (the
RMSNorm output tile's dtype), computes the router logits from it (returned in the input dtype),
takes the top-K experts of each token (softmax or sigmoid before or after the top-K, optionally
renormalised, as ``cases_library_moe`` documents) and weights each selected expert's MLP by its
affinity. Inputs are redrawn until every token's K-th and (K+1)-th logits are far apart, so
the expert choice does not depend on the precision the kernel computes them in.

MX weights (MXFP4 / MXFP8, ``all_expert_mx_impl`` and ``selective_expert_mx_impl``) are passed
as their x4 storage words (uint16 / uint32) and, inside the launch (``Case.driver``), viewed as
the x4 dtype and wrapped in the library's ``TensorView``: the kernels read them through
``.base_tensor``. The layouts and the reference's modelling of the kernel's on-device MXFP8
quantization and bf16 steps are described at the MX section below.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, f64, mx_decode, mx_quantized_values, mx_words

REPO = "nki-library"
F16 = np.float16
MOE_TKG = "src/nkilib_src/nkilib/core/moe/moe_tkg/moe_tkg.py"
MOE_BLOCK = "src/nkilib_src/nkilib/core/moe_block/moe_block_tkg.py"


def _act(z: np.ndarray, name: str) -> np.ndarray:
    if name == "SiLU":
        return z / (1 + np.exp(-z))
    if name == "Swish":  # nl.gelu_apprx_sigmoid: x * sigmoid(1.702 x)
        return z / (1 + np.exp(-1.702 * z))
    if name == "GELU":  # nl.gelu: x * Phi(x) (math.erf: no optional dependency)
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return 0.5 * z * (1 + erf(np.asarray(z, np.float64) / np.sqrt(2)))
    raise NotImplementedError(name)


def _expert(x, wgu, wd, bgu, bd, act, gate_hi, up_lo, up_hi, sgu=None, sd=None):
    """One expert's MLP on x [T, H] in float64: weights [H, 2, I] and [I, H] (times their
    per-column fp32 scales [2, I] and [H] with FP8 row quantization)."""
    wg, wu, wdd = f64(wgu[:, 0, :]), f64(wgu[:, 1, :]), f64(wd)
    if sgu is not None:
        wg, wu, wdd = wg * f64(sgu[0]), wu * f64(sgu[1]), wdd * f64(sd)
    g = f64(x) @ wg
    u = f64(x) @ wu
    if bgu is not None:
        g = g + f64(bgu[0])
        u = u + f64(bgu[1])
    if gate_hi is not None:
        g = np.minimum(g, gate_hi)
    if up_lo is not None:
        u = np.maximum(u, up_lo)
    if up_hi is not None:
        u = np.minimum(u, up_hi)
    y = (_act(g, act) * u) @ wdd
    if bd is not None:
        y = y + f64(bd)
    return y


def _moe_ref(
    x,
    wgu,
    wd,
    affin,
    idx,
    is_all_expert,
    rank_id=None,
    expert_gate_up_bias=None,
    expert_down_bias=None,
    expert_affinities_scaling_mode=None,
    activation_fn=None,
    gate_clamp_upper_limit=None,
    up_clamp_upper_limit=None,
    up_clamp_lower_limit=None,
    mask_unselected_experts=False,
    expert_gate_up_weights_scale=None,
    expert_down_weights_scale=None,
    output_dtype=None,
    **_,
):
    t, h = x.shape
    e_l = wgu.shape[0]
    base = 0 if rank_id is None else int(rank_id[0, 0]) * e_l  # this rank's first expert
    post = (
        expert_affinities_scaling_mode is not None
        and expert_affinities_scaling_mode.name == "POST_SCALE"
    )
    act = activation_fn.name if activation_fn is not None else "SiLU"
    out = np.zeros((t, h))
    for e in range(e_l):
        bgu = None if expert_gate_up_bias is None else expert_gate_up_bias[e]
        bd = None if expert_down_bias is None else expert_down_bias[e]
        sgu = None if expert_gate_up_weights_scale is None else expert_gate_up_weights_scale[e]
        sd = None if expert_down_weights_scale is None else expert_down_weights_scale[e]
        y = _expert(
            x,
            wgu[e],
            wd[e],
            bgu,
            bd,
            act,
            gate_clamp_upper_limit,
            up_clamp_lower_limit,
            up_clamp_upper_limit,
            sgu,
            sd,
        )
        if is_all_expert:
            w = f64(affin[:, base + e]) if post else np.ones(t)
            if post and mask_unselected_experts:
                w = np.where((idx == base + e).any(axis=1), w, 0.0)
        else:
            sel = (idx == e).any(axis=1)
            w = np.where(sel, f64(affin[:, e]) if post else 1.0, 0.0)
        out += w[:, None] * y
    return out.astype(x.dtype if output_dtype is None else output_dtype)


def _moe_inputs(
    t: int,
    h: int,
    i: int,
    e: int,
    k: int | None,
    all_expert: bool,
    dtype,
    bias: bool = False,
    clamp: bool = False,
    act: str = "SiLU",
    scale: str = "POST_SCALE",
    ranks: int = 1,
    rank: int = 0,
    mask: bool = False,
    fp8_row: bool = False,
):
    """``e`` local experts (all of them when ``k`` is None); with ``ranks`` > 1 the affinities
    and indices span ``e * ranks`` global experts, of which rank ``rank`` holds ``e``.
    Affinities: each token's K selected experts' weights sum to 1, zero elsewhere, except with
    ``mask`` (every expert has a weight: the kernel must zero the unselected ones).
    ``fp8_row``: float8_e4m3 weights with fp32 per-column scales (QuantizationType.ROW)."""

    def make(rng):
        from nkilib.core.utils.common_types import ActFnType, ExpertAffinityScaleMode

        x = rng.standard_normal((t, h)).astype(dtype)
        wgu = rng.standard_normal((e, h, 2, i)) / np.sqrt(h)
        wd = rng.standard_normal((e, i, h)) / np.sqrt(i)
        kw: dict = {}
        if fp8_row:  # weights of a few units in fp8, the column scales bring them back
            sgu = rng.uniform(0.5, 1.5, (e, 2, i)).astype(np.float32) / 16
            sd = rng.uniform(0.5, 1.5, (e, h)).astype(np.float32) / 16
            wgu = (wgu / sgu[:, None]).astype(ml_dtypes.float8_e4m3)
            wd = (wd / sd[:, None]).astype(ml_dtypes.float8_e4m3)
            kw.update(expert_gate_up_weights_scale=sgu, expert_down_weights_scale=sd)
        else:
            wgu, wd = wgu.astype(dtype), wd.astype(dtype)
        eg = e * ranks
        kk = eg if k is None else k
        idx = np.stack([rng.permutation(eg)[:kk] for _ in range(t)]).astype(np.int32)
        if mask:
            aff = rng.random((t, eg))
        else:
            aff = np.zeros((t, eg))
            p = rng.random((t, kk))
            np.put_along_axis(aff, idx, p / p.sum(axis=1, keepdims=True), axis=1)
        # the library's tests: bf16 affinities for all-expert, fp32 for selective (a FIXME)
        aff = aff.astype(bf16 if all_expert else np.float32)
        kw["expert_affinities_scaling_mode"] = getattr(ExpertAffinityScaleMode, scale)
        kw["activation_fn"] = getattr(ActFnType, act)
        if all_expert and scale != "NO_SCALE":
            kw["rank_id"] = np.full((1, 1), rank, np.uint32)
        if mask:
            kw["mask_unselected_experts"] = True
        if bias:
            kw["expert_gate_up_bias"] = rng.standard_normal((e, 2, i)).astype(dtype)
            kw["expert_down_bias"] = rng.standard_normal((e, h)).astype(dtype)
        if clamp:  # the library tests' limits: gate <= 7, -6 <= up <= 8
            kw.update(
                gate_clamp_upper_limit=7.0, up_clamp_upper_limit=8.0, up_clamp_lower_limit=-6.0
            )
        return Call((x, wgu, wd, aff, idx, all_expert), kw)

    return make


# ---- MX weights (MXFP4 / MXFP8): all_expert_mx_impl, selective_expert_mx_impl -------------------
#
# Layouts, from the kernels' docstrings: gate/up weights [E, 128, 2, H/512, I] (x4 words) with
# scales [E, 16, 2, H/512, I]; down weights [E, I_p, ceil(I/512), H] with scales
# [E, I_p/8, ceil(I/512), H] (I_p = I/4 for I <= 512). The hidden input goes through the layout
# adapter (``_layout_adapter_hbm``: [T, H] viewed as [T, 4_H, H/512, 128]), so H index
# h = j * H/4 + tile * 128 + p sits at partition p, H/512 tile ``tile``, x4 slot j; the
# contraction pairs it with the weight word (p, tile) slot j. The gate/up result is laid out
# [I_p (P), ceil(I/512), T, 4]: intermediate index i = j * I/4 + p (one I/512 tile). An MX
# block is 8 partitions x the 4 slots of a word, one scale each (``quantize_mx``,
# ``nc_matmul_mx`` docs). The kernel quantizes the hidden input and the intermediate
# act(gate) * up to MXFP8 (float8_e4m3fn_x4) on device; the reference quantizes the same
# blocks with the NKI scale rule (``refs.mx_quantized_values``).


def _k_order(n: int, rows: int) -> np.ndarray:
    """For an axis of ``n`` = 4 * ``rows`` values laid out index = j * rows + r (slot j,
    row r = partition within its tiles), the index of each K = 4 r + j (``mx_words``' order:
    word r packs K = 4r..4r+3, a block is 8 consecutive words)."""
    k = np.arange(n)
    r, j = k // 4, k % 4
    return j * rows + r


def _i_order(n: int) -> np.ndarray:
    """``_k_order`` for the intermediate axis: per I/512 tile (index tile * 512 + j * R/4 + p,
    R = min(I, 512) the tile's size), K = tile * 512 + 4 p + j."""
    r = min(n, 512)
    return np.concatenate([t * 512 + _k_order(r, r // 4) for t in range(n // r)])


def _i_map(n: int) -> np.ndarray:
    """[I_p, ceil(I/512), 4]: the intermediate index at partition p, I/512 tile, slot j."""
    r = min(n, 512)
    p, t, j = np.meshgrid(np.arange(r // 4), np.arange(n // r), np.arange(4), indexing="ij")
    return t * 512 + j * (r // 4) + p


def _mx_weights(
    w: np.ndarray, elem: str, packed: str, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """w [N, F] (N the contraction axis, by default index j * N/4 + r) -> words [N/4, F] and
    scales [N/32, F] in the kernel's layout (``order``: each K's index, default _k_order)."""
    n = w.shape[0]
    order = _k_order(n, n // 4) if order is None else order
    return mx_words(w[order], elem, packed)


def _mx_values(
    words: np.ndarray, scales: np.ndarray, packed: str, order: np.ndarray | None = None
) -> np.ndarray:
    """Inverse of ``_mx_weights``: the [N, F] values the words hold."""
    n = words.shape[0] * 4
    order = _k_order(n, n // 4) if order is None else order
    vals = np.empty((n, words.shape[1]))
    vals[order] = mx_decode(words, scales, _MX_ELEM[packed], packed)
    return vals


def _mx_quantize_axis0(x: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """x [N, T] quantized to MXFP8 (e4m3fn) in the kernel's blocks along N (as _mx_weights)."""
    n = x.shape[0]
    order = _k_order(n, n // 4) if order is None else order
    out = np.empty(x.shape)
    out[order] = mx_quantized_values(x[order], "float8_e4m3fn")
    return out


_MX_ELEM = {"float4_e2m1fn_x4": "float4_e2m1fn", "float8_e4m3fn_x4": "float8_e4m3fn"}
# the x4 dtype of the weights' storage words (these cases use e4m3fn for MXFP8)
_PACKED = {"uint16": "float4_e2m1fn_x4", "uint32": "float8_e4m3fn_x4"}


def _mx_expert_weights(rng, e: int, h: int, i: int, packed: str, dtype) -> tuple:
    """Random MX expert weights: gate/up [E, H, 2, I] and down [E, I, H] quantized in the
    kernel's blocks and stored in its layouts, and a gate/up bias [E, 2, I] in the
    intermediate's layout [E, I_p, 2, ceil(I/512), 4] -> (gate/up words, down words (both
    storage words: uint16 for MXFP4, uint32 for MXFP8), gate/up scales, down scales, gate/up
    bias)."""
    legal = ((i <= 512 and i % 32 == 0) or i % 512 == 0) and h % 512 == 0
    assert legal, "these layouts: I a multiple of 32 up to 512, or of 512"
    elem = _MX_ELEM[packed]
    nh = h // 512
    gu_w = np.zeros((e, 128, 2, nh, i), np.uint16 if "float4" in packed else np.uint32)
    gu_s = np.zeros((e, 16, 2, nh, i), np.uint8)
    ni, ip = max(1, i // 512), min(i, 512) // 4
    d_w = np.zeros((e, ip, ni, h), gu_w.dtype)
    d_s = np.zeros((e, ip // 8, ni, h), np.uint8)
    for ex in range(e):
        for g in range(2):
            w = rng.standard_normal((h, i)) / np.sqrt(h)
            words, scales = _mx_weights(w, elem, packed)
            gu_w[ex, :, g] = words.reshape(nh, 128, i).transpose(1, 0, 2)
            gu_s[ex, :, g] = scales.reshape(nh, 16, i).transpose(1, 0, 2)
        w = rng.standard_normal((i, h)) / np.sqrt(i)
        words, scales = _mx_weights(w, elem, packed, _i_order(i))
        d_w[ex] = words.reshape(ni, ip, h).transpose(1, 0, 2)
        d_s[ex] = scales.reshape(ni, ip // 8, h).transpose(1, 0, 2)
    b = rng.standard_normal((e, 2, i)).astype(dtype)
    gu_b = np.ascontiguousarray(b[:, :, _i_map(i)].transpose(0, 2, 1, 3, 4))
    return gu_w, d_w, gu_s, d_s, gu_b


def _mx_inputs(
    t,
    h,
    i,
    e,
    k,
    all_expert,
    packed,
    act="Swish",
    clamp=True,
    dtype=bf16,
    down_bias=False,
    block_size=None,
):
    """moe_tkg's arguments with MX weights (``_mx_expert_weights``; the reference decodes the
    words it is given)."""

    def make(rng):
        from nkilib.core.utils.common_types import ActFnType, ExpertAffinityScaleMode

        x = rng.standard_normal((t, h)).astype(dtype)
        gu, dw, gu_s, d_s, gu_b = _mx_expert_weights(rng, e, h, i, packed, dtype)
        kk = e if k is None else k
        idx = np.stack([rng.permutation(e)[:kk] for _ in range(t)]).astype(np.int32)
        aff = np.zeros((t, e))
        p = rng.random((t, kk))
        np.put_along_axis(aff, idx, p / p.sum(axis=1, keepdims=True), axis=1)
        aff = aff.astype(bf16 if all_expert else np.float32)
        kw = {
            "expert_gate_up_bias": gu_b,
            "expert_gate_up_weights_scale": gu_s,
            "expert_down_weights_scale": d_s,
            "expert_affinities_scaling_mode": ExpertAffinityScaleMode.POST_SCALE,
            "activation_fn": getattr(ActFnType, act),
        }
        if down_bias:
            kw["expert_down_bias"] = rng.standard_normal((e, h)).astype(dtype)
        if block_size is not None:
            kw.update(is_all_expert_dynamic=True, block_size=block_size)
        if all_expert:
            kw["rank_id"] = np.zeros((1, 1), np.uint32)
        if clamp:
            kw.update(
                gate_clamp_upper_limit=7.0, up_clamp_upper_limit=8.0, up_clamp_lower_limit=-6.0
            )
        return Call((x, gu, dw, aff, idx, all_expert), kw)

    return make


def _block_mx_inputs(b, s_, h, i, e, k, packed, dtype=F16, **kw):
    """moe_block_tkg's arguments (``_block_inputs``: the router part) with MX expert weights,
    gate/up bias and down bias."""
    base = _block_inputs(b, s_, h, i, e, k, dtype, **kw)

    def make(rng):
        call = base(rng)
        gu, dw, gu_s, d_s, gu_b = _mx_expert_weights(rng, e, h, i, packed, dtype)
        extra = {
            "expert_gate_up_weights_scale": gu_s,
            "expert_down_weights_scale": d_s,
            "expert_gate_up_bias": gu_b,
            "expert_down_bias": rng.standard_normal((e, h)).astype(dtype),
        }
        return Call((*call.args[:3], gu, dw), {**call.kwargs, **extra})

    return make


def _block_mx_ref(inp, gamma, router_weights, wgu, wd, **kw):
    """RMSNorm, router top-K (as ``_block_ref``), then the MX experts (``_mx_ref``) on the
    normalised input (the RMSNorm output tile, in the input's dtype)."""
    eps, n_act = kw.get("eps", 1e-6), kw.get("hidden_actual")
    if kw.get("is_all_expert"):  # rmsnorm_mx_quantize_tkg: x * gamma to an input-dtype tile,
        x = f64(inp).reshape(-1, inp.shape[-1])  # then times 1/RMS (fp32) to the output tile
        n = x.shape[-1] if n_act is None else n_act
        xg = (x * f64(gamma)).astype(inp.dtype).astype(np.float64)
        rs = (1 / np.sqrt((x * x).sum(axis=-1, keepdims=True) / n + eps)).astype(np.float32)
        xn = (xg * rs).astype(np.float32).astype(inp.dtype)
    else:
        xn = _block_norm(inp, gamma, eps, n_act)
    mm = kw.get("router_mm_dtype") or bf16
    logits = _block_logits(xn, router_weights, kw.get("router_bias"), mm)
    w = _block_weights(
        logits,
        kw["top_k"],
        kw["router_act_fn"].name,
        kw.get("router_pre_norm", True),
        kw.get("norm_topk_prob", False),
    )
    idx = np.argsort(-w, axis=1, kind="stable")[:, : kw["top_k"]]
    keep = (
        "expert_gate_up_bias",
        "expert_down_bias",
        "expert_gate_up_weights_scale",
        "expert_down_weights_scale",
        "gate_clamp_upper_limit",
        "up_clamp_upper_limit",
        "up_clamp_lower_limit",
    )
    e_l = wgu.shape[0]
    base = 0 if kw.get("rank_id") is None else int(kw["rank_id"][0, 0]) * e_l
    out = _mx_ref(
        xn,
        wgu,
        wd,
        w[:, base : base + e_l],
        idx - base,
        kw.get("is_all_expert", False),
        activation_fn=kw["hidden_act_fn"],
        **{n: kw[n] for n in keep if n in kw},
    )
    return out, logits.astype(inp.dtype)


def _block_mx_driver(kernel):
    """As ``_mx_driver``, for moe_block_tkg (which hands the weights to moe_tkg)."""

    def call(inp, gamma, router_weights, wgu, wd, *args, **kwargs):
        return kernel(inp, gamma, router_weights, _mx_view(wgu), _mx_view(wd), *args, **kwargs)

    return call


def _mx_view(w):
    """Inside the launch: the weight words (HBM, uint16 / uint32) viewed as their x4 dtype
    (``NkiTensor.view``) and wrapped in the library's ``TensorView``: moe_tkg reads MX weights
    through ``.base_tensor``, an attribute of ``TensorView``, not of the documented
    ``NkiTensor`` (nki-library's moe_block_tkg MX test wrapper passes them so)."""
    import nki.language as nl
    from nkilib.core.utils.tensor_view import TensorView

    packed = _PACKED[str(w.dtype)]
    return TensorView(w.view(getattr(nl, packed)))


def _mx_driver(kernel):
    """The launched kernel: moe_tkg, unmodified, on the MX weights as ``_mx_view`` gives them."""

    def call(x, wgu, wd, *args, **kwargs):
        return kernel(x, _mx_view(wgu), _mx_view(wd), *args, **kwargs)

    return call


def _mx_case(name: str, inputs, notes: str) -> Case:
    return Case(
        name,
        REPO,
        MOE_TKG,
        "moe_tkg",
        inputs,
        _mx_ref,
        driver=_mx_driver,
        grid=(2,),
        rtol=BF16_TOL,
        atol=BF16_TOL,
        notes=notes + "; I a multiple of 512 (for I % 512 != 0 the kernel feeds never-written SBUF "
        "partitions to nc_matmul_mx against zeroed weights, its comment calls them garbage; "
        "trnsim's never-written memory is NaN and NaN * 0 is NaN); the weights are passed as "
        "the library's TensorView (see _mx_view); the reference quantizes the input and the "
        "intermediate to MXFP8 in the kernel's blocks and rounds each bf16 step as the kernel "
        "does (all-expert: bit-exact; selective: the down projection's bf16 steps are not "
        "modelled), so only bf16 roundings remain: tolerance 2^-6 (4 bf16 ulps)",
    )


def _bf(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(bf16).astype(np.float64)


def _mx_ref(
    x,
    wgu,
    wd,
    affin,
    idx,
    is_all_expert,
    expert_gate_up_bias=None,
    expert_down_bias=None,
    expert_gate_up_weights_scale=None,
    expert_down_weights_scale=None,
    activation_fn=None,
    gate_clamp_upper_limit=None,
    up_clamp_upper_limit=None,
    up_clamp_lower_limit=None,
    **_,
):
    t, h = x.shape
    packed = _PACKED[np.dtype(wgu.dtype).name]
    gu_w, gu_s = wgu, expert_gate_up_weights_scale
    d_w, d_s = wd, expert_down_weights_scale
    e_l, i = gu_w.shape[0], gu_w.shape[-1]
    vals_gu = np.zeros((e_l, h, 2, i))
    vals_d = np.zeros((e_l, i, h))
    for e in range(e_l):
        for g in range(2):
            words = gu_w[e, :, g].transpose(1, 0, 2).reshape(h // 4, i)
            scales = gu_s[e, :, g].transpose(1, 0, 2).reshape(h // 32, i)
            vals_gu[e, :, g] = _mx_values(words, scales, packed)
        ni, ip = d_w.shape[2], d_w.shape[1]
        words = d_w[e].transpose(1, 0, 2).reshape(ni * ip, h)
        scales = d_s[e].transpose(1, 0, 2).reshape(ni * ip // 8, h)
        vals_d[e] = _mx_values(words, scales, packed, _i_order(i))
    xq = _mx_quantize_axis0(f64(x).T).T  # [T, H] as the kernel's MXFP8 holds it
    out = np.zeros((t, h))
    parts: dict[int, np.ndarray] = {}
    for e in range(vals_gu.shape[0]):
        g = _bf(xq @ vals_gu[e, :, 0])  # each step's result tile is bf16 (PSUM and SBUF)
        u = _bf(xq @ vals_gu[e, :, 1])
        if expert_gate_up_bias is not None:  # [I_p, 2, ceil(I/512), 4] -> [2, I]
            b = np.zeros((2, i))
            b[:, _i_map(i)] = f64(expert_gate_up_bias[e]).transpose(1, 0, 2, 3)
            g, u = _bf(g + b[0]), _bf(u + b[1])
        if gate_clamp_upper_limit is not None:
            g = np.minimum(g, gate_clamp_upper_limit)
        if up_clamp_lower_limit is not None:
            u = np.maximum(u, up_clamp_lower_limit)
        if up_clamp_upper_limit is not None:
            u = np.minimum(u, up_clamp_upper_limit)
        # the product goes to the intermediate tile: bf16 (activation_compute_dtype) in the
        # all-expert kernel, the I/O dtype in the selective one (intermediate_state_sb)
        inter = _bf(_act(g, activation_fn.name)) * u
        inter = _bf(inter) if is_all_expert else inter.astype(np.float32).astype(x.dtype)
        inter = _mx_quantize_axis0(f64(inter).T, _i_order(i)).T
        if not is_all_expert:
            y = inter @ vals_d[e]
            if expert_down_bias is not None:
                y = y + f64(expert_down_bias[e])
            w = np.where((idx == e).any(axis=1), affin[:, e], 0)
            out += f64(w)[:, None] * y
            continue
        # all-expert (down_projection_mx): with two or more I/512 tiles each core takes half
        # of them (shard_on_I); a core's PSUM result is bf16, scaled by the affinity into its
        # bf16 output tile and added to the earlier experts' there; at the last expert the two
        # cores' tiles are added (sendrecv, one bf16 add)
        n_i = max(1, i // 512)
        halves = np.array_split(np.arange(i), 2 if n_i >= 2 else 1)
        a = f64(affin[:, e])[:, None]
        for c, rows in enumerate(halves):
            y = _bf(inter[:, rows] @ vals_d[e][rows])
            if expert_down_bias is not None and c == 0:
                y = _bf(y + f64(expert_down_bias[e]))
            part = _bf(a * y)
            parts[c] = part if e == 0 else _bf(parts[c] + part)
    if is_all_expert:
        out = parts[0] if len(parts) == 1 else _bf(parts[0] + parts[1])
    return out.astype(x.dtype)


# ---- moe_block_tkg: RMSNorm + router top-K + experts ------------------------------------------


def _softmax(z: np.ndarray) -> np.ndarray:
    ez = np.exp(z - z.max(axis=-1, keepdims=True))
    return ez / ez.sum(axis=-1, keepdims=True)


def _block_norm(inp, gamma, eps, hidden_actual):
    x = f64(inp).reshape(-1, inp.shape[-1])
    n = x.shape[-1] if hidden_actual is None else hidden_actual
    xn = x / np.sqrt((x * x).sum(axis=-1, keepdims=True) / n + eps) * f64(gamma)
    return xn.astype(inp.dtype)  # the RMSNorm output tile is in the input's dtype


def _block_logits(xn, w, bias, mm_dtype):
    logits = f64(xn.astype(mm_dtype)) @ f64(w)
    return logits if bias is None else logits + f64(bias)


def _block_weights(logits, k, act, pre_norm, norm_topk):
    """[T, E] weight of each expert for each token: the top-K affinities, zeros elsewhere."""
    f = _softmax if act == "SOFTMAX" else (lambda z: 1 / (1 + np.exp(-z)))
    scores = f(logits) if pre_norm else logits
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(scores, idx, axis=1)
    if not pre_norm:
        top = f(top)
    if norm_topk:
        top = top / top.sum(axis=1, keepdims=True)
    w = np.zeros_like(logits)
    np.put_along_axis(w, idx, top, axis=1)
    return w


def _block_ref(
    inp,
    gamma,
    router_weights,
    wgu,
    wd,
    eps=1e-6,
    top_k=1,
    router_act_fn=None,
    router_pre_norm=True,
    norm_topk_prob=False,
    expert_affinities_scaling_mode=None,
    hidden_act_fn=None,
    router_bias=None,
    expert_gate_up_bias=None,
    expert_down_bias=None,
    gate_clamp_upper_limit=None,
    up_clamp_upper_limit=None,
    up_clamp_lower_limit=None,
    router_mm_dtype=None,
    hidden_actual=None,
    rank_id=None,
    **_,
):
    xn = _block_norm(inp, gamma, eps, hidden_actual)
    logits = _block_logits(xn, router_weights, router_bias, router_mm_dtype or bf16)
    w = _block_weights(logits, top_k, router_act_fn.name, router_pre_norm, norm_topk_prob)
    post = expert_affinities_scaling_mode.name == "POST_SCALE"
    e_l = wgu.shape[0]
    base = 0 if rank_id is None else int(rank_id[0, 0]) * e_l
    out = np.zeros(xn.shape)
    for e in range(e_l):
        bgu = None if expert_gate_up_bias is None else expert_gate_up_bias[e]
        bd = None if expert_down_bias is None else expert_down_bias[e]
        y = _expert(
            xn,
            wgu[e],
            wd[e],
            bgu,
            bd,
            hidden_act_fn.name,
            gate_clamp_upper_limit,
            up_clamp_lower_limit,
            up_clamp_upper_limit,
        )
        sel = w[:, base + e] if post else (w[:, base + e] > 0).astype(np.float64)
        out += sel[:, None] * y
    return out.astype(inp.dtype), logits.astype(inp.dtype)


def _block_inputs(
    b,
    s,
    h,
    i,
    e,
    k,
    dtype,
    act="SOFTMAX",
    hidden_act="Swish",
    pre_norm=False,
    norm_topk=False,
    bias=False,
    clamp=False,
    all_expert=False,
    e_local=None,
    rank=0,
):
    """Inputs drawn (and redrawn) until every token's K-th and (K+1)-th router scores are
    further apart than the router's bf16 rounding could move them, so the expert choice is
    the same in any precision the kernel may use."""

    def make(rng):
        from nkilib.core.utils.common_types import (
            ActFnType,
            ExpertAffinityScaleMode,
            RouterActFnType,
        )

        el = e if e_local is None else e_local
        mm = bf16 if dtype == bf16 else dtype
        while True:
            inp = rng.uniform(-1, 1, (b, s, h)).astype(dtype)
            gamma = rng.uniform(0.5, 1.5, (1, h)).astype(dtype)
            w = (rng.uniform(-1, 1, (h, e)) / np.sqrt(h)).astype(mm)
            rb = rng.uniform(-0.1, 0.1, (1, e)).astype(mm) if bias else None
            logits = _block_logits(_block_norm(inp, gamma, 1e-6, None), w, rb, mm)
            top = -np.sort(-logits, axis=1)[:, : k + 1]
            if (np.diff(-top, axis=1) > 2.0**-5 * np.abs(top).max()).all():
                break
        wgu = (rng.standard_normal((el, h, 2, i)) / np.sqrt(h)).astype(dtype)
        wd = (rng.standard_normal((el, i, h)) / np.sqrt(i)).astype(dtype)
        kw = {
            "top_k": k,
            "router_act_fn": getattr(RouterActFnType, act),
            "router_pre_norm": pre_norm,
            "norm_topk_prob": norm_topk,
            "expert_affinities_scaling_mode": ExpertAffinityScaleMode.POST_SCALE,
            "hidden_act_fn": getattr(ActFnType, hidden_act),
            "router_mm_dtype": mm,
            "is_all_expert": all_expert,
        }
        if bias:
            kw["router_bias"] = rb
            kw["expert_gate_up_bias"] = rng.standard_normal((el, 2, i)).astype(dtype)
            kw["expert_down_bias"] = rng.standard_normal((el, h)).astype(dtype)
        if clamp:
            kw.update(
                gate_clamp_upper_limit=7.0, up_clamp_upper_limit=8.0, up_clamp_lower_limit=-6.0
            )
        if all_expert:
            kw["rank_id"] = np.full((1, 1), rank, np.uint32)
        return Call((inp, gamma, w, wgu, wd), kw)

    return make


BF16_TOL = 2.0**-6  # 4 bf16 ulps (2^-8 relative each)
F16_TOL = 2.0**-8  # 4 fp16 ulps (2^-10 relative each)
_TOL_WHY = (
    "; tolerance {tol} relative and absolute: outputs of order 1, and the kernel rounds the "
    "projections, the activation product, each affinity-weighted expert output and the running "
    "sum over experts to the I/O dtype (a few ulps of it; the sum can cancel, hence the "
    "absolute part)"
)


def _case(name: str, inputs, dtype, notes: str) -> Case:
    tol = BF16_TOL if dtype == bf16 else F16_TOL
    label = "2^-6" if dtype == bf16 else "2^-8"
    return Case(
        name,
        REPO,
        MOE_TKG,
        "moe_tkg",
        inputs,
        _moe_ref,
        grid=(2,),  # the library's tests run LNC=2 (H or K is split over the two cores)
        rtol=tol,
        atol=tol,
        notes=notes + _TOL_WHY.format(tol=label),
    )


def _block_case(name: str, inputs, dtype, notes: str) -> Case:
    tol = BF16_TOL if dtype == bf16 else F16_TOL
    label = "2^-6" if dtype == bf16 else "2^-8"
    return Case(
        name,
        REPO,
        MOE_BLOCK,
        "moe_block_tkg",
        inputs,
        _block_ref,
        grid=(2,),  # moe_block_tkg asserts an LNC=2 grid
        rtol=tol,
        atol=tol,
        notes=notes + _TOL_WHY.format(tol=label),
    )


CASES: list[Case] = [
    _case(
        "library/moe_tkg_all_expert",
        _moe_inputs(4, 512, 128, 2, None, True, bf16),
        bf16,
        "all-expert, bf16 [4, 512] x 2 experts (I=128), SiLU, POST_SCALE by each expert's "
        "affinity (rank 0 of 1)",
    ),
    _case(
        "library/moe_tkg_all_expert_bias_clamp",
        _moe_inputs(4, 1024, 192, 4, None, True, F16, bias=True, clamp=True, act="Swish"),
        F16,
        "all-expert, fp16, Swish (gelu_apprx_sigmoid), gate/up and down biases, clamps "
        "(gate <= 7, -6 <= up <= 8), I=192 (not a multiple of 128)",
    ),
    _case(
        "library/moe_tkg_all_expert_gelu_noscale",
        _moe_inputs(4, 512, 128, 2, None, True, bf16, act="GELU", scale="NO_SCALE"),
        bf16,
        "all-expert, NO_SCALE (the plain sum of every expert's output), GELU",
    ),
    _case(
        "library/moe_tkg_all_expert_rank_mask",
        _moe_inputs(8, 512, 128, 2, 2, True, bf16, ranks=4, rank=2, mask=True),
        bf16,
        "all-expert on rank 2 of 4 (experts 4-5 of 8 global): the kernel slices the [T, 8] "
        "affinities at rank_id * E_L and, with mask_unselected_experts, zeroes each token's "
        "affinity to an expert not in its top-2 (every affinity is non-zero in the input)",
    ),
    _case(
        "library/moe_tkg_all_expert_t160",
        _moe_inputs(160, 512, 128, 2, None, True, bf16),
        bf16,
        "all-expert with T=160 > 128: the documented T-tiling (a full and a partial tile)",
    ),
    _case(
        "library/moe_tkg_all_expert_fp8_row",
        _moe_inputs(4, 512, 128, 2, None, True, bf16, fp8_row=True),
        bf16,
        "all-expert, FP8 row quantization: float8_e4m3 weights, fp32 scales per output column "
        "([E, 2, I] gate/up, [E, H] down); the reference dequantizes the same fp8 values",
    ),
    _case(
        "library/moe_tkg_selective",
        _moe_inputs(4, 512, 128, 4, 2, False, bf16),
        bf16,
        "selective-expert, bf16, top-2 of 4 experts, SiLU, POST_SCALE (fp32 affinities, as the "
        "library's tests give them)",
    ),
    _case(
        "library/moe_tkg_selective_bias_clamp",
        _moe_inputs(3, 512, 128, 4, 2, False, F16, bias=True, clamp=True, act="Swish"),
        F16,
        "selective-expert, fp16, odd T=3 (shard on T), Swish, biases and clamps",
    ),
    _case(
        "library/moe_tkg_selective_fp8_row",
        _moe_inputs(4, 512, 128, 4, 2, False, bf16, fp8_row=True, act="Swish", bias=True),
        bf16,
        "selective-expert, FP8 row quantization, Swish, biases",
    ),
    _block_case(
        "library/moe_block_tkg_selective",
        _block_inputs(1, 4, 512, 128, 8, 2, F16, bias=True, clamp=True),
        F16,
        "RMSNorm + router (softmax after top-2, router bias) + selective experts (Swish, "
        "biases, clamps), fp16 [1, 4, 512], 8 experts; outputs: [T, H] and the router logits",
    ),
    _block_case(
        "library/moe_block_tkg_selective_prenorm",
        _block_inputs(1, 4, 512, 128, 8, 2, bf16, hidden_act="SiLU", pre_norm=True, norm_topk=True),
        bf16,
        "bf16, softmax over the 8 experts then top-2, renormalised (norm_topk_prob), SiLU",
    ),
    _block_case(
        "library/moe_block_tkg_all_expert",
        _block_inputs(
            8, 1, 512, 128, 8, 2, F16, bias=True, clamp=True, all_expert=True, e_local=4, rank=1
        ),
        F16,
        "all-expert: 4 local experts on rank 1 of 2 (experts 4-7 of 8), top-2 routing",
    ),
    _block_case(
        "library/moe_block_tkg_all_expert_mask",
        _block_inputs(
            8, 1, 512, 128, 8, 2, bf16, hidden_act="SiLU", pre_norm=True, all_expert=True, e_local=4
        ),
        bf16,
        "all-expert, softmax over E then top-2 without renormalising: the router returns the "
        "full [T, E] affinities and moe_tkg masks the unselected experts (rank 0 of 2)",
    ),
    _mx_case(
        "library/moe_tkg_selective_mxfp4",
        _mx_inputs(2, 512, 512, 4, 2, False, "float4_e2m1fn_x4"),
        "selective-expert, MXFP4 weights, top-2 of 4 experts, T=2, Swish, gate/up bias, clamps",
    ),
    _mx_case(
        "library/moe_tkg_selective_mxfp8",
        _mx_inputs(
            2, 512, 512, 4, 2, False, "float8_e4m3fn_x4", act="SiLU", down_bias=True, dtype=F16
        ),
        "selective-expert, MXFP8 weights, fp16 I/O, SiLU, gate/up and down biases (the down "
        "bias is weighted by the affinities after the projection, as the kernel's comments "
        "describe)",
    ),
    _mx_case(
        "library/moe_tkg_all_expert_mxfp4",
        _mx_inputs(32, 512, 512, 2, None, True, "float4_e2m1fn_x4"),
        "all-expert, MXFP4 weights, T=32 (the kernel asks T divisible by 32 when it quantizes "
        "the input itself), 2 experts, Swish, gate/up bias, clamps",
    ),
    _mx_case(
        "library/moe_tkg_all_expert_mxfp8",
        _mx_inputs(32, 512, 1024, 2, None, True, "float8_e4m3fn_x4", act="SiLU", clamp=False),
        "all-expert, MXFP8 weights, SiLU, no clamps",
    ),
    _mx_case(
        "library/moe_tkg_all_expert_mxfp4_dynamic",
        _mx_inputs(32, 512, 1024, 1, None, True, "float4_e2m1fn_x4", block_size=8),
        "all-expert with dynamic control flow (is_all_expert_dynamic, block_size 8 of T=32, "
        "one local expert as the kernel requires, I=1024 so that I is sharded over the two "
        "cores: with one I/512 tile the dynamic blocks still take shard_on_I's default True "
        "and both cores add the same full result, doubling it). Every token is routed: the "
        "kernel never writes the output row of a token routed to no local expert (its "
        "indirect DMA skips it; moe_tkg's own output buffer is not zeroed), so those rows "
        "hold whatever the buffer held",
    ),
    Case(
        "library/moe_block_tkg_selective_mxfp4",
        REPO,
        MOE_BLOCK,
        "moe_block_tkg",
        _block_mx_inputs(1, 4, 512, 512, 8, 2, "float4_e2m1fn_x4", bias=True, clamp=True),
        _block_mx_ref,
        driver=_block_mx_driver,
        grid=(2,),  # moe_block_tkg asserts an LNC=2 grid
        rtol=BF16_TOL,
        atol=BF16_TOL,
        notes="RMSNorm + router (softmax after top-2 of 8, router bias) + selective MXFP4 "
        "experts (eager affinities from the router), fp16 [1, 4, 512], I=512, Swish, biases, "
        "clamps; the weights passed as the library's TensorView (_block_mx_driver); the expert "
        "part as in the moe_tkg MX cases (the intermediate tile in the I/O dtype): tolerance "
        "2^-6 (4 bf16 ulps: the projections run in bf16)",
    ),
    Case(
        "library/moe_block_tkg_all_expert_mxfp4",
        REPO,
        MOE_BLOCK,
        "moe_block_tkg",
        _block_mx_inputs(
            4, 1, 512, 1024, 8, 2, "float4_e2m1fn_x4", bias=True, clamp=True, all_expert=True
        ),
        _block_mx_ref,
        driver=_block_mx_driver,
        grid=(2,),
        rtol=BF16_TOL,
        atol=BF16_TOL,
        notes="all-expert with MXFP4 experts: the fused RMSNorm + MXFP8 quantization "
        "(rmsnorm_mx_quantize_tkg: x * gamma stored in the input dtype, then times 1/RMS; the "
        "reference rounds the same two steps), the router (softmax after top-2 of 8), and "
        "moe_tkg on the pre-quantized input (hidden_input_scale); T=4, H=512, I=1024 (I "
        "sharded over the two cores); E=8: router_topk's max8 reads E values per token and "
        "max8 needs at least 8 (with E=4 trnsim stops at the max8 rule); tolerance 2^-6",
    ),
]
