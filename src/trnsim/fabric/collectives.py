"""Collectives in closed form: ``latency + bytes / bandwidth`` per step, per fabric level.

Size convention (nccl-tests / nccom-test "size"): ``nbytes`` is the per-rank buffer:
all-reduce and broadcast: the buffer; all-gather: the gathered *output*; reduce-scatter: the
*input*; all-to-all: each rank's whole send buffer (``nbytes / ranks`` to each peer); permute
(send-recv): what each rank sends to its successor. ``algbw = nbytes / time`` and
``busbw = algbw x factor`` with the nccl-tests factors in ``OPS`` (all-reduce 2(n-1)/n,
all-gather / reduce-scatter / all-to-all (n-1)/n, broadcast and permute 1).

A group of ranks is split into per-level fan-outs (:func:`trnsim.fabric.topology.group`). For
one level with fan-out n, hop latency a and per-chip bandwidth B (ring: B_r, see topology):

========================  =====================================================================
ring      all-reduce      2(n-1) a + 2 (n-1)/n M / B_r
          all-gather/RS   (n-1) a + (n-1)/n M / B_r
          all-to-all      (n-1) a + floor(n^2/4)/n M / B_r    (each chunk goes the shorter way)
          broadcast       (n-1) a + M / B_r                    (pipelined chain)
direct    all-reduce      2 (a d + X(M))        (reduce-scatter + all-gather as exchanges)
(mesh)    all-gather/RS   a d + X(M)             X: uniform exchange time, d: diameter in hops
          all-to-all      a d + X(M)             (switch: X = (n-1)/n M / B; torus: k/8 M / b)
          broadcast       2 a d + (n-1)/n M / B + X(M)          (scatter, then all-gather)
rdh       all-reduce      sum_j 2 (a h_j + M/2^(j+1) h_j / B_r), j < log2 n (distance 2^j)
          all-gather/RS   half of the above;  all-to-all (Bruck): sum_j (a h_j + M/2 h_j / B_r)
tree      all-reduce      2 ceil(log2 n) a + 2 M / B_r         (pipelined double binary tree)
          broadcast       ceil(log2 n) a + M / B_r
========================  =====================================================================

Across levels: *flat* algorithms see the whole group (ring: slowest ring bandwidth and largest
hop latency of the levels crossed; direct: the levels' exchanges run at once on their own links,
time = max over levels; rdh: step j runs on the level that distance 2^j crosses). *hierarchical*
runs the collective level by level (all-reduce: reduce-scatter inner to outer on M, M/n_0, ...,
then all-gather outer to inner; all-gather: outer to inner; all-to-all: one full exchange per
level), each level with the algorithm the selection rule picks for its own message size.

Selection (``algo=None`` / ``"auto"``), after the Neuron runtime (calibration E): a group on one
level uses direct ("Mesh") below 1 MB, RDH up to 56 MB, ring ("KangaRing") above; broadcast uses a
tree below 1 MB; a group over several levels uses hierarchical (with that rule per level);
all-to-all and permute use direct. ``algo="best"`` takes the fastest applicable algorithm.

A fixed software overhead and a link efficiency (calibration constants, fitted in
:mod:`trnsim.fabric.calibration`) are applied to every collective of more than one rank.

**Stacks.** All of the above is the Neuron runtime's family (stack ``neuron``), the default on
AWS chips. Each system's collectives run on its vendor's stack (:mod:`trnsim.fabric.stacks`):
NVIDIA GPUs on ``nccl`` (ring / tree / NVLS x LL / LL128 / Simple, :mod:`trnsim.fabric.nccl`,
fitted to calibration G), TPUs on ``tpu-ici`` (hierarchical over the torus dimensions, a
bidirectional ring per dimension, then the DCN; no software overhead, full link rate). GPUs and
TPUs never take the Neuron runtime's constants. Passing ``overheads`` explicitly selects the
generic (Neuron-family) algorithms with those constants on any system (stack ``custom``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from trnsim import inputs
from trnsim.core.collops import OPS, canonical_op
from trnsim.core.collops import ring_fraction as _f
from trnsim.errors import ConfigError, UnknownNameError
from trnsim.fabric import nccl
from trnsim.fabric.overheads import FITTED, MESH_MAX_BYTES, RDH_MAX_BYTES, Overheads
from trnsim.fabric.stacks import NCCL, canonical_stack
from trnsim.fabric.topology import FatTree, Group, LevelView, group
from trnsim.hw import SystemSpec
from trnsim.hw import system as lookup_system

ALGOS = ("ring", "direct", "rdh", "tree", "hierarchical")
ALGO_ALIASES = {
    "mesh": "direct",
    "kangaring": "ring",
    "recursive-halving-doubling": "rdh",
    "halving-doubling": "rdh",
    "hd": "rdh",
    "bruck": "rdh",
    "double-binary-tree": "tree",
    "hier": "hierarchical",
}
SELECTORS = ("auto", "best")
NCCL_ALGOS = nccl.NCCL_ALGOS

#: The ``tpu-ici`` stack's constants: no TPU collective measurement to fit (see stacks.py).
TPU_ICI = Overheads(software_s=0.0, link_efficiency=1.0)


def canonical_algo(algo: str | None) -> str:
    """``None`` -> ``"auto"``; aliases (mesh, kangaring, ...) -> canonical; error lists names."""
    if algo is None:
        return "auto"
    key = algo.strip().lower().replace("_", "-")
    key = ALGO_ALIASES.get(key, key)
    if key in ALGOS or key in SELECTORS or key in NCCL_ALGOS:
        return key
    valid = ", ".join(dict.fromkeys((*ALGOS, *NCCL_ALGOS, *SELECTORS, *ALGO_ALIASES)))
    raise UnknownNameError(f"unknown collective algorithm {algo!r}; valid: {valid}")


@dataclass(frozen=True, slots=True)
class Step:
    """One phase of a collective on one level: ``count`` sequential steps of this kind.

    ``bytes_per_rank``: bytes one rank sends in the phase; ``latency_s`` and ``bandwidth_s``
    are the phase's two parts (their sum is the phase's time).
    """

    phase: str
    level: str
    algo: str
    n: int
    count: int
    bytes_per_rank: float
    latency_s: float
    bandwidth_s: float

    @property
    def time_s(self) -> float:
        return self.latency_s + self.bandwidth_s


@dataclass(frozen=True, slots=True)
class CollectiveResult:
    """The time of one collective and where it goes. Units SI (s, bytes, bytes/s)."""

    op: str
    nbytes: float
    ranks: int
    system: str
    algo: str
    placement: str
    time_s: float
    algbw: float
    busbw: float
    overhead_s: float
    steps: tuple[Step, ...]
    evaluator: str = "closed"
    stack: str = "neuron"
    protocol: str = ""

    @property
    def latency_s(self) -> float:
        """Derived: sum of the steps' latency parts (excludes the software overhead)."""
        return sum(s.latency_s for s in self.steps)

    @property
    def bandwidth_s(self) -> float:
        """Derived: sum of the steps' bandwidth parts."""
        return sum(s.bandwidth_s for s in self.steps)

    @property
    def breakdown(self) -> dict[str, dict[str, float]]:
        """Per level: latency and bandwidth seconds (plus ``software`` for the fixed overhead)."""
        out: dict[str, dict[str, float]] = {}
        for s in self.steps:
            d = out.setdefault(s.level, {"latency_s": 0.0, "bandwidth_s": 0.0})
            d["latency_s"] += s.latency_s
            d["bandwidth_s"] += s.bandwidth_s
        if self.overhead_s:
            out["software"] = {"latency_s": self.overhead_s, "bandwidth_s": 0.0}
        return out

    def to_dict(self) -> dict:
        """JSON-ready, SI units."""
        return {
            "op": self.op,
            "nbytes": self.nbytes,
            "ranks": self.ranks,
            "system": self.system,
            "algo": self.algo,
            "placement": self.placement,
            "evaluator": self.evaluator,
            "stack": self.stack,
            "protocol": self.protocol,
            "time_s": self.time_s,
            "algbw_Bps": self.algbw,
            "busbw_Bps": self.busbw,
            "overhead_s": self.overhead_s,
            "latency_s": self.latency_s,
            "bandwidth_s": self.bandwidth_s,
            "breakdown": self.breakdown,
            "steps": [
                {
                    "phase": s.phase,
                    "level": s.level,
                    "algo": s.algo,
                    "n": s.n,
                    "count": s.count,
                    "bytes_per_rank": s.bytes_per_rank,
                    "latency_s": s.latency_s,
                    "bandwidth_s": s.bandwidth_s,
                }
                for s in self.steps
            ],
        }


# ---------------------------------------------------------------------------------------------
# Flat algorithms over a whole group (one or more levels)
# ---------------------------------------------------------------------------------------------

PHASE = {
    "all-reduce": "all-reduce",
    "all-gather": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "exchange",
    "broadcast": "broadcast",
    "permute": "send-recv",
}


def _ring(op: str, g: Group, m: float) -> list[Step]:
    n = g.ranks
    a = max(lv.latency_s for lv in g.levels)
    slow = min(g.levels, key=lambda lv: lv.ring_bw)
    br = slow.ring_bw
    count, data = {
        "all-reduce": (2 * (n - 1), 2 * _f(n) * m),
        "all-gather": (n - 1, _f(n) * m),
        "reduce-scatter": (n - 1, _f(n) * m),
        "all-to-all": (n - 1, (n * n // 4) / n * m),
        "broadcast": (n - 1, m),
    }[op]
    return [Step(PHASE[op], slow.name, "ring", n, count, data, count * a, data / br)]


def _path_latency(g: Group) -> float:
    """Latency of the longest direct path: torus levels add diameter hops, switches one hop."""
    worst, torus = 0.0, 0.0
    for lv in g.levels:
        if lv.is_torus:
            torus += lv.latency_s * lv.diameter
            worst = max(worst, torus)
        else:
            worst = max(worst, lv.latency_s)
    return worst


def _exchange(g: Group, m: float) -> tuple[float, LevelView]:
    """Uniform exchange of a per-rank buffer ``m`` over the group: levels at once, max of them."""
    total = g.fanout_product
    best, where = 0.0, g.levels[0]
    torus_prefix = 1
    for lv in g.levels:
        if lv.is_torus and torus_prefix == lv.inner:
            torus_prefix *= lv.n
            share = m * torus_prefix / total  # all traffic inside the torus domain moves here
        else:
            share = m * lv.inner * lv.n / total
        t = lv.exchange_time(share)
        if t > best:
            best, where = t, lv
    return best, where


def _direct(op: str, g: Group, m: float) -> list[Step]:
    n, lat = g.ranks, _path_latency(g)
    if op == "permute":
        # shift by one rank: the sub-domain edges cross every level; the slowest one bounds it
        lv = min(g.levels, key=lambda v: v.link_bw)
        return [Step("send-recv", lv.name, "direct", n, 1, m, lv.latency_s, m / lv.link_bw)]
    x, lv = _exchange(g, m)
    if op == "all-reduce":
        return [
            Step("reduce-scatter", lv.name, "direct", n, 1, _f(n) * m, lat, x),
            Step("all-gather", lv.name, "direct", n, 1, _f(n) * m, lat, x),
        ]
    if op == "broadcast":
        root = max((lv for lv in g.levels), key=lambda v: _f(n) * m / v.bw)
        return [
            Step("scatter", root.name, "direct", n, 1, _f(n) * m, lat, _f(n) * m / root.bw),
            Step("all-gather", lv.name, "direct", n, 1, _f(n) * m, lat, x),
        ]
    return [Step(PHASE[op], lv.name, "direct", n, 1, _f(n) * m, lat, x)]


def _rdh_steps(g: Group, pairs: list[tuple[int, float]], phase: str) -> list[Step]:
    """Steps exchanging ``bytes`` with the partner ``offset`` ranks away; grouped by level."""
    by_level: dict[str, list[float]] = {}
    order: list[str] = []
    for offset, nbytes in pairs:
        lv = g.level_of_offset(offset)
        h = lv.hops(max(offset // lv.inner, 1))
        acc = by_level.setdefault(lv.name, [0, 0.0, 0.0, 0.0, lv.n])
        if lv.name not in order:
            order.append(lv.name)
        acc[0] += 1
        acc[1] += nbytes
        acc[2] += lv.latency_s * h
        acc[3] += nbytes * h / lv.ring_bw
    return [
        Step(phase, name, "rdh", g.ranks, int(c), b, lat, bw)
        for name in order
        for c, b, lat, bw, _ in [by_level[name]]
    ]


def _rdh(op: str, g: Group, m: float) -> list[Step]:
    n = g.ranks
    k = n.bit_length() - 1
    p2 = 1 << k
    extra: list[tuple[int, float]] = [(p2, m)] if p2 != n else []  # fold the n - 2^k extra ranks
    halving = [(1 << j, m / (1 << (j + 1))) for j in range(k)]  # distance doubling, data halving
    if op == "all-reduce":
        return [
            *_rdh_steps(g, extra + halving, "reduce-scatter"),
            *_rdh_steps(g, halving[::-1] + extra, "all-gather"),
        ]
    if op in ("all-gather", "reduce-scatter"):
        seq = halving if op == "reduce-scatter" else halving[::-1]
        return _rdh_steps(g, extra + seq if op == "reduce-scatter" else seq + extra, op)
    if op == "all-to-all":  # Bruck: ceil(log2 n) steps of about half the buffer each
        kk = max(1, math.ceil(math.log2(n)))
        return _rdh_steps(g, [(1 << j, m / 2) for j in range(kk)], "exchange")
    # broadcast: binomial scatter (far partners first) + recursive-doubling all-gather
    scatter = [(1 << (k - 1 - j), m / (1 << (j + 1))) for j in range(k)]
    return [*_rdh_steps(g, extra + scatter, "scatter"), *_rdh_steps(g, halving[::-1], "all-gather")]


def _tree(op: str, g: Group, m: float) -> list[Step]:
    n = g.ranks
    slow = min(g.levels, key=lambda lv: lv.ring_bw)
    depth = sum(max(1, math.ceil(math.log2(lv.n))) * lv.latency_s for lv in g.levels)
    steps = sum(max(1, math.ceil(math.log2(lv.n))) for lv in g.levels)
    passes = 2 if op == "all-reduce" else 1
    return [
        Step(PHASE[op], slow.name, "tree", n, passes * steps, m, passes * depth,
             passes * m / slow.ring_bw)
    ]  # fmt: skip


FLAT: dict[str, Callable[[str, Group, float], list[Step]]] = {
    "ring": _ring,
    "direct": _direct,
    "rdh": _rdh,
    "tree": _tree,
}


#: A torus larger than this (chips) is treated like several levels by the default rule: it runs
#: dimension by dimension (as TPU pods do) instead of one ring over every chip. The Neuron rule
#: is stated for one instance (a 16-chip 4x4 torus); this bound is a model choice.
TORUS_FLAT_MAX = 64


#: The largest torus ring that is a hypercube: RDH's distance-doubling partners are one hop
#: apart only where each torus dimension holds at most 4 chips (a 4-ring is a 2-cube; the Trn
#: 4x4 2D torus is "a 4D hyper-cube": aws-neuron-sdk neuron-runtime/explore/
#: intranode-collective-comm.rst, "Recursive Doubling and Halving (RDH) Algorithm").
RDH_MAX_RING = 4


def rule(op: str, nbytes: float, levels: int, hypercube: bool = True) -> str:
    """The default selection (Neuron runtime switch points, calibration section E).

    The RDH band applies where the group's torus is a hypercube (``hypercube``: every torus
    dimension of at most ``RDH_MAX_RING`` chips). On a longer ring (Inferentia2's 12-chip
    NeuronLink ring) distance-doubling partners are several hops apart and share links, and
    the runtime's RDH, built on the 2D torus's hypercube, does not exist: the ring runs there.
    """
    if op in ("all-to-all", "permute"):
        return "direct"
    if levels > 1:
        return "hierarchical"
    if nbytes < MESH_MAX_BYTES:
        return "tree" if op == "broadcast" else "direct"
    return "rdh" if nbytes <= RDH_MAX_BYTES and hypercube else "ring"


def level_is_hypercube(lv: LevelView) -> bool:
    """True unless ``lv`` is a torus with a dimension of more than ``RDH_MAX_RING`` chips."""
    return not lv.is_torus or all(k <= RDH_MAX_RING for k in lv.dims)


def is_hypercube(g: Group) -> bool:
    """True if every level of ``g`` is a hypercube for RDH (``level_is_hypercube``)."""
    return all(level_is_hypercube(lv) for lv in g.levels)


def units(g: Group) -> list[LevelView]:
    """The hierarchical algorithm's stages: each level, torus levels split into their dimensions,
    fastest first (reduce-scatter on the fastest links while the data is largest; the stages
    form a grid, so any order is a valid schedule). Sorting is stable, so ties keep nesting order.
    Each stage's ``inner`` is its stride in rank order (packed placement).
    """
    out: list[LevelView] = []
    for lv in g.levels:
        if lv.is_torus and len([k for k in lv.dims if k > 1]) > 1:
            stride = lv.inner
            for k in lv.dims:
                used = 1 if k == 2 else 2
                ring_bw = lv.bw * used / lv.links
                out.append(replace(lv, n=k, inner=stride, dims=(k,), ring_bw=ring_bw))
                stride *= k
        else:
            out.append(lv)
    return sorted(out, key=lambda v: -v.ring_bw)


def hierarchical_plan(op: str, fanouts: list[int], m: float) -> list[tuple[str, int, float]]:
    """The stages of a hierarchical collective as (sub-op, stage index, bytes per rank).

    All-reduce = reduce-scatter inner to outer (each stage on 1/n of the previous size), then
    all-gather back outer to inner; all-to-all and broadcast move the full size at every stage.
    Shared by the closed form and the flow simulator so both time the same schedule.
    """
    sizes, inner = [], 1
    for n in fanouts:
        sizes.append(m / inner)
        inner *= n
    forward = list(range(len(fanouts)))
    order = {
        "all-reduce": [("reduce-scatter", i) for i in forward]
        + [("all-gather", i) for i in reversed(forward)],
        "reduce-scatter": [(op, i) for i in forward],
        "all-gather": [(op, i) for i in reversed(forward)],
    }.get(op, [(op, i) for i in forward])
    full = op in ("all-to-all", "broadcast")
    return [(sub_op, i, m if full else sizes[i]) for sub_op, i in order]


def _hierarchical(
    op: str, g: Group, m: float, stage_rule: Callable[[str, float, int], str] | None = None
) -> list[Step]:
    stages = units(g)
    subs = [Group(g.system, lv.n, g.placement, (replace(lv, inner=1),)) for lv in stages]
    steps: list[Step] = []
    for sub_op, i, size in hierarchical_plan(op, [lv.n for lv in stages], m):
        if stage_rule is None:
            algo = rule(sub_op, size, 1, is_hypercube(subs[i]))
        else:
            algo = stage_rule(sub_op, size, 1)
        steps += FLAT[algo](sub_op, subs[i], size)
    return steps


def tpu_rule(op: str, nbytes: float, levels: int) -> str:
    """The ``tpu-ici`` stage rule: a bidirectional ring along each torus dimension (all-to-all
    and permute as a direct exchange)."""
    return "direct" if op in ("all-to-all", "permute") else "ring"


def nccl_plan(op: str, g: Group, m: float) -> tuple[list[tuple[str, int, float]], list[LevelView]]:
    """NCCL's stages (levels, fastest first) and plan: the op itself on one stage; otherwise the
    hierarchical plan with each adjacent reduce-scatter + all-gather pair on the same stage run
    as one all-reduce there (so NVLS or a tree can take it, as NCCL's NVLS-tree and tree do)."""
    stages = units(g)
    if len(stages) == 1:
        return [(op, 0, m)], stages
    plan = hierarchical_plan(op, [lv.n for lv in stages], m)
    merged: list[tuple[str, int, float]] = []
    for entry in plan:
        last = merged[-1] if merged else None
        pair = last is not None and (last[0], entry[0]) == ("reduce-scatter", "all-gather")
        if pair and last[1] == entry[1]:
            merged[-1] = ("all-reduce", entry[1], entry[2])
            continue
        merged.append(entry)
    return merged, stages


# ---------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------


def _steps(op: str, algo: str, g: Group, m: float, stage_rule=None) -> list[Step]:
    if algo == "hierarchical":
        return _hierarchical(op, g, m, stage_rule)
    return FLAT[algo](op, g, m)


def algorithms(system: SystemSpec | str, stack: str | None = None) -> tuple[str, ...]:
    """The algorithms ``algo=`` accepts on ``system`` under ``stack`` (default: its vendor's)."""
    stk = canonical_stack(stack, resolve_system(system))
    return NCCL_ALGOS if stk.name == "nccl" else ALGOS


def flow_overheads(system: SystemSpec | str, stack: str | None = None) -> Overheads:
    """The ``Overheads`` the flow simulator should use for ``system``'s stack: Neuron's fitted
    constants on AWS chips; on GPUs NCCL's Simple-protocol latency and ring efficiency (the flow
    simulator runs the generic algorithms, not NCCL's protocol choice); on TPUs ``TPU_ICI``."""
    name = canonical_stack(stack, resolve_system(system)).name
    if name == "nccl":
        simple = NCCL.protocol("Simple")
        return Overheads(software_s=simple.latency_s, link_efficiency=NCCL.ring_efficiency)
    if name == "hccl":
        return IDEAL_NCCL_GROUP  # no Gaudi constants fitted: no overhead, full port rate
    return TPU_ICI if name == "tpu-ici" else FITTED


def resolve_system(system: SystemSpec | str) -> SystemSpec:
    return lookup_system(system) if isinstance(system, str) else system


def collective_time(
    op: str,
    nbytes: float,
    ranks: int,
    system: SystemSpec | str,
    algo: str | None = None,
    placement: str = "packed",
    *,
    overheads: Overheads | None = None,
    fat_tree: FatTree | None = None,
    stack: str | None = None,
) -> CollectiveResult:
    """Closed-form time of collective ``op`` on ``ranks`` chips of ``system``.

    ``nbytes``: the nccl-tests size (see the module docstring). ``algo``: ``"auto"``/None (the
    stack's own choice), ``"best"``, or one the stack runs: Neuron family ``ALGOS`` (or an alias:
    mesh, kangaring, ...); NCCL ``ring``, ``tree``, ``nvls``. ``placement``: ``packed``
    (consecutive ranks fill the innermost domains) or ``spread``. ``stack``: ``neuron``, ``nccl``
    or ``tpu-ici`` (default: the system's vendor's, :func:`trnsim.fabric.stacks.stack_for`).
    ``overheads``: Neuron-family constants; given explicitly, the Neuron-family algorithms run with
    them on any system (stack ``custom``). Deterministic; cached.
    """
    spec = canonical_op(op)
    chosen = canonical_algo(algo)
    sys_spec = resolve_system(system)
    stk = canonical_stack(stack, sys_spec)
    family = "custom" if overheads is not None else stk.name
    if family == "nccl":
        if chosen in ALGOS and chosen != "hierarchical" and chosen not in NCCL_ALGOS:
            raise ConfigError(
                f"algorithm {chosen!r} is not one NCCL runs (stack nccl on {sys_spec.name}); "
                f"valid: {', '.join((*NCCL_ALGOS, *SELECTORS))}"
            )
    elif chosen in NCCL_ALGOS and chosen not in ALGOS:
        raise ConfigError(
            f"algorithm {chosen!r} is an NCCL algorithm; stack {family} on {sys_spec.name} "
            f"runs {', '.join((*ALGOS, *SELECTORS))}"
        )
    elif chosen in ALGOS and chosen not in spec.algos:
        raise ConfigError(
            f"algorithm {chosen!r} does not apply to {spec.name}; valid: {', '.join(spec.algos)}"
        )
    m = inputs.check("collective-bytes", nbytes)
    inputs.check("ranks", ranks)
    if family == "neuron":
        ov = FITTED
    elif family == "tpu-ici":
        ov = TPU_ICI
    else:
        ov = overheads or IDEAL_NCCL_GROUP
    return _cached(
        spec.name,
        m,
        int(ranks) if isinstance(ranks, int) else ranks,
        sys_spec,
        chosen,
        placement,
        ov,
        fat_tree,
        family,
    )


#: NCCL reads link rates unscaled (its efficiencies live in ``NcclParams``).
IDEAL_NCCL_GROUP = Overheads(software_s=0.0, link_efficiency=1.0)


def _nccl_result(op: str, m: float, g: Group, chosen: str, placement: str) -> CollectiveResult:
    plan, stages = nccl_plan(op, g, m)
    forced = chosen if chosen in NCCL_ALGOS else None
    flat = (g.levels, g.ranks, op, m) if len(g.levels) > 1 else None
    proto, tuples = nccl.run(plan, stages, NCCL, forced, flat)
    steps = tuple(Step(*t) for t in tuples)
    algos = list(dict.fromkeys(s.algo for s in steps))
    hier = len(stages) > 1 and len(steps) > 1
    algo = f"hierarchical({'+'.join(algos)})" if hier else algos[0]
    t = proto.latency_s + sum(s.time_s for s in steps)
    algbw = m / t if t > 0 else 0.0
    return CollectiveResult(
        op=op,
        nbytes=m,
        ranks=g.ranks,
        system=g.system.name,
        algo=algo,
        placement=placement,
        time_s=t,
        algbw=algbw,
        busbw=algbw * OPS[op].bus_factor(g.ranks),
        overhead_s=proto.latency_s,
        steps=steps,
        stack="nccl",
        protocol=proto.name,
    )


@lru_cache(maxsize=65536)
def _cached(
    op: str,
    m: float,
    ranks: int,
    sys_spec: SystemSpec,
    chosen: str,
    placement: str,
    ov: Overheads,
    fat_tree: FatTree | None,
    family: str = "neuron",
) -> CollectiveResult:
    spec = OPS[op]
    g = group(sys_spec, ranks, placement, ov.link_efficiency, fat_tree)
    if ranks == 1:
        return CollectiveResult(
            op, m, 1, sys_spec.name, "none", placement, 0.0, 0.0, 0.0, 0.0, (), stack=family
        )
    if family == "nccl":
        return _nccl_result(op, m, g, chosen, placement)
    stage_rule = tpu_rule if family == "tpu-ici" else None
    if chosen == "auto" and family == "tpu-ici":
        algo = "direct" if op == "permute" else "hierarchical"
    elif chosen == "auto":
        big_torus = g.levels[0].is_torus and g.levels[0].n > TORUS_FLAT_MAX
        algo = rule(op, m, len(g.levels) + big_torus, is_hypercube(g))
    elif chosen == "best":
        cands = [(sum(s.time_s for s in _steps(op, a, g, m, stage_rule)), a) for a in spec.algos]
        algo = min(cands)[1]
    else:
        algo = chosen
    steps = tuple(_steps(op, algo, g, m, stage_rule))
    t = ov.software_s + sum(s.time_s for s in steps)
    algbw = m / t if t > 0 else 0.0
    return CollectiveResult(
        op=op,
        nbytes=m,
        ranks=ranks,
        system=sys_spec.name,
        algo=algo,
        placement=placement,
        time_s=t,
        algbw=algbw,
        busbw=algbw * spec.bus_factor(ranks),
        overhead_s=ov.software_s,
        steps=steps,
        stack=family,
    )
