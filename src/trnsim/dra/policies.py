"""Placement policies: pure functions ``policy(state, shape) -> Placement | None``.

They read a :class:`~trnsim.dra.state.FleetState` and a job's :class:`Shape` and never change
the state (the event loop applies what they return). Every policy is all-or-nothing for a job
(a gang): a multi-node job starts when all its nodes are found.

- ``dra``: topology-aware, as Neuron DRA claims and the UltraServer operator place work
  (deploy/eks/dra.rst, ultraserver-operator.rst). A job that fits in a node takes devices of one
  connected group (``matchAttribute: resource.aws.com/devicegroup{4,8,16}_id``, the smallest
  group that holds it), on the busiest node that has such a group free (best fit), sparing nodes
  of wholly free UltraServers. A multi-node job takes whole nodes (``neuron_node`` claims): up to
  the largest ``ultraserverMode`` (4) an aligned block of that many nodes of one UltraServer
  (the mode rounded up: a 3-node job holds 4); up to an UltraServer's nodes, nodes of one
  UltraServer; beyond, whole free UltraServers (the operator's ``serverCount``) plus the rest on
  one more UltraServer.
- ``count``: the device plugin (``aws.amazon.com/neuron: N``): counts devices only. A pod takes
  the first free devices of the first node with enough of them; a multi-node job is pods of a
  node's devices each, on the first nodes that have them, wherever they are.
- ``best-fit``: packing without topology: the same pods, each on the node with the fewest free
  devices that still holds it (whole nodes from the UltraServers with the fewest free nodes).

Placement within a node picks device indices in order; only ``dra`` keeps a job's devices in
one connected group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from trnsim.dra.state import FleetState, Placement
from trnsim.errors import UnknownNameError


@dataclass(frozen=True, slots=True)
class Shape:
    """What a job asks for: ``chips`` devices, or ``nodes`` whole nodes (``neuron_node``
    claims); ``group``: the connected-group size its claim's matchAttribute asks (None: the
    policy's own choice); ``eligible``: the nodes whose devices its selectors match (None:
    all)."""

    chips: int
    nodes: int = 0
    group: int | None = None
    eligible: np.ndarray | None = None
    key: str = ""  # identifies the eligibility mask, for the loop's failure memo

    def __post_init__(self) -> None:
        if self.chips < 1 and self.nodes < 1:
            raise ValueError(
                f"a job needs chips >= 1 or nodes >= 1, got {self.chips}, {self.nodes}"
            )


def _eligible(state: FleetState, shape: Shape) -> np.ndarray:
    return np.ones(state.n_nodes, dtype=bool) if shape.eligible is None else shape.eligible


def _node_size(state: FleetState, elig: np.ndarray) -> int:
    if elig.all():
        return state.dmax
    sizes = state.devices[elig]
    return int(sizes.max()) if sizes.size else 0


def _first_free(state: FleetState, node: int, n: int) -> tuple[int, ...]:
    return tuple(int(d) for d in np.flatnonzero(state.free[node])[:n])


def _is_multi(state: FleetState, shape: Shape, elig: np.ndarray) -> bool:
    return shape.nodes > 0 or shape.chips > _node_size(state, elig)


def _whole(state: FleetState, nodes: list[int]) -> Placement:
    return Placement(
        tuple(nodes),
        tuple(tuple(range(int(state.devices[n]))) for n in nodes),
        whole_nodes=True,
    )


def _nodes_needed(state: FleetState, shape: Shape, elig: np.ndarray) -> tuple[int, int]:
    size = _node_size(state, elig)
    k = shape.nodes if shape.nodes else math.ceil(shape.chips / size)
    return k, size


# ---------------------------------------------------------------------------------------------
# dra: topology-aware, gang
# ---------------------------------------------------------------------------------------------


def _group_size(state: FleetState, shape: Shape, node_devices: int) -> int:
    if shape.group:
        return shape.group
    for g in state.group_sizes:
        if g >= shape.chips and g <= node_devices:
            return g
    return node_devices


def dra_topology(state: FleetState, shape: Shape) -> Placement | None:
    elig = _eligible(state, shape)
    if not _is_multi(state, shape, elig):
        return _dra_single(state, shape, elig)
    k, size = _nodes_needed(state, shape, elig)
    for same_type in _types(state, elig & (state.devices == size)):
        cand = same_type & state.node_whole_free
        if state.node_us[same_type][0] >= 0:
            got = _dra_ultraservers(state, k, cand) if cand.any() else None
        else:
            nodes = np.flatnonzero(cand)
            got = _whole(state, nodes[:k].tolist()) if nodes.size >= k else None
        if got is not None:
            return got
    return None


def _types(state: FleetState, mask: np.ndarray):
    """``mask`` split by instance type, in fleet order: a job's nodes are of one type (a
    workload's pods select an instance type)."""
    if state.n_types == 1:
        if mask.any():
            yield mask
        return
    for t in range(state.n_types):
        m = mask & (state.type_id == t)
        if m.any():
            yield m


def _dra_single(state: FleetState, shape: Shape, elig: np.ndarray) -> Placement | None:
    big = np.iinfo(np.int64).max
    spare = np.zeros(state.n_nodes, dtype=np.int64)
    if state.n_us:  # spare the nodes of wholly free UltraServers for gangs
        whole_us = state.us_free_nodes == state.us_size
        us = state.node_us
        spare = ((us >= 0) & whole_us[np.maximum(us, 0)]).astype(np.int64)
    best: tuple[int, int, int, int] | None = None  # key, node, block, group size
    sizes = state.distinct_devices if shape.eligible is None else np.unique(state.devices[elig])
    for g in sorted({_group_size(state, shape, int(d)) for d in sizes}):
        if g == 1 or g not in state.block_free:
            ok = elig & (state.free_count >= shape.chips) & (state.devices >= g)
            fits = None
        else:
            bf = state.block_free[g]
            fits = np.where(bf >= shape.chips, bf, big)
            ok = elig & (fits.min(axis=1) < big)
        if not ok.any():
            continue
        key = np.where(ok, spare * (state.dmax + 1) + state.free_count, big)
        node = int(np.argmin(key))
        block = int(np.argmin(fits[node])) if fits is not None else -1
        if best is None or key[node] < best[0]:
            best = (int(key[node]), node, block, g)
    if best is None:
        return None
    _, node, block, g = best
    if block < 0:
        return Placement((node,), (_first_free(state, node, shape.chips),))
    devs = np.flatnonzero(state.free[node, block * g : (block + 1) * g])[: shape.chips] + block * g
    return Placement((node,), (tuple(int(d) for d in devs),))


def _aligned_block(state: FleetState, u: int, k: int, cand: np.ndarray) -> list[int] | None:
    members = state.us_nodes[u]
    ok = cand[members]
    for start in range(0, len(members) - k + 1, k):
        if ok[start : start + k].all():
            return members[start : start + k].tolist()
    return None


def _dra_ultraservers(state: FleetState, k: int, cand: np.ndarray) -> Placement | None:
    free_per_us = np.zeros(state.n_us, dtype=np.int64)
    np.add.at(free_per_us, state.node_us[cand], 1)
    sizes = state.us_size
    per_us = int(sizes[state.node_us[cand][0]])
    modes = state.modes[int(np.flatnonzero(cand)[0])]
    max_mode = max(modes) if modes else 1

    def one_us(k_part: int, exclude: set[int]) -> list[int] | None:
        if k_part <= max_mode:
            k_alloc = min(m for m in modes if m >= k_part)
            order = np.argsort(free_per_us, kind="stable")  # best fit: fewest free first
            for u in order:
                if int(u) in exclude or free_per_us[u] < k_alloc:
                    continue
                block = _aligned_block(state, int(u), k_alloc, cand)
                if block is not None:
                    return block
            return None
        fits = np.where(free_per_us >= k_part, free_per_us, np.iinfo(np.int64).max)
        for u in exclude:
            fits[u] = np.iinfo(np.int64).max
        u = int(np.argmin(fits))
        if fits[u] == np.iinfo(np.int64).max:
            return None
        members = state.us_nodes[u]
        return members[cand[members]][:k_part].tolist()

    if k <= per_us:
        nodes = one_us(k, set())
        return _whole(state, nodes) if nodes else None
    m, r = divmod(k, per_us)
    whole = np.flatnonzero(free_per_us == sizes)
    if whole.size < m:
        return None
    chosen = whole[:m].tolist()
    nodes = [int(n) for u in chosen for n in state.us_nodes[u]]
    if r:
        rest = one_us(r, set(chosen))
        if rest is None:
            return None
        nodes += rest
    return _whole(state, nodes)


# ---------------------------------------------------------------------------------------------
# count (device plugin) and best-fit
# ---------------------------------------------------------------------------------------------


def _pods(state: FleetState, shape: Shape, elig: np.ndarray, pick_node, pick_whole):
    if not _is_multi(state, shape, elig):
        cand = elig & (state.free_count >= shape.chips)
        if not cand.any():
            return None
        node = pick_node(cand)
        return Placement((node,), (_first_free(state, node, shape.chips),))
    k, size = _nodes_needed(state, shape, elig)
    full, rem = (k, 0) if shape.nodes else divmod(shape.chips, size)
    for same_type in _types(state, elig & (state.devices == size)):
        nodes = pick_whole(same_type & state.node_whole_free, full)
        if nodes is None:
            continue
        devices = [tuple(range(size)) for _ in nodes]
        if rem:
            cand2 = same_type & (state.free_count >= rem)
            cand2[nodes] = False
            if not cand2.any():
                continue
            node = pick_node(cand2)
            nodes.append(node)
            devices.append(_first_free(state, node, rem))
        return Placement(tuple(nodes), tuple(devices))
    return None


def count_only(state: FleetState, shape: Shape) -> Placement | None:
    def first(cand: np.ndarray) -> int:
        return int(np.argmax(cand))

    def first_whole(cand: np.ndarray, n: int) -> list[int] | None:
        nodes = np.flatnonzero(cand)[:n]
        return nodes.tolist() if nodes.size == n else None

    return _pods(state, shape, _eligible(state, shape), first, first_whole)


def best_fit(state: FleetState, shape: Shape) -> Placement | None:
    def tightest(cand: np.ndarray) -> int:
        return int(np.argmin(np.where(cand, state.free_count, np.iinfo(np.int64).max)))

    def packed_whole(cand: np.ndarray, n: int) -> list[int] | None:
        nodes = np.flatnonzero(cand)
        if nodes.size < n:
            return None
        if state.n_us:
            us = state.node_us[nodes]
            busy = np.where(us >= 0, state.us_free_nodes[np.maximum(us, 0)], 1 << 30)
            nodes = nodes[np.argsort(busy, kind="stable")]
        return nodes[:n].tolist()

    return _pods(state, shape, _eligible(state, shape), tightest, packed_whole)


Policy = Callable[[FleetState, Shape], Placement | None]

POLICIES: dict[str, Policy] = {"dra": dra_topology, "count": count_only, "best-fit": best_fit}
POLICY_HELP = {
    "dra": "topology-aware DRA: connected device groups, whole-UltraServer gangs",
    "count": "device-plugin style: device counts only, first fit",
    "best-fit": "packing without topology: the tightest node first",
}


def policy(name: str) -> Policy:
    if name not in POLICIES:
        raise UnknownNameError(f"unknown policy {name!r}; valid: {', '.join(POLICIES)}")
    return POLICIES[name]
