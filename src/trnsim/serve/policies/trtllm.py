"""TensorRT-LLM's in-flight batching scheduler (``trtllm``), written here from its source:
NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`` @ 02a10fed
(``MaxUtilizationScheduler``, ``GuaranteedNoEvictScheduler``), ``microBatchScheduler.cpp`` @
0a949d31 (``MicroBatchScheduler::operator()``, ``setCtxRequestsChunkSize``),
``kvCacheManager.cpp`` (``getNeededBlocksOneStep``) and the defaults of
``tensorrt_llm/llmapi/llm_args.py`` @ 00043967.

One iteration is two schedulers, one after the other, over the active requests in arrival
order (requests already running come before new ones):

1. **Capacity scheduler** (which requests may run, by KV cache and ``max_batch_size``):

   - ``guaranteed_no_evict`` (the default, ``SchedulerConfig.capacity_scheduler_policy``):
     every running request first reserves the blocks it needs to run to completion (its
     prompt and all its output tokens); a new request is admitted only if the blocks of its
     whole run fit in what is left, and the first that does not stops the admission. Nothing
     is ever evicted.
   - ``max_utilization``: a request is scheduled if the blocks of its next step fit (a new
     request's whole prompt, "first context chunk: the prompt's blocks"; a generating request
     one more block at a block boundary). When a request does not fit, the **last started
     request** (from the end of the list) is paused, its blocks freed, and the request tried
     again; when no started request is left to pause, scheduling stops. A paused request
     recomputes its context later (as vLLM's recompute preemption; trnsim keeps it at the
     front of the queue).

2. **Micro-batch scheduler** (what each scheduled request computes, by ``max_num_tokens``):
   generation requests first take one token each while the token budget lasts ("Select the
   generation phase requests that meet the criteria of total token size"; the first that does
   not fit ends the selection); context requests are collected with their remaining prompt.
   If they do not all fit in the budget left, **chunked context** (``enable_chunked_context``,
   off by default: a context then runs whole or waits) gives them chunks first come first
   served (``context_chunking_policy`` FIRST_COME_FIRST_SERVED): each takes what is left,
   rounded down to a multiple of the chunk unit (``tokens_per_block``) unless it is the whole
   remainder; a chunk of 0 is not scheduled. ``max_batch_size`` counts every request
   selected, contexts and generations.

Defaults (``llm_args.py``): ``max_batch_size`` 2048, ``max_num_tokens`` 8192,
``tokens_per_block`` 32, ``free_gpu_memory_fraction`` 0.9 of the memory left after the
weights and activations (``trnsim.serve.engine.kv_capacity``, rule ``trtllm``),
``enable_block_reuse`` (prefix caching) on, ``enable_chunked_prefill`` off, sampling on the
device.

Pipeline parallelism: TensorRT-LLM keeps ``pp`` micro-batches in flight, each scheduled as
above and each through every stage in turn; trnsim runs them as ``pp`` independent streams
of the replica (``Limits.streams``), each with the step time of the whole model (its stages
one after another), the stages of one stream overlapping the others'. The streams share one
KV-cache pool: TensorRT-LLM has one KV cache manager for every micro-batch
(``cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp``: ``forwardAsync`` runs
the capacity scheduler of the current micro-batch over ``mKvCacheManager``, the requests in
flight in the other micro-batches, ``mInflightReqIds``, left out), so one micro-batch's peak
is absorbed by the others' slack (a pool split per stream paused requests the shared pool
keeps: RESULTS.md, issue 23 session 6).
"""

from __future__ import annotations

import math

from trnsim.errors import ConfigError
from trnsim.serve.engine import (
    Deployment,
    EngineConfig,
    Limits,
    Live,
    Queues,
    StepPlan,
    kv_capacity,
)
from trnsim.serve.kv import KVCache
from trnsim.serve.policies import kv_horizon

MAX_BATCH_SIZE = 2048  # llm_args.py BaseLlmArgs.max_batch_size
MAX_NUM_TOKENS = 8192  # llm_args.py BaseLlmArgs.max_num_tokens
TOKENS_PER_BLOCK = 32  # llm_args.py KvCacheConfig.tokens_per_block
FREE_GPU_MEMORY_FRACTION = 0.9  # llm_args.py KvCacheConfig.free_gpu_memory_fraction
CAPACITY_POLICY = "guaranteed_no_evict"  # llm_args.py SchedulerConfig


def resolve(dep: Deployment, cfg: EngineConfig, prec: object) -> Limits:
    if cfg.long_prefill_token_threshold:
        raise ConfigError("engine: long_prefill_token_threshold is vLLM's; TensorRT-LLM has none")
    if cfg.async_scheduling:
        raise ConfigError("engine: async scheduling is vLLM's; not modelled for trtllm")
    notes = []
    seqs = cfg.max_num_seqs or MAX_BATCH_SIZE
    mnt = cfg.max_num_batched_tokens or MAX_NUM_TOKENS
    if cfg.max_num_seqs is None or cfg.max_num_batched_tokens is None:
        notes.append(
            f"TensorRT-LLM defaults: max_batch_size {seqs}, max_num_tokens {mnt} (llm_args.py)"
        )
    mml = cfg.max_model_len or dep.model.max_seq_len
    bs = cfg.block_size or TOKENS_PER_BLOCK
    caching = True if cfg.prefix_caching is None else cfg.prefix_caching
    chunked = bool(cfg.chunked_prefill)
    policy = cfg.capacity_policy or CAPACITY_POLICY
    frac = cfg.kv_free_fraction or FREE_GPU_MEMORY_FRACTION
    sampling = cfg.sampling or "device"
    streams = dep.plan.pp
    if cfg.num_gpu_blocks:
        blocks = cfg.num_gpu_blocks
        _, per_token, _ = kv_capacity(
            dep, prec, block_size=bs, act_tokens=mnt, gmu=frac, rule="trtllm"
        )
        notes.append(f"KV cache: {blocks} blocks (given)")
    else:
        blocks, per_token, how = kv_capacity(
            dep, prec, block_size=bs, act_tokens=mnt, gmu=frac, rule="trtllm"
        )
        notes.append(f"KV cache: {blocks} blocks of {bs} tokens; {how}")
    if streams > 1:
        notes.append(
            f"pipeline parallelism: {streams} micro-batches in flight, each a stream with up "
            f"to {seqs} requests and {mnt} tokens per iteration, all drawing on the one "
            f"pool of {blocks} KV blocks"
        )
    notes.append(
        f"capacity scheduler {policy}; chunked context "
        + ("on (first come first served)" if chunked else "off")
    )
    need = math.ceil(mml / bs)
    if blocks - 1 < need:
        have = max(blocks - 1, 0) * bs
        raise ConfigError(
            f"the model does not fit: {dep.model.name} on {dep.describe().split(': ', 1)[1]} "
            f"leaves KV room for {have} tokens, less than one max_seq_len ({mml}) request; "
            "lower --max-model-len, raise tp, or use more memory"
        )
    return Limits(
        policy="trtllm",
        form="trtllm",
        max_num_seqs=seqs,
        max_num_batched_tokens=mnt,
        max_model_len=mml,
        block_size=bs,
        prefix_caching=caching,
        num_blocks=blocks,
        chunked_prefill=chunked,
        long_prefill_token_threshold=0,
        prefill_buckets=None,
        batch_buckets=None,
        context_buckets=None,
        max_kv_concurrent=seqs,
        sampling=sampling,
        async_scheduling=False,
        kv_bytes_per_token=per_token,
        notes=tuple(notes),
        capacity_policy=policy,
        streams=streams,
    )


def _total(r: Live) -> float:
    """Tokens a request's KV holds once its context is done (its prompt, and the tokens it
    generated before a pause)."""
    return r.prompt + max(r.generated, 1.0) - 1.0


def _to_completion(kv: KVCache, r: Live) -> int:
    """Blocks ``r`` still needs to run to completion (``getRemainingBlocksToCompletion``)."""
    return max(0, kv.blocks_for(r.prompt + r.output) - r.hold.n)


def schedule(q: Queues, kv: KVCache, lim: Limits, qd: int) -> StepPlan:
    # Every running request is visited each iteration, so the loops below inline the
    # arithmetic of ``_total``, ``Live.pending`` and ``KVCache.blocks_for`` (same expressions,
    # same results): with thousands of requests in flight the scheduler is the run's cost.
    plan = StepPlan()
    running = list(q.running)
    # 1. capacity scheduler: the requests that may run this iteration
    if lim.capacity_policy == "max_utilization":
        chosen, admitted = _max_utilization(q, kv, lim, qd, running, plan)
    else:
        chosen, admitted = _no_evict(q, kv, lim, running)
    # 2. micro-batch scheduler: generation tokens first, then context chunks
    budget = lim.max_num_batched_tokens
    mml = lim.max_model_len
    bs = kv.block_size
    decodes = plan.decodes
    contexts: list[tuple[Live, int]] = []
    for r, hits in chosen:  # at most max_batch_size of them (the capacity scheduler's cap)
        base = max(r.computed, len(hits) * bs) if hits else r.computed
        g = r.generated
        left = int(r.prompt + (g if g > 1.0 else 1.0) - 1.0 - base)
        if left > 0:
            contexts.append((r, min(left, mml - int(base))))
        else:
            if qd > budget:
                break
            budget -= qd
            decodes.append(r)
    for r, left in contexts:
        n = left
        if n > budget:
            if not lim.chunked_prefill:
                break
            n = budget // bs * bs
        if n <= 0:
            continue
        budget -= n
        plan.chunks.append((r, n))
    if admitted:
        # requests admitted this step but given nothing to compute stay waiting
        # (admitted requests come last in ``chosen``, so any of them decoding is among the
        # last decodes)
        given = {id(r) for r, _n in plan.chunks}
        given.update(id(r) for r in decodes[-len(admitted) :])
        kept = [(r, h) for r, h in admitted if id(r) in given]
        # admission follows the queue order: keep its leading run only
        n = 0
        for (r, _h), w in zip(kept, q.waiting, strict=False):
            if r is not w:
                break
            n += 1
        plan.admitted = kept[:n]
        if n < len(kept):
            dropped = {id(r) for r, _h in kept[n:]}
            plan.chunks = [(r, k) for r, k in plan.chunks if id(r) not in dropped]
            plan.decodes = [r for r in decodes if id(r) not in dropped]
    plan.stable = bool(plan.decodes) and not plan.chunks and not plan.admitted
    return plan


def _no_evict(
    q: Queues, kv: KVCache, lim: Limits, running: list[Live]
) -> tuple[list[tuple[Live, list[int]]], list[tuple[Live, list[int]]]]:
    """``GuaranteedNoEvictScheduler``: running requests reserve their blocks to completion;
    new ones are admitted while the blocks of their whole run fit."""
    chosen: list[tuple[Live, list[int]]] = [(r, []) for r in running[: lim.max_num_seqs]]
    bs = kv.block_size
    reserved = kv.free
    for r, _h in chosen:  # _to_completion, inlined
        need = -(-int(r.prompt + r.output) // bs) - r.hold.n
        if need > 0:
            reserved -= need
    admitted: list[tuple[Live, list[int]]] = []
    for r in q.waiting:
        if len(chosen) >= lim.max_num_seqs:
            break
        hits: list[int] = []
        in_queue = 0
        if r.computed == 0 and lim.prefix_caching:
            hits, in_queue = kv.lookup(r.hold, r.req.hash_ids, r.req.hash_block, int(_total(r)))
        need = max(0, kv.blocks_for(r.prompt + r.output) - len(hits)) + in_queue
        if need > reserved:
            break
        reserved -= need
        chosen.append((r, hits))
        admitted.append((r, hits))
    return chosen, admitted


def _max_utilization(
    q: Queues, kv: KVCache, lim: Limits, qd: int, running: list[Live], plan: StepPlan
) -> tuple[list[tuple[Live, list[int]]], list[tuple[Live, list[int]]]]:
    """``MaxUtilizationScheduler``: each request's next step must fit; a running request that
    does not fit pauses the last started one (``plan.preempted``)."""
    free = kv.free
    bs = kv.block_size
    most = lim.max_num_seqs
    chosen: list[tuple[Live, list[int]]] = []
    i = 0
    while i < len(running):
        r = running[i]
        if len(chosen) >= most:
            break
        g = r.generated
        total = r.prompt + (g if g > 1.0 else 1.0) - 1.0  # _total(r)
        c = r.computed
        # a context in progress needs the rest of its prompt's blocks; a generation the
        # blocks of its next tokens
        t = total if total - c > 0 else c + qd
        need = (-(-int(t) // bs) if t > 0 else 0) - r.hold.n
        if need < 0:
            need = 0
        if need <= free:
            free -= need
            chosen.append((r, []))
            i += 1
            continue
        victim = running.pop()  # the last started request
        plan.preempted.append(victim)
        free += victim.hold.n if not kv.prefix_caching else _releasable(kv, victim)
        if victim is r:
            break
    admitted: list[tuple[Live, list[int]]] = []
    if plan.preempted:
        return chosen, admitted
    for r in q.waiting:
        if len(chosen) >= most:
            break
        hits: list[int] = []
        in_queue = 0
        if r.computed == 0 and lim.prefix_caching:
            hits, in_queue = kv.lookup(r.hold, r.req.hash_ids, r.req.hash_block, int(_total(r)))
        need = max(0, kv.blocks_for(_total(r)) - len(hits) - r.hold.n) + in_queue
        if need > free:
            break  # no started request after a new one: nothing to pause
        free -= need
        chosen.append((r, hits))
        admitted.append((r, hits))
    return chosen, admitted


def _releasable(kv: KVCache, r: Live) -> int:
    ref = kv._ref
    return sum(1 for b in r.hold.ids if ref[b] == 1)


def horizon(
    q: Queues, kv: KVCache, lim: Limits, plan: StepPlan, per_step: float, qd: int, cap: int
) -> int:
    return kv_horizon(plan.decodes, kv, per_step, qd, cap)
