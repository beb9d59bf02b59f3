"""The fleet's occupancy as arrays, for scheduling a trace over time.

``FleetState`` holds, per node, which devices are free (allocated devices and tainted devices
are not), per UltraServer which nodes are whole and free, and the static layout the policies
read: devices per node, the UltraServer of each node and its position in it, the connected
device groups of each node (the driver's ``devicegroup{4,8,16}_id``: rows of the 4x4 torus on
Trn1/Trn2, consecutive ids on Trn3) and the node groupings an UltraServer offers
(``ultraserverMode``). Policies read it and return placements; only the event loop changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from trnsim.dra.driver import GROUP_SIZES, group_index
from trnsim.dra.fleet import Fleet


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job runs: ``nodes[i]`` holds ``devices[i]`` (device indices) of the job.
    ``whole_nodes``: the job holds those nodes whole (as ``neuron_node`` claims)."""

    nodes: tuple[int, ...]
    devices: tuple[tuple[int, ...], ...]
    whole_nodes: bool = False

    @property
    def chips(self) -> int:
        return sum(len(d) for d in self.devices)


class FleetState:
    def __init__(self, fleet: Fleet):
        self.fleet = fleet
        n = len(fleet.nodes)
        self.n_nodes = n
        self.devices = np.array([nd.devices for nd in fleet.nodes], dtype=np.int64)
        self.dmax = int(self.devices.max())
        self.exists = np.arange(self.dmax)[None, :] < self.devices[:, None]
        self.tainted = np.zeros((n, self.dmax), dtype=bool)
        for node, dev in fleet.failed:
            self.tainted[node, dev] = True
        self.busy = np.zeros((n, self.dmax), dtype=bool)
        self.n_busy = 0
        self.node_us = np.array(
            [-1 if nd.ultraserver is None else nd.ultraserver for nd in fleet.nodes], dtype=np.int64
        )
        self.node_pos = np.array([nd.node_in_ultraserver for nd in fleet.nodes], dtype=np.int64)
        self.n_us = len(fleet.ultraservers)
        self.us_nodes = [np.array(u.nodes, dtype=np.int64) for u in fleet.ultraservers]
        self.us_size = np.array([len(u.nodes) for u in fleet.ultraservers], dtype=np.int64)
        self.standalone = np.flatnonzero(self.node_us < 0)
        # connected groups of the driver's devicegroup{4,8,16}_id: contiguous device ranges of
        # `size` on every instance type here (checked per type); block_free[size][node, b] is
        # the free devices of group b (-1 where the node has no such group)
        self.group_sizes = tuple(s for s in GROUP_SIZES if s <= self.dmax)
        types = {nd.itype.name: nd.itype for nd in fleet.nodes}
        for it in types.values():
            for size in self.group_sizes:
                if it.devices >= size and any(
                    group_index(it, d, size) != d // size for d in range(it.devices)
                ):
                    raise ValueError(f"{it.name}: devicegroup{size} is not contiguous")
        modes = {name: it.ultraserver_modes for name, it in types.items()}
        self.type_of = [nd.itype.name for nd in fleet.nodes]
        names = list(dict.fromkeys(self.type_of))  # fleet order
        self.type_id = np.array([names.index(t) for t in self.type_of], dtype=np.int64)
        self.n_types = len(names)
        self.modes = [modes[t] for t in self.type_of]
        self.distinct_devices = tuple(int(d) for d in np.unique(self.devices))
        self.block_valid = {
            g: (np.arange(self.dmax // g)[None, :] + 1) * g <= self.devices[:, None]
            for g in self.group_sizes
            if self.dmax % g == 0
        }
        self._refresh()

    # --- derived views --------------------------------------------------------------------------

    def _blocks(self, idx) -> None:
        for g, valid in self.block_valid.items():
            counts = self.free[idx].reshape(-1, self.dmax // g, g).sum(axis=2)
            self.block_free[g][idx] = np.where(valid[idx], counts, -1)

    def _refresh(self) -> None:
        self.free = self.exists & ~self.busy & ~self.tainted
        self.free_count = self.free.sum(axis=1)
        self.node_whole_free = self.free_count == self.devices
        self.us_free_nodes = np.array(
            [int(self.node_whole_free[m].sum()) for m in self.us_nodes], dtype=np.int64
        )
        self.block_free = {
            g: np.zeros((self.n_nodes, self.dmax // g), dtype=np.int64) for g in self.block_valid
        }
        self._blocks(slice(None))

    def _touch(self, nodes: tuple[int, ...]) -> None:
        idx = np.unique(np.asarray(nodes, dtype=np.int64))
        self.free[idx] = self.exists[idx] & ~self.busy[idx] & ~self.tainted[idx]
        self.free_count[idx] = self.free[idx].sum(axis=1)
        self.node_whole_free[idx] = self.free_count[idx] == self.devices[idx]
        self._blocks(idx)
        for u in set(self.node_us[idx].tolist()) - {-1}:
            self.us_free_nodes[u] = int(self.node_whole_free[self.us_nodes[u]].sum())

    # --- changes (the event loop only) ----------------------------------------------------------

    _index_cache: ClassVar[dict[int, tuple[Placement, tuple[np.ndarray, np.ndarray]]]] = {}

    @classmethod
    def _index(cls, p: Placement) -> tuple[np.ndarray, np.ndarray]:
        """(node, device) index arrays of a placement (cached while the placement lives)."""
        hit = cls._index_cache.get(id(p))
        if hit is not None and hit[0] is p:
            return hit[1]
        rows = np.repeat(np.asarray(p.nodes, dtype=np.int64), [len(d) for d in p.devices])
        cols = np.fromiter((d for devs in p.devices for d in devs), dtype=np.int64)
        if len(cls._index_cache) > 4096:
            cls._index_cache.clear()
        cls._index_cache[id(p)] = (p, (rows, cols))
        return rows, cols

    def apply(self, p: Placement) -> None:
        rows, cols = self._index(p)
        if not self.free[rows, cols].all():
            raise RuntimeError(f"placement {p} is not free")
        self.busy[rows, cols] = True
        self.n_busy += len(rows)
        self._touch(p.nodes)

    def release(self, p: Placement) -> None:
        rows, cols = self._index(p)
        self.busy[rows, cols] = False
        self.n_busy -= len(rows)
        self._touch(p.nodes)

    def taint(self, node: int, device: int) -> None:
        self.tainted[node, device] = True
        self._touch((node,))

    def untaint(self, node: int, device: int) -> None:
        self.tainted[node, device] = False
        self._touch((node,))

    # --- metrics --------------------------------------------------------------------------------

    def usable_devices(self) -> int:
        return int((self.exists & ~self.tainted).sum())

    def busy_devices(self) -> int:
        return self.n_busy

    def node_fragmentation(self) -> float:
        """Free devices stranded on partly used nodes, as a fraction of all free devices."""
        free = self.free_count.sum()
        if free == 0:
            return 0.0
        partial = (self.free_count > 0) & (self.free_count < self.devices)
        return float(self.free_count[partial].sum() / free)

    def ultraserver_fragmentation(self) -> float:
        """Whole free nodes stranded in partly used UltraServers, as a fraction of all whole
        free nodes of UltraServers (0 without UltraServers)."""
        if self.n_us == 0:
            return 0.0
        total = self.us_free_nodes.sum()
        if total == 0:
            return 0.0
        partial = (self.us_free_nodes > 0) & (self.us_free_nodes < self.us_size)
        return float(self.us_free_nodes[partial].sum() / total)
