"""TensorRT-LLM's in-flight batching (``trnsim.serve.policies.trtllm``), one documented
behaviour per test.

Upstream: NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`` @
02a10fed (``GuaranteedNoEvictScheduler``, ``MaxUtilizationScheduler``),
``microBatchScheduler.cpp`` @ 0a949d31 (``MicroBatchScheduler::operator()``,
``setCtxRequestsChunkSize``), ``tensorrt_llm/llmapi/llm_args.py`` @ 00043967 (defaults). The
tests build a state and read the plan (no event loop).
"""

from __future__ import annotations

import pytest

from serve_limits import make_limits
from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan
from trnsim.serve import Deployment, EngineConfig, resolve
from trnsim.serve.engine import Limits, Live, Queues
from trnsim.serve.kv import KVCache
from trnsim.serve.policies import trtllm
from trnsim.serve.workload import Request


def limits(**kw) -> Limits:
    kw.setdefault("capacity_policy", "guaranteed_no_evict")
    return make_limits("trtllm", "trtllm", **kw)


def live(rid: int, prompt: int, output: int = 100) -> Live:
    return Live(Request(rid, 0.0, prompt, output), output, 0.0)


def decoding(rid: int, kv: KVCache, prompt: int = 40, generated: int = 3, output=100) -> Live:
    """A running request past its context phase, holding the blocks of its tokens."""
    r = live(rid, prompt, output)
    r.generated = float(generated)
    r.computed = float(prompt + generated - 1)
    kv.allocate(r.hold, r.computed)
    return r


def test_generation_first_then_context_chunks_in_the_token_budget():
    """microBatchScheduler.cpp: generation requests take one token each first; the context
    gets what is left of ``max_num_tokens``, rounded down to the chunk unit
    (``tokens_per_block``) since it is not its whole remainder."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    new = live(9, 500)
    q.waiting.append(new)
    plan = trtllm.schedule(q, kv, limits(), 1)
    assert plan.decodes == q.running
    assert plan.chunks == [(new, (64 - 3) // 16 * 16)]
    assert [r for r, _ in plan.admitted] == [new]


def test_without_chunked_context_a_long_context_waits_whole():
    """``enable_chunked_context`` off (llm_args.py default): a context that does not fit the
    budget left is not scheduled; admitted-but-idle requests stay in the queue."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    q.waiting.append(live(9, 500))
    plan = trtllm.schedule(q, kv, limits(chunked_prefill=False), 1)
    assert plan.decodes == q.running and not plan.chunks and not plan.admitted
    assert plan.stable  # decode-only, nothing admitted: the loop may run it several times


def test_no_evict_reserves_every_running_request_to_completion():
    """GuaranteedNoEvictScheduler: running requests reserve the blocks of their whole run
    (prompt + all output); a new request is admitted only if its whole run fits in the rest,
    and the first that does not stops the admission (FCFS)."""
    kv = KVCache(30, 16)  # 29 usable blocks
    q = Queues()
    r0 = decoding(0, kv, prompt=40, generated=3, output=100)  # 3 blocks held, 9 for its run
    q.running = [r0]
    big = live(1, 200, 100)  # 19 blocks for its run: fits in 29 - 9 = 20
    small = live(2, 16, 16)  # 2 blocks
    q.waiting.extend([big, small])
    plan = trtllm.schedule(q, kv, limits(max_num_batched_tokens=4096), 1)
    assert [r for r, _ in plan.admitted] == [big]  # 9 + 19 = 28 of 29; small (2) stops
    huge = live(3, 300, 100)  # 25 blocks: with r0's 9 reserved, 29 - 9 = 20 < 25
    q2 = Queues()
    q2.running = [r0]
    q2.waiting.extend([huge, small])
    plan = trtllm.schedule(q2, kv, limits(max_num_batched_tokens=4096), 1)
    assert not plan.admitted  # the head does not fit, so nothing behind it is admitted


def test_max_utilization_pauses_the_last_started_request():
    """MaxUtilizationScheduler: a request whose next step does not fit pauses the last
    started request (from the end of the running list), which frees its blocks."""
    kv = KVCache(8, 16)  # 7 usable blocks
    q = Queues()
    # each holds 2 full blocks (32 tokens computed) and needs a third for its next token
    reqs = [decoding(i, kv, prompt=30, generated=3) for i in range(3)]
    assert kv.free == 1
    q.running = list(reqs)
    plan = trtllm.schedule(q, kv, limits(capacity_policy="max_utilization"), 1)
    assert plan.preempted == [reqs[2]]  # the newest, not the one that did not fit
    assert plan.decodes == reqs[:2] and not plan.admitted


def test_max_utilization_admits_on_the_next_step_only():
    """MaxUtilizationScheduler: a new request needs only its prompt's blocks ("first context
    chunk"), not its whole run as under guaranteed_no_evict."""
    kv = KVCache(12, 16)  # 11 usable blocks
    q = Queues()
    new = live(1, 160, 1000)  # 10 prompt blocks; its whole run would need 73
    q.waiting.append(new)
    lim = limits(max_num_batched_tokens=4096)
    assert not trtllm.schedule(q, kv, lim, 1).admitted
    plan = trtllm.schedule(
        q, kv, limits(max_num_batched_tokens=4096, capacity_policy="max_utilization"), 1
    )
    assert [r for r, _ in plan.admitted] == [new] and plan.chunks == [(new, 160)]


def test_max_batch_size_counts_contexts_and_generations():
    """``max_batch_size`` bounds every request an iteration selects."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    q.waiting.extend(live(10 + i, 20) for i in range(4))
    plan = trtllm.schedule(q, kv, limits(max_num_seqs=4, max_num_batched_tokens=4096), 1)
    assert len(plan.decodes) + len(plan.chunks) == 4
    assert len(plan.admitted) == 1


def _dep(pp: int = 1) -> Deployment:
    return Deployment(
        "llama-3.1-8b", "dgx-h100", ParallelPlan(tp=1, pp=pp, zero=0, recompute="none")
    )


def test_defaults_and_pipeline_streams():
    """llm_args.py defaults (max_batch_size 2048, max_num_tokens 8192, tokens_per_block 32,
    guaranteed_no_evict); with pp > 1 the replica runs pp streams on one KV pool."""
    one = resolve(_dep(), EngineConfig(policy="trtllm"))
    assert (one.max_num_seqs, one.max_num_batched_tokens, one.block_size) == (2048, 8192, 32)
    assert one.capacity_policy == "guaranteed_no_evict" and one.streams == 1
    assert not one.chunked_prefill and one.prefix_caching
    two = resolve(_dep(2), EngineConfig(policy="trtllm", num_gpu_blocks=1000, max_model_len=4096))
    assert two.streams == 2 and two.num_blocks == 1000


def test_pipeline_streams_share_one_kv_pool():
    """TensorRT-LLM has one KV cache manager for all its micro-batches (trtGptModelInflight
    Batching.cpp, forwardAsync: the capacity scheduler of each micro-batch runs over
    ``mKvCacheManager``): the pp streams of a replica draw on one pool, replicas on their own."""
    from trnsim.serve.engine import kv_precision
    from trnsim.serve.loop import Simulation
    from trnsim.serve.metrics import Collector
    from trnsim.serve.policies import policy as get_policy

    dep = Deployment(
        "llama-3.1-8b",
        "dgx-h100",
        ParallelPlan(tp=1, pp=2, zero=0, recompute="none"),
        replicas=2,
    )
    cfg = EngineConfig(policy="trtllm", max_model_len=4096)
    lim = resolve(dep, cfg)
    sim = Simulation(dep, lim, get_policy("trtllm"), kv_precision(dep, cfg), Collector(None))
    pools = [r.kv for r in sim.replicas]
    assert len(pools) == 4
    assert pools[0] is pools[1] and pools[2] is pools[3] and pools[0] is not pools[2]
    assert pools[0].free == lim.num_blocks - 1


def test_trtllm_options_are_refused_elsewhere_and_checked():
    with pytest.raises(ConfigError, match="capacity_policy is TensorRT-LLM's"):
        resolve(_dep(), EngineConfig(policy="vllm-v1", capacity_policy="max_utilization"))
    with pytest.raises(ConfigError, match="capacity_policy must be one of"):
        EngineConfig(policy="trtllm", capacity_policy="greedy")
    with pytest.raises(ConfigError, match=r"kv_free_fraction must be in \(0, 1\]"):
        EngineConfig(policy="trtllm", kv_free_fraction=0.0)
