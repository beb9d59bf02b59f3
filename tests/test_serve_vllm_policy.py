"""vLLM V1's scheduler (``trnsim.serve.policies.vllm_v1``), one documented behaviour per test.

Upstream: vllm-project/vllm ``vllm/v1/core/sched/scheduler.py`` @ 00024d31 (``schedule``),
``vllm/v1/core/kv_cache_manager.py`` @ 003df296, ``vllm/engine/arg_utils.py`` (batch
defaults). The policy is a pure function of the queues and the KV cache: the tests build a
state and read the plan (no event loop).
"""

from __future__ import annotations

import pytest

from serve_limits import make_limits
from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan
from trnsim.serve import Deployment, EngineConfig, resolve
from trnsim.serve.engine import Limits, Live, Queues
from trnsim.serve.kv import KVCache
from trnsim.serve.policies import vllm_v1
from trnsim.serve.workload import Request


def limits(**kw) -> Limits:
    return make_limits("vllm-v1", "v1", **kw)


def live(rid: int, prompt: int, output: int = 100) -> Live:
    return Live(Request(rid, 0.0, prompt, output), output, 0.0)


def decoding(rid: int, kv: KVCache, prompt: int = 40, generated: int = 3) -> Live:
    """A running request past its prefill, holding the blocks of its tokens."""
    r = live(rid, prompt)
    r.generated = float(generated)
    r.computed = float(prompt + generated - 1)
    kv.allocate(r.hold, r.computed)
    return r


def test_running_first_then_waiting_in_the_token_budget():
    """scheduler.py: "First, schedule the RUNNING requests" (one token each here), "Next,
    schedule the WAITING requests" with what is left of ``max_num_batched_tokens``: the new
    prompt gets a chunk of budget - decodes tokens (chunked prefill)."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    new = live(9, 500)
    q.waiting.append(new)
    plan = vllm_v1.schedule(q, kv, limits(), 1)
    assert plan.decodes == q.running
    assert plan.chunks == [(new, 64 - 3)]
    assert plan.kind == "mixed"  # chunked prefill mixes into the decode step
    assert [r for r, _ in plan.admitted] == [new]


def test_a_running_prefill_continues_before_decodes_of_later_requests():
    """Running requests are taken in order, each asking for its remaining tokens: a prompt
    admitted earlier keeps its place in the running list and its next chunk comes first."""
    kv = KVCache(1000, 16)
    q = Queues()
    first = live(0, 200)
    first.computed = 64.0
    kv.allocate(first.hold, 64)
    q.running = [first, decoding(1, kv)]
    plan = vllm_v1.schedule(q, kv, limits(), 1)
    assert plan.chunks == [(first, 64)]  # the whole budget
    assert plan.decodes == []


def test_long_prefill_token_threshold_caps_a_prompt_per_step():
    """scheduler.py: ``if 0 < long_prefill_token_threshold < num_new_tokens``."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.waiting.append(live(0, 500))
    plan = vllm_v1.schedule(q, kv, limits(long_prefill_token_threshold=20), 1)
    assert plan.chunks[0][1] == 20


def test_max_num_seqs_caps_admission():
    """scheduler.py: ``if len(self.running) == self.max_num_running_reqs: break``."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(2)]
    q.waiting.extend([live(5, 10), live(6, 10)])
    plan = vllm_v1.schedule(q, kv, limits(max_num_seqs=3), 1)
    assert [r.req.rid for r, _ in plan.admitted] == [5]


def test_chunked_prefill_off_leaves_a_prompt_longer_than_the_budget_waiting():
    """scheduler.py: without chunked prefill, ``num_new_tokens > token_budget`` stops the
    waiting loop."""
    kv = KVCache(1000, 16)
    q = Queues()
    q.waiting.append(live(0, 100))
    assert vllm_v1.schedule(q, kv, limits(chunked_prefill=False), 1).empty
    assert not vllm_v1.schedule(q, kv, limits(chunked_prefill=True), 1).empty


def test_preemption_takes_the_newest_running_request():
    """scheduler.py: when ``allocate_slots`` fails, ``preempted_req = self.running.pop()``
    (FCFS: the last of the running list) and the request retries; nothing is admitted from the
    waiting queue in a step that preempted (``if not preempted_reqs``)."""
    kv = KVCache(8, 16)  # 7 usable blocks
    q = Queues()
    a = decoding(0, kv, prompt=32, generated=1)  # 32 tokens: 2 blocks, full
    b = decoding(1, kv, prompt=32, generated=1)
    c = decoding(2, kv, prompt=40, generated=1)  # 3 blocks
    q.running = [a, b, c]
    q.waiting.append(live(7, 10))
    assert kv.free == 0
    plan = vllm_v1.schedule(q, kv, limits(), 1)
    assert plan.preempted == [c]  # the newest goes; its 3 blocks let a and b grow
    assert plan.decodes == [a, b]
    assert plan.admitted == []


def test_a_request_that_preempts_itself_stops_the_step():
    """scheduler.py: ``if preempted_req == request: break`` (no more to preempt)."""
    kv = KVCache(3, 16)  # 2 usable blocks
    q = Queues()
    a = decoding(0, kv, prompt=32, generated=1)  # needs a third block to grow
    q.running = [a]
    plan = vllm_v1.schedule(q, kv, limits(), 1)
    assert plan.preempted == [a]
    assert plan.empty


def test_a_preempted_request_recomputes_its_prompt_and_outputs():
    """scheduler.py ``_preempt_request``: ``num_computed_tokens = 0``; back in the waiting
    queue it is scheduled for ``request.num_tokens`` (prompt and generated tokens)."""
    r = live(0, 100)
    r.generated = 5.0
    r.computed = 0.0
    assert r.pending() == 100 + 5 - 1


def test_prefix_hits_are_taken_at_admission():
    """get_computed_blocks at admission: the hit tokens are not recomputed; the chunk is the
    rest of the prompt."""
    kv = KVCache(100, 4, prefix_caching=True)
    ids = tuple(range(20))
    old = Live(Request(0, 0.0, 20, 5, ids, 1), 5, 0.0)
    kv.lookup(old.hold, ids, 1, 20)
    kv.allocate(old.hold, 20)
    kv.register(old.hold, 20)
    q = Queues()
    new = Live(Request(1, 0.0, 20, 5, ids, 1), 5, 0.0)
    q.waiting.append(new)
    plan = vllm_v1.schedule(q, kv, limits(block_size=4, prefix_caching=True), 1)
    ((_r, hits),) = plan.admitted
    assert len(hits) == 4  # (20 - 1) // 4 full blocks: the last token is recomputed
    assert plan.chunks == [(new, 20 - 16)]


def test_a_decode_only_plan_with_a_blocked_queue_is_stable():
    kv = KVCache(1000, 16)
    q = Queues()
    q.running = [decoding(i, kv) for i in range(3)]
    q.waiting.append(live(9, 10))
    plan = vllm_v1.schedule(q, kv, limits(max_num_seqs=3), 1)
    assert plan.stable and plan.kind == "decode"


def test_defaults_follow_device_memory():
    """arg_utils.py: >= 70 GiB (and not an A100): 8192 tokens and 1024 sequences for the
    OpenAI server; otherwise 2048 and 256; block size 16; prefix caching on in V1."""
    plan = ParallelPlan(tp=1, zero=0, recompute="none")
    h100 = resolve(
        Deployment("llama-3.1-8b", "p5.48xlarge", plan), EngineConfig(max_model_len=8192)
    )
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    assert (h100.block_size, h100.prefix_caching) == (16, True)
    trn2 = resolve(
        Deployment("llama-3.1-8b", "trn2.48xlarge", ParallelPlan(tp=4, ranks_per_chip=4)),
        EngineConfig(max_model_len=8192),
    )
    assert (trn2.max_num_batched_tokens, trn2.max_num_seqs) == (2048, 256)


def test_kv_capacity_is_hbm_times_utilization_less_weights_and_activations():
    dep = Deployment("llama-3.1-8b", "p5.48xlarge", ParallelPlan(tp=1, zero=0, recompute="none"))
    lim = resolve(dep, EngineConfig(max_model_len=8192, gpu_memory_utilization=0.5))
    lim9 = resolve(dep, EngineConfig(max_model_len=8192, gpu_memory_utilization=0.9))
    per_block = lim.kv_bytes_per_token * lim.block_size
    # 0.4 of the HBM more, all of it KV
    assert (lim9.num_blocks - lim.num_blocks) * per_block == pytest.approx(0.4 * 80e9, rel=1e-3)


def test_a_model_that_does_not_fit_is_refused():
    dep = Deployment("llama-3.1-70b", "p5.48xlarge", ParallelPlan(tp=1, zero=0, recompute="none"))
    with pytest.raises(ConfigError, match="does not fit"):
        resolve(dep, EngineConfig(max_model_len=8192))
