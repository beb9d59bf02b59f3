"""Overlap as time (issue 22, item 1): each communication kind hides at most its stack's
fraction of itself and never more than the compute it overlaps."""

import dataclasses

import pytest

from trnsim.hw import system
from trnsim.perf import ParallelPlan, estimate_training
from trnsim.perf.stacks import STACKS
from trnsim.perf.train import hide

MEGATRON = STACKS["megatron-core"]


def _moe_over_ib(**plan_kw):
    """Qwen3-30B-A3B with EP 32 over four DGX-H100 nodes (InfiniBand): a 4,096-token
    micro-batch's all-to-all is several times its compute."""
    plan = ParallelPlan(dp=32, ep=32, micro_batch=1, zero=1, recompute="none", **plan_kw)
    return estimate_training(
        "qwen3-30b-a3b", system("h100-ib-cluster"), plan, global_batch=256, seq_len=4096
    )


def test_an_all_to_all_longer_than_the_compute_is_charged_its_excess():
    """Without the 1F1B all-to-all overlap nothing hides the dispatch and combine; with it,
    at most the compute there is: the excess is always charged (before: 1 % of any size)."""
    est = _moe_over_ib()
    b = est.breakdown
    compute = b["forward"] + b["backward"] + b["recompute"]
    assert b["ep_comm"] > compute
    assert b["comm_exposed"] >= b["ep_comm"] - 1e-12
    ovl = _moe_over_ib(moe_a2a_overlap=True).breakdown
    assert ovl["comm_exposed"] >= ovl["ep_comm"] - compute - 1e-9
    assert ovl["comm_exposed"] < b["comm_exposed"]


def test_hidden_time_is_capped_by_fraction_window_and_compute():
    comm = {"tp": 4.0, "ep": 10.0, "cp": 1.0}
    cap = {"tp": 3.0, "ep": 10.0, "cp": 1.0}
    window = {"tp": 5.0, "ep": 6.0, "cp": 0.5}
    h = hide(comm, cap, window, compute=100.0)
    assert h == {"tp": 3.0, "ep": 6.0, "cp": 0.5}
    # all kinds together never hide more than the compute there is
    h = hide(comm, cap, window, compute=4.75)
    assert sum(h.values()) == pytest.approx(4.75)
    assert all(h[k] <= min(comm[k], cap[k], window[k]) for k in comm)
    assert hide(comm, cap, window, compute=0.0) == {"tp": 0.0, "ep": 0.0, "cp": 0.0}


def test_tp_overlap_is_stated_per_kind_with_sources():
    kinds = dict(MEGATRON.overlap)
    assert set(kinds) == {"tp", "cp", "ep", "pp", "dp"}
    assert all("performance-guide.md" in text for text in kinds.values())
    eff = MEGATRON.roofline
    # one chunk of four TP splits stays exposed (Megatron-Bridge guide, num_splits = 4)
    assert eff.tp_overlap == pytest.approx(0.75)


def test_tp_communication_beyond_the_matmuls_is_exposed():
    """A TP group over InfiniBand (TP 16 on 8-GPU nodes) moves more than its matmuls can hide:
    at least the comm minus everything the matmuls could hide is charged."""
    plan = ParallelPlan(tp=16, dp=2, micro_batch=1, zero=1, recompute="none")
    est = estimate_training(
        "llama-3.1-8b", system("h100-ib-cluster"), plan, global_batch=64, seq_len=4096
    )
    b = est.breakdown
    assert b["tp_comm"] > 0
    assert b["comm_exposed"] >= b["tp_comm"] - 0.75 * b["tp_comm"] - 1e-12


def test_fsdp_prefetch_leaves_the_first_layer_gather_exposed():
    """FSDP gathers each layer's weights one layer ahead under the previous layer's compute;
    the first layer of the step has nothing to hide under (before: all of it hidden)."""
    plan = ParallelPlan(dp=64, micro_batch=1, zero=3, recompute="none")
    est = estimate_training(
        "llama-3.1-70b", system("h100-ib-cluster"), plan, global_batch=128, seq_len=4096
    )
    assert est.breakdown["dp_comm_exposed"] > 0
    assert est.breakdown["fsdp_comm"] > 0


def test_cp_ring_hides_only_under_attention():
    """Context parallelism's K/V exchange overlaps the attention of the sequence chunks, not
    the rest of the layer: with the attention made very fast, the CP traffic is exposed."""
    plan = ParallelPlan(cp=8, dp=1, micro_batch=1, zero=1, recompute="none")
    args = dict(global_batch=8, seq_len=32768)
    sysm = system("h100-ib-cluster")
    base = MEGATRON.roofline
    slow = estimate_training("llama-3.1-8b", sysm, plan, eff=base, **args)
    fast = estimate_training(
        "llama-3.1-8b", sysm, plan, eff=dataclasses.replace(base, attention=1.0), **args
    )
    assert slow.breakdown["cp_comm"] > 0
    assert fast.breakdown["comm_exposed"] >= slow.breakdown["comm_exposed"]
