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

Two engines time a phase, with the same arithmetic. :func:`run_phase` (the specification) keeps
one entry per flow. :func:`run_grouped` (the default) works on *flow classes*: flows that the
max-min program cannot tell apart (same bytes, same ready time, same constraints) share one
rate for the whole phase, so one entry per class with its multiplicity suffices, and a link class
(links that carry the same mix of classes) is one entry with its total capacity. Two exact
reductions build the classes (:class:`Grouped`):

- *identical constraints* (any phase, any fabric): flows with the same bytes, latency, set of
  shared links (crossed by more than one flow) and tightest private link are one class; a link
  crossed by one flow only is that flow's private cap. A ring or halving step over a million
  chips collapses to a handful of classes.
- *domain orbits* (a full exchange over ranks 0..R-1 on a fabric of switches, whose domain sizes
  nest): the automorphisms of the packed domain tree (permuting full sibling domains) preserve
  the pattern, so a chip's class is the lowest level at which its domain is the partial one,
  and a flow's class is (source class, destination class, lowest common domain). Pair counts
  come from per-domain chip counts; no flow is enumerated (a 4,096-rank all-to-all has 16.7M).

Phases repeat (a ring's 2(n-1) steps are one pattern); the grouped engine times each distinct
lifted pattern once. Anything else (a torus exchange, an uneven split) takes the first
reduction, which is exact for every phase.
"""

from __future__ import annotations

import heapq
import itertools
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
    level_is_hypercube,
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
    """Every ordered pair of distinct members (``None`` arrays: expanded on demand)."""
    return (None, None, per_pair)


def _expand(n: int, src, dst) -> tuple[np.ndarray, np.ndarray]:
    if src is not None:
        return np.asarray(src), np.asarray(dst)
    s, d = np.divmod(np.arange(n * n), n)
    keep = s != d
    return s[keep], d[keep]


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
    return [(*_expand(n, s, d), b) for s, d, b in _symbolic_pattern(op, algo, n, m)]


def _symbolic_pattern(op: str, algo: str, n: int, m: float) -> list[tuple]:
    """:func:`local_pattern` with a full exchange left as ``(None, None, bytes)``."""
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


@dataclass(frozen=True, slots=True, eq=False)
class Lifted:
    """One phase before expansion: a local pattern run in every sub-group {base + i * stride}.

    ``src``/``dst``: local member indices (``None``: every ordered pair of distinct members).
    """

    src: np.ndarray | None
    dst: np.ndarray | None
    nbytes: float
    n: int
    stride: int
    ranks: int
    label: str

    @property
    def exchange(self) -> bool:
        return self.src is None

    def key(self) -> tuple:
        """Equal keys mean equal phases (same flows, same bytes)."""
        if self.src is None:
            return ("exchange", self.n, self.stride, self.ranks, self.nbytes)
        src, dst = np.asarray(self.src), np.asarray(self.dst)
        return (src.tobytes(), dst.tobytes(), self.n, self.stride, self.ranks, self.nbytes)

    def phase(self) -> Phase:
        """The explicit flows (one entry per flow)."""
        src, dst = _expand(self.n, self.src, self.dst)
        members = np.arange(self.ranks)
        base = members[(members // self.stride) % self.n == 0]
        s = (base[:, None] + src[None, :] * self.stride).ravel()
        d = (base[:, None] + dst[None, :] * self.stride).ravel()
        return Phase(s, d, np.full(len(s), float(self.nbytes)), self.label)

    @property
    def flows(self) -> int:
        groups = len(range(0, self.ranks, self.stride * self.n)) * min(self.stride, self.ranks)
        per = self.n * (self.n - 1) if self.src is None else len(self.src)
        return groups * per


def _lift(pattern: list[tuple], ranks: int, n: int, stride: int, label: str) -> list[Lifted]:
    """Run the pattern in every sub-group {base + i * stride}, all at once."""
    return [Lifted(src, dst, float(b), n, stride, ranks, label) for src, dst, b in pattern]


def plan(
    op: str, nbytes: float, ranks: int, system: SystemSpec, algo: str, placement: str = "packed"
) -> list[Lifted]:
    """The phases of a collective, unexpanded (rank r on chip r; packed placement only)."""
    if placement != "packed":
        raise ConfigError(f"the flow simulator supports packed placement only, got {placement!r}")
    if algo != "hierarchical":
        return _lift(_symbolic_pattern(op, algo, ranks, nbytes), ranks, ranks, 1, algo)
    g = group(system, ranks, placement)
    if g.fanout_product != ranks:
        raise ConfigError(
            f"hierarchical flow simulation needs ranks ({ranks}) to fill its levels exactly "
            f"(fan-outs {[lv.n for lv in g.levels]} multiply to {g.fanout_product})"
        )
    stages = units(g)
    out: list[Lifted] = []
    for sub_op, i, size in hierarchical_plan(op, [lv.n for lv in stages], nbytes):
        lv = stages[i]
        sub_algo = rule(sub_op, size, 1, level_is_hypercube(lv))
        pattern = _symbolic_pattern(sub_op, sub_algo, lv.n, size)
        out += _lift(pattern, ranks, lv.n, lv.inner, f"{sub_op}@{lv.name}")
    return out


def phases(
    op: str, nbytes: float, ranks: int, system: SystemSpec, algo: str, placement: str = "packed"
) -> list[Phase]:
    """The phases of a collective with every flow explicit (the specification's input)."""
    return [lifted.phase() for lifted in plan(op, nbytes, ranks, system, algo, placement)]


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


# ---------------------------------------------------------------------------------------------
# The grouped engine: flow classes with multiplicities
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Grouped:
    """A phase as flow classes. Class c: ``count[c]`` flows of ``nbytes[c]`` bytes, ready after
    ``latency[c]``. Link class j: ``capacity[j]`` is the total over its links. ``ci[k]``,
    ``lj[k]``, ``w[k]``: the flows of class ``ci[k]`` make ``w[k]`` crossings of links of class
    ``lj[k]`` in total. Valid when every link of a class carries the same number of flows of each
    flow class and every flow of a class crosses the same links classes (an equitable partition).
    """

    count: np.ndarray
    nbytes: np.ndarray
    latency: np.ndarray
    capacity: np.ndarray
    ci: np.ndarray
    lj: np.ndarray
    w: np.ndarray


def maxmin_grouped(
    capacity: np.ndarray, ci: np.ndarray, lj: np.ndarray, w: np.ndarray, nclasses: int
) -> np.ndarray:
    """Per-flow max-min fair rate of each class: :func:`maxmin_rates` on the quotient.

    A link class's fair share is its remaining capacity over the crossings of unfrozen flows;
    both are totals over the class's links, so the share is every one of its links' share.
    """
    rate = np.zeros(nclasses)
    has_link = np.bincount(ci, minlength=nclasses) > 0
    rate[~has_link] = np.inf
    active = has_link.copy()
    rem = capacity.astype(float).copy()
    while active.any():
        on = active[ci]
        count = np.bincount(lj[on], weights=w[on], minlength=len(rem))
        used = count > 0
        share = np.full(len(rem), np.inf)
        share[used] = rem[used] / count[used]
        s = share.min()
        rate[active] += s
        rem[used] -= s * count[used]
        saturated = used & (share <= s * (1 + REL_TOL))
        frozen = np.unique(ci[on & saturated[lj]])
        active[frozen] = False
    return rate


def run_grouped(g: Grouped, t0: float = 0.0) -> float:
    """:func:`run_phase` on flow classes; returns the time the last flow finishes."""
    n = len(g.count)
    if n == 0:
        return t0
    ci, lj, w = g.ci, g.lj, g.w
    events: list[tuple[float, int, np.ndarray]] = []
    for seq, t in enumerate(np.unique(g.latency)):
        heapq.heappush(events, (t0 + float(t), seq, np.flatnonzero(g.latency == t)))
    remaining = g.nbytes.astype(float).copy()
    active = np.zeros(n, dtype=bool)
    now, end = t0, t0
    while events or active.any():
        if active.any():
            sel = active[ci]
            local = np.cumsum(active) - 1
            rates = maxmin_grouped(g.capacity, local[ci[sel]], lj[sel], w[sel], int(active.sum()))
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


def _factorize(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(index of each value among the distinct values, number of distinct values).

    A few distinct values (latencies, caps, sizes of one phase) are peeled off one by one
    without a sort; many fall back to ``np.unique``.
    """
    if len(values) == 0 or (values == values[0]).all():
        return np.zeros(len(values), np.int64), 1
    inv = np.full(len(values), -1, np.int64)
    for k in range(8):
        todo = np.flatnonzero(inv < 0)
        if len(todo) == 0:
            return inv, k
        inv[todo[values[todo] == values[todo[0]]]] = k
    distinct, inv = np.unique(values, return_inverse=True)
    return inv.astype(np.int64), len(distinct)


def _factorize_int(values: np.ndarray) -> tuple[np.ndarray, int]:
    """:func:`_factorize` for integers: a lookup table over their range when it is short (no
    sort; indices follow the values' order), else a sort."""
    if len(values) == 0:
        return np.zeros(0, np.int64), 0
    lo, hi = int(values.min()), int(values.max())
    if hi - lo > 4 * len(values) + 1024:
        return _factorize(values)
    present = np.zeros(hi - lo + 1, bool)
    present[values - lo] = True
    remap = np.cumsum(present) - 1
    return remap[values - lo], int(remap[-1]) + 1


#: More runs than this and the shared-link sets are sorted per flow instead.
MAX_RUNS = 64


def _shared_rows(
    fi: np.ndarray, li: np.ndarray, shared: np.ndarray, n: int, nlinks: int
) -> list[np.ndarray]:
    """Each flow's shared links as rows of a (slots x flows) table, -1 where none.

    Slots are the maximal runs of strictly increasing flow index in the incidence list (a flow
    is in a run at most once), so no sort is needed when routes come in a few such runs; flows
    with equal sets in different slots only make finer (still exact) classes.
    """
    if not shared.any():
        return []
    run = np.concatenate([[0], np.cumsum(fi[1:] <= fi[:-1])])
    if run[-1] + 1 <= MAX_RUNS:
        rows = np.full((int(run[-1]) + 1, n), -1, np.int64)
        rows[run[shared], fi[shared]] = li[shared]
        return [r for r in rows if (r >= 0).any()]
    sf, sl = fi[shared], li[shared]
    order = np.argsort(sf * nlinks + sl)  # by flow, then link: a canonical set per flow
    sf, sl = sf[order], sl[order]
    per = np.bincount(sf, minlength=n)
    slot = np.arange(len(sf)) - np.repeat(np.cumsum(per) - per, per)
    rows = np.full((int(per.max()), n), -1, np.int64)
    rows[slot, sf] = sl
    return list(rows)


def group_flows(fabric: Fabric, phase: Phase) -> Grouped:
    """Classes of identical constraints (exact for any phase on any fabric).

    Two flows with the same bytes, latency, set of shared links and tightest private link enter
    the max-min program symmetrically, so they get the same rate at every event.
    """
    src, dst, size = phase.src, phase.dst, phase.nbytes.astype(float)
    keep = (src != dst) & (size > 0)
    src, dst, size = src[keep], dst[keep], size[keep]
    n = len(size)
    if n == 0:
        z = np.zeros(0)
        zi = np.zeros(0, np.int64)
        return Grouped(z, z, z, z, zi, zi, z)
    fi, li, lat = fabric.routes(src, dst)
    shared = np.bincount(li, minlength=len(fabric.capacity))[li] > 1
    private_cap = np.full(n, np.inf)
    np.minimum.at(private_cap, fi[~shared], fabric.capacity[li[~shared]])
    nlinks = len(fabric.capacity)
    cols = [_factorize(size), _factorize(lat), _factorize(private_cap)]
    cols += [_factorize_int(row) for row in _shared_rows(fi, li, shared, n, nlinks)]
    code = np.zeros(n, np.int64)
    radix = 1
    for inv, card in cols:
        if card <= 1:
            continue
        if radix * card >= 2**62:
            code, radix = _factorize(code)
        code = code * card + inv
        radix *= card
    code, radix = _factorize_int(code)
    first = np.full(radix, n, np.int64)
    np.minimum.at(first, code, np.arange(n))
    cls = code
    count = np.bincount(cls, minlength=radix).astype(float)
    # shared links: each its own link class; every flow of a class crosses its representative's
    rep_f = np.zeros(n, bool)
    rep_f[first] = True
    on = shared & rep_f[fi]
    pc, pl = cls[fi[on]], li[on]
    lj_shared, nused = _factorize_int(pl)
    used_links = np.zeros(nused, np.int64)
    used_links[lj_shared] = pl
    capacity = [fabric.capacity[used_links]]
    ci, lj, w = [pc], [lj_shared], [count[pc]]
    # private caps: one link class per flow class, carrying that class alone
    pcap = private_cap[first]
    has = np.isfinite(pcap)
    own = np.flatnonzero(has)
    capacity.append(pcap[has] * count[has])
    ci.append(own)
    lj.append(len(used_links) + np.arange(len(own)))
    w.append(count[has])
    return Grouped(
        count, size[first], lat[first], np.concatenate(capacity),
        np.concatenate(ci), np.concatenate(lj), np.concatenate(w),
    )  # fmt: skip


def _chain(fabric: Fabric, ranks: int) -> list[tuple[int, int, int]] | None:
    """Nested domain sizes below ``ranks``: (size, fabric level, tier or -1), ascending.

    None when the fabric has a torus level or the sizes do not nest (then no orbit reduction).
    """
    out: list[tuple[int, int, int]] = []
    for i, e in enumerate(fabric._layout):
        if e["kind"] != "switch":
            return None
        if e["level"].span < ranks:
            out.append((e["level"].span, i, -1))
        for t, (below, _) in enumerate(e.get("tiers", ())):
            if below < ranks:
                out.append((below, i, t))
    out.sort(key=lambda x: (x[0], x[2]))
    sizes = [1] + [z for z, _, _ in out]
    if any(b % a for a, b in itertools.pairwise(sizes)):
        return None
    return out


def exchange_classes(fabric: Fabric, ranks: int, nbytes: float) -> Grouped | None:
    """Domain-orbit classes of a full exchange (every ordered pair of ranks 0..R-1, ``nbytes``
    each) on a switch fabric; None when the reduction does not apply.

    Chip type tau: the first chain level at which the chip's domain is the partial (last) one
    (K: none). Chips of one type are one orbit; so are pairs with the same (tau_s, tau_d, level
    of their lowest common domain). Pair counts: sum over domains of per-type chip counts.
    """
    chain = _chain(fabric, ranks)
    if chain is None or nbytes <= 0 or ranks < 2:
        return None
    K = len(chain)
    sizes = np.array([z for z, _, _ in chain] + [ranks], dtype=np.int64)  # K: the whole group
    chips = np.arange(ranks, dtype=np.int64)
    tau = np.full(ranks, K, dtype=np.int64)
    for k in range(K - 1, -1, -1):
        z = sizes[k]
        if ranks % z:
            tau[chips // z == ranks // z] = k
    T = K + 1
    n_tau = np.bincount(tau, minlength=T).astype(float)
    # P[k][a, b]: ordered pairs (s, d), types a, b, in one domain of chain level k (k = K: all)
    prev = np.diag(n_tau)
    pairs: list[np.ndarray] = []
    for k in range(K + 1):
        dom = chips // sizes[k] if k < K else np.zeros(ranks, np.int64)
        ndom = int(dom.max()) + 1
        m = np.bincount(dom * T + tau, minlength=ndom * T).reshape(ndom, T).astype(float)
        cur = m.T @ m
        pairs.append(cur - prev)
        prev = cur
    layout = fabric._layout
    nlev = len(layout)
    lvl_of = []  # fabric level of each chain level's lowest common domain
    for k in range(K + 1):
        z = sizes[k]
        lv = next((i for i, e in enumerate(layout) if e["level"].span >= z), nlev - 1)
        lvl_of.append(lv)
    # link classes, keyed; capacity = number of links x per-link capacity
    link_ix: dict[tuple, int] = {}
    caps: list[float] = []

    def link(key: tuple, count: float, cap: float) -> int:
        if key not in link_ix:
            link_ix[key] = len(caps)
            caps.append(count * cap)
        return link_ix[key]

    count, lat, ci, lj, w = [], [], [], [], []
    tier_chain = {(i, t): k for k, (_, i, t) in enumerate(chain) if t >= 0}
    for k in range(K + 1):
        lv = lvl_of[k]
        e = layout[lv]
        per_chip = float(fabric.capacity[e["base"]])
        for a in range(T):
            for b in range(T):
                c = pairs[k][a, b]
                if c <= 0:
                    continue
                cls = len(count)
                count.append(c)
                lat.append(e["level"].latency_s)
                crossings = [
                    (link(("up", lv, a), n_tau[a], per_chip), c),
                    (link(("down", lv, b), n_tau[b], per_chip), c),
                ]
                groups_total = ranks
                for t, (below, tbase) in enumerate(e.get("tiers", ())):
                    tcap = float(fabric.capacity[tbase])
                    if below >= groups_total or sizes[k] <= below:
                        continue
                    j = tier_chain[(lv, t)]
                    for direction, ty in (("tup", a), ("tdown", b)):
                        if ty > j:  # a full group: N_ty / below groups of this chip type
                            key, nlinks = (direction, lv, t, ty), n_tau[ty] / below
                        else:
                            key, nlinks = (direction, lv, t, "partial"), 1.0
                        crossings.append((link(key, nlinks, tcap), c))
                for lk, cw in crossings:
                    ci.append(cls)
                    lj.append(lk)
                    w.append(cw)
    return Grouped(
        np.array(count), np.full(len(count), float(nbytes)), np.array(lat), np.array(caps),
        np.array(ci, np.int64), np.array(lj, np.int64), np.array(w, float),
    )  # fmt: skip


#: Phases that must be listed flow by flow are refused above this many flows (about 4 GB of
#: routes); the per-flow engine needed 5.7 GB for 16.7M flows.
MAX_LISTED_FLOWS = 20_000_000


def grouped_phase(fabric: Fabric, lifted: Lifted) -> Grouped:
    """The flow classes of one phase (domain orbits when they apply, else identical
    constraints)."""
    if lifted.exchange and lifted.stride == 1 and lifted.n == lifted.ranks:
        g = exchange_classes(fabric, lifted.ranks, lifted.nbytes)
        if g is not None:
            return g
    if lifted.flows > MAX_LISTED_FLOWS:
        raise ConfigError(
            f"flow simulation of {lifted.label} would list {lifted.flows:,} flows one by one "
            f"(limit {MAX_LISTED_FLOWS:,}; only a full exchange on a switch fabric is counted "
            "without listing); use the closed form (--evaluator closed) or fewer ranks"
        )
    return group_flows(fabric, lifted.phase())


def simulate_plan(
    fabric: Fabric, lifted_plan: list[Lifted], overhead_s: float = 0.0
) -> tuple[float, list[float]]:
    """:func:`simulate_phases` with the grouped engine; each distinct phase is timed once."""
    from trnsim.report.progress import progress

    t, durations = 0.0, []
    seen: dict[tuple, float] = {}
    with progress("flow simulation (phases)", total=len(lifted_plan)) as bar:
        for lifted in lifted_plan:
            key = lifted.key()
            if key not in seen:
                seen[key] = run_grouped(grouped_phase(fabric, lifted))
            durations.append(seen[key])
            t += seen[key]
            bar.advance()
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
    grouped: bool = True,
) -> CollectiveResult:
    """Flow-level time of a collective; same arguments and result type as ``collective_time``.

    ``algo`` None/"auto" uses the same selection rule as the closed form. ``grouped=False``
    runs the per-flow specification engine (slow: one entry per flow).
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
    lifted_plan = plan(spec.name, float(nbytes), ranks, sys_spec, name, placement)
    if grouped:
        total, durations = simulate_plan(fabric, lifted_plan, ov.software_s)
    else:
        total, durations = simulate_phases(
            fabric, (lifted.phase() for lifted in lifted_plan), ov.software_s
        )
    steps = tuple(
        Step(ph.label, ph.label.split("@")[-1], name, ranks, 1,
             ph.nbytes if ph.flows else 0.0, 0.0, d)
        for ph, d in zip(lifted_plan, durations, strict=True)
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
