"""nki.collectives inside kernels: functional across the cores of an LNC=2 launch (values
against NumPy references written here), recorded for the timing model and costed as a ring
over the DMA engines; illegal calls name the rule, the values and the kernel's file:line."""

import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as ncc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import costs
from trnsim.core.isa import Op
from trnsim.core.timing import schedule
from trnsim.errors import KernelError

HERE = "test_nki_isa_new_collectives.py"
LINE: dict[str, int] = {}
RG = ncc.ReplicaGroup([[0, 1]])


def _run2(kernel, *args):
    return nki.run(kernel, *args, lnc=2)


def _per_rank_input(x):
    """Rank r works on x[r] (a [2, ...] input)."""
    r = ncc.rank_id()
    return x[r]


def test_all_reduce_on_hbm_and_sbuf_gives_every_rank_the_sum():
    def k(x):
        out = nl.ndarray((2, 64, 32), nl.float32, buffer=nl.shared_hbm)
        r = ncc.rank_id()
        src = nl.ndarray((64, 32), nl.float32, buffer=nl.hbm)
        nisa.dma_copy(src, x[r])
        dst = nl.ndarray((64, 32), nl.float32, buffer=nl.hbm)
        ncc.all_reduce([src], [dst], RG, nl.add)
        sb = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(sb, x[r])
        sb_out = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        ncc.all_reduce(sb, sb_out, RG, nl.maximum)
        nisa.dma_copy(out[r], dst) if r == 0 else nisa.dma_copy(out[r], sb_out)
        return out

    x = np.random.default_rng(1).standard_normal((2, 64, 32)).astype(np.float32)
    out = _run2(k, x).outputs
    assert np.array_equal(out[0], x[0] + x[1])
    assert np.array_equal(out[1], np.maximum(x[0], x[1]))


def test_all_gather_reduce_scatter_all_to_all_and_permute_values():
    def k(x):
        r = ncc.rank_id()
        src = nl.ndarray((8, 16), nl.bfloat16, buffer=nl.hbm)
        nisa.dma_copy(src, x[r])
        g = nl.ndarray((16, 16), nl.bfloat16, buffer=nl.hbm)
        ncc.all_gather([src], [g], RG, collective_dim=0)
        rs = nl.ndarray((4, 16), nl.bfloat16, buffer=nl.hbm)
        ncc.reduce_scatter([src], [rs], RG, collective_dim=0, op=nl.add)
        a2a = nl.ndarray((8, 16), nl.bfloat16, buffer=nl.hbm)
        ncc.all_to_all([src], [a2a], RG, collective_dim=0)
        pm = nl.ndarray((8, 16), nl.bfloat16, buffer=nl.hbm)
        ncc.collective_permute([src], [pm], [(0, 1), (1, 0)])
        outs = []
        for t in (g, rs, a2a, pm):
            o = nl.ndarray((2, *t.shape), nl.bfloat16, buffer=nl.shared_hbm)
            nisa.dma_copy(o[r], t)
            outs.append(o)
        return tuple(outs)

    bf = ml_dtypes.bfloat16
    x = np.random.default_rng(2).standard_normal((2, 8, 16)).astype(bf)
    g, rs, a2a, pm = _run2(k, x).outputs
    for r in range(2):
        assert g[r].tobytes() == np.concatenate([x[0], x[1]]).tobytes()
        total = (x[0].astype(np.float32) + x[1].astype(np.float32)).astype(bf)
        assert rs[r].tobytes() == total[4 * r : 4 * r + 4].tobytes()
        assert (
            a2a[r].tobytes()
            == np.concatenate([x[0][4 * r : 4 * r + 4], x[1][4 * r : 4 * r + 4]]).tobytes()
        )
        assert pm[r].tobytes() == x[1 - r].tobytes()


def test_collectives_are_recorded_and_costed_as_a_ring_of_dma_steps():
    def k(x):
        r = ncc.rank_id()
        src = nl.ndarray((128, 512), nl.float32, buffer=nl.hbm)
        nisa.dma_copy(src, x[r])
        dst = nl.ndarray((128, 512), nl.float32, buffer=nl.hbm)
        ncc.all_reduce([src], [dst], RG, nl.add)
        out = nl.ndarray((2, 128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out[r], dst)
        return out

    run = _run2(k, np.ones((2, 128, 512), np.float32))
    ar = [i for i in run.instructions if i.opcode is Op.ALL_REDUCE]
    assert len(ar) == 2 and ar[0].attr("ranks") == (0, 1)
    spec = run.cores[0].spec
    model = costs.DmaModel.for_core(spec)
    c = costs.dma_cost(ar[0], model)
    # 2 ranks: 2 ring steps, 2 * (n - 1) / n = 1 message of bytes moved per rank
    assert c.latency_s == pytest.approx(2 * spec.dma.fixed_latency_s)
    assert c.nbytes == 128 * 512 * 4
    prof = schedule(run.instructions, spec)
    assert prof.total_s > c.latency_s + c.data_s  # the copies in and out come on top


def _bad_group():
    LINE["at"] = sys._getframe(1).f_lineno + 1


def test_illegal_collectives_name_rule_values_and_line():
    def partial_group():
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.hbm)
        _bad_group()
        ncc.all_reduce([t], [t], ncc.ReplicaGroup([[0]]), nl.add)

    def wrong_gather_shape():
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.hbm)
        d = nl.ndarray((4, 4), nl.float32, buffer=nl.hbm)
        _bad_group()
        ncc.all_gather([t], [d], RG, 0)

    def sbuf_all_to_all():
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        _bad_group()
        ncc.all_to_all([t], [t], RG, 0)

    for kernel, rule, values in (
        (partial_group, "replica-group", ("[[0]]", "[0, 1]")),
        (wrong_gather_shape, "collective", ("dst [4, 4] must be [8, 4]",)),
        (sbuf_all_to_all, "memory", ("SBUF",)),
    ):
        with pytest.raises(KernelError) as info:
            _run2(kernel)
        assert info.value.rule == rule, str(info.value)
        for v in values:
            assert v in str(info.value), (v, str(info.value))
        assert f"{HERE}:{LINE['at']}" in str(info.value)


def test_all_gather_v_keeps_the_docstrings_current_limitations():
    """all_gather_v: LNC=2 and exactly 4 ranks per group; the two programs of a kernel[2]
    launch are a group of 2 (values across 4 ranks: tests/test_conf_coll.py)."""

    def k():
        t = nl.ndarray((8,), nl.float32, buffer=nl.hbm)
        meta = nl.ndarray((3, 2), nl.uint32, buffer=nl.hbm)
        ncc.all_gather_v([t], [t], RG, meta)

    with pytest.raises(KernelError, match="exactly 4 ranks per group") as info:
        _run2(k)
    assert info.value.rule == "collective"


def test_sbuf_all_gather_along_the_free_axis_and_timing_only_recording():
    def k(x):
        r = ncc.rank_id()
        t = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(t, x[r])
        g = nl.ndarray((128, 32), nl.float32, buffer=nl.sbuf)
        ncc.all_gather(srcs=[t], dsts=[g], replica_group=RG, collective_dim=1)
        out = nl.ndarray((2, 128, 32), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out[r], g)
        return out

    x = np.random.default_rng(3).standard_normal((2, 128, 16)).astype(np.float32)
    out = _run2(k, x).outputs
    for r in range(2):
        assert np.array_equal(out[r], np.concatenate([x[0], x[1]], axis=1))
    timing = nki.run(k, x, lnc=2, functional=False)
    assert sum(i.opcode is Op.ALL_GATHER for i in timing.instructions) == 2


def test_a_collective_starts_when_every_core_has_its_inputs():
    """Core 1 reaches the all-reduce at once, core 0 only after a long load: in the timing
    model neither core's all-reduce starts before core 0's input is ready (the k-th
    collective of each core meets; ``timing._rendezvous``)."""

    def k(x, big):
        r = ncc.rank_id()
        src = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        if r == 0:
            pad = nl.ndarray(big.shape, big.dtype, buffer=nl.sbuf)
            nisa.dma_copy(pad, big)  # a long transfer on core 0 only
            nisa.tensor_copy(src, pad[0:64, 0:32])
        else:
            nisa.dma_copy(src, x[r])
        dst = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        ncc.all_reduce(src, dst, RG, nl.add)
        out = nl.ndarray((64, 32), nl.float32, buffer=nl.hbm)
        nisa.dma_copy(out, dst)

    x = np.zeros((2, 64, 32), np.float32)
    big = np.zeros((128, 16384), np.float32)
    rec = _run2(k, x, big).instructions
    s = schedule(rec, "gen4").schedule
    ar = [i for i, ins in enumerate(rec) if ins.opcode is Op.ALL_REDUCE]
    feed0 = next(i for i, ins in enumerate(rec) if ins.opcode is Op.TENSOR_COPY)
    assert len(ar) == 2 and rec[ar[0]].core != rec[ar[1]].core
    assert all(s.start[i] >= s.end[feed0] for i in ar)
    assert s.start[ar[0]] == s.start[ar[1]]  # same queues, same inputs bound: they start together
