"""One request at a time, ``trnsim.serve`` reproduces ``trnsim infer``'s TTFT and TPOT (issue 23,
"Must hold"): both run ``trnsim.perf.step.StepCost``, and a request decoding alone is one run
timed by the same quadrature (``decode_offsets``) as infer's TPOT."""

from __future__ import annotations

import math

import pytest

from trnsim.perf import ParallelPlan, Speculative, estimate_inference
from trnsim.perf.step import StepCost
from trnsim.serve import ClosedLoop, Deployment, EngineConfig, Lengths, Synthetic, simulate

CASES = [
    # model, system, plan kwargs, input, output
    ("llama-3.1-8b", "p5.48xlarge", {"tp": 1}, 1000, 200),
    ("llama-3.1-8b", "trn3-gen2-ultraserver", {"tp": 1}, 1500, 250),
    ("llama-3.1-70b", "trn2.48xlarge", {"tp": 16, "ranks_per_chip": 4}, 700, 97),
    ("llama-3.1-70b", "dgx-h200", {"tp": 4, "pp": 2}, 512, 33),
    ("gpt-oss-120b", "dgx-b200", {"tp": 2}, 2048, 64),
    ("llama-3.1-8b", "inf2.48xlarge", {"tp": 8, "ranks_per_chip": 2}, 300, 2),
]


def _alone(dep: Deployment, n_in: int, n_out: int, engine: EngineConfig) -> tuple:
    wl = ClosedLoop(1, 3, Synthetic(Lengths(n_in), Lengths(n_out)))
    res = simulate(dep, wl, engine, keep_records=True)
    assert res.metrics.done == 3
    return res.metrics.records


@pytest.mark.parametrize(("model", "system", "plan", "n_in", "n_out"), CASES)
def test_one_request_at_a_time_is_trnsim_infer(model, system, plan, n_in, n_out):
    p = ParallelPlan(zero=0, recompute="none", **plan)
    est = estimate_inference(model, system, p, batch=1, input_tokens=n_in, output_tokens=n_out)
    dep = Deployment(model, system, p)
    # the vLLM policy (no padding) with a token budget that takes each prompt whole
    engine = EngineConfig(policy="vllm-v1", max_num_batched_tokens=4096, max_model_len=8192)
    for rec in _alone(dep, n_in, n_out, engine):
        ttft, tpot = rec[7], rec[8]
        assert ttft == pytest.approx(est.ttft_s, rel=1e-12, abs=0)
        assert tpot == pytest.approx(est.tpot_s, rel=1e-12, abs=0)


def test_neuron_alone_is_the_padded_infer_step():
    """vllm-neuron pads: alone, a request's TTFT is the prefill of its bucket and every decode
    step reads the whole max_model_len of KV (neuron-scheduler.md; decode-context-length-
    bucketing.md, "Problem"): serve equals StepCost at those shapes exactly."""
    p = ParallelPlan(tp=4, ranks_per_chip=4, zero=0, recompute="none")
    dep = Deployment("llama-3.1-8b", "trn2.48xlarge", p)
    engine = EngineConfig(policy="neuron", max_model_len=4096, sampling="device")
    sc = StepCost("llama-3.1-8b", dep.system, p)
    recs = _alone(dep, 1500, 100, engine)
    ttft = sc.prefill(1, 2048, 2048).total  # 1,500 tokens run in the 2,048 bucket
    tpot = sc.decode(1, 4096).total  # batch bucket 1, context max_model_len
    for rec in recs:
        assert rec[7] == pytest.approx(ttft, rel=1e-12)
        assert rec[8] == pytest.approx(tpot, rel=1e-12)


@pytest.mark.parametrize(
    "system,spec",
    [
        ("dgx-b200", Speculative("llama-3.1-8b", 3, 0.6)),  # a draft model
        ("dgx-b200", Speculative("eagle3", 3)),  # an EAGLE-3 head, its sourced acceptance
        ("trn2.48xlarge", Speculative("eagle3", 3)),  # with NxDI's fitted draft-step overhead
    ],
)
def test_speculative_alone_matches_infer_up_to_the_last_step(system, spec):
    """With speculative decoding a step yields the expected tokens; the request needs whole
    steps, so serve's TPOT is infer's step time x ceil((O - 1) / E) / (O - 1). The draft's
    prefill over the prompt is in both TTFTs."""
    p = ParallelPlan(tp=1, zero=0, recompute="none")
    est = estimate_inference(
        "llama-3.1-70b",
        system,
        p,
        batch=1,
        input_tokens=800,
        output_tokens=120,
        speculative=spec,
        precision_name="fp8",
    )
    dep = Deployment("llama-3.1-70b", system, p, precision="fp8", speculative=spec)
    engine = EngineConfig(policy="vllm-v1", max_num_batched_tokens=4096, max_model_len=8192)
    rec = _alone(dep, 800, 120, engine)[0]
    steps = math.ceil(119 / spec.expected_tokens)
    assert rec[7] == pytest.approx(est.ttft_s, rel=1e-12)
    assert rec[8] == pytest.approx(est.tpot_s * spec.expected_tokens * steps / 119, rel=1e-3)
