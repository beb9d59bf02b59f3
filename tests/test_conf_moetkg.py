"""nki-library's MoE token-generation kernels (``cases_library_moetkg``): moe_tkg (all-expert,
selective, FP8 row, MX) and moe_block_tkg, run unmodified from a local checkout against the
references written here."""

import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance.cases_library_moetkg import CASES, _block_weights, _moe_ref
from trnsim.conformance.runner import run_checkout

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


class _Enum:
    def __init__(self, name):
        self.name = name


def test_reference_weights_only_the_selected_experts():
    x = np.ones((2, 4), np.float32)
    wgu = np.zeros((3, 4, 2, 2), np.float32)
    wgu[..., 1, :] = 0.25  # up = 1 per token; gate = 0 -> silu(0) = 0: make gate large
    wgu[..., 0, :] = 10.0  # silu(40) ~ 40
    wd = np.ones((3, 2, 4), np.float32)
    aff = np.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0]], np.float32)
    idx = np.array([[0], [1]], np.int32)
    post = _Enum("POST_SCALE")
    sel = _moe_ref(x, wgu, wd, aff, idx, False, expert_affinities_scaling_mode=post)
    # token 0: only expert 0 (affinity 0.5); token 1: expert 1 (affinity 1); each y = 2 * 40
    np.testing.assert_allclose(sel[:, 0], [0.5 * 80, 80], rtol=1e-6)
    every = _moe_ref(x, wgu, wd, aff, idx, True, expert_affinities_scaling_mode=post)
    np.testing.assert_allclose(every[:, 0], [80, 80], rtol=1e-6)  # sum of the affinities: 1
    masked = _moe_ref(
        x, wgu, wd, aff, idx, True, expert_affinities_scaling_mode=post,
        mask_unselected_experts=True,
    )  # fmt: skip
    np.testing.assert_allclose(masked[:, 0], [0.5 * 80, 80], rtol=1e-6)


def test_router_weights_top_k():
    logits = np.array([[3.0, 1.0, 2.0, 0.0]])
    w = _block_weights(logits, 2, "SOFTMAX", False, False)  # softmax over the two kept
    e = np.exp([3.0, 2.0])
    np.testing.assert_allclose(w, [[e[0] / e.sum(), 0, e[1] / e.sum(), 0]])
    w = _block_weights(logits, 2, "SOFTMAX", True, True)  # softmax over E, then renormalise
    np.testing.assert_allclose(w, [[e[0] / e.sum(), 0, e[1] / e.sum(), 0]])
    w = _block_weights(logits, 2, "SOFTMAX", True, False)
    full = np.exp(logits[0]) / np.exp(logits[0]).sum()
    np.testing.assert_allclose(w, [[full[0], 0, full[2], 0]])


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_moe_tkg_kernels_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
