"""nki-library's MoE token-generation kernels (``cases_library_moetkg``): moe_tkg (all-expert,
selective, FP8 row, MX) and moe_block_tkg, run unmodified from a local checkout against the
references written here."""

import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance.cases_library_moetkg import (
    CASES,
    _block_weights,
    _i_map,
    _i_order,
    _k_order,
    _moe_ref,
    _mx_values,
    _mx_weights,
)
from trnsim.conformance.runner import run_checkout
from trnsim.errors import KernelError
from trnsim.nki.simulate import run

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


def _max8(x):
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    sb = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=x)
    top = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.max8(dst=top, src=sb)
    out = nl.ndarray(top.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=top)
    return out


def test_max8_reads_at_least_8_elements_per_partition():
    # nki.isa.max8: "The number of elements read per partition must be between 8 and 16,384"
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_array_equal(run(_max8, x).outputs, x[:, ::-1])
    with pytest.raises(KernelError, match="max8 reads 4 elements per partition"):
        run(_max8, np.ones((2, 4), np.float32))


def test_mx_layout_blocks_are_8_partitions_by_4_slots():
    # an axis of 64 values laid out index = j * 16 + r: K = 4 r + j
    order = _k_order(64, 16)
    assert list(order[:8]) == [0, 16, 32, 48, 1, 17, 33, 49]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 3))
    words, scales = _mx_weights(w, "float8_e4m3fn", "float8_e4m3fn_x4")
    assert words.shape == (16, 3) and scales.shape == (2, 3)
    back = _mx_values(words, scales, "float8_e4m3fn_x4")
    np.testing.assert_allclose(back, w, rtol=2.0**-3)  # e4m3: 3 mantissa bits
    # block 0 holds rows r = 0..7 of every slot: index j * 16 + r
    big = w.copy()
    big[[0, 16, 32, 48, 7, 23, 39, 55], 0] = 0.0
    big[16 * 3 + 2, 0] = 100.0  # slot 3, row 2: in block 0 (not 1)
    _, s2 = _mx_weights(big, "float8_e4m3fn", "float8_e4m3fn_x4")
    assert s2[0, 0] > scales[0, 0] and s2[1, 0] == scales[1, 0]


def test_intermediate_layout_is_per_512_tile():
    # I = 1024: two tiles of [128 partitions, 4 slots], index tile * 512 + j * 128 + p
    m = _i_map(1024)
    assert m.shape == (128, 2, 4) and m[5, 1, 3] == 512 + 3 * 128 + 5
    order = _i_order(1024)
    assert sorted(order) == list(range(1024))
    assert list(order[512:516]) == [512, 640, 768, 896]  # K = 512 + 4 p + j
    small = _i_map(128)  # I = 128: one tile of 32 partitions, index j * 32 + p
    assert small.shape == (32, 1, 4) and small[5, 0, 3] == 3 * 32 + 5


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_moe_tkg_kernels_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
