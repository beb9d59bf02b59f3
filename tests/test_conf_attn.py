"""nki-library's token-generation attention (``cases_library_attn``): gen_mask_tkg_hbm and
attention_tkg run unmodified from a local checkout against references written here; the
references' layouts against the docstrings' formulas; ``Case.driver`` on a kernel written here."""

import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance.cases_library_attn import (
    CASES,
    _mask_ref,
    _reduce_angle,
    _rope,
    _token_of_row,
)
from trnsim.conformance.runner import run_checkout

EXTERNAL = {  # their package imports torch (see the cases' notes)
    "library/attention_block_tkg",
    "library/attention_block_tkg_update_proj",
    "library/attention_block_tkg_lnc2",
}
LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


def test_flat_mask_rows_follow_the_strided_iota():
    # s_prior 512: 4 tiles; SBUF [p, f] holds token p * 4 + f and HBM row f * 128 + p
    tok = _token_of_row(512, 0)
    assert tok[3 * 128 + 5] == 5 * 4 + 3
    assert sorted(tok) == list(range(512))


def test_block_mask_rows_follow_the_shuffling_formula():
    # "token_idx = fold_idx * block_len * P_MAX + partition * block_len + blk_offset"
    tok = _token_of_row(2048, 4)  # 16 tiles = 4 folds of block_len 4
    fold, j, p = 2, 3, 7
    assert tok[(fold * 4 + j) * 128 + p] == fold * 4 * 128 + p * 4 + j
    assert sorted(tok) == list(range(2048))


def test_swa_mask_wraps_as_the_design_spec_draws_it():
    # design spec 2B: cache slots 0..15, q0 window start 12, end 3 -> {0, 1, 2, 12..15}
    s_prior = 128  # one tile so that row == token for f = 0
    m = _mask_ref(np.array([[3.0]]), 1, 1, 1, s_prior, start_pos_hbm=np.array([[12.0]]))
    on = set(np.flatnonzero(m[:, 0, 0, 0]))
    assert on == {0, 1, 2} | set(range(12, s_prior))


def test_rope_at_position_zero_is_the_identity_and_rotates_pairs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 2, 64)).astype(np.float32)
    inv = rng.random((32, 1)).astype(np.float32)
    np.testing.assert_allclose(_rope(x, np.zeros((1, 2)), inv), x, atol=1e-6)
    pos = np.array([[3.0, 4.0]])
    y = _rope(x, pos, inv)
    # each pair (x_i, x_{i+d/2}) turns by angle inv_i * pos: norms kept
    n_x = x[..., :32] ** 2 + x[..., 32:] ** 2
    n_y = y[..., :32] ** 2 + y[..., 32:] ** 2
    np.testing.assert_allclose(n_y, n_x, rtol=1e-5)


def test_reduced_angle_is_in_range_and_keeps_the_sine():
    emb = np.linspace(0, 3000, 1001, dtype=np.float32)
    r = _reduce_angle(emb, np.pi)
    assert (np.abs(r) <= np.float32(np.pi) + 1e-6).all()
    np.testing.assert_allclose(np.sin(r), np.sin(emb.astype(np.float64)), atol=1e-3)


def test_caller_runs_afresh_in_each_program(tmp_path):
    """A caller's per-launch state (here a list standing in for an SBUF manager) is made in
    each LNC program, so the two programs' threads never share it."""
    from trnsim.conformance.case import Case
    from trnsim.conformance.runner import checkout_imports, run_case

    folder = tmp_path / "src" / "nki_samples" / "tutorials" / "t"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text(
        "import nki.isa as nisa\nimport nki.language as nl\n\n\n"
        "def k(x, out, state):\n"
        "    state.append(1)\n"
        "    assert len(state) == 1, 'state shared between programs'\n"
        "    i = nl.program_id(0)\n"
        "    t = nl.ndarray((1, 4), x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(t, x[i : i + 1, :])\n"
        "    nisa.tensor_scalar(t, t, nl.multiply, 2.0)\n"
        "    nisa.dma_copy(out[i : i + 1, :], t)\n"
    )

    def caller(kernel):
        def k_caller(x, out):
            kernel(x, out, [])

        return k_caller

    case = Case(
        "t/k",
        "nki-samples",
        "src/nki_samples/tutorials/t/k.py",
        "k",
        lambda rng: (np.arange(8, dtype=np.float32).reshape(2, 4), np.zeros((2, 4), np.float32)),
        lambda x, out: 2 * x,
        grid=(2,),
        out_args=(1,),
        driver=caller,
    )
    with checkout_imports(tmp_path.resolve(), "nki-samples"):
        r = run_case(case, tmp_path)
    assert r.outcome == "pass", r.detail


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES if c.name not in EXTERNAL])
def test_attention_tkg_kernels_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", sorted(EXTERNAL))
def test_attention_block_tkg_is_external_and_matches_with_torch_stubbed(name, monkeypatch):
    """attention_block_tkg's package imports torch (for an unrelated torch reference), so the
    case is ``external`` where torch is not installed (and passes where it is); with that
    import satisfied by a stub the kernel itself runs unmodified and matches the reference (it
    never calls torch)."""
    import importlib.util
    import sys
    from unittest import mock

    from trnsim.conformance.runner import checkout_imports, run_case

    (case,) = [c for c in CASES if c.name == name]
    _, _, results = run_checkout(LIBRARY, only=case.name)
    if importlib.util.find_spec("torch") is None:
        assert results[0].outcome == "external" and "torch" in results[0].detail
    else:
        assert results[0].outcome == "pass", results[0].detail
    monkeypatch.setitem(sys.modules, "torch", mock.MagicMock(name="torch"))
    with checkout_imports(LIBRARY.resolve(), "nki-library"):
        r = run_case(case, LIBRARY)
    assert r.outcome == "pass", r.detail


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
def test_an_illegal_configuration_is_a_kernel_error_at_the_asserting_line():
    """Fused RoPE with a batch-sharded LNC=2 launch is refused by the kernel's own check; the
    runner reports it at attention_tkg.py's line, not inside kernel_assert."""
    import dataclasses

    from trnsim.conformance.cases_library_attn import _attn_tkg_inputs
    from trnsim.conformance.runner import checkout_imports, run_case

    (base,) = [c for c in CASES if c.name == "library/attention_tkg_lnc2_batch"]
    shape = dict(b=2, h=2, sa=3, s=128, full=256, d=64, tp_k_prior=True, use_pos_id=True)
    case = dataclasses.replace(
        base, inputs=_attn_tkg_inputs(**shape, fuse_rope=True), out_args=(6, 13)
    )
    with checkout_imports(LIBRARY.resolve(), "nki-library"):
        r = run_case(case, LIBRARY)
    assert r.outcome == "kernel-error"
    assert "Fuse rope requires batch to not be sharded" in r.detail
    assert r.location.startswith("src/nkilib_src/nkilib/core/attention/attention_tkg.py:")
