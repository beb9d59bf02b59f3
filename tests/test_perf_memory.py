"""Memory per rank: accounting identities, ZeRO sharding, over-capacity flagged."""

import pytest

from trnsim.hw import chip
from trnsim.perf import ParallelPlan, estimate_training, precision, train_memory
from trnsim.perf.memory import infer_memory, params_per_rank
from trnsim.workloads import model

BF16 = precision("bf16")


def test_params_split_over_tp_and_pp_sum_to_model():
    m = model("llama-2-7b")
    dense, experts = params_per_rank(m, ParallelPlan(tp=4, pp=1, dp=1))
    assert experts == 0
    assert dense * 4 == pytest.approx(m.n_params)


def test_expert_params_split_over_ep():
    m = model("mixtral-8x7b")
    _, e1 = params_per_rank(m, ParallelPlan(dp=8, ep=1))
    _, e8 = params_per_rank(m, ParallelPlan(dp=8, ep=8))
    assert e1 == pytest.approx(8 * e8)
    assert e1 == pytest.approx(m.expert_params_total)


def test_mixed_precision_is_16_bytes_per_param_without_zero():
    m = model("llama-2-7b")
    mem = train_memory(m, ParallelPlan(zero=0, dp=8), chip("trn3"), 4096, 8, BF16)
    assert (mem.weights + mem.gradients + mem.optimizer) == pytest.approx(16 * m.n_params)


@pytest.mark.parametrize("zero,sharded", [(1, "optimizer"), (2, "gradients"), (3, "weights")])
def test_zero_stages_shard_state(zero, sharded):
    m = model("llama-2-7b")
    base = train_memory(m, ParallelPlan(zero=zero - 1, dp=8), chip("trn3"), 4096, 8, BF16)
    more = train_memory(m, ParallelPlan(zero=zero, dp=8), chip("trn3"), 4096, 8, BF16)
    assert getattr(more, sharded) < getattr(base, sharded) / 4


def test_recompute_reduces_activations():
    m = model("llama-3.1-8b")
    acts = [
        train_memory(
            m, ParallelPlan(tp=8, dp=1, recompute=r), chip("trn3"), 8192, 8, BF16
        ).activations
        for r in ("none", "selective", "full")
    ]
    assert acts[0] > acts[1] > acts[2]


def test_total_is_sum_of_parts():
    mem = infer_memory(model("llama-3-70b"), ParallelPlan(tp=8), chip("trn3"), 8, 4096, 2048, BF16)
    assert mem.total == pytest.approx(mem.weights + mem.activations + mem.kv_cache)


def test_kv_cache_replicated_beyond_kv_heads():
    m = model("llama-3-8b")  # 8 KV heads
    kv8 = infer_memory(m, ParallelPlan(tp=8), chip("trn3"), 1, 8192, 1, BF16).kv_cache
    kv32 = infer_memory(m, ParallelPlan(tp=32), chip("trn3"), 1, 8192, 1, BF16).kv_cache
    assert kv8 == kv32 == pytest.approx(m.kv_cache_elems(8192) * 2 / 8)


def test_over_capacity_plan_is_flagged():
    est = estimate_training(
        "llama-3.1-70b", "trn3-gen2", ParallelPlan(tp=1, dp=8, zero=0), global_batch=8, seq_len=4096
    )
    assert not est.fits
    assert "DOES NOT FIT" in est.memory.explain()
    assert est.assumptions[0].startswith("OVER CAPACITY")
    assert est.as_dict()["fits"] is False
