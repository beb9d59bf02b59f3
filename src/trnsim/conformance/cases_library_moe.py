"""Conformance cases: nki-library's MoE router (``core/router_topk``).

``router_topk`` writes three caller-given HBM outputs (``Case.out_args``): router logits
[T, E], expert affinities [T, E] (zero outside each token's top K) and expert indices [T, K].
The reference follows the docstring's pseudocode: logits = x @ w + bias (bf16 inputs, fp32
products and sums, logits stored in bf16); with ``router_pre_norm`` the activation (softmax
over E, or sigmoid) runs on the fp32 logits before top-K, else on the K selected logits;
``norm_topk_prob`` divides the K affinities by their sum; top-K takes the K largest in
descending order (``max8`` / ``find_index8``); the K affinities are scattered back to their
experts (zeros elsewhere), except in the (ACT1, topK) pipeline (``router_pre_norm`` without
``norm_topk_prob``), whose stages the kernel documents as storing the full activated [T, E]
(the docstring's pseudocode always scatters; the kernel's own pipeline comments are more
precise, and the affinities of every expert are what a pre-norm router returns). Inputs are
drawn so that no two of a token's scores are closer than a bf16 ulp, so the ranking is the
same in any precision the kernel may use (indices are compared exactly).
"""

from __future__ import annotations

import numpy as np

from trnsim.conformance.case import Call, Case
from trnsim.conformance.refs import bf16, f64

REPO = "nki-library"
ROUTER = "src/nkilib_src/nkilib/core/router_topk/router_topk.py"
BF16_ULP = 2.0**-7  # one bf16 ulp relative to the binade's lower end


def _router_inputs(t: int, h: int, e: int, k: int, act: str, **kw):
    def make(rng):
        from nkilib.core.utils.common_types import RouterActFnType

        w = rng.uniform(-0.1, 0.1, (h, e)).astype(bf16)
        bias = rng.uniform(-0.1, 0.1, (1, e)).astype(bf16)
        x = np.empty((t, h), bf16)
        for i in range(t):  # each token redrawn until its top-K ranking is unambiguous
            while True:  # (its K+1 best scores at least 2 bf16 ulps apart)
                x[i] = rng.uniform(-0.1, 0.1, h).astype(bf16)
                logits = f64(x[i]) @ f64(w) + f64(bias[0])
                top = -np.sort(-logits)[: k + 1]
                if (np.diff(-top) > 2.0**-6 * np.abs(top[1:]).max()).all():
                    break
        outs = (
            np.zeros((t, e), bf16),
            np.zeros((t, e), bf16),
            np.zeros((t, k), np.uint32),
        )
        fn = RouterActFnType.SOFTMAX if act == "softmax" else RouterActFnType.SIGMOID
        # x in HBM as [T, H]: x_hbm_layout 1; x_sb_layout 0 (unused for an HBM x)
        return Call((x, w, bias, *outs, fn, k, 1, 0), kw)

    return make


def _act(z: np.ndarray, name: str) -> np.ndarray:
    if name == "SOFTMAX":
        ez = np.exp(z - z.max(axis=-1, keepdims=True))
        return ez / ez.sum(axis=-1, keepdims=True)
    return 1 / (1 + np.exp(-z))


def _router_ref(
    x,
    w,
    bias,
    logits_out,
    affin_out,
    index_out,
    act_fn,
    k,
    x_hbm_layout,
    x_sb_layout,
    router_pre_norm=True,
    norm_topk_prob=False,
    **_,
):
    logits = (f64(x) @ f64(w) + f64(bias)).astype(np.float32).astype(np.float64)
    scores = _act(logits, act_fn.name) if router_pre_norm else logits
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(scores, idx, axis=1)
    if not router_pre_norm:
        top = _act(top, act_fn.name) if act_fn.name != "SOFTMAX" else _act(top, "SOFTMAX")
    if norm_topk_prob:
        top = top / top.sum(axis=1, keepdims=True)
    if router_pre_norm and not norm_topk_prob:
        affin = scores  # (ACT1, topK): the full activated [T, E], no scatter
    else:
        affin = np.zeros_like(logits)
        np.put_along_axis(affin, idx, top, axis=1)
    return logits.astype(bf16), affin.astype(bf16), idx.astype(np.uint32)


def _router_case(name: str, t: int, h: int, e: int, k: int, act: str, notes: str, **kw) -> Case:
    return Case(
        name,
        REPO,
        ROUTER,
        "router_topk",
        _router_inputs(t, h, e, k, act, **kw),
        _router_ref,
        out_args=(3, 4, 5),
        grid=(2,),  # the kernel ends with core_barrier, documented for LNC=2 launches only
        rtol=BF16_ULP,
        atol=2.0**-14,  # affinities of a few 1e-3: below bf16's resolution there
        notes=notes,
    )


CASES: list[Case] = [
    _router_case(
        "library/router_topk_softmax",
        16,
        256,
        64,
        4,
        "softmax",
        "bf16 x [16, 256] @ w [256, 64] + bias, softmax over E then top-4 (pre-norm); bf16 "
        "outputs to one bf16 ulp, indices exact",
    ),
    _router_case(
        "library/router_topk_post_norm",
        16,
        256,
        64,
        4,
        "softmax",
        "top-4 of the logits, then softmax over the 4 and the L1 norm (router_pre_norm=False, "
        "norm_topk_prob=True)",
        router_pre_norm=False,
        norm_topk_prob=True,
    ),
    _router_case(
        "library/router_topk_sigmoid",
        32,
        128,
        32,
        2,
        "sigmoid",
        "sigmoid (needs the indirect-DMA scatter of the affinities, documented), top-2, "
        "L1-normalised: (ACT1, topK, Norm), scattered",
        use_indirect_dma_scatter=True,
        norm_topk_prob=True,
    ),
    _router_case(
        "library/router_topk_sigmoid_full",
        32,
        128,
        32,
        2,
        "sigmoid",
        "sigmoid, top-2, (ACT1, topK): the full [T, E] affinities",
        use_indirect_dma_scatter=True,
    ),
]
