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


def test_gb200_llama3_70b_fsdp64_as_nvidia_ran_it_fits():
    """NeMo 25.11 ran Llama3 70B on 64 GB200 with Megatron FSDP, micro-batch 2 x 8,192 tokens
    and 40 of 80 layers' activations offloaded to Grace memory (peers.md J and the recipe);
    the memory model called it DOES NOT FIT before (no offload, FP8 matmul inputs saved in
    2 bytes, fp32 logits)."""
    from trnsim.hw import system

    plan = ParallelPlan(dp=64, micro_batch=2, zero=3, recompute="none", offload_layers=40)
    args = dict(global_batch=256, seq_len=8192, precision_name="fp8")
    sysm = system("gb200-nvl72-ib-cluster")
    est = estimate_training("llama-3-70b", sysm, plan, **args)
    assert est.fits, est.memory.explain()
    assert not estimate_training("llama-3-70b", sysm, plan.replace(offload_layers=0), **args).fits


def test_offloaded_layers_leave_hbm_and_fp8_inputs_are_saved_in_a_byte():
    m = model("llama-3.1-8b")
    plan = ParallelPlan(dp=8, recompute="none")
    full = train_memory(m, plan, chip("gb200"), 8192, 8, BF16)
    half = train_memory(m, plan.replace(offload_layers=16), chip("gb200"), 8192, 8, BF16)
    logits = 8192 * m.vocab * 4.0
    assert half.activations - logits == pytest.approx((full.activations - logits) / 2)
    fp8 = train_memory(m, plan, chip("gb200"), 8192, 8, precision("fp8"))
    assert fp8.activations < full.activations


def test_planner_and_estimate_agree_on_what_fits():
    """One memory model for plan and train: the planner's over-capacity count is exactly the
    candidates whose estimate says DOES NOT FIT (the stack's memory inputs, e.g. NeMo's fused
    cross entropy, in both)."""
    from trnsim.hw import system
    from trnsim.perf.planner import search_training

    sysm = system("dgx-h100")
    cands = [
        ParallelPlan(tp=tp, pp=pp, dp=8 // (tp * pp), micro_batch=mb, zero=z, recompute=rc)
        for tp in (1, 2, 4)
        for pp in (1, 2)
        if 8 % (tp * pp) == 0
        for mb in (1, 4)
        for z in (1, 3)
        for rc in ("none", "full")
    ]
    res = search_training(
        "llama-3.1-8b", sysm, 8, global_batch=64, seq_len=8192, candidates=cands, top=100
    )
    over = sum(
        not estimate_training("llama-3.1-8b", sysm, p, global_batch=64, seq_len=8192).fits
        for p in cands
    )
    assert res.over_capacity == over > 0
    assert all(e.fits for e in res.top)
