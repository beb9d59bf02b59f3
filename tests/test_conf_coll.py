"""nki-library's SBUF utilities (``cases_library_utils``, through the drivers of
``trnsim.conformance.drivers_sbuf``) and collectives, run unmodified from a local checkout
against the references written here; illegal uses name the rule and the library's file:line."""

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

import trnsim.nki.collectives as ncc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.conformance import cases_library_coll as coll
from trnsim.conformance import cases_library_utils as utils
from trnsim.conformance.refs import bf16, randn
from trnsim.conformance.runner import checkout_imports, run_case, run_checkout
from trnsim.core import semantics as S
from trnsim.core.isa import Op
from trnsim.core.timing import schedule
from trnsim.errors import KernelError
from trnsim.nki.simulate import jit, run_ranks

LIBRARY = Path(os.environ.get("TRNSIM_NKI_LIBRARY", "/work/checkouts/nki-library"))
needs_library = pytest.mark.skipif(not LIBRARY.is_dir(), reason="no nki-library checkout")


def _case(name: str):
    (case,) = [c for c in utils.CASES if c.name == name]
    return case


def _run(case, seed: int = 0):
    with checkout_imports(LIBRARY.resolve(), case.repo):
        return run_case(case, LIBRARY.resolve(), seed=seed)


@needs_library
@pytest.mark.parametrize("name", [c.name for c in utils.CASES])
def test_sbuf_utilities_run_unmodified_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0


def test_cross_partition_copy_reference_keeps_other_partitions():
    src = np.arange(6 * 2, dtype=np.float32).reshape(6, 2)
    dst = -np.ones((8, 2), np.float32)
    out = utils._xpc_ref(src, dst, 1, 5, 3, 2)
    assert (out[5:8] == src[1:4]).all() and (out[:5] == -1).all()


@needs_library
def test_a_tensor_copy_at_an_illegal_start_names_the_library_line():
    # 48 partitions starting at partition 32: the architecture guide's start_partition rule
    # allows 0 or 64 for 33..64 partitions; the library's aligned path copies directly
    case = dataclasses.replace(
        _case("library/cross_partition_copy_aligned"),
        inputs=utils._xpc_inputs(128, 128, 64, 32, 64, 48),
    )
    r = _run(case)
    assert r.outcome == "kernel-error"
    assert "start-partition" in r.detail and "starts at partition 32 with 48" in r.detail
    assert r.location.endswith("core/utils/cross_partition_copy.py:87")


@needs_library
def test_tp_broadcast_of_bf16_is_refused_at_the_transpose():
    # nc_transpose: "The output dst tile must have the same data type as that of data"; the
    # utility transposes into an fp32 PSUM tile, so only an fp32 src is legal
    case = dataclasses.replace(
        _case("library/tp_broadcast_fp32"), inputs=lambda rng: (randn(rng, (64, 4), bf16), 32, 0)
    )
    r = _run(case)
    assert r.outcome == "kernel-error"
    assert "nc_transpose dst dtype float32 must equal data dtype bfloat16" in r.detail
    assert r.location.endswith("core/utils/tp_broadcast.py:60")


@needs_library
def test_an_illegal_use_in_a_driver_names_the_driver_line():
    # a src of 130 partitions: the driver's own SBUF tensor is illegal, before the utility runs
    case = dataclasses.replace(
        _case("library/stream_shuffle_broadcast"),
        inputs=lambda rng: (randn(rng, (130, 8)), randn(rng, (32, 8))),
    )
    r = _run(case)
    assert r.outcome == "kernel-error"
    assert "partition-dim" in r.detail and "130 partitions" in r.detail
    assert "trnsim/conformance/drivers_sbuf.py:" in r.location


# ---- collectives across ranks (run_ranks), from the nki.collectives docstrings ---------------

RING4 = ncc.ReplicaGroup([[0, 1, 2, 3]])


def _load(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _shards(n=4, shape=(8, 16)):
    rng = np.random.default_rng(3)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


def test_ring_semantics_follow_the_docstrings():
    parts = [np.full(2, r) for r in range(4)]
    # "each rank sends data to its successor and receives from its predecessor"
    assert [int(S.collective_permute_implicit(parts, i)[0]) for i in range(4)] == [3, 0, 1, 2]
    # "at iteration 0 ... the current rank's own ID", then its predecessors' around the ring
    assert [S.ring_rank((4, 5, 6, 7), 1, k) for k in range(5)] == [5, 4, 7, 6, 5]


def test_each_rank_is_a_launch_of_its_own_with_its_own_input_and_rank_id():
    @jit
    def k(x):
        t = _load(x)
        r = ncc.rank_id()
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(r))
        return _store(t)

    xs = _shards()
    runs = run_ranks(k, [((x,), {}) for x in xs])
    assert len(runs) == 4 and all(len(r.cores) == 1 for r in runs)
    for r, res in enumerate(runs):
        assert np.array_equal(res.outputs, xs[r] + r)


def test_all_gather_across_four_ranks_concatenates_in_group_order():
    @jit
    def k(x):
        t = _load(x)
        g = nl.ndarray((x.shape[0], 4 * x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_gather(srcs=[t], dsts=[g], replica_group=RING4, collective_dim=1)
        return _store(g)

    xs = _shards()
    for res in run_ranks(k, [((x,), {}) for x in xs]):
        assert np.array_equal(res.outputs, np.concatenate(xs, axis=1))


def test_ring_permute_and_processing_rank_gather_every_shard():
    """The ring all-gather the docstrings describe: hold a shard, write it to the slot of the
    rank it came from (the processing rank id as a register offset), pass it on."""

    @jit
    def k(x):
        m, f = x.shape
        cur, nxt = _load(x), nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        out = nl.ndarray((4, m, f), dtype=x.dtype, buffer=nl.shared_hbm)
        for it in range(4):
            who = ncc.collective_permute_implicit_current_processing_rank_id(
                iteration_id=it, replica_group=RING4
            )
            dst = out.ap(pattern=[[f, m], [1, f]], offset=0, scalar_offset=who, indirect_dim=0)
            nisa.dma_copy(dst=dst, src=cur)
            if it < 3:
                ncc.collective_permute_implicit(
                    srcs_by_channel=[[cur]], dsts_by_channel=[[nxt]], replica_group=RING4
                )
                cur, nxt = nxt, cur
        return out

    xs = _shards()
    runs = run_ranks(k, [((x,), {}) for x in xs])
    for res in runs:
        assert np.array_equal(res.outputs, np.stack(xs))
    ring = [i for i in runs[0].instructions if i.opcode is Op.COLLECTIVE_PERMUTE_IMPLICIT]
    assert len(ring) == 3 and ring[0].attr("ranks") == (0, 1, 2, 3)
    assert schedule(runs[0].instructions, runs[0].cores[0].spec).total_s > 0


@pytest.mark.parametrize("op,npop", [(nl.add, np.add), (nl.maximum, np.maximum)])
def test_ring_permute_with_reduction_sends_the_reduced_sources(op, npop):
    """collective_permute_implicit_reduce: each rank reduces its two sources and receives its
    predecessor's result (SBUF and HBM destinations)."""

    @jit
    def k(x, y):
        a, b = _load(x), _load(y)
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        ncc.collective_permute_implicit_reduce([[a]], [[b]], [[d]], RING4, op)
        hx = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        hy = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        nisa.dma_copy(hx, x)
        nisa.dma_copy(hy, y)
        hd = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.collective_permute_implicit_reduce([[hx]], [[hy]], [[hd]], RING4, op)
        return _store(d), hd

    xs, ys = _shards(), [s[::-1].copy() for s in _shards()]
    runs = run_ranks(k, [((x, y), {}) for x, y in zip(xs, ys, strict=True)])
    for r, res in enumerate(runs):
        want = npop(xs[(r - 1) % 4], ys[(r - 1) % 4])
        assert np.array_equal(res.outputs[0], want) and np.array_equal(res.outputs[1], want)
    ops = [i.opcode for i in runs[0].instructions]
    assert ops.count(Op.DMA_COMPUTE) == 2 and ops.count(Op.COLLECTIVE_PERMUTE_IMPLICIT) == 2


def test_two_rings_of_two_in_a_run_of_four():
    halves = ncc.ReplicaGroup([[0, 1], [2, 3]])

    @jit
    def k(x):
        t, d = _load(x), nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        ncc.collective_permute_implicit([[t]], [[d]], halves)
        return _store(d)

    xs = _shards()
    outs = [r.outputs for r in run_ranks(k, [((x,), {}) for x in xs])]
    # each ring of two: a rank receives the other's source
    assert all(np.array_equal(o, xs[j]) for o, j in zip(outs, (1, 0, 3, 2), strict=True))


def _error(kernel, n=4, lnc=None):
    with pytest.raises(KernelError) as info:
        run_ranks(kernel, [((x,), {}) for x in _shards(n)], lnc=lnc)
    return info.value


def test_replica_groups_must_cover_the_ranks_of_the_run():
    @jit
    def k(x):
        t = _load(x)
        ncc.all_reduce([t], [t], ncc.ReplicaGroup([[0, 1]]), nl.add)
        return _store(t)

    err = _error(k)
    assert err.rule == "replica-group" and "a run of 4 ranks" in str(err)
    assert err.kernel_file.endswith("test_conf_coll.py")


def test_a_ring_channel_takes_one_src_and_one_dst():
    @jit
    def k(x):
        t = _load(x)
        ncc.collective_permute_implicit([[t, t]], [[t, t]], RING4)
        return _store(t)

    err = _error(k)
    assert err.rule == "collective" and "each channel takes exactly one src" in str(err)


def test_more_than_four_ring_channels_are_refused():
    @jit
    def k(x):
        t = _load(x)
        ncc.collective_permute_implicit([[t]] * 5, [[t]] * 5, RING4, channel_ids=range(5))
        return _store(t)

    assert "at most 4 channels" in str(_error(k))


def test_lnc2_ranks_exchange_core_by_core_and_send_what_both_cores_wrote():
    """kernel[2] ranks: core c of each rank gathers its own SBUF tile with core c of the
    others; a shared-HBM source is sent once both cores of the rank have written it."""
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((2, 8, 16)).astype(np.float32) for _ in range(4)]

    @jit
    def k(x):
        c = nl.program_id(0)
        t = _load(x[c])
        g = nl.ndarray((8, 64), dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_gather([t], [g], RING4, 1)
        out = nl.ndarray((2, 8, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[c], src=g)
        both = nl.ndarray((2, 8, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=both[c], src=t)  # each core writes its half of the rank's source
        got = nl.ndarray((2, 8, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.collective_permute_implicit([[both]], [[got]], RING4)
        return out, got

    runs = run_ranks(k, [((x,), {}) for x in xs], lnc=2)
    for r, res in enumerate(runs):
        out, got = res.outputs
        for c in range(2):
            assert np.array_equal(out[c], np.concatenate([x[c] for x in xs], axis=1))
        assert np.array_equal(got, xs[(r - 1) % 4])
    assert all(len(res.cores) == 2 for res in runs)


def test_a_failing_rank_stops_the_others_waiting_in_a_collective():
    @jit
    def k(x):
        t = _load(x)
        if ncc.rank_id() == 2:
            nl.ndarray((130, 4), dtype=nl.float32, buffer=nl.sbuf)  # illegal: 130 partitions
        g = nl.ndarray((x.shape[0], 4 * x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_gather([t], [g], RING4, 1)
        return _store(g)

    assert _error(k).rule == "partition-dim"


@needs_library
@pytest.mark.parametrize("name", [c.name for c in coll.CASES])
def test_library_collectives_run_on_four_ranks_and_match(name):
    _, _, results = run_checkout(LIBRARY, only=name, profile=True)
    (r,) = [r for r in results if r.name == name]
    assert r.outcome == "pass", r.detail
    assert r.profile_s is not None and r.profile_s > 0


def _v_kernel(collective, **kw):
    @jit
    def k(x, meta_in, zeros):
        dst = nl.ndarray(zeros.shape, dtype=zeros.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=dst, src=zeros)
        meta = nl.ndarray(meta_in.shape, dtype=meta_in.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=meta, src=meta_in)
        collective([x], [dst], RING4, meta, **kw)
        return dst, meta

    return k


def test_all_to_all_v_moves_the_counts_the_metadata_gives():
    """Rank s sends src_s[4 j : 4 j + c_sj] to rank j, which writes it in slot s (4 elements);
    row 2 of each rank's metadata gets the counts it received."""
    counts = np.array([[(s + j) % 4 + 1 for j in range(4)] for s in range(4)], np.uint32)
    xs = [(100 * s + np.arange(16, dtype=np.float32)).reshape(4, 4) for s in range(4)]
    per_rank = []
    for s in range(4):
        meta = np.zeros((3, 4), np.uint32)
        meta[0], meta[1] = counts[s], 4 * np.arange(4)
        per_rank.append(((xs[s], meta, np.zeros((4, 4), np.float32)), {}))
    runs = run_ranks(_v_kernel(ncc.all_to_all_v), per_rank)
    for j, res in enumerate(runs):
        dst, meta = res.outputs
        want = np.zeros(16, np.float32)
        for s in range(4):
            c = counts[s, j]
            want[4 * s : 4 * s + c] = xs[s].reshape(-1)[4 * j : 4 * j + c]
        assert np.array_equal(dst.reshape(-1), want)
        assert list(meta[2]) == [int(counts[s, j]) for s in range(4)]
    ops = [i.opcode for i in runs[0].instructions]
    assert Op.ALL_TO_ALL_V in ops


def test_all_to_all_v_with_receive_displacements_and_known_counts():
    xs = [np.full((2, 4), s + 1, np.float32) for s in range(4)]
    per_rank = []
    for s in range(4):
        meta = np.zeros((4, 4), np.uint32)
        meta[0], meta[1] = 2, 0  # 2 elements from the start to everyone
        meta[3] = [6, 4, 2, 0]  # receive from s at 6 - 2 s (reversed order)
        per_rank.append(((xs[s], meta, np.zeros((2, 4), np.float32)), {}))
    k = _v_kernel(ncc.all_to_all_v, has_rdispls=True, recv_counts_known=True)
    for res in run_ranks(k, per_rank):
        dst, meta = res.outputs
        assert list(dst.reshape(-1)) == [4, 4, 3, 3, 2, 2, 1, 1]
        assert list(meta[2]) == [0, 0, 0, 0]  # recv_counts_known: row 2 left as it was


def test_all_gather_v_broadcasts_one_chunk_per_rank_on_lnc2_ranks():
    xs = [(10 * s + np.arange(8, dtype=np.float32)).reshape(2, 4) for s in range(4)]
    per_rank = []
    for s in range(4):
        meta = np.zeros((3, 4), np.uint32)
        meta[0, 0], meta[1, 0] = s + 1, 8 - (s + 1)  # the last s + 1 elements
        per_rank.append(((xs[s], meta, np.zeros((4, 4), np.float32)), {}))
    runs = run_ranks(_v_kernel(ncc.all_gather_v), per_rank, lnc=2)
    want = np.zeros(16, np.float32)
    for s in range(4):
        want[4 * s : 4 * s + s + 1] = xs[s].reshape(-1)[8 - (s + 1) :]
    for res in runs:
        dst, meta = res.outputs
        assert np.array_equal(dst.reshape(-1), want)
        assert list(meta[2]) == [1, 2, 3, 4]


def test_v_collectives_refuse_what_their_docstrings_exclude():
    def args(meta):
        return ((np.zeros((2, 4), np.float32), meta, np.zeros((4, 4), np.float32)), {})

    per_rank = [args(np.zeros((3, 4), np.uint32)) for _ in range(4)]
    with pytest.raises(KernelError, match="exactly 4 ranks per group"):
        run_ranks(_v_kernel(ncc.all_gather_v), per_rank)  # LNC=1
    bad = np.zeros((3, 4), np.uint32)
    bad[0], bad[1] = 3, 7  # 3 elements from 7 of an 8-element source
    with pytest.raises(KernelError, match="send_displ 7"):
        run_ranks(_v_kernel(ncc.all_to_all_v), [args(bad.copy()) for _ in range(4)])
