"""optimum-neuron's vLLM integration (``optimum-neuron``), written here from its design notes:
huggingface/optimum-neuron @ 19457388 ``optimum/neuron/vllm/ARCHITECTURE_VLLM_SERVING.md``
(platform, runner, sampling sections).

This is how the serving.md K3 runs served (not vllm-neuron): vLLM's own V1 scheduler
(``trnsim.serve.policies.vllm_v1``) over NxD Inference graphs, with:

- prefix caching off, ``block_size = max_model_len``, one KV slot per sequence
  (``max_num_seqs`` = the compiled batch), so the scheduler admits by slots;
- ``max_num_batched_tokens = max(2048, max_model_len)`` (the platform's fix), and no vLLM
  chunking: a new request's whole prompt is scheduled in one step;
- a step runs the **decode graph first** (every running sequence; the compiled batch, every
  slot computed, over the token-generation bucket of the longest sequence), **then the prefill
  graph** of each new request, one after another (prefill and decode are never batched
  together): the step's time is their sum;
- standard prefill pads a prompt to a context-encoding bucket; chunked prefill
  (``prefill_chunk_size``) runs the prompt as chunks of that size inside the step, one
  sequence at a time, and always samples the first token on the CPU;
- sampling on the device or the CPU (``on_device_sampling``) for the decode graph;
- the runner's host work (Python: batch state, input tensors, sorting by slot, output
  processing): a fixed time per step and per prompt prefilled, fitted to serving.md K3
  (``trnsim.serve.fitted``).

Buckets as NxD Inference builds them (aws-neuron-sdk ``libraries/nxd-inference/developer_guides/
feature-guide.rst`` "Automatic Bucketing"): powers of two from 128 to ``max_model_len``.
"""

from __future__ import annotations

from dataclasses import replace

from trnsim.errors import ConfigError
from trnsim.serve.engine import Deployment, EngineConfig, Limits, Queues, StepPlan
from trnsim.serve.fitted import OPTIMUM_HOST_PREFILL_S as HOST_PREFILL_S
from trnsim.serve.fitted import OPTIMUM_HOST_STEP_S as HOST_STEP_S
from trnsim.serve.kv import KVCache
from trnsim.serve.policies import bucket, kv_horizon, neuron, vllm_v1


def resolve(dep: Deployment, cfg: EngineConfig, prec: object) -> Limits:
    if cfg.prefix_caching:
        raise ConfigError("engine: optimum-neuron does not support prefix caching")
    if cfg.async_scheduling:
        raise ConfigError("engine: optimum-neuron runs the synchronous vLLM engine")
    base = neuron.resolve(
        dep,
        replace(cfg, neuron_form="nxdi", chunked_prefill=None, max_num_batched_tokens=None),
        prec,
    )
    mnbt = max(cfg.max_num_batched_tokens or 2048, base.max_model_len)
    chunk = cfg.prefill_chunk_size or 0
    notes = list(base.notes)
    if chunk:
        notes.append(f"chunked prefill: {chunk}-token chunks, first token sampled on the CPU")
    return replace(
        base,
        policy="optimum-neuron",
        form="optimum",
        max_num_batched_tokens=mnbt,
        chunked_prefill=False,
        prefill_chunk=chunk,
        prefill_buckets=(chunk,) if chunk else base.prefill_buckets,
        notes=tuple(notes),
    )


def schedule(q: Queues, kv: KVCache, lim: Limits, qd: int) -> StepPlan:
    plan = vllm_v1.schedule(q, kv, lim, qd)
    if not plan.empty:  # the runner's host work: per step, and per prompt it prefills
        plan.host_s = HOST_STEP_S + HOST_PREFILL_S * len(plan.chunks)
    if plan.decodes:
        ctx = neuron.context_pad(lim, max(r.computed for r in plan.decodes) + qd)
        plan.graphs.append(("d", lim.max_num_seqs, ctx))
    for r, n in plan.chunks:
        if lim.prefill_chunk:
            done = int(r.computed)
            left = n
            while left > 0:
                m = min(left, lim.prefill_chunk)
                plan.graphs.append(("p", lim.prefill_chunk, done))
                done += m
                left -= m
            plan.host_samples += 1
        else:
            plan.graphs.append(("p", bucket(n, lim.prefill_buckets, "prefill"), int(r.computed)))
    return plan


def horizon(
    q: Queues, kv: KVCache, lim: Limits, plan: StepPlan, per_step: float, qd: int, cap: int
) -> int:
    """Steps until the token-generation bucket changes (or the KV slots run out)."""
    longest = max(r.computed for r in plan.decodes)
    pad = plan.decode_graph[2]
    if pad < lim.max_model_len:
        cap = min(cap, max(1, int((pad - qd - longest) // per_step) + 1))
    return kv_horizon(plan.decodes, kv, per_step, qd, cap)
