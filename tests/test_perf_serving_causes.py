"""The serving causes of issue 22, each a test that failed on the model before it:

- TTFT was the weakest serving metric: prefill too slow on Trn1 and Inferentia2;
- the Inferentia2 ring ran mid-size all-reduces as recursive halving-doubling, several times
  slower than the ring it has;
- speculative decoding assumed a fixed acceptance;
- EAGLE-style drafts had no per-step overhead.
"""

import pytest

from trnsim.fabric import collective_time
from trnsim.perf import ParallelPlan, Speculative, calsets, estimate_inference
from trnsim.perf.infer import ACCEPTANCE

MiB = 2**20


def test_trn1_ttft_mape_is_below_18_percent():
    # 26.4 % before (the prefill of the Llama-3 rows 28-64 % too slow, the HSB rows 46-57 %
    # too fast with one score cost for both attention layouts)
    res = calsets.validate(sets=["C"])
    assert calsets.mape(res, "C", "TTFT ms") < 0.18


def test_inf2_ring_runs_mid_size_all_reduce_as_a_ring():
    # 12 chips on a NeuronLink ring: RDH's distance-doubling partners are up to 6 hops apart
    # (and 4 extra ranks folded over 4 hops); it took 4.4x the ring's time at 12 MiB
    auto = collective_time("all-reduce", 12 * MiB, 12, "inf2.48xlarge")
    ring = collective_time("all-reduce", 12 * MiB, 12, "inf2.48xlarge", algo="ring")
    rdh = collective_time("all-reduce", 12 * MiB, 12, "inf2.48xlarge", algo="rdh")
    assert auto.algo == "ring" and auto.time_s == pytest.approx(ring.time_s)
    assert rdh.time_s > 3 * ring.time_s
    # the 4x4 2D torus of trn1/trn2 is a hypercube: RDH stays the rule there
    assert collective_time("all-reduce", 12 * MiB, 16, "trn1.32xlarge").algo == "rdh"


def test_inf2_prefill_is_not_too_slow():
    # aws-neuron-sdk about-neuron/benchmarks/inf2/latency_data_decoder.csv: Llama-3-70B, TP24
    # on inf2.48xlarge, 1,024 prompt tokens, TTFT p50 310.18 ms (Transformers-NeuronX 2.18.1,
    # the BSH-layout sample); predicted 621 ms (+100 %) before, the ring all-reduces alone
    # 242 ms of it
    plan = ParallelPlan(tp=24, ranks_per_chip=2, pad_heads=True, zero=0, recompute="none")
    est = estimate_inference(
        "llama-3-70b",
        "inf2.48xlarge",
        plan,
        batch=1,
        input_tokens=1024,
        output_tokens=1024,
        max_seq_len=2048,
        stack="transformers-neuronx",
    )
    assert est.ttft_s == pytest.approx(0.31018, rel=0.15)
    assert est.breakdown["prefill_tp_comm"] < 0.2 * est.ttft_s  # was 39 %


def test_speculative_acceptance_is_a_modelled_sourced_quantity():
    # EAGLE-3: the method's published rate, with its source; the vLLM per-position acceptance
    # of a run gives its acceptance length (1 + sum)
    eagle = Speculative("eagle3", 3)
    assert eagle.rate == ACCEPTANCE["eagle3"].rate == pytest.approx(0.635 ** (1 / 3), abs=0.005)
    assert "tutorial-eagle3" in eagle.acceptance_source
    measured = Speculative("eagle3", 3, per_position=(0.865, 0.725, 0.635))
    assert measured.expected_tokens == pytest.approx(3.225)  # the tutorial's 3.22
    mtp = Speculative("mtp", 1)
    assert 0.85 <= mtp.rate <= 0.90 and mtp.expected_tokens == pytest.approx(1 + mtp.rate)
    # acceptance drops with depth: a longer draft gains less per token
    assert Speculative("eagle3", 6).expected_tokens - Speculative("eagle3", 5).expected_tokens < (
        Speculative("eagle3", 2).expected_tokens - Speculative("eagle3", 1).expected_tokens
    )


def test_eagle_draft_steps_carry_an_overhead():
    # vLLM-Neuron EAGLE3 tutorial (set S): Llama-3.1-8B, TP8 (2 Trn2 chips, LNC=2), batch 2,
    # 3 draft tokens, median TPOT 6.41 ms; without a per-step draft overhead the model gave
    # 4.0 ms (-37 %)
    plan = ParallelPlan(tp=8, zero=0, recompute="none", ranks_per_chip=4)
    kw = dict(batch=2, input_tokens=512, output_tokens=128, stack="nxd-inference")
    spec = Speculative("eagle3", 3, per_position=(0.865, 0.725, 0.635))
    est = estimate_inference("llama-3.1-8b", "trn2.48xlarge", plan, speculative=spec, **kw)
    assert est.tpot_s == pytest.approx(6.41e-3, rel=0.1)
    base = estimate_inference("llama-3.1-8b", "trn2.48xlarge", plan, **kw)
    assert est.tpot_s < base.tpot_s  # still a speed-up, as measured (10.52 -> 6.41 ms)
