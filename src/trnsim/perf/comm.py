"""A plan's collectives mapped onto ``trnsim.fabric.collective_time`` (no collective model here).

Every group of a plan is described by its size in ranks and its rank stride (``plan.py``: TP
stride 1, CP stride tp, DP stride tp x cp, EP stride tp, PP stride tp x cp x dp). The fabric
takes chips, so:

- **Ranks to chips.** Rank r lives on chip r // ranks_per_chip. A group of g ranks at stride
  s >= ranks_per_chip spans g chips at chip stride s / ranks_per_chip; a packed group (s = 1)
  spans ceil(g / ranks_per_chip) chips. The reduction among ranks of one chip is taken as free.
  When ranks_per_chip groups share each chip (a strided group), they share its links: the
  bytes are multiplied by the number of groups per chip (bandwidth sharing; latency unchanged).
- **Strided groups.** ``fabric`` places a group *packed* (consecutive chips fill the innermost
  domain first). A group whose members are ``stride`` chips apart behaves as a packed group on
  a *strided view* of the system: the fabric levels whose domains hold no more than ``stride``
  chips join no two members and are dropped; every other level's span is divided by the
  stride (a torus's dimensions are divided from the innermost). Each member keeps its own
  per-chip bandwidth at every level, which is right because the ``stride`` interleaved groups
  run at once, each chip in exactly one of them.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

from trnsim.fabric import collective_time
from trnsim.hw import FabricLevel, SystemSpec
from trnsim.perf.plan import ParallelPlan


def _divide_dims(dims: tuple[int, ...], stride: int) -> tuple[int, ...]:
    out = []
    for d in dims:
        g = math.gcd(d, stride)
        out.append(d // g)
        stride //= g
    return tuple(x for x in out if x > 1) or (1,)


@lru_cache(maxsize=512)
def strided_system(system: SystemSpec, stride: int) -> SystemSpec:
    """The system as seen by a group whose members are ``stride`` chips apart (module doc)."""
    if stride <= 1:
        return system
    levels: list[FabricLevel] = []
    for lvl in system.levels:
        if lvl.span <= stride:
            continue
        dims = _divide_dims(lvl.dims, stride) if lvl.dims else ()
        levels.append(dataclasses.replace(lvl, span=max(1, lvl.span // stride), dims=dims))
    return dataclasses.replace(
        system,
        name=f"{system.name}/stride{stride}",
        chips=max(1, system.chips // stride),
        chips_per_server=None,
        levels=tuple(levels),
    )


@lru_cache(maxsize=65536)
def group_time(
    op: str, nbytes: float, ranks: int, stride: int, system: SystemSpec, ranks_per_chip: int = 1
) -> float:
    """Seconds for collective ``op`` of ``nbytes`` (nccl-tests size) over a group of ``ranks``
    ranks at rank stride ``stride`` (see the module docstring)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    rpc = ranks_per_chip
    if stride >= rpc:
        chips, chip_stride = ranks, stride // rpc
        sharing = rpc  # every chip hosts one member of rpc different groups
    else:
        per_chip = max(1, rpc // stride)
        chips, chip_stride = math.ceil(ranks / per_chip), 1
        sharing = max(1, rpc // per_chip)
    if chips <= 1:
        return 0.0
    view = strided_system(system, chip_stride)
    return collective_time(op, nbytes * sharing, chips, view).time_s


def moe_dispatch_bytes(
    tokens: float, top_k: int, d_model: int, act_bytes: float, plan: ParallelPlan
) -> float:
    """Per-rank buffer (nccl-tests all-to-all size) of one MoE dispatch, or one combine, over
    the EP group, as the busiest rank sees it.

    Each of the rank's ``tokens`` tokens goes to its ``top_k`` routed experts: ``top_k x tokens
    x d_model x act_bytes`` (one copy per assignment, as the token dispatchers of Megatron-Core
    and NxD send them; 1/ep of it stays on the rank, which the fabric's (n-1)/n accounts for).
    With sequence parallelism the TP ranks split the tokens, so each sends 1/tp of them. The
    busiest rank receives ``moe_imbalance`` x the mean, and the exchange ends when it does: its
    share scales the bytes (the latency term is unchanged).
    """
    per_rank = tokens / (plan.tp if plan.sequence_parallel else 1)
    return per_rank * top_k * d_model * act_bytes * plan.moe_imbalance


def tp_time(op: str, nbytes: float, plan: ParallelPlan, system: SystemSpec) -> float:
    return group_time(op, nbytes, plan.tp, 1, system, plan.ranks_per_chip)


def cp_time(op: str, nbytes: float, plan: ParallelPlan, system: SystemSpec) -> float:
    return group_time(op, nbytes, plan.cp, plan.tp, system, plan.ranks_per_chip)


def dp_time(op: str, nbytes: float, plan: ParallelPlan, system: SystemSpec) -> float:
    return group_time(op, nbytes, plan.dp * plan.cp, plan.tp, system, plan.ranks_per_chip)


def ep_time(op: str, nbytes: float, plan: ParallelPlan, system: SystemSpec) -> float:
    """The EP group: ``ep`` ranks at stride ``etp`` (``ParallelPlan.ep_stride``)."""
    return group_time(op, nbytes, plan.ep, plan.ep_stride, system, plan.ranks_per_chip)


def edp_time(op: str, nbytes: float, plan: ParallelPlan, system: SystemSpec) -> float:
    """The expert data-parallel group (routed experts' gradients and weights): ``expert_dp``
    ranks at stride ``etp x ep`` (the expert grid of ``ParallelPlan``)."""
    return group_time(
        op, nbytes, plan.expert_dp, plan.expert_tp * plan.ep, system, plan.ranks_per_chip
    )


def pp_time(nbytes: float, plan: ParallelPlan, system: SystemSpec) -> float:
    """One point-to-point send between neighbouring stages (a 2-rank permute at the PP stride)."""
    if plan.pp <= 1:
        return 0.0
    return group_time("permute", nbytes, 2, plan.pp_stride, system, plan.ranks_per_chip)
