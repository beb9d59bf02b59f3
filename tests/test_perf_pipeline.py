"""Pipelines the stacks run (issue 22, item 4): interleaved 1F1B with the real bubble, uneven
stages, more virtual stages than layers."""

import pytest

from trnsim.hw import system
from trnsim.perf import ParallelPlan, estimate_training

H100 = system("h100-ib-cluster")


def _est(plan, model="llama-3.1-70b", gb=64, seq=4096):
    return estimate_training(model, H100, plan, global_batch=gb, seq_len=seq)


def test_bubble_is_the_other_stages_time_over_the_virtual_stages():
    """1F1B: m slots of the slowest stage plus the fill and drain of the others, divided by
    the virtual stages (even stages: (pp - 1) / v slots, Narayanan et al. 2021)."""
    plain = _est(ParallelPlan(tp=8, pp=4, dp=2, recompute="none"))
    inter = _est(ParallelPlan(tp=8, pp=4, dp=2, recompute="none", schedule="interleaved", chunks=4))
    mb = plain.micro_batches
    per = plain.step_time_s - plain.breakdown["dp_comm_exposed"] - plain.breakdown["optimizer"]
    assert plain.breakdown["pp_bubble"] > 0
    assert plain.breakdown["pp_bubble"] == pytest.approx(per * 3 / (mb + 3), rel=0.05)
    assert inter.breakdown["pp_bubble"] < plain.breakdown["pp_bubble"] / 2


def test_uneven_stages_set_the_steady_state_by_the_slowest():
    even = _est(ParallelPlan(tp=8, pp=4, dp=2, recompute="none"))
    heavy = _est(ParallelPlan(tp=8, pp=4, dp=2, recompute="none", first_stage_layers=35))
    assert heavy.stage_layers[0] == 35 and sum(heavy.stage_layers) == 80
    assert heavy.step_time_s > even.step_time_s


def test_more_virtual_stages_than_layers_runs():
    """NeMo runs Qwen3-30B-A3B with PP 2 x VP 24 = 48 virtual stages of its 48 layers, and
    layouts with empty stages; PP x VP > layers was refused before."""
    plan = ParallelPlan(pp=2, dp=4, schedule="interleaved", chunks=24, recompute="none")
    est = _est(plan, model="llama-3.1-8b", gb=64)  # 32 layers, 48 virtual stages
    assert est.stage_layers == (16, 16) and est.tokens_per_s > 0


def test_partial_full_recompute_costs_its_layers_only():
    some = _est(ParallelPlan(tp=8, pp=4, dp=2, recompute="full", recompute_layers=5))
    every = _est(ParallelPlan(tp=8, pp=4, dp=2, recompute="full"))
    assert 0 < some.breakdown["recompute"] < every.breakdown["recompute"] / 3
    assert some.memory.activations > every.memory.activations
