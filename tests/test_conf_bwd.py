"""nki-library's MoE blockwise backward and the hybrid shard-on-I forward
(``cases_library_bwd``), run unmodified from a local checkout against the references written
here; and the backward reference itself checked against finite differences of the forward."""

import os
from pathlib import Path

import numpy as np
import pytest

from trnsim.conformance.cases_library_bwd import (
    CASES,
    _act,
    _act_dx,
    _bwd_forward,
    _bwd_ref,
    _rope_halves,
    _routing,
)
from trnsim.conformance.runner import run_checkout

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))


@pytest.mark.parametrize("act", ["SiLU", "Swish"])
def test_activation_derivative_matches_finite_differences(act):
    z = np.linspace(-4, 4, 81)
    eps = 1e-6
    numeric = (_act(z + eps, act) - _act(z - eps, act)) / (2 * eps)
    np.testing.assert_allclose(_act_dx(z, act), numeric, rtol=1e-6, atol=1e-8)


def test_routing_keeps_each_cores_tokens_in_its_half():
    mask, perm, bte = _routing(np.random.default_rng(0), 255, 4, 2, 256)
    half = 128
    blocks = perm.reshape(-1, 256)
    assert len(blocks) == len(bte)
    real = blocks != 255
    assert (blocks[:, :128][real[:, :128]] < half).all()
    assert (blocks[:, 128:][real[:, 128:]] >= half).all()
    for ex in range(4):  # every routed token appears exactly once in its expert's blocks
        got = np.sort(blocks[bte[:, 0] == ex][real[bte[:, 0] == ex]])
        np.testing.assert_array_equal(got, np.flatnonzero(mask[:, ex]))


def test_backward_reference_is_the_gradient_of_the_forward():
    """sum(dy * y) differentiated numerically, with y the documented forward."""
    rng = np.random.default_rng(1)
    t, h, e, i, b = 7, 4, 2, 3, 256
    mask, perm, bte = _routing(rng, t, e, 1, b)
    x = np.zeros((t + 1, h))
    x[:t] = rng.uniform(0, 1, (t, h))
    dy = np.zeros((t + 1, h))
    dy[:t] = rng.uniform(-1, 1, (t, h))
    aff = np.zeros((t + 1, e))
    aff[:t] = rng.uniform(0, 1, (t, e)) * mask
    gup = rng.uniform(-1, 1, (e, h, 2, i))
    down = rng.uniform(-1, 1, (e, i, h))

    def loss(x, aff, gup, down):
        _, dn = _bwd_forward(x, gup, down, perm, bte, b, "SiLU", None)
        y = np.zeros(x.shape)
        for blk in range(len(bte)):
            ex = int(bte[blk, 0])
            ids = perm[blk * b : (blk + 1) * b]
            np.add.at(y, ids, dn[blk] * aff[ids, ex][:, None])
        return (dy * y).sum()

    gu_t, dn = _bwd_forward(x, gup, down, perm, bte, b, "SiLU", None)
    grads = _bwd_ref(x, aff.reshape(-1, 1), gup, down, gu_t, dn, perm, bte, dy, b)
    args = [x, aff, gup, down]
    for which, got in enumerate([grads[0], grads[1].reshape(aff.shape), *grads[2:]]):
        numeric = np.zeros(args[which].shape)
        for idx in np.ndindex(*args[which].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][idx] += 1e-6
            minus[which][idx] -= 1e-6
            numeric[idx] = (loss(*plus) - loss(*minus)) / 2e-6
        if which == 1:  # only routed (token, expert) pairs have an affinity gradient
            numeric = numeric * np.vstack([mask, np.zeros((1, e))])
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7)


def test_rope_on_contiguous_halves_is_a_complex_rotation():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8))
    theta = rng.uniform(-3, 3, 4)
    got = _rope_halves(x, np.cos(theta), np.sin(theta))
    z = (x[:, :4] + 1j * x[:, 4:]) * np.exp(1j * theta)
    np.testing.assert_allclose(got, np.concatenate([z.real, z.imag], axis=1), atol=1e-12)


EXTERNAL = ("library/transformer_tkg", "library/transformer_tkg_bf16")


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", EXTERNAL)
def test_transformer_tkg_is_external_at_this_library_commit(name):
    """experimental/transformer/__init__.py imports torch (and core/mlp/mlp.py has an
    IndentationError at d2ad3a5): outside trnsim. With both fixed the cases pass."""
    _, _, results = run_checkout(LIBRARY, only=name)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome in ("external", "pass"), r.detail
    if r.outcome == "external":
        assert "torch" in r.detail or "IndentationError" in r.detail or "indent" in r.detail


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
@pytest.mark.parametrize("name", [c.name for c in CASES if c.name not in EXTERNAL])
def test_bwd_cases_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0


def test_arrays_in_list_arguments_are_device_tensors_written_back():
    """A kernel taking ``List[nl.ndarray]`` (as nki-library's ``transformer_tkg`` documents
    for its per-layer weights and caches): each array in the list is an HBM tensor, and what
    the kernel writes into one is copied back to the caller's array."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    def k(xs, caches):
        out = nl.ndarray(xs[0].shape, xs[0].dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(xs[0].shape, xs[0].dtype, buffer=nl.sbuf)
        b = nl.ndarray(xs[0].shape, xs[0].dtype, buffer=nl.sbuf)
        nisa.dma_copy(a, xs[0])
        nisa.dma_copy(b, xs[1])
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(out, a)
        nisa.dma_copy(caches[1], a)  # an in-place update, like a KV cache
        return out

    x0, x1 = np.ones((4, 8), np.float32), np.full((4, 8), 2.0, np.float32)
    caches = [np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32)]
    out = nki.simulate(k)([x0, x1], caches)
    np.testing.assert_array_equal(out, 3.0)
    np.testing.assert_array_equal(caches[1], 3.0)
    np.testing.assert_array_equal(caches[0], 0.0)


# ---- write-write races between the cores of an LNC=2 launch (trnsim.core.races) -------------


def _race_kernel(values, barrier: bool):
    """Both cores store ``values[program_id]`` into one HBM tensor, with or without a
    core_barrier between the stores."""
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    def k():
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        pid = nl.program_id(0)
        nisa.memset(t, float(values[pid]))
        if barrier and pid == 1:
            nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(out, t)
        if barrier and pid == 0:
            nisa.core_barrier(out, (0, 1))
        return out

    return k


def test_cores_storing_different_values_without_a_barrier_is_a_race():
    import trnsim.nki as nki
    from trnsim.errors import KernelError

    with pytest.raises(KernelError, match="lnc-race"):
        nki.run(_race_kernel((1.0, 2.0), barrier=False), lnc=2)


def test_cores_storing_the_same_values_or_across_a_barrier_are_not_races():
    import trnsim.nki as nki

    same = nki.run(_race_kernel((3.0, 3.0), barrier=False), lnc=2).outputs
    np.testing.assert_array_equal(same, 3.0)
    ordered = nki.run(_race_kernel((1.0, 2.0), barrier=True), lnc=2).outputs
    np.testing.assert_array_equal(ordered, 2.0)  # core 1 stores after the barrier


def test_an_indirect_scatter_racing_a_store_is_a_race_on_the_deferred_path_too():
    """Core 0 zeroes a table while core 1 scatters rows into it through a vector_offset
    (the shape of blockwise_mm_bwd's affinity-gradient race)."""
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl
    from trnsim.core.options import CoreOptions
    from trnsim.errors import KernelError

    def k(idx):
        table = nl.ndarray((8, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            nisa.memset(t, 0.0)
            nisa.dma_copy(table, t)
        else:
            i = nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(i, idx)
            nisa.memset(t, 5.0)
            nisa.dma_copy(table.ap([[4, 2], [1, 4]], vector_offset=i, indirect_dim=0), t[0:2])
        return table

    idx = np.array([[1], [6]], np.int32)
    for options in (CoreOptions(), CoreOptions(fast_paths=True, deferred=True)):
        with pytest.raises(KernelError, match="lnc-race"):
            nki.run(k, idx, lnc=2, options=options)


@pytest.mark.parametrize("first_strided", [True, False])
def test_race_check_compares_each_cores_last_value(first_strided):
    """RaceCheck directly: strided stores by one core, indexed stores by the other; what
    counts is each core's last value of a byte in the epoch."""
    from trnsim.core.memory import Hbm
    from trnsim.core.races import RaceCheck
    from trnsim.errors import KernelError

    hbm = Hbm(1 << 20)
    alloc = hbm.allocate(64, name="t")
    flat = alloc.buffer[:64].view(np.float32)  # 16 elements
    race = RaceCheck()

    def strided(core, value):  # column 1 of a [4, 4] view: elements 1, 5, 9, 13
        race.store(core, alloc, flat.reshape(4, 4)[:, 1], np.full(4, value, np.float32))

    def indexed(core, value):
        race.store_flat(core, alloc, flat, np.array([5, 9]), np.float32(value))

    a, b = (strided, indexed) if first_strided else (indexed, strided)
    a(0, 1.0)
    b(1, 1.0)
    race.advance()  # the same last value on both cores: no race
    a(0, 1.0)
    b(1, 2.0)
    a(0, 2.0)
    race.advance()  # core 0 ended on core 1's value: no race
    a(0, 1.0)
    b(1, 2.0)
    with pytest.raises(KernelError, match=r"lnc-race.*HBM tensor 't'.*at this barrier"):
        race.advance()  # elements 5 and 9 end as 1.0 or 2.0, as the cores interleave
    assert race.epoch == 4


@pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")
def test_blockwise_mm_bwd_with_tokens_across_core_halves_is_refused_as_a_race(monkeypatch):
    """Each core zeroes half of expert_affinities_masked_grad, then (no barrier) writes the
    affinity gradients of its own tile of each block: a token of the other core's half is
    written by one core and zeroed by the other, in either order. Without the split routing
    of the cases, trnsim refuses it (it used to pass or not as the threads interleaved)."""
    import dataclasses

    from trnsim.conformance import cases_library_bwd as mod
    from trnsim.conformance.runner import checkout_imports, run_case

    def in_token_order(rng, t, e, k, b):
        mask = np.zeros((t, e), bool)
        for tok in range(t):
            mask[tok, rng.choice(e, k, replace=False)] = True
        pos = [np.full(b, t, np.int32) for _ in range(e)]
        for ex in range(e):
            ids = np.flatnonzero(mask[:, ex])
            pos[ex][: len(ids)] = ids
        return mask, np.concatenate(pos), np.arange(e, dtype=np.int32).reshape(-1, 1)

    monkeypatch.setattr(mod, "_routing", in_token_order)
    (case,) = [c for c in CASES if c.name == "library/blockwise_mm_bwd_fp32"]
    case = dataclasses.replace(
        case, inputs=mod._bwd_inputs(255, 256, 2, 128, 256, 1, np.dtype(np.float32))
    )
    with checkout_imports(LIBRARY.resolve(), "nki-library"):
        r = run_case(case, LIBRARY)
    assert r.outcome == "kernel-error" and "lnc-race" in r.detail, r.detail
    assert "bwmm_bwd_dropless.py" in r.location
