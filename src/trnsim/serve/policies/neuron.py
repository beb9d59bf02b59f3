"""vllm-neuron's scheduler (``neuron``), in its two forms, written here from their source:

**native** (the current plugin; aws-neuron-sdk @ 81ce03ae ``vllm-neuron/docs/design/vllm/
neuron-scheduler.md``, ``padding-batching-block-kv.md``, ``decode-context-length-bucketing.md``,
``determine_available_memory_design.md``, ``docs/guides/reference-configuration.md``):

- A step is prefill or decode, never both. A request in the middle of a segmented prefill
  runs alone until its prompt is done; otherwise the head of the waiting queue is admitted
  (``can_schedule``: running < ``max_num_seqs``, no prefill in the running list, one prefill
  per step, running < the KV concurrency cap) and its prefill runs alone, the decodes held
  back: **prefill has priority**. Otherwise all running requests decode.
- **Segmented prefill**: a prompt runs in ``max_num_batched_tokens`` segments, each padded to
  the smallest of ``num_batched_tokens_buckets`` (default powers of two from 128 to
  ``min(max_num_batched_tokens, max_model_len)``); a segment attends to the KV before it.
- **Decode padding**: the batch is padded to the smallest of ``num_seqs_buckets`` (default
  powers of two from 1 to ``max_num_seqs``); every sequence reads ``max_model_len`` tokens of
  KV, or the smallest ``decode_context_length_buckets`` entry >= ``max(num_computed_tokens) +
  1 + num_speculative_tokens`` when those are configured.
- **No preemption**: admission is capped by ``_max_kv_concurrent`` = KV tokens //
  ``max_model_len`` (deadlock prevention), so decodes never run out of blocks.
- KV budget min(HBM x ``gpu_memory_utilization`` - weights, 0.30 x HBM x
  ``gpu_memory_utilization``); ``block_size`` 32; prefix caching on; sampling on the CPU
  (``on_device_sampling_config`` null); async scheduling on when sampling is on the device;
  ``max_num_batched_tokens`` vLLM's 2048 with chunked prefill (``tutorial-llama3-70b.md``).

**nxdi** (vllm-neuron 0.2.x over NxD Inference; vllm-project/vllm-neuron @ a5ef7c8
``vllm_neuron/core/scheduler.py`` ContinuousBatchingNeuronScheduler, ``vllm_neuron/platform.py``,
``vllm_neuron/worker/neuronx_distributed_model_loader.py``, and aws-neuron-sdk
``libraries/nxd-inference/developer_guides/feature-guide.rst`` "Automatic Bucketing"):

- ``can_schedule``: a new batch starts when nothing runs or waits; otherwise a request is
  admitted while running + waiting < ``max_num_seqs`` and no other prefill waits (one per
  step). A waiting request hides the decodes: prefill has priority.
- Chunked prefill off (``max_num_batched_tokens`` 131072): a prompt is prefilled whole,
  padded to a context-encoding bucket (powers of two from 128 to ``max_model_len``); with
  ``chunked_prefill`` it runs in ``max_num_batched_tokens`` segments (padded the same way).
- Decode runs the compiled batch (``batch_size`` = ``max_num_seqs``, every slot computed) over
  a token-generation bucket (powers of two from 128 to ``max_model_len``) that covers the
  longest sequence.
- The KV cache is one ``max_model_len`` block per sequence, ``max_num_seqs`` of them
  (``block_size = max_model_len``): it must fit beside the weights; no preemption.
- ``max_num_seqs`` 32; sampling on the device (``OnDeviceSamplingConfig``); no async.

Both forms: ``max_model_len`` defaults here to min(model maximum, 8192) (vllm-neuron compiles
for the length it is given; its tutorials use 2,048 to 16,384), stated in the limits' notes.
"""

from __future__ import annotations

from trnsim.errors import ConfigError
from trnsim.perf.memory import infer_memory
from trnsim.serve.engine import (
    Deployment,
    EngineConfig,
    Limits,
    Queues,
    StepPlan,
    draft_weights,
    kv_capacity,
)
from trnsim.serve.kv import KVCache
from trnsim.serve.policies import bucket, kv_horizon, pow2_buckets

DEFAULT_MAX_MODEL_LEN = 8192


def resolve(dep: Deployment, cfg: EngineConfig, prec: object) -> Limits:
    m = dep.model
    notes = []
    mml = cfg.max_model_len or min(m.max_seq_len, DEFAULT_MAX_MODEL_LEN)
    if cfg.max_model_len is None:
        notes.append(f"max_model_len {mml} (trnsim's default for Neuron: the compiled length)")
    if cfg.neuron_form == "nxdi":
        return _resolve_nxdi(dep, cfg, prec, mml, notes)
    seqs = cfg.max_num_seqs or 256
    mnbt = cfg.max_num_batched_tokens or 2048
    bs = cfg.block_size or 32
    caching = True if cfg.prefix_caching is None else cfg.prefix_caching
    sampling = cfg.sampling or "host"
    asyn = (sampling == "device") if cfg.async_scheduling is None else cfg.async_scheduling
    if asyn and sampling == "host":
        raise ConfigError(
            "engine: async scheduling needs on-device sampling (vllm-neuron "
            "reference-configuration: 'Requires on-device sampling'); add --sampling device"
        )
    top = min(mnbt, mml)
    pre = cfg.prefill_buckets or pow2_buckets(128, top)
    if pre[-1] != top:
        raise ConfigError(
            f"engine: the largest prefill bucket ({pre[-1]}) must equal min(max_num_batched_"
            f"tokens, max_model_len) = {top} (vllm-neuron neuron-scheduler.md)"
        )
    bat = cfg.batch_buckets or pow2_buckets(1, seqs)
    if bat[-1] != seqs:
        raise ConfigError(
            f"engine: the largest batch bucket ({bat[-1]}) must equal max_num_seqs ({seqs})"
        )
    ctx = cfg.context_buckets
    if ctx is not None and (ctx[-1] >= mml or any(c % 128 for c in ctx)):
        raise ConfigError(
            f"engine: decode context buckets {list(ctx)} must be < max_model_len ({mml}) and "
            "multiples of 128 (vllm-neuron decode-context-length-bucketing.md)"
        )
    if cfg.num_gpu_blocks:
        blocks = cfg.num_gpu_blocks
        _, per_token, _ = kv_capacity(
            dep,
            prec,
            block_size=bs,
            act_tokens=top,
            gmu=cfg.gpu_memory_utilization,
            rule="neuron",
            cap_fraction=cfg.kv_cap_fraction,
        )
        notes.append(f"KV cache: {blocks} blocks (given)")
    else:
        blocks, per_token, how = kv_capacity(
            dep,
            prec,
            block_size=bs,
            act_tokens=top,
            gmu=cfg.gpu_memory_utilization,
            rule="neuron",
            cap_fraction=cfg.kv_cap_fraction,
        )
        notes.append(f"KV cache: {blocks} blocks of {bs} tokens; {how}")
    kv_tokens = max(blocks - 1, 0) * bs
    concurrent = kv_tokens // mml
    if concurrent < 1:
        raise ConfigError(
            f"the model does not fit: the KV budget of {dep.model.name} on "
            f"{dep.describe().split(': ', 1)[1]} holds {kv_tokens} tokens, less than one "
            f"max_model_len ({mml}) request; lower --max-model-len or raise tp"
        )
    if concurrent < seqs:
        notes.append(
            f"admission capped at {concurrent} running requests (KV tokens {kv_tokens} // "
            f"max_model_len {mml}; max_num_seqs {seqs})"
        )
    return Limits(
        policy="neuron",
        form="native",
        max_num_seqs=seqs,
        max_num_batched_tokens=mnbt,
        max_model_len=mml,
        block_size=bs,
        prefix_caching=caching,
        num_blocks=blocks,
        chunked_prefill=True,
        long_prefill_token_threshold=cfg.long_prefill_token_threshold,
        prefill_buckets=pre,
        batch_buckets=bat,
        context_buckets=ctx,
        max_kv_concurrent=min(concurrent, seqs),
        sampling=sampling,
        async_scheduling=asyn,
        kv_bytes_per_token=per_token,
        notes=tuple(notes),
    )


def _resolve_nxdi(
    dep: Deployment, cfg: EngineConfig, prec: object, mml: int, notes: list
) -> Limits:
    seqs = cfg.max_num_seqs or 32
    chunked = bool(cfg.chunked_prefill)
    mnbt = cfg.max_num_batched_tokens or (2048 if chunked else 131072)
    if cfg.prefix_caching:
        raise ConfigError(
            "engine: prefix caching needs the block KV layout; the nxdi form models the "
            "contiguous cache (block_size = max_model_len)"
        )
    sampling = cfg.sampling or "device"
    if cfg.async_scheduling:
        raise ConfigError("engine: vllm-neuron 0.2.x has no async scheduling (platform.py)")
    top = min(mnbt, mml) if chunked else mml
    pre = cfg.prefill_buckets or pow2_buckets(128, top)
    if pre[-1] < top:
        raise ConfigError(f"engine: the largest context-encoding bucket ({pre[-1]}) is below {top}")
    tkg = cfg.context_buckets or pow2_buckets(128, mml)
    if tkg[-1] < mml:
        tkg = (*tkg, mml)
    m, plan, chip = dep.model, dep.plan, dep.system.chip
    mem = infer_memory(m, plan, chip, seqs, mml, top, prec)
    per_token = mem.kv_cache / (seqs * mml)
    weights = mem.weights
    if dep.speculative is not None:
        draft = dep.speculative.draft_model(m)
        dm = infer_memory(draft, plan, chip, seqs, mml, 1, prec)
        weights += draft_weights(dep.speculative, draft, dm.weights)
        per_token += dm.kv_cache / (seqs * mml)
    total = weights + mem.activations + per_token * seqs * mml
    usable = mem.capacity * cfg.gpu_memory_utilization
    if total > usable:
        raise ConfigError(
            f"the model does not fit: {m.name} with a contiguous KV cache of {seqs} x "
            f"{mml} tokens needs {total / 1e9:.1f} GB per rank (weights {weights / 1e9:.1f}, KV "
            f"{per_token * seqs * mml / 1e9:.1f}, activations {mem.activations / 1e9:.1f}) of "
            f"{usable / 1e9:.1f} GB usable; lower --max-num-seqs or --max-model-len, or raise tp"
        )
    notes.append(
        f"KV cache: {seqs} contiguous blocks of {mml} tokens ({per_token * seqs * mml / 1e9:.2f} "
        "GB per rank, NxD Inference layout)"
    )
    return Limits(
        policy="neuron",
        form="nxdi",
        max_num_seqs=seqs,
        max_num_batched_tokens=mnbt,
        max_model_len=mml,
        block_size=mml,
        prefix_caching=False,
        num_blocks=seqs + 1,
        chunked_prefill=chunked,
        long_prefill_token_threshold=0,
        prefill_buckets=pre,
        batch_buckets=(seqs,),
        context_buckets=tkg,
        max_kv_concurrent=seqs,
        sampling=sampling,
        async_scheduling=False,
        kv_bytes_per_token=per_token,
        notes=tuple(notes),
    )


def context_pad(lim: Limits, needed: float) -> int:
    """The context every decode sequence reads: the smallest context bucket >= ``needed``,
    else ``max_model_len`` (native) / the token-generation bucket (nxdi)."""
    for b in lim.context_buckets or ():
        if b >= needed:
            return b
    return lim.max_model_len


def _prefill(plan: StepPlan, r, n: int, lim: Limits, base: float) -> StepPlan:
    plan.chunks.append((r, n))
    plan.graphs.append(("p", bucket(n, lim.prefill_buckets, "prefill segment"), int(base)))
    return plan


def schedule(q: Queues, kv: KVCache, lim: Limits, qd: int) -> StepPlan:
    plan = StepPlan()
    seg = lim.max_num_batched_tokens if lim.chunked_prefill else None
    running = q.running
    for r in running:  # an unfinished segmented prefill runs alone
        pend = r.pending()
        if pend > 0:
            n = int(pend) if seg is None else min(int(pend), seg)
            if kv.blocks_for(r.computed + n) - r.hold.n > kv.free:
                raise ConfigError("neuron: a prefill segment has no KV blocks (admission bug)")
            return _prefill(plan, r, n, lim, r.computed)
    admitted_decode = None
    if q.waiting:
        r = q.waiting[0]
        if lim.form == "nxdi":
            ok = len(running) < lim.max_num_seqs
        else:
            ok = len(running) < lim.max_num_seqs and len(running) < lim.max_kv_concurrent
        if ok:
            hits: list[int] = []
            in_queue = 0
            total = r.prompt + max(r.generated, 1.0) - 1.0
            if r.computed == 0 and lim.prefix_caching:
                hits, in_queue = kv.lookup(r.hold, r.req.hash_ids, r.req.hash_block, int(total))
            base = max(r.computed, len(hits) * kv.block_size)
            if total - base > 0:
                n = int(total - base) if seg is None else min(int(total - base), seg)
                need = max(0, kv.blocks_for(base + n) - len(hits) - r.hold.n)
                if need + in_queue <= kv.free:
                    plan.admitted.append((r, hits))
                    return _prefill(plan, r, n, lim, base)
            elif kv.blocks_for(base + qd) - r.hold.n <= kv.free:
                admitted_decode = (r, hits)  # KV arrived from a prefill pool: decode it now
    decodes = [r for r in running if r.pending() <= 0]
    if admitted_decode is not None:
        plan.admitted.append(admitted_decode)
        decodes.append(admitted_decode[0])
    if not decodes:
        return plan
    budget = lim.max_num_batched_tokens
    if len(decodes) * qd > budget:
        decodes = decodes[: budget // qd]
    free = kv.free
    for r in decodes:
        free -= max(0, kv.blocks_for(r.computed + qd) - r.hold.n)
    if free < 0:
        raise ConfigError(
            "neuron: decode ran out of KV blocks; vllm-neuron does not preempt (its admission "
            "cap should prevent this)"
        )
    plan.decodes = decodes
    batch = bucket(len(decodes), lim.batch_buckets, "decode batch")
    plan.graphs.append(("d", batch, context_pad(lim, max(r.computed for r in decodes) + qd)))
    plan.stable = admitted_decode is None
    return plan


def horizon(
    q: Queues, kv: KVCache, lim: Limits, plan: StepPlan, per_step: float, qd: int, cap: int
) -> int:
    """Steps until the context bucket changes, or the KV blocks (the cap keeps them enough)."""
    longest = max(r.computed for r in plan.decodes)
    pad = plan.decode_graph[2]
    if pad < lim.max_model_len:  # a smaller bucket: stay while max(computed) + qd <= pad
        cap = min(cap, max(1, int((pad - qd - longest) // per_step) + 1))
    return kv_horizon(plan.decodes, kv, per_step, qd, cap)
