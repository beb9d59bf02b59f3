"""How fast a job runs where it landed, against the most compact placement of the same chips.

The placement becomes a system: the catalog system of the nodes (the UltraServer, or the
instance for standalone nodes), each fabric level's span capped at the most chips the job has
in one domain of that level. A job split over two UltraServers has at most half its chips in
one, so its collectives cross EFA; a job whose devices sit on four nodes has at most a quarter
in one node. ``trnsim.fabric`` (through ``trnsim.perf`` for training configs) times the job on
that system and on the uncapped one; the ratio is the slowdown (>= 1 for a worse placement).
An uneven split is approximated by its largest part (the fabric's packed-group model).

A job gives either a training config (``model``, ``seq_len``, ``global_batch``, ``tp``, ``pp``,
``tokens``: :func:`trnsim.perf.estimate_training` gives its step time and so its duration), or
a duration with a data-parallel step: ``step_s`` seconds of compute and an all-reduce of
``allreduce_bytes`` per step (defaults :data:`DEFAULT_STEP_S`, :data:`DEFAULT_ALLREDUCE_BYTES`,
stated in every result).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from trnsim.dra.state import FleetState, Placement
from trnsim.hw.catalog import SYSTEMS
from trnsim.hw.specs import FabricLevel, SystemSpec

DEFAULT_STEP_S = 1.0
DEFAULT_ALLREDUCE_BYTES = 2**30  # 1 GiB of gradients per step


@dataclass(frozen=True, slots=True)
class DataParallel:
    """A data-parallel step: ``step_s`` of compute, then an all-reduce of ``allreduce_bytes``."""

    step_s: float = DEFAULT_STEP_S
    allreduce_bytes: float = DEFAULT_ALLREDUCE_BYTES


@dataclass(frozen=True, slots=True)
class Training:
    """A training run timed by trnsim.perf (bf16, the stack's default profile)."""

    model: str
    tokens: float
    seq_len: int = 4096
    global_batch: int = 256
    tp: int = 1
    pp: int = 1


def system_of(state: FleetState, node: int) -> SystemSpec | None:
    nd = state.fleet.nodes[node]
    if nd.ultraserver is not None:
        return SYSTEMS.get(state.fleet.ultraservers[nd.ultraserver].system)
    return SYSTEMS.get(nd.itype.system) if nd.itype.system else None


def level_caps(state: FleetState, system: SystemSpec, p: Placement) -> tuple[int, ...]:
    """The most chips of the job in one domain of each level of ``system``."""
    rows, cols = state._index(p)
    d = state.devices[rows]
    us = state.node_us[rows]
    if state.n_us:
        usize = np.where(us >= 0, state.us_size[np.maximum(us, 0)], 0) * d
    else:
        usize = np.zeros_like(d)
    caps = []
    for lvl in system.levels:
        span = lvl.span
        inside = span <= d  # a domain inside a node: (node, device // span)
        in_us = ~inside & (us >= 0) & (span <= usize)  # (UltraServer, node position // span)
        key = np.where(
            inside,
            rows * state.dmax + cols // span,
            np.where(in_us, -2 - (us * (state.dmax * 1024) + state.node_pos[rows] * d // span), -1),
        )
        caps.append(int(np.unique(key, return_counts=True)[1].max()))
    for i in range(1, len(caps)):  # a level never holds fewer chips than the level inside it
        caps[i] = max(caps[i], caps[i - 1])
    return tuple(caps)


def _torus_dims(dims: tuple[int, ...], span: int) -> tuple[int, ...]:
    out, rest = [], span
    for d in dims:
        k = min(d, rest)
        while rest % k:
            k -= 1
        out.append(k)
        rest //= k
    if rest > 1:
        out.append(rest)
    return tuple(x for x in out if x > 1) or (1,)


def capped(system: SystemSpec, caps: tuple[int, ...]) -> SystemSpec:
    """``system`` with each level's span capped at the job's chips in one of its domains. A
    torus level keeps the inner level's dims and adds its own ring; its cap is rounded up to a
    whole number of inner domains (24 chips over 16-chip nodes occupy two nodes)."""
    levels: list[FabricLevel] = []
    prev_span, prev_dims = 1, ()
    for lvl, cap in zip(system.levels, caps, strict=True):
        if lvl.kind == "fat-tree":
            levels.append(lvl)
            prev_span, prev_dims = lvl.span, ()
            continue
        span = min(lvl.span, cap)
        if lvl.kind == "torus":
            span = min(lvl.span, -(-span // prev_span) * prev_span)
            if prev_dims and math.prod(prev_dims) == prev_span:
                extra = span // prev_span
                dims = prev_dims + ((extra,) if extra > 1 else ())
            else:
                dims = _torus_dims(tuple(lvl.dims), span) if lvl.dims else ()
            if dims and math.prod(dims) != span:
                dims = ()
        else:
            dims = lvl.dims
        levels.append(lvl if span == lvl.span else dataclasses.replace(lvl, span=span, dims=dims))
        prev_span, prev_dims = span, tuple(levels[-1].dims)
    return dataclasses.replace(system, name=f"{system.name} (as placed)", levels=tuple(levels))


@functools.lru_cache(maxsize=4096)
def _dp_step(system: SystemSpec, chips: int, work: DataParallel) -> float:
    from trnsim.fabric import collective_time

    if chips <= 1 or work.allreduce_bytes <= 0:
        return work.step_s
    res = collective_time("all-reduce", work.allreduce_bytes, chips, system)
    return work.step_s + res.time_s


@functools.lru_cache(maxsize=1024)
def _train_step(system: SystemSpec, chips: int, work: Training) -> tuple[float, float]:
    from trnsim.perf import estimate_training, plan_for_chips

    plan = plan_for_chips(chips, tp=work.tp, pp=work.pp)
    est = estimate_training(
        work.model, system, plan, global_batch=work.global_batch, seq_len=work.seq_len
    )
    return est.step_time_s, est.tokens_per_s


def step_time(system: SystemSpec, chips: int, work: DataParallel | Training) -> float:
    if isinstance(work, Training):
        return _train_step(system, chips, work)[0]
    return _dp_step(system, chips, work)


def packed_caps(system: SystemSpec, chips: int) -> tuple[int, ...]:
    """The caps of the most compact placement: each level holds min(span, chips)."""
    return tuple(min(lvl.span, chips) for lvl in system.levels)


_RATIOS: dict[tuple[str, tuple[int, ...], int, DataParallel | Training], float] = {}


def _ratio(system: SystemSpec, caps: tuple[int, ...], chips: int, work) -> float:
    key = (system.name, caps, chips, work)  # catalog names are unique: a cheap key
    hit = _RATIOS.get(key)
    if hit is not None:
        return hit
    ideal = packed_caps(system, chips)
    if caps == ideal:
        value = 1.0
    else:
        value = step_time(capped(system, caps), chips, work) / step_time(
            capped(system, ideal), chips, work
        )
    _RATIOS[key] = value
    return value


def slowdown(state: FleetState, p: Placement, work: DataParallel | Training) -> float:
    """Step time as placed over step time packed (1.0 for a single chip or no fabric)."""
    chips = p.chips
    system = system_of(state, p.nodes[0])
    if system is None or chips <= 1:
        return 1.0
    caps = level_caps(state, system, p)
    return _ratio(system, caps, chips, work)


def ideal_duration(state: FleetState, p: Placement, work: Training) -> float:
    """A training job's duration packed on its system: tokens / tokens per second."""
    system = system_of(state, p.nodes[0])
    if system is None:
        raise ValueError("training configs need nodes of a catalog system")
    _, tok_s = _train_step(system, p.chips, work)
    return work.tokens / tok_s


def spans(state: FleetState, p: Placement) -> dict[str, int]:
    """How many nodes and UltraServers a placement spans."""
    us = {int(state.node_us[n]) for n in p.nodes if state.node_us[n] >= 0}
    return {"nodes": len(set(p.nodes)), "ultraservers": len(us)}


__all__ = [
    "DEFAULT_ALLREDUCE_BYTES",
    "DEFAULT_STEP_S",
    "DataParallel",
    "Training",
    "ideal_duration",
    "slowdown",
    "spans",
]
