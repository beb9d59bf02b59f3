"""Inference estimates: TTFT/TPOT behaviour, precision, KV cache."""

import pytest

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
