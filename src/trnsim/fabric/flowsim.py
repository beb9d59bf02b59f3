"""A flow-level simulator: links with capacities, max-min fair sharing, per-hop latency, a fixed
software overhead. For congestion, uneven all-to-all (all-to-all-v) and mixed traffic, and as an
independent check of the closed forms.

Model. A collective is a sequence of *phases* (the steps of its algorithm, one barrier between
phases). A phase is a set of flows (src chip, dst chip, bytes). A flow is routed on the
:class:`~trnsim.fabric.topology.Fabric` graph; it becomes ready after its path latency (sum of
per-hop latencies from ``hw``) and then shares every link on its path with max-min fairness
(progressive filling: raise all unfrozen rates together until a link saturates, freeze the flows
on it, repeat; vectorised with NumPy ``bincount`` over the flow-link incidence). Rates are
recomputed at every event (a flow becomes ready or finishes); events sit on a heap ordered by
``(time, seq)`` so ties resolve deterministically. The software overhead (the calibration
constant) is added once per collective, as in the closed form.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from trnsim.errors import ConfigError
from trnsim.fabric.calibration import FITTED, Overheads
from trnsim.fabric.collectives import (
    OPS,
    CollectiveResult,
    Step,
    canonical_algo,
    canonical_op,
    hierarchical_plan,
    resolve_system,
    rule,
    units,
)
from trnsim.fabric.topology import Fabric, FatTree, build_fabric, group
from trnsim.hw import SystemSpec

REL_TOL = 1e-9


@dataclass(frozen=True, slots=True, eq=False)
class Phase:
    """Flows that start together: ``src``, ``dst`` (chip ids) and ``nbytes`` arrays; a label."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    label: str = "phase"


def maxmin_rates(capacity: np.ndarray, fi: np.ndarray, li: np.ndarray, nflows: int) -> np.ndarray:
    """Max-min fair rates of ``nflows`` flows; flow ``fi[k]`` crosses link ``li[k]``.

    Progressive filling: every unfrozen flow's rate rises by the smallest fair share
    ``remaining capacity / unfrozen flows`` over links; flows on the links that saturate freeze.
    Flows that cross no link get ``inf``.
    """
    rate = np.zeros(nflows)
    has_link = np.bincount(fi, minlength=nflows) > 0
    rate[~has_link] = np.inf
    active = has_link.copy()
    rem = capacity.astype(float).copy()
    while active.any():
        on = active[fi]
        count = np.bincount(li[on], minlength=len(rem))
        used = count > 0
        share = np.full(len(rem), np.inf)
        share[used] = rem[used] / count[used]
        s = share.min()
        rate[active] += s
        rem[used] -= s * count[used]
        saturated = used & (share <= s * (1 + REL_TOL))
        frozen = np.unique(fi[on & saturated[li]])
        active[frozen] = False
    return rate


def run_phase(fabric: Fabric, phase: Phase, t0: float = 0.0) -> float:
    """Simulate one phase starting at ``t0``; returns the time its last flow finishes."""
    src, dst, size = phase.src, phase.dst, phase.nbytes.astype(float)
    keep = (src != dst) & (size > 0)
    src, dst, size = src[keep], dst[keep], size[keep]
    n = len(size)
    if n == 0:
        return t0
    fi, li, lat = fabric.routes(src, dst)
    events: list[tuple[float, int, np.ndarray]] = []
    for seq, t in enumerate(np.unique(lat)):  # one ready event per distinct path latency
        heapq.heappush(events, (t0 + float(t), seq, np.flatnonzero(lat == t)))
    remaining = size.copy()
    active = np.zeros(n, dtype=bool)
    now, end = t0, t0
    while events or active.any():
        if active.any():
            sel = active[fi]
            local = np.cumsum(active) - 1  # flow id -> index among active flows
            rates = maxmin_rates(fabric.capacity, local[fi[sel]], li[sel], int(active.sum()))
            ids = np.flatnonzero(active)
            finish = now + remaining[ids] / rates
            t_fin = float(finish.min())
        else:
            ids, rates, finish, t_fin = None, None, None, math.inf
        t_ready = events[0][0] if events else math.inf
        t_next = min(t_fin, t_ready)
        if ids is not None:
            remaining[ids] -= rates * (t_next - now)
            done = ids[finish <= t_next * (1 + REL_TOL) + 1e-18]
            remaining[done] = 0.0
            active[done] = False
            end = max(end, t_next) if len(done) else end
        now = t_next
        while events and events[0][0] <= now * (1 + REL_TOL):
            _, _, flows = heapq.heappop(events)
            active[flows] = True
    return end


# ---------------------------------------------------------------------------------------------
# Collectives as phases (local patterns over a 1-D group of n members, lifted onto a grid)
# ---------------------------------------------------------------------------------------------


def _ring(n: int, m: float, count: int) -> list[tuple]:
    a = np.arange(n)
    return [(a, (a + 1) % n, m / n)] * count


def _exchange(n: int, per_pair: float) -> tuple:
    s, d = np.divmod(np.arange(n * n), n)
    keep = s != d
    return (s[keep], d[keep], per_pair)


def _rdh(op: str, n: int, m: float) -> list[tuple]:
    k = n.bit_length() - 1
    p2 = 1 << k
    extra = np.arange(n - p2)
    fold = [(extra + p2, extra, m)] if len(extra) else []
    unfold = [(extra, extra + p2, m)] if len(extra) else []
    a = np.arange(p2)
    halving = [(a, a ^ (1 << j), m / (1 << (j + 1))) for j in range(k)]
    if op == "all-reduce":
        return fold + halving + halving[::-1] + unfold
    if op == "reduce-scatter":
        return fold + halving
    if op == "all-gather":
        return halving[::-1] + unfold
    if op == "all-to-all":
        b = np.arange(n)
        return [(b, (b + (1 << j)) % n, m / 2) for j in range(max(1, math.ceil(math.log2(n))))]
    scatter = []
    for j in range(k):
        d = 1 << (k - 1 - j)
        holders = np.arange(0, p2, 2 * d)
        scatter.append((holders, holders + d, m / (1 << (j + 1))))
    return scatter + halving[::-1] + unfold


def local_pattern(op: str, algo: str, n: int, m: float) -> list[tuple]:
    """Phases of ``op`` with ``algo`` over members 0..n-1: (src, dst, bytes per flow) tuples."""
    if algo == "ring" and op in ("all-reduce", "all-gather", "reduce-scatter"):
        return _ring(n, m, 2 * (n - 1) if op == "all-reduce" else n - 1)
    if algo == "direct":
        if op == "permute":
            a = np.arange(n)
            return [(a, (a + 1) % n, m)]
        ex = _exchange(n, m / n)
        if op == "all-reduce":
            return [ex, ex]
        if op == "broadcast":
            others = np.arange(1, n)
            return [(np.zeros(n - 1, np.int64), others, m / n), ex]
        return [ex]
    if algo == "rdh":
        return _rdh(op, n, m)
    raise ConfigError(
        f"the flow simulator has no phase model for {op} with {algo!r}; it simulates ring "
        "(all-reduce, all-gather, reduce-scatter), direct (all ops), rdh (all ops) and "
        "hierarchical compositions of them"
    )


def _lift(pattern: list[tuple], ranks: int, n: int, stride: int, label: str) -> list[Phase]:
    """Run the pattern in every sub-group {base + i * stride}, all at once."""
    members = np.arange(ranks)
    base = members[(members // stride) % n == 0]
    out = []
    for src, dst, b in pattern:
        s = (base[:, None] + np.asarray(src)[None, :] * stride).ravel()
        d = (base[:, None] + np.asarray(dst)[None, :] * stride).ravel()
        out.append(Phase(s, d, np.full(len(s), float(b)), label))
    return out


def phases(
    op: str, nbytes: float, ranks: int, system: SystemSpec, algo: str, placement: str = "packed"
) -> list[Phase]:
    """The phases of a collective (rank r on chip r; packed placement only)."""
    if placement != "packed":
        raise ConfigError(f"the flow simulator supports packed placement only, got {placement!r}")
    if algo != "hierarchical":
        return _lift(local_pattern(op, algo, ranks, nbytes), ranks, ranks, 1, algo)
    g = group(system, ranks, placement)
    if g.fanout_product != ranks:
        raise ConfigError(
            f"hierarchical flow simulation needs ranks ({ranks}) to fill its levels exactly "
            f"(fan-outs {[lv.n for lv in g.levels]} multiply to {g.fanout_product})"
        )
    stages = units(g)
    out: list[Phase] = []
    for sub_op, i, size in hierarchical_plan(op, [lv.n for lv in stages], nbytes):
        lv = stages[i]
        sub_algo = rule(sub_op, size, 1)
        pattern = local_pattern(sub_op, sub_algo, lv.n, size)
        out += _lift(pattern, ranks, lv.n, lv.inner, f"{sub_op}@{lv.name}")
    return out


def simulate_phases(
    fabric: Fabric, plan: Iterable[Phase], overhead_s: float = 0.0
) -> tuple[float, list[float]]:
    """Run phases back to back (a barrier between them); returns (total, per-phase durations)."""
    t, durations = 0.0, []
    for ph in plan:
        t_end = run_phase(fabric, ph, t)
        durations.append(t_end - t)
        t = t_end
    return overhead_s + t, durations


def simulate(
    op: str,
    nbytes: float,
    ranks: int,
    system: SystemSpec | str,
    algo: str | None = None,
    placement: str = "packed",
    *,
    overheads: Overheads | None = None,
    fat_tree: FatTree | None = None,
) -> CollectiveResult:
    """Flow-level time of a collective; same arguments and result type as ``collective_time``.

    ``algo`` None/"auto" uses the same selection rule as the closed form.
    """
    from trnsim.fabric.collectives import collective_time

    spec = canonical_op(op)
    sys_spec = resolve_system(system)
    ov = overheads or FITTED
    closed = collective_time(op, nbytes, ranks, sys_spec, algo, placement, overheads=ov,
                             fat_tree=fat_tree)  # fmt: skip
    chosen = canonical_algo(algo)
    name = closed.algo if chosen in ("auto", "best") else chosen
    if ranks == 1:
        return closed
    fabric = build_fabric(sys_spec, ranks, ov.link_efficiency, fat_tree)
    plan = phases(spec.name, float(nbytes), ranks, sys_spec, name, placement)
    total, durations = simulate_phases(fabric, plan, ov.software_s)
    steps = tuple(
        Step(ph.label, ph.label.split("@")[-1], name, ranks, 1, float(ph.nbytes.max(initial=0)),
             0.0, d)
        for ph, d in zip(plan, durations, strict=True)
    )  # fmt: skip
    algbw = float(nbytes) / total if total > 0 else 0.0
    return CollectiveResult(
        op=spec.name,
        nbytes=float(nbytes),
        ranks=ranks,
        system=sys_spec.name,
        algo=name,
        placement=placement,
        time_s=total,
        algbw=algbw,
        busbw=algbw * OPS[spec.name].bus_factor(ranks),
        overhead_s=ov.software_s,
        steps=steps,
        evaluator="flow",
    )


def alltoallv(
    matrix: np.ndarray,
    system: SystemSpec | str,
    *,
    overheads: Overheads | None = None,
    fat_tree: FatTree | None = None,
) -> float:
    """Time of an uneven all-to-all: ``matrix[s, d]`` bytes from rank s to rank d (packed)."""
    mat = np.asarray(matrix, dtype=float)
    if mat.ndim != 2 or mat.shape[0] != mat.shape[1]:
        raise ConfigError(f"all-to-all-v needs a square bytes matrix, got shape {mat.shape}")
    if (mat < 0).any() or not np.isfinite(mat).all():
        raise ConfigError("all-to-all-v bytes must be finite and >= 0")
    ov = overheads or FITTED
    n = mat.shape[0]
    fabric = build_fabric(resolve_system(system), n, ov.link_efficiency, fat_tree)
    s, d = np.divmod(np.arange(n * n), n)
    total, _ = simulate_phases(fabric, [Phase(s, d, mat.ravel(), "all-to-all-v")], ov.software_s)
    return total
