"""Topologies built from ``trnsim.hw``: how a group of ranks sits on a system's fabric levels,
and (for the flow simulator) the graph of chips, switches and directed links.

Every bandwidth and latency comes from a :class:`trnsim.hw.FabricLevel`; this module only adds
geometry (torus dimensions, domains, routes) and two model choices stated here:

- **Placement.** ``packed``: consecutive ranks fill the innermost domains first (rank r on chip r).
  ``spread``: ranks are dealt round-robin over the innermost domains (one rank per server before
  a second one), the worst case for inner-level locality.
- **Per-level links are separate.** A chip reaches each level through that level's own links
  (Trn3: 4 PCIe links to the in-server switch, 5 to the rack layer, 2 to the inter-rack layer;
  Trn2: the 4x4 torus links plus the Z-ring links between instances). Traffic between two chips
  whose smallest common domain is level L uses level L's links only (and, on a torus, the torus
  links of the levels below it, by dimension-ordered routing).

A group's shape per level is summarised by :class:`LevelView` (fan-out ``n``, hop latency,
per-chip bandwidths, torus geometry); closed forms read these and never loop over ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.hw import FabricLevel, SystemSpec

PLACEMENTS = ("packed", "spread")
SWITCH_KINDS = frozenset({"switch", "nvswitch", "fat-tree", "single", "hierarchical"})


@dataclass(frozen=True, slots=True)
class FatTree:
    """The scale-out (EFA) fat-tree above the UltraServers: a model configuration, not a spec.

    ``tiers``: switch tiers (1 = one non-blocking switch; 2 = leaf + spine; 3 = leaf, spine, core).
    ``leaf_chips``: chips under one leaf switch (default: one domain of the level below, e.g. one
    UltraServer). ``fanout``: leaf groups under one tier-2 switch (and so on up).
    ``oversubscription``: downlink / uplink bandwidth at every tier above the leaf (1.0 is
    non-blocking); default: the level's figure in ``hw`` (None there means 1.0).
    """

    tiers: int = 2
    leaf_chips: int | None = None
    fanout: int = 16
    oversubscription: float | None = None

    def __post_init__(self) -> None:
        if self.tiers < 1:
            raise ConfigError(f"fat-tree tiers must be >= 1, got {self.tiers}")
        if self.fanout < 2:
            raise ConfigError(f"fat-tree fanout must be >= 2, got {self.fanout}")
        if self.oversubscription is not None and self.oversubscription < 1.0:
            raise ConfigError(
                f"fat-tree oversubscription must be >= 1.0 (1.0 = non-blocking), "
                f"got {self.oversubscription}"
            )


@dataclass(frozen=True, slots=True)
class LevelView:
    """One fabric level as a group of ranks uses it.

    ``n``: fan-out (sub-domains of the level below joined by this level in the group).
    ``inner``: ranks per sub-domain (product of the fan-outs below). ``bw``: a chip's bandwidth
    into the level (hw figure x link efficiency / oversubscription). ``ring_bw``: what a ring
    (neighbour exchange) can use: all of ``bw`` on a switch; on a torus the share of links a ring
    over the occupied dimensions touches. ``dims``: occupied torus dimensions of this level.
    """

    name: str
    kind: str
    index: int
    n: int
    inner: int
    latency_s: float
    bw: float
    ring_bw: float
    dims: tuple[int, ...] = ()
    links: int = 1

    @property
    def is_torus(self) -> bool:
        return self.kind == "torus"

    @property
    def link_bw(self) -> float:
        """Derived: one directed link's bandwidth (torus) or the whole per-chip figure (switch)."""
        return self.bw / self.links if self.is_torus else self.bw

    @property
    def diameter(self) -> int:
        """Derived: hops between the farthest pair (torus: sum of half ring sizes; switch: 1)."""
        return sum(k // 2 for k in self.dims) if self.is_torus else 1

    def exchange_time(self, total: float) -> float:
        """Bandwidth time of a uniform exchange in which each rank sends ``total * (n-1)/n`` bytes
        spread evenly over the other ``n - 1`` sub-domains (all-to-all with per-rank buffer
        ``total``).

        Switch: egress-bound, ``(n-1)/n * total / bw``. Torus (dimension-ordered, shortest
        direction, bidirectional rings of size k): the busiest directed link of dimension i carries
        ``total * k/8`` (k >= 3; ``total/2`` for k = 2, one link), so the time is
        ``max_i total * c(k_i) / link_bw``. Derivation: a ring of k nodes, each sending m to every
        other node by the shorter way, loads each of its 2k directed links with m k^2/8; with
        m = total / n and n/k such rings per dimension, the load is total * k / 8.
        """
        if self.n <= 1:
            return 0.0
        if not self.is_torus:
            return (self.n - 1) / self.n * total / self.bw
        worst = max((0.5 if k == 2 else k / 8.0) for k in self.dims if k > 1)
        return total * worst / self.link_bw

    def hops(self, offset: int) -> int:
        """Hops between sub-domains ``offset`` apart in rank order (torus: shortest way)."""
        if not self.is_torus:
            return 1
        hops, rest = 0, offset
        for k in self.dims:
            c = rest % k
            rest //= k
            hops += min(c, k - c)
        return max(hops, 1)


@dataclass(frozen=True, slots=True)
class Group:
    """A group of ``ranks`` chips on ``system``: the levels it spans (fan-out > 1), inner first."""

    system: SystemSpec
    ranks: int
    placement: str
    levels: tuple[LevelView, ...] = field(default=())

    @property
    def fanout_product(self) -> int:
        """Derived: product of the fan-outs (equals ``ranks`` when the placement divides evenly)."""
        return math.prod(lv.n for lv in self.levels)

    def level_of_offset(self, offset: int) -> LevelView:
        """The slowest level crossed when every rank r exchanges with r XOR ``offset`` (a power
        of two; packed rank order): the first level whose domains (``inner * n`` ranks) hold every
        such pair, i.e. span the whole group or are a multiple of ``2 * offset``."""
        for lv in self.levels:
            d = lv.inner * lv.n
            if d >= self.ranks or d % (2 * offset) == 0:
                return lv
        return self.levels[-1]


def own_dims(level: FabricLevel, inner_span: int) -> tuple[int, ...]:
    """The torus dimensions a level adds over the level below (the trn2 UltraServer's Z ring)."""
    dims = tuple(level.dims)
    if not dims:
        return (level.span // max(inner_span, 1),)
    prod = 1
    for i, k in enumerate(dims):
        if prod == inner_span:
            return dims[i:]
        prod *= k
    if prod == inner_span:
        return ()
    if inner_span == 1:
        return dims
    return (level.span // inner_span,)


def _occupied(dims: tuple[int, ...], n: int) -> tuple[int, ...]:
    """Dimensions occupied by ``n`` consecutive positions filling ``dims`` in order."""
    out, rest = [], n
    for k in dims:
        if rest <= 1:
            break
        out.append(min(k, rest))
        rest = math.ceil(rest / k)
    return tuple(out) or (1,)


def check_ranks(system: SystemSpec, ranks: int) -> None:
    """Rule: 1 <= ranks <= system.chips, or up to the outermost level's span for scale-out."""
    if not isinstance(ranks, int | np.integer) or ranks < 1:
        raise ConfigError(f"ranks must be a positive integer, got {ranks!r}")
    if ranks <= system.chips:
        return
    outer = system.levels[-1] if system.levels else None
    if outer is not None and outer.kind == "fat-tree" and ranks <= outer.span:
        return
    limit = outer.span if outer is not None and outer.kind == "fat-tree" else system.chips
    raise ConfigError(
        f"ranks ({ranks}) exceed what {system.name!r} can join: {system.chips} chips"
        + (
            f", or up to {limit} over its scale-out level {outer.name!r}"
            if outer is not None and outer.kind == "fat-tree"
            else " (no scale-out fabric level)"
        )
    )


@lru_cache(maxsize=4096)
def group(
    system: SystemSpec,
    ranks: int,
    placement: str = "packed",
    efficiency: float = 1.0,
    fat_tree: FatTree | None = None,
) -> Group:
    """Decompose ``ranks`` on ``system`` into per-level fan-outs (see the module docstring).

    Ranks per domain at level l: packed ``r_l = min(ranks, span_l)``; spread
    ``r_l = min(ranks, span_l, ceil(ranks * span_l / C))`` with C the chips in use. The fan-out is
    ``n_l = ceil(r_l / r_{l-1})``; when a level's span does not divide the group the product of
    fan-outs rounds up (a stated approximation).
    """
    if placement not in PLACEMENTS:
        raise UnknownNameError(f"unknown placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
    check_ranks(system, ranks)
    chips = max(system.chips, ranks)
    views: list[LevelView] = []
    prev_r, prev_span = 1, 1
    for i, lvl in enumerate(system.levels):
        r = min(ranks, lvl.span)
        if placement == "spread":
            r = min(r, max(1, math.ceil(ranks * lvl.span / chips)))
        n = math.ceil(r / prev_r)
        if n > 1:
            views.append(_view(lvl, i, n, prev_r, prev_span, efficiency, fat_tree))
        prev_r, prev_span = max(r, prev_r), lvl.span
    if not views and ranks > 1:
        raise ConfigError(f"system {system.name!r} has no fabric level joining {ranks} ranks")
    return Group(system=system, ranks=ranks, placement=placement, levels=tuple(views))


def _view(
    lvl: FabricLevel,
    index: int,
    n: int,
    inner: int,
    inner_span: int,
    efficiency: float,
    fat_tree: FatTree | None,
) -> LevelView:
    bw = lvl.bw_per_direction * efficiency
    if lvl.kind == "fat-tree":
        over = (fat_tree.oversubscription if fat_tree else None) or lvl.oversubscription or 1.0
        bw /= over
    if lvl.kind != "torus":
        return LevelView(lvl.name, lvl.kind, index, n, inner, lvl.latency_s, bw, bw)
    level_dims = own_dims(lvl, inner_span)
    links = lvl.links_per_chip or sum(1 if k == 2 else 2 for k in level_dims if k > 1)
    dims = _occupied(level_dims, n)
    used = sum(1 if k == 2 else 2 for k in dims if k > 1)
    ring_bw = bw * min(used, links) / links
    return LevelView(lvl.name, "torus", index, n, inner, lvl.latency_s, bw, ring_bw, dims, links)


# ---------------------------------------------------------------------------------------------
# The link graph (for the flow simulator)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Fabric:
    """Directed links of ``chips`` chips of ``system``, with capacities (bytes/s), and routes.

    Switch-like levels give each chip one up and one down link into the level (capacity: the
    level's per-chip bandwidth); the switch itself is non-blocking. A fat-tree level adds, per
    tier above the leaf, an up and a down link per switch group with capacity
    ``chips below x bw / oversubscription^t``. Torus levels give each chip one link per
    direction per own dimension (a single link for a dimension of size 2), capacity
    ``bw / links``; routes are dimension-ordered, shortest way (ties go the + way).
    """

    system: SystemSpec
    chips: int
    capacity: np.ndarray  # (links,) bytes/s
    names: tuple[str, ...]  # per link block: level name (for reports)
    block_of_link: np.ndarray  # (links,) index into names
    _layout: tuple = ()

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised routes: (flow index, link index) incidence pairs and per-flow latency (s)."""
        return _routes(self, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))


def build_fabric(
    system: SystemSpec, chips: int, efficiency: float = 1.0, fat_tree: FatTree | None = None
) -> Fabric:
    """The link graph for ``chips`` chips (rank r on chip r; see :func:`group` for the rule)."""
    check_ranks(system, chips)
    caps: list[np.ndarray] = []
    names: list[str] = []
    layout = []
    base = 0
    inner_span = 1
    ft = fat_tree or FatTree()
    for lvl in system.levels:
        bw = lvl.bw_per_direction * efficiency
        entry: dict = {"level": lvl, "base": base, "inner_span": inner_span}
        if lvl.kind == "torus":
            dims = own_dims(lvl, inner_span)
            links = lvl.links_per_chip or sum(1 if k == 2 else 2 for k in dims if k > 1)
            n = chips * len(dims) * 2
            entry.update(kind="torus", dims=dims)
            caps.append(np.full(n, bw / links))
        else:
            entry.update(kind="switch")
            n = 2 * chips
            caps.append(np.full(n, bw))
            if lvl.kind == "fat-tree" and ft.tiers > 1:
                over = ft.oversubscription or lvl.oversubscription or 1.0
                leaf = ft.leaf_chips or inner_span
                tiers = []
                below = leaf
                for t in range(1, ft.tiers):
                    groups = math.ceil(chips / below)
                    tiers.append((below, base + n))
                    caps.append(np.full(2 * groups, below * bw / over**t))
                    n += 2 * groups
                    below *= ft.fanout
                entry.update(tiers=tuple(tiers))
        names.append(lvl.name)
        layout.append(entry)
        base += n
        inner_span = lvl.span
    capacity = np.concatenate(caps)
    block = np.zeros(len(capacity), dtype=np.int64)
    for i, e in enumerate(layout):
        end = layout[i + 1]["base"] if i + 1 < len(layout) else len(capacity)
        block[e["base"] : end] = i
    return Fabric(system, chips, capacity, tuple(names), block, tuple(layout))


def _lca(fabric: Fabric, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Index of the smallest level whose domain holds both chips (-1 when src == dst)."""
    out = np.full(len(src), -1, dtype=np.int64)
    todo = src != dst
    for i, e in enumerate(fabric._layout):
        span = e["level"].span
        same = todo & (src // span == dst // span)
        out[same] = i
        todo &= ~same
    out[todo] = len(fabric._layout) - 1
    return out


def _routes(fabric: Fabric, src: np.ndarray, dst: np.ndarray):
    lca = _lca(fabric, src, dst)
    fi: list[np.ndarray] = []
    li: list[np.ndarray] = []
    lat = np.zeros(len(src))
    idx = np.arange(len(src))
    chips = fabric.chips
    for i, e in enumerate(fabric._layout):
        lvl = e["level"]
        mask = lca == i
        if not mask.any():
            continue
        if e["kind"] == "switch":
            f = idx[mask]
            fi += [f, f]
            li += [e["base"] + src[mask], e["base"] + chips + dst[mask]]
            lat[mask] = lvl.latency_s
            for below, tbase in e.get("tiers", ()):
                cross = mask & (src // below != dst // below)
                f = idx[cross]
                groups = math.ceil(chips / below)
                fi += [f, f]
                li += [tbase + src[cross] // below, tbase + groups + dst[cross] // below]
            continue
        # torus: move through every torus level up to this one, inner first
        cur = src[mask].copy()
        target = dst[mask]
        f = idx[mask]
        hops_lat = np.zeros(len(f))
        for j in range(i + 1):
            ej = fabric._layout[j]
            if ej["kind"] != "torus":
                raise ConfigError(
                    f"flow routing over torus level {lvl.name!r} needs torus levels below it; "
                    f"level {ej['level'].name!r} is a {ej['level'].kind}"
                )
            span, inner = ej["level"].span, ej["inner_span"]
            dims = ej["dims"]
            stride = 1
            for d, k in enumerate(dims):
                cd = (cur % span) // inner // stride % k
                td = (target % span) // inner // stride % k
                delta = (td - cd) % k
                plus = delta <= k // 2
                steps = np.where(plus, delta, k - delta)
                for s in range(int(steps.max(initial=0))):
                    move = steps > s
                    if not move.any():
                        break
                    c = cur[move]
                    dirn = np.where(plus[move] | (k == 2), 0, 1)
                    link = ej["base"] + (c * len(dims) + d) * 2 + dirn
                    fi.append(f[move])
                    li.append(link)
                    digit = (c % span) // inner // stride % k
                    new = np.where(dirn == 0, (digit + 1) % k, (digit - 1) % k)
                    cur[move] = c + (new - digit) * inner * stride
                    hops_lat[move] += ej["level"].latency_s
                stride *= k
        lat[mask] = hops_lat
    if not fi:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), lat
    return np.concatenate(fi), np.concatenate(li), lat
