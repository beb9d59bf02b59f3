"""Engine scheduling policies: each a small module of pure functions over an engine's state.

A policy module provides:

- ``resolve(dep, cfg, prec) -> Limits``: its defaults for the settings ``EngineConfig`` leaves
  open, the KV cache size, and the checks that refuse a configuration the real engine refuses;
- ``schedule(q, kv, lim, qd) -> StepPlan``: the next step, from the queues (``Queues``), the
  KV cache (read only: ``free``, ``blocks_for``, ``lookup``), the limits and the positions a
  decode step computes per sequence (``qd``: 1, or ``tokens + 1`` with speculative decoding);
- ``horizon(q, kv, lim, plan, per_step) -> int``: for a ``stable`` decode plan, how many
  consecutive steps the policy itself lets it repeat (KV blocks running out, a context bucket
  changing); the loop also stops at finishes and arrivals.

Policies never change the state; the loop (``trnsim.serve.loop``) applies their plans. The
registry refuses duplicates and a lookup failure lists the names; ``trtllm`` is TensorRT-LLM's
in-flight batching; an ``sglang`` policy would be one more module.
"""

from __future__ import annotations

from types import ModuleType

from trnsim.errors import ConfigError, UnknownNameError


def pow2_buckets(low: int, high: int) -> tuple[int, ...]:
    """Powers of two from ``low`` while <= ``high``, then ``high`` itself if it is not one (the
    largest bucket must equal the maximum: vllm-neuron ``docs/design/vllm/neuron-scheduler.md``,
    "Constraints")."""
    out = []
    b = low
    while b <= high:
        out.append(b)
        b *= 2
    if not out or out[-1] != high:
        out.append(high)
    return tuple(out)


def bucket(n: int, buckets: tuple[int, ...], what: str) -> int:
    """The smallest bucket >= ``n`` (vllm-neuron ``get_bucket_for_count``)."""
    for b in buckets:
        if b >= n:
            return b
    raise ConfigError(f"{what}: {n} exceeds the largest compiled bucket {buckets[-1]}")


def kv_horizon(decodes: list, kv: object, per_step: float, qd: int, cap: int) -> int:
    """The most consecutive decode steps (<= ``cap``) the free blocks allow: at step ``j`` each
    sequence holds the blocks of ``computed + j x per_step + qd`` tokens."""

    def need(k: int) -> int:
        total = 0
        for r in decodes:
            total += max(0, kv.blocks_for(r.computed + (k - 1) * per_step + qd) - r.hold.n)
        return total

    free = kv.free
    # Quick bound: no sequence needs more than this many new blocks in ``cap`` steps.
    most = -(-int((cap - 1) * per_step + qd) // kv.block_size) + 1
    if most * len(decodes) <= free or need(cap) <= free:
        return cap
    lo, hi = 0, cap  # need(lo) <= free < need(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need(mid) <= free:
            lo = mid
        else:
            hi = mid
    return lo


_POLICIES: dict[str, str] = {}


def register(name: str, module: str) -> None:
    if name in _POLICIES:
        raise ConfigError(f"serving policy {name!r} is registered twice")
    _POLICIES[name] = module


def policy(name: str) -> ModuleType:
    """The policy module of ``name``."""
    import importlib

    if name not in _POLICIES:
        raise UnknownNameError(f"no serving policy {name!r}; valid: {', '.join(_POLICIES)}")
    return importlib.import_module(_POLICIES[name])


def names() -> list[str]:
    return list(_POLICIES)


register("vllm-v1", "trnsim.serve.policies.vllm_v1")
register("neuron", "trnsim.serve.policies.neuron")
register("optimum-neuron", "trnsim.serve.policies.optimum_neuron")
register("trtllm", "trnsim.serve.policies.trtllm")
