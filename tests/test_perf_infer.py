"""Inference estimates: TTFT/TPOT behaviour, precision, KV cache."""

import pytest

from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan, estimate_inference


def _est(**kw):
    args = dict(batch=4, input_tokens=1024, output_tokens=256)
    plan = kw.pop("plan", ParallelPlan(tp=4))
    model = kw.pop("model", "llama-3.1-70b")
    args.update(kw)
    return estimate_inference(model, "trn3-gen2", plan, **args)


def test_longer_prompts_take_longer_to_first_token():
    assert _est(input_tokens=4096).ttft_s > _est(input_tokens=1024).ttft_s


def test_bigger_batch_raises_throughput_and_tpot():
    small, big = _est(batch=1), _est(batch=32)
    assert big.throughput_tokens_per_s > small.throughput_tokens_per_s
    assert big.tpot_s >= small.tpot_s


def test_smaller_weights_decode_faster():
    bf16 = _est(batch=1, precision_name="bf16")
    fp4 = _est(batch=1, precision_name="mxfp4")
    assert fp4.tpot_s < bf16.tpot_s
    assert fp4.memory.weights == pytest.approx(bf16.memory.weights * (0.5 + 1 / 32) / 2)


def test_throughput_identity():
    e = _est(plan=ParallelPlan(tp=4, dp=2))
    assert e.throughput_tokens_per_s == pytest.approx(2 * 4 * 256 / e.e2e_latency_s)
    assert e.e2e_latency_s == pytest.approx(e.ttft_s + 256 * e.tpot_s)


def test_kv_cache_grows_with_context():
    assert _est(input_tokens=8192).memory.kv_cache == pytest.approx(
        _est(input_tokens=1024 + 8192 - 1024).memory.kv_cache
    )
    assert _est(input_tokens=8192).memory.kv_cache > _est().memory.kv_cache


def test_moe_decode_reads_fewer_weights_than_dense_of_same_size():
    moe = _est(model="mixtral-8x7b", batch=1, plan=ParallelPlan(tp=1))
    assert moe.tpot_s > 0 and moe.fits


def test_over_capacity_is_flagged():
    e = estimate_inference(
        "llama-3.1-405b",
        "trn3-gen2",
        ParallelPlan(tp=1),
        batch=1,
        input_tokens=128,
        output_tokens=8,
    )
    assert not e.fits
    assert e.assumptions[0].startswith("OVER CAPACITY")


def test_json_has_documented_keys():
    d = _est().as_dict()
    for k in ("ttft_s", "tpot_s", "memory_per_chip_bytes", "throughput_tokens_per_s"):
        assert k in d


def test_moe_decode_charges_only_touched_experts_sized_by_their_tokens():
    """Issue 15 defect: a decode step of GPT-OSS-120B charged each of 128 experts a kernel call
    for 0.03 rows, so the kernel-table TPOT came out far above the roofline's."""
    from trnsim.perf import ParallelPlan, RooflineComputeModel
    from trnsim.perf.compute import rank_work
    from trnsim.perf.precision import precision
    from trnsim.workloads import expected_experts_touched, forward_graph, model

    m = model("gpt-oss-120b")
    g = forward_graph(m, 1, 1, 2048, phase="decode")
    plan = ParallelPlan(tp=16, ranks_per_chip=1)
    (op,) = [o for grp in g.groups for o in grp.ops if o.name == "expert_up"][:1]
    w = rank_work(op, g, plan, precision("bf16"))
    assert w.count == pytest.approx(expected_experts_touched(m.top_k, m.n_experts, m.top_k))
    assert w.m == pytest.approx(1.0)  # one token per touched expert
    kw = dict(batch=1, input_tokens=1024, output_tokens=256)
    tab = estimate_inference("gpt-oss-120b", "trn2.48xlarge", plan, **kw)
    roof = estimate_inference(
        "gpt-oss-120b", "trn2.48xlarge", plan, compute_model=RooflineComputeModel(), **kw
    )
    assert tab.tpot_s == pytest.approx(roof.tpot_s, rel=0.25)


def test_moe_imbalance_slows_the_busiest_rank():
    from trnsim.perf import ParallelPlan

    kw = dict(batch=64, input_tokens=1024, output_tokens=64)
    base = estimate_inference("mixtral-8x7b", "trn2.48xlarge", ParallelPlan(tp=4, dp=4, ep=4), **kw)
    skew = estimate_inference(
        "mixtral-8x7b",
        "trn2.48xlarge",
        ParallelPlan(tp=4, dp=4, ep=4, moe_imbalance=1.5),
        **kw,
    )
    assert skew.ttft_s > base.ttft_s


def test_speculative_decoding_expected_tokens_and_tpot():
    from trnsim.perf import Speculative

    s = Speculative("llama-3.1-8b", tokens=4, acceptance=0.5)
    assert s.expected_tokens == pytest.approx(1 + 0.5 + 0.25 + 0.125 + 0.0625)
    assert Speculative("llama-3.1-8b", tokens=3, acceptance=1.0).expected_tokens == 4
    assert Speculative("llama-3.1-8b", tokens=3, acceptance=0.0).expected_tokens == 1
    plan = ParallelPlan(tp=16)
    kw = dict(batch=1, input_tokens=2048, output_tokens=256)
    base = estimate_inference("llama-3.3-70b", "trn2.48xlarge", plan, **kw)
    good = estimate_inference(
        "llama-3.3-70b",
        "trn2.48xlarge",
        plan,
        speculative=Speculative("llama-3.1-8b", 4, 0.8),
        **kw,
    )
    bad = estimate_inference(
        "llama-3.3-70b",
        "trn2.48xlarge",
        plan,
        speculative=Speculative("llama-3.1-8b", 4, 0.05),
        **kw,
    )
    assert good.tpot_s < base.tpot_s < bad.tpot_s  # a poor draft only adds work
    assert good.memory.weights > base.memory.weights  # the draft's weights are held too
    # the draft prefills the prompt too: TTFT grows by exactly its prefill pass
    assert good.ttft_s == pytest.approx(base.ttft_s + good.breakdown["draft_prefill"])
    assert good.breakdown["draft_prefill"] > 0


def test_prefix_caching_prefills_only_the_uncached_tokens():
    plan = ParallelPlan(tp=16)
    kw = dict(batch=1, input_tokens=8192, output_tokens=64)
    cold = estimate_inference("llama-3.3-70b", "trn2.48xlarge", plan, **kw)
    warm = estimate_inference("llama-3.3-70b", "trn2.48xlarge", plan, prefix_hit=0.75, **kw)
    assert warm.ttft_s < 0.4 * cold.ttft_s
    assert warm.tpot_s == cold.tpot_s
    with pytest.raises(ConfigError, match="prefix_hit"):
        estimate_inference("llama-3.3-70b", "trn2.48xlarge", plan, prefix_hit=1.0, **kw)


def test_moe_all_to_all_is_sized_by_routed_tokens_and_scaled_by_imbalance():
    """Dispatch and combine carry top_k x tokens x d x bytes per rank over the EP group; the
    busiest rank (``moe_imbalance``) receives more and the exchange waits for it."""
    from trnsim.hw import system
    from trnsim.perf import ParallelPlan, comm
    from trnsim.perf.infer import _comm_per_pass
    from trnsim.perf.precision import precision
    from trnsim.workloads import model

    m = model("mixtral-8x7b")
    prec = precision("bf16")
    sysm = system("trn2.48xlarge")
    plan = ParallelPlan(tp=4, dp=4, ep=4, sequence_parallel=False)
    assert comm.moe_dispatch_bytes(64, 2, 4096, 2, plan) == 64 * 2 * 4096 * 2
    sp = plan.replace(sequence_parallel=True)
    assert comm.moe_dispatch_bytes(64, 2, 4096, 2, sp) == 64 * 2 * 4096 * 2 / 4
    skew = plan.replace(moe_imbalance=1.5)
    assert comm.moe_dispatch_bytes(64, 2, 4096, 2, skew) == 1.5 * 64 * 2 * 4096 * 2
    _, ep_c, _ = _comm_per_pass(m, plan, sysm, 64, prec)
    a2a = 64 * m.top_k * m.d_model * prec.act_bytes
    assert ep_c == pytest.approx(2 * m.n_moe_layers * comm.ep_time("all-to-all", a2a, plan, sysm))
    _, ep_skew, _ = _comm_per_pass(m, skew, sysm, 64, prec)
    assert ep_skew > ep_c
    # twice the routed tokens: more bytes, so a longer exchange
    _, ep_2x, _ = _comm_per_pass(m, plan, sysm, 128, prec)
    assert ep_2x > ep_c
    kw = dict(batch=64, input_tokens=1024, output_tokens=64)
    base = estimate_inference("mixtral-8x7b", sysm, plan, **kw)
    slow = estimate_inference("mixtral-8x7b", sysm, skew, **kw)
    assert slow.breakdown["prefill_ep_comm"] > base.breakdown["prefill_ep_comm"]
    assert slow.breakdown["decode_ep_comm"] > base.breakdown["decode_ep_comm"]
    assert slow.breakdown["prefill_compute"] > base.breakdown["prefill_compute"]


def test_moe_imbalance_scales_training_all_to_all_and_compute():
    from trnsim.perf import ParallelPlan, estimate_training

    kw = dict(global_batch=64, seq_len=2048)
    plan = ParallelPlan(tp=4, dp=8, ep=8, micro_batch=1)
    base = estimate_training("mixtral-8x7b", "trn2-ultraserver", plan, **kw)
    skew = estimate_training(
        "mixtral-8x7b", "trn2-ultraserver", plan.replace(moe_imbalance=2.0), **kw
    )
    assert skew.breakdown["ep_comm"] > base.breakdown["ep_comm"]
    assert skew.step_time_s > base.step_time_s


def test_blockwise_moe_prefill_computes_every_provisioned_block():
    """NxD Inference's dropless MoE prefill: ceil(T k / B) + E - 1 blocks of B rows, all
    computed; decode and stacks without blocks size each expert's matmul by its tokens."""
    from trnsim.perf import ParallelPlan
    from trnsim.perf.compute import moe_blocks, rank_work
    from trnsim.perf.precision import precision
    from trnsim.workloads import forward_graph, model

    assert moe_blocks(6, 3, 4) == 2 + 2  # the deep dive's 6 tokens, 3 experts, block 4
    assert moe_blocks(2000, 8, 256) == 15  # and its 1,000 tokens x top-2 example
    m = model("gpt-oss-120b")
    g = forward_graph(m, 1, 512, 512, phase="prefill")
    plan = ParallelPlan(tp=16, ranks_per_chip=4)
    (op,) = [o for grp in g.groups for o in grp.ops if o.name == "expert_up"][:1]
    plain = rank_work(op, g, plan, precision("bf16"))
    block = rank_work(op, g, plan, precision("bf16"), moe_block=512)
    blocks = moe_blocks(512 * m.top_k, m.n_experts, 512)
    assert block.flops == pytest.approx(plain.flops * blocks * 512 / (512 * m.top_k))
    assert block.m == 512 and block.count == pytest.approx(blocks)
    kw = dict(batch=1, input_tokens=512, output_tokens=128)
    nxd = estimate_inference("gpt-oss-120b", "trn2.48xlarge", plan, **kw)
    tnx = estimate_inference(
        "gpt-oss-120b", "trn2.48xlarge", plan, stack="transformers-neuronx", **kw
    )
    assert nxd.breakdown["prefill_compute"] > 2 * tnx.breakdown["prefill_compute"]
    # the stack's block size is what changes the MoE prefill; dense models are untouched
    from dataclasses import replace

    from trnsim.perf.stacks import STACKS

    no_block = replace(STACKS["nxd-inference"], moe_prefill_block=0)
    nb = estimate_inference("gpt-oss-120b", "trn2.48xlarge", plan, stack=no_block, **kw)
    assert nb.tpot_s == pytest.approx(nxd.tpot_s) and nb.ttft_s < nxd.ttft_s / 2
    dense = ParallelPlan(tp=8, ranks_per_chip=4)
    d0 = estimate_inference("llama-3.1-8b", "trn2.48xlarge", dense, stack=no_block, **kw)
    d1 = estimate_inference("llama-3.1-8b", "trn2.48xlarge", dense, **kw)
    assert d1.ttft_s == pytest.approx(d0.ttft_s)
