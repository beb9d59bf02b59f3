"""vllm-neuron's scheduler (``neuron``, native and NxD-Inference forms) and optimum-neuron's
(``optimum-neuron``), one documented behaviour per test.

Upstream: aws-neuron-sdk @ 81ce03ae ``vllm-neuron/docs/design/vllm/neuron-scheduler.md``,
``padding-batching-block-kv.md``, ``decode-context-length-bucketing.md``, ``prefix-caching.md``,
``determine_available_memory_design.md``, ``docs/guides/additional-config.md``;
vllm-project/vllm-neuron @ a5ef7c8 ``vllm_neuron/core/scheduler.py`` and
``vllm_neuron/platform.py``; huggingface/optimum-neuron @ 19457388
``optimum/neuron/vllm/ARCHITECTURE_VLLM_SERVING.md``.
"""

from __future__ import annotations

import pytest

from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan
from trnsim.perf.memory import infer_memory
from trnsim.serve import (
    ClosedLoop,
    Deployment,
    EngineConfig,
    Lengths,
    Synthetic,
    resolve,
    simulate,
)
from trnsim.serve.cost import StepModel
from trnsim.serve.engine import Live, Queues, kv_precision
from trnsim.serve.fitted import HOST_SAMPLING_S_PER_LOGIT, HOST_SAMPLING_STEP_S
from trnsim.serve.kv import KVCache
from trnsim.serve.policies import bucket, neuron, optimum_neuron, pow2_buckets
from trnsim.serve.workload import Request

TRN2 = ParallelPlan(tp=4, ranks_per_chip=4, zero=0, recompute="none")


def dep() -> Deployment:
    return Deployment("llama-3.1-8b", "trn2.48xlarge", TRN2)


def live(rid: int, prompt: int, output: int = 50) -> Live:
    return Live(Request(rid, 0.0, prompt, output), output, 0.0)


def decoding(rid: int, kv: KVCache, prompt: int = 100) -> Live:
    r = live(rid, prompt)
    r.generated = 1.0
    r.computed = float(prompt)
    kv.allocate(r.hold, r.computed)
    return r


def native(**kw):
    cfg = dict(policy="neuron", max_model_len=4096, sampling="device")
    cfg.update(kw)
    return resolve(dep(), EngineConfig(**cfg))


# --- buckets -------------------------------------------------------------------------------


def test_default_prefill_buckets_are_powers_of_two_from_128():
    """neuron-scheduler.md, "Default Buckets": for max_num_batched_tokens 8192,
    [128, 256, 512, 1024, 2048, 4096, 8192]; num_seqs_buckets powers of two from 1."""
    assert pow2_buckets(128, 8192) == (128, 256, 512, 1024, 2048, 4096, 8192)
    assert pow2_buckets(1, 8) == (1, 2, 4, 8)
    assert pow2_buckets(128, 3000) == (128, 256, 512, 1024, 2048, 3000)  # the largest = the max


@pytest.mark.parametrize(
    ("n", "padded"), [(50, 128), (127, 128), (128, 128), (129, 256), (1500, 2048)]
)
def test_bucket_rounding_examples(n, padded):
    """neuron-scheduler.md, "Padding Algorithm" examples."""
    assert bucket(n, pow2_buckets(128, 8192), "prefill") == padded


def test_custom_buckets_round_up():
    """neuron-scheduler.md: "A prefill chunk of 3000 tokens -> padded to 4096 bucket";
    "3 decode requests -> padded to batch size 4"."""
    assert bucket(3000, (512, 1024, 2048, 4096, 8192), "prefill") == 4096
    assert bucket(3, (1, 2, 4, 8), "batch") == 4


def test_the_largest_bucket_must_equal_the_maximum():
    with pytest.raises(ConfigError, match="largest prefill bucket"):
        native(max_num_batched_tokens=8192, prefill_buckets=(512, 1024, 2048))
    with pytest.raises(ConfigError, match="largest batch bucket"):
        native(max_num_seqs=8, batch_buckets=(1, 2, 4))


def test_decode_context_buckets_pick_the_smallest_that_covers_the_batch():
    """decode-context-length-bucketing.md: needed = max(num_computed_tokens) + 1 +
    num_speculative_tokens; the smallest bucket >= needed, else max_model_len."""
    lim = native(max_model_len=16384, context_buckets=(4096, 8192))
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(0, kv, 3000), decoding(1, kv, 5000)]
    plan = neuron.schedule(q, kv, lim, 1)
    assert plan.decode_graph == ("d", 2, 8192)
    q.running.append(decoding(2, kv, 9000))
    assert neuron.schedule(q, kv, lim, 1).decode_graph == ("d", 4, 16384)


def test_without_context_buckets_every_decode_reads_max_model_len():
    """decode-context-length-bucketing.md, "Problem": the block table is sized to
    max_model_len and every decode step reads it."""
    lim = native()
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(0, kv, 100)]
    assert neuron.schedule(q, kv, lim, 1).decode_graph == ("d", 1, 4096)


# --- one prefill per step, priority, segments --------------------------------------------------


def test_one_prefill_per_step_and_decodes_held_back():
    """neuron-scheduler.md: "only one prefill request per iteration"; a new prefill hides the
    running decodes (prefill priority; a step is prefill or decode, never both)."""
    lim = native()
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    q.waiting.extend([live(7, 300), live(8, 300)])
    plan = neuron.schedule(q, kv, lim, 1)
    assert [r.req.rid for r, _ in plan.chunks] == [7]
    assert plan.decodes == [] and plan.kind == "prefill"
    assert plan.graphs == [("p", 512, 0)]


def test_an_unfinished_segment_runs_before_any_admission():
    """neuron-scheduler.md: a request in the middle of a segmented prefill keeps the step
    (``has_prefill_in_running``)."""
    lim = native(max_num_batched_tokens=1024)
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    r = live(0, 3000)
    r.computed = 1024.0
    kv.allocate(r.hold, 1024)
    q.running = [r, decoding(1, kv)]
    q.waiting.append(live(2, 100))
    plan = neuron.schedule(q, kv, lim, 1)
    assert plan.chunks == [(r, 1024)] and plan.graphs == [("p", 1024, 1024)]


@pytest.mark.parametrize(("prompt", "segment", "steps"), [(32000, 8192, 4), (10000, 2048, 5)])
def test_segmented_prefill_counts(prompt, segment, steps):
    """neuron-scheduler.md: 32,000 tokens with max_num_batched_tokens 8192 take 4 iterations;
    prefix-caching.md: 10,000 tokens with 2048 take 5."""
    eng = EngineConfig(
        policy="neuron",
        max_model_len=32768,
        max_num_batched_tokens=segment,
        sampling="device",
        max_num_seqs=8,
    )
    dep70 = Deployment("llama-3.1-8b", "trn3-gen2-ultraserver", ParallelPlan(tp=1))
    res = simulate(dep70, ClosedLoop(1, 1, Synthetic(Lengths(prompt), Lengths(2))), eng)
    assert res.summary()["steps"]["prefill"] == steps


def test_admission_stops_at_max_num_seqs():
    lim = native(max_num_seqs=2)
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(0, kv), decoding(1, kv)]
    q.waiting.append(live(2, 100))
    plan = neuron.schedule(q, kv, lim, 1)
    assert plan.kind == "decode" and plan.stable


def test_admission_is_capped_by_kv_tokens_over_max_model_len():
    """neuron-scheduler.md, "Deadlock Prevention": ``len(running) >= _max_kv_concurrent``
    rejects, with _max_kv_concurrent = KV tokens // max_model_len."""
    lim = native(num_gpu_blocks=3 * 4096 // 32 + 2)
    assert lim.max_kv_concurrent == 3
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    q.waiting.append(live(3, 100))
    assert neuron.schedule(q, kv, lim, 1).kind == "decode"


def test_no_preemption():
    """neuron-scheduler.md: "Preemption is not supported on Neuron": a decode without blocks
    is an error, never a preemption."""
    lim = native()
    kv = KVCache(4, lim.block_size)  # a state with its blocks used up
    q = Queues()
    r = decoding(0, kv, prompt=96)  # 3 blocks, full
    q.running = [r]
    with pytest.raises(ConfigError, match="does not preempt"):
        neuron.schedule(q, kv, lim, 1)


def test_kv_budget_is_capped_at_a_fraction_of_the_memory_budget():
    """determine_available_memory_design.md: available = min(HBM x gmu - weights,
    0.30 x HBM x gmu)."""
    lim = native()
    d = dep()
    mem = infer_memory(d.model, d.plan, d.system.chip, 1, 32, 1, d.precision)
    budget = min(mem.capacity * 0.9 - mem.weights, 0.30 * mem.capacity * 0.9)
    assert lim.num_blocks == int(budget // (lim.kv_bytes_per_token * 32))


def test_native_defaults():
    """reference-configuration.md: block_size 32, prefix caching on, on-device sampling off
    (CPU), async scheduling only with on-device sampling."""
    lim = resolve(dep(), EngineConfig(policy="neuron", max_model_len=4096))
    assert (lim.block_size, lim.prefix_caching, lim.sampling, lim.async_scheduling) == (
        32,
        True,
        "host",
        False,
    )
    assert native().async_scheduling is True
    with pytest.raises(ConfigError, match="on-device sampling"):
        resolve(dep(), EngineConfig(policy="neuron", sampling="host", async_scheduling=True))


# --- the NxD-Inference 0.2.x form ------------------------------------------------------------


def nxdi(**kw):
    cfg = dict(policy="neuron", neuron_form="nxdi", max_model_len=4096, max_num_seqs=8)
    cfg.update(kw)
    return resolve(dep(), EngineConfig(**cfg))


def test_nxdi_kv_is_one_max_model_len_block_per_sequence():
    """vllm_neuron/platform.py: ``block_size = max_model_len`` without prefix caching; the
    loader's default ``pa_num_blocks`` gives one per sequence."""
    lim = nxdi()
    assert (lim.block_size, lim.num_blocks - 1) == (4096, 8)


def test_nxdi_admits_while_running_is_below_max_num_seqs_and_pads_the_batch():
    """scheduler.py ``can_schedule``: running + waiting < max_num_seqs and one waiting; decode
    runs the compiled batch (``batch_size = max_num_seqs``) over a token-generation bucket."""
    lim = nxdi()
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(i, kv, 700) for i in range(3)]
    q.waiting.append(live(5, 1500))
    plan = neuron.schedule(q, kv, lim, 1)
    assert plan.kind == "prefill" and plan.graphs == [("p", 2048, 0)]
    q.waiting.clear()
    assert neuron.schedule(q, kv, lim, 1).graphs == [("d", 8, 1024)]


def test_nxdi_refuses_a_cache_that_does_not_fit():
    with pytest.raises(ConfigError, match="does not fit"):
        nxdi(max_num_seqs=512, max_model_len=32768)


# --- optimum-neuron ------------------------------------------------------------------------------


def test_optimum_neuron_runs_decode_then_prefills_in_one_step():
    """ARCHITECTURE_VLLM_SERVING.md: "The runner always processes decode first (token
    generation graph), then prefill"; vLLM's scheduler admits whole prompts within
    max_num_batched_tokens = max(2048, max_model_len)."""
    lim = resolve(dep(), EngineConfig(policy="optimum-neuron", max_model_len=4096, max_num_seqs=32))
    assert lim.max_num_batched_tokens == 4096
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.running = [decoding(i, kv, 1500) for i in range(2)]
    q.waiting.extend([live(5, 1500), live(6, 1500), live(7, 1500)])
    plan = optimum_neuron.schedule(q, kv, lim, 1)
    assert [r.req.rid for r, _ in plan.chunks] == [5, 6]  # 4096 - 2 decode tokens
    assert plan.graphs == [("d", 32, 2048), ("p", 2048, 0), ("p", 2048, 0)]


def test_optimum_neuron_chunked_prefill_samples_its_first_token_on_the_host():
    """ARCHITECTURE_VLLM_SERVING.md, "Chunked prefill always uses CPU sampling"."""
    lim = resolve(
        dep(),
        EngineConfig(policy="optimum-neuron", max_model_len=4096, prefill_chunk_size=1024),
    )
    kv = KVCache(lim.num_blocks, lim.block_size)
    q = Queues()
    q.waiting.append(live(0, 2500))
    plan = optimum_neuron.schedule(q, kv, lim, 1)
    assert plan.graphs == [("p", 1024, 0), ("p", 1024, 1024), ("p", 1024, 2048)]
    assert plan.host_samples == 1


# --- host sampling ------------------------------------------------------------------------------


def test_host_sampling_costs_a_round_trip_and_the_logits_of_the_real_sequences():
    d = dep()
    dev = EngineConfig(policy="neuron", neuron_form="nxdi", max_model_len=4096, max_num_seqs=32)
    host = EngineConfig(
        policy="neuron", neuron_form="nxdi", max_model_len=4096, max_num_seqs=32, sampling="host"
    )
    lim_d, lim_h = resolve(d, dev), resolve(d, host)
    md = StepModel(d, lim_d, kv_precision(d, dev))
    mh = StepModel(d, lim_h, kv_precision(d, host))
    kv = KVCache(lim_d.num_blocks, lim_d.block_size)
    for n in (1, 3):
        q = Queues()
        q.running = [decoding(i, kv, 1000) for i in range(n)]
        plan = neuron.schedule(q, kv, lim_d, 1)
        assert plan.decode_graph is not None and plan.decode_graph[1] > n  # padded batch
        extra = sum(mh.step(plan)) - sum(md.step(plan))
        want = HOST_SAMPLING_STEP_S + HOST_SAMPLING_S_PER_LOGIT * n * 128256
        assert extra == pytest.approx(want, rel=1e-12)


def test_the_host_sampling_constants_are_the_k3_itl_differences():
    """serving.md K3 (inf2, A device vs B host sampling): one user, 48.22 - 24.51 ms per step
    with one sequence sampled; full load, 123.80 - 59.09 ms with 25.1 sequences per step."""
    one = HOST_SAMPLING_STEP_S + HOST_SAMPLING_S_PER_LOGIT * 128256
    full = HOST_SAMPLING_STEP_S + HOST_SAMPLING_S_PER_LOGIT * 128256 * 25.1
    assert one == pytest.approx(48.22e-3 - 24.51e-3, rel=1e-12)
    assert full == pytest.approx(123.80e-3 - 59.09e-3, rel=1e-12)
    assert HOST_SAMPLING_STEP_S > 0 and HOST_SAMPLING_S_PER_LOGIT > 0
