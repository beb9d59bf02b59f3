"""vLLM V1's scheduler (``vllm-v1``), written here from its source: vllm-project/vllm
``vllm/v1/core/sched/scheduler.py`` @ 00024d31 (``Scheduler.schedule``), with the KV rules of
``vllm/v1/core/kv_cache_manager.py`` @ 003df296 and the defaults of ``vllm/engine/arg_utils.py``
(``EngineArgs`` batch defaults for the OpenAI server, read via the code index at 99d7eb5d).

One step (there is no prefill or decode phase: each request's computed tokens catch up with
its tokens):

1. **Running requests first**, in order, each asking for its remaining tokens (a prefill
   chunk) or one decode token, capped by ``long_prefill_token_threshold`` and by what is left
   of the step's **token budget** (``max_num_batched_tokens``): chunked prefill mixes into the
   decode steps.
2. When a running request cannot get its KV blocks, the scheduler **preempts the last request
   of the running list** (the newest admitted) and retries, until the request fits or it has
   preempted the request itself; a preempted request loses its KV (recompute) and goes back to
   the front of the waiting queue.
3. **Waiting requests** (only if nothing was preempted this step), FCFS, while the budget lasts
   and fewer than ``max_num_seqs`` run: each gets its prefix-cache hit (full blocks only, at
   most ``tokens - 1`` tokens) and a chunk of its prompt; the first one whose blocks do not fit
   stops the admission.

Defaults: ``max_num_batched_tokens`` 8192 and ``max_num_seqs`` 1024 on devices with >= 70 GiB
of memory per rank, 2048 and 256 otherwise (``max_num_seqs`` at most the token budget);
``block_size`` 16; prefix caching on (V1); ``max_model_len`` the model's; sampling on the
device; synchronous scheduling.
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

GIB = 2**30
BIG_DEVICE = 70 * GIB  # vllm/engine/arg_utils.py: "device_memory >= 70 * GiB_bytes"


def resolve(dep: Deployment, cfg: EngineConfig, prec: object) -> Limits:
    chip = dep.system.chip
    rank_hbm = chip.hbm_bytes / dep.plan.ranks_per_chip
    big = rank_hbm >= BIG_DEVICE
    notes = []
    mnbt = cfg.max_num_batched_tokens or (8192 if big else 2048)
    seqs = cfg.max_num_seqs or min(1024 if big else 256, mnbt)
    if cfg.max_num_batched_tokens is None or cfg.max_num_seqs is None:
        notes.append(
            f"vLLM defaults for {rank_hbm / GIB:.0f} GiB per rank: max_num_batched_tokens "
            f"{mnbt}, max_num_seqs {seqs}"
        )
    mml = cfg.max_model_len or dep.model.max_seq_len
    bs = cfg.block_size or 16
    caching = True if cfg.prefix_caching is None else cfg.prefix_caching
    sampling = cfg.sampling or "device"
    asyn = bool(cfg.async_scheduling)
    if asyn and sampling == "host":
        raise ConfigError(
            "engine: async scheduling needs sampling on the device (--sampling device)"
        )
    if cfg.chunked_prefill is False:
        notes.append("chunked prefill off: a prompt longer than the token budget never runs")
    if cfg.num_gpu_blocks:
        blocks = cfg.num_gpu_blocks
        _, per_token, _ = kv_capacity(
            dep, prec, block_size=bs, act_tokens=mnbt, gmu=cfg.gpu_memory_utilization, rule="vllm"
        )
        notes.append(f"KV cache: {blocks} blocks (given)")
    else:
        blocks, per_token, how = kv_capacity(
            dep, prec, block_size=bs, act_tokens=mnbt, gmu=cfg.gpu_memory_utilization, rule="vllm"
        )
        notes.append(f"KV cache: {blocks} blocks of {bs} tokens; {how}")
    need = math.ceil(mml / bs)
    if blocks - 1 < need:
        have = max(blocks - 1, 0) * bs
        raise ConfigError(
            f"the model does not fit: {dep.model.name} on {dep.describe().split(': ', 1)[1]} "
            f"leaves KV room for {have} tokens, less than one max_model_len ({mml}) request "
            "(vLLM refuses to start); lower --max-model-len, raise tp, or use more memory"
        )
    return Limits(
        policy="vllm-v1",
        form="v1",
        max_num_seqs=seqs,
        max_num_batched_tokens=mnbt,
        max_model_len=mml,
        block_size=bs,
        prefix_caching=caching,
        num_blocks=blocks,
        chunked_prefill=cfg.chunked_prefill is not False,
        long_prefill_token_threshold=cfg.long_prefill_token_threshold,
        prefill_buckets=None,
        batch_buckets=None,
        context_buckets=None,
        max_kv_concurrent=seqs,
        sampling=sampling,
        async_scheduling=asyn,
        kv_bytes_per_token=per_token,
        notes=tuple(notes),
    )


def _releasable(kv: KVCache, r: Live) -> int:
    """Blocks that return to the free queue when ``r`` is preempted (shared ones stay)."""
    if not kv.prefix_caching:
        return r.hold.n
    ref = kv._ref
    return sum(1 for b in r.hold.ids if ref[b] == 1)


def schedule(q: Queues, kv: KVCache, lim: Limits, qd: int) -> StepPlan:
    plan = StepPlan()
    budget = lim.max_num_batched_tokens
    thr = lim.long_prefill_token_threshold
    mml = lim.max_model_len
    free = kv.free
    bs = kv.block_size
    running = list(q.running)
    i = 0
    while i < len(running) and budget > 0:
        r = running[i]
        c = r.computed
        g = r.generated
        pend = r.prompt + (g if g > 1.0 else 1.0) - 1.0 - c  # Live.pending(), inlined
        n = int(pend) if pend > 0 else qd
        if 0 < thr < n:
            n = thr
        if n > budget:
            n = budget
        if n > mml - int(c):
            n = mml - int(c)
        if n <= 0:
            i += 1
            continue
        tokens = c + n
        need = 0 if tokens <= r.hold.n * bs else kv.blocks_for(tokens) - r.hold.n
        self_preempted = False
        while need > free:
            victim = running.pop()  # FCFS policy: the last request of the running list
            plan.preempted.append(victim)
            free += _releasable(kv, victim)
            if victim is r:
                self_preempted = True
                break
        if self_preempted:
            break
        free -= need
        budget -= n
        if pend > 0:
            plan.chunks.append((r, n))
        else:
            plan.decodes.append(r)
        i += 1
    if plan.preempted:
        return plan
    for r in q.waiting:
        if budget <= 0 or len(running) + len(plan.admitted) >= lim.max_num_seqs:
            break
        hits: list[int] = []
        in_queue = 0
        total = r.prompt + max(r.generated, 1.0) - 1.0
        if r.computed == 0 and lim.prefix_caching:
            hits, in_queue = kv.lookup(r.hold, r.req.hash_ids, r.req.hash_block, int(total))
        base = max(r.computed, len(hits) * kv.block_size)
        decode_ready = total - base <= 0
        n = qd if decode_ready else int(total - base)
        if 0 < thr < n:
            n = thr
        if not lim.chunked_prefill and n > budget:
            break
        n = min(n, budget)
        need = max(0, kv.blocks_for(base + n) - len(hits) - r.hold.n)
        if need + in_queue > free:
            break
        free -= need + in_queue
        budget -= n
        plan.admitted.append((r, hits))
        if decode_ready:
            plan.decodes.append(r)
        else:
            plan.chunks.append((r, n))
    plan.stable = bool(plan.decodes) and not plan.chunks and not plan.admitted
    return plan


def horizon(
    q: Queues, kv: KVCache, lim: Limits, plan: StepPlan, per_step: float, qd: int, cap: int
) -> int:
    return kv_horizon(plan.decodes, kv, per_step, qd, cap)
