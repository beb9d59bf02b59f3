"""The Kubernetes structured-parameters allocator, for one node, as a plain interpreter.

A reproduction of kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go``
(commit 03ab440), the allocator the scheduler's DynamicResources plugin runs for each node:

- per claim, per request (``exactly``): ``ExactCount`` wants ``count`` devices; ``All`` wants
  every device of the node's pools that matches, decided before the search, and fails if there
  is none or if any is unusable;
- the search is exhaustive depth-first with backtracking, one device at a time, in pool ->
  slice -> device order, first solution wins (``allocateOne``);
- a candidate must not be in use (allocated, or being allocated in this search), must match the
  DeviceClass's selectors then the request's (CEL), must have its counters available
  (partitionable devices: ``consumesCounters`` against the pool's ``sharedCounters``), must not
  carry a NoSchedule / NoExecute taint the request does not tolerate, and must keep every
  ``matchAttribute`` constraint: the devices of the constrained requests all share the
  attribute's value (the first device fixes it; a device without the attribute never fits);
- ``config``: the class's then the claim's configurations that apply to the allocated requests.

Not modelled (refused when a claim asks for them): admin access, prioritized lists
(``firstAvailable``), ``distinctAttribute``, binding conditions, consumable capacity.
``allocate`` also returns None when a search exceeds ``max_steps`` calls of the per-device
step (the real scheduler bounds it by a timeout), saying so in ``Allocator.last_error``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trnsim.dra.cel import CelDevice, selector
from trnsim.dra.k8s import (
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Allocation,
    Attribute,
    Claim,
    Device,
    DeviceClass,
    ManifestError,
    OpaqueConfig,
    Request,
    ResourceSlice,
)

DeviceID = tuple[str, str, str]  # driver, pool, device


class AllocationError(ManifestError):
    """A claim that Kubernetes itself refuses outright (an unknown DeviceClass, an ``All``
    request whose constraint cannot hold): exit status 2."""


@dataclass
class Pool:
    driver: str
    name: str
    node: str
    slices: list[ResourceSlice]
    counters: dict[str, dict[str, int]] = field(default_factory=dict)

    def devices(self):
        for s in self.slices:
            for d in s.devices:
                yield s, d


def gather_pools(slices: list[ResourceSlice]) -> dict[str, list[Pool]]:
    """Pools per node (``GatherPools`` for node-local slices): node name -> its pools."""
    pools: dict[tuple[str, str], Pool] = {}
    for s in slices:
        key = (s.driver, s.pool)
        pool = pools.get(key)
        if pool is None:
            pool = pools[key] = Pool(s.driver, s.pool, s.node_name, [])
        pool.slices.append(s)
        for cs, counters in s.shared_counters:
            pool.counters.setdefault(cs, {}).update(dict(counters))
    by_node: dict[str, list[Pool]] = {}
    for pool in pools.values():
        by_node.setdefault(pool.node, []).append(pool)
    return by_node


class _MatchAttribute:
    """``matchAttributeConstraint``: all devices of the named requests share the value."""

    def __init__(self, requests: tuple[str, ...], attribute: str):
        self.requests = set(requests)
        self.attribute = attribute
        self.value: Attribute | None = None
        self.count = 0

    def applies(self, request: str) -> bool:
        return not self.requests or request in self.requests

    def add(self, request: str, device: Device, driver: str) -> bool:
        if not self.applies(request):
            return True
        attr = device.attribute(self.attribute, driver)
        if attr is None:
            return False
        if self.count == 0:
            self.value = attr
            self.count = 1
            return True
        if self.value is None or attr.kind != self.value.kind or attr.value != self.value.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str) -> None:
        if self.applies(request):
            self.count -= 1


@dataclass
class _ReqData:
    request: Request
    cls: DeviceClass
    num: int
    all_devices: list[tuple[Pool, Device]] = field(default_factory=list)


class Allocator:
    """Allocates claims on one node at a time against the fleet's slices. ``allocated`` (device
    ids in use) and ``consumed`` (counters per pool) are the cluster state it reads; the caller
    commits a result with :meth:`commit`."""

    def __init__(
        self,
        slices: list[ResourceSlice],
        classes: dict[str, DeviceClass],
        max_steps: int = 200_000,
    ):
        self.pools = gather_pools(slices)
        self.classes = classes
        self.allocated: set[DeviceID] = set()
        self.consumed: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        self.max_steps = max_steps
        self.last_error = ""
        self._cel: dict[tuple[str, str], CelDevice] = {}

    # --- selectors ------------------------------------------------------------------------------

    def cel_device(self, pool: Pool, device: Device) -> CelDevice:
        key = (pool.name, device.name)
        cd = self._cel.get(key)
        if cd is None:
            cd = self._cel[key] = CelDevice(device, pool.driver)
        return cd

    def selectable(self, req: _ReqData, pool: Pool, device: Device) -> bool:
        cd = self.cel_device(pool, device)
        for expr in req.cls.selectors:
            if not selector(expr).matches(cd):
                return False
        return all(selector(expr).matches(cd) for expr in req.request.selectors)

    def device_class(self, claim: Claim, request: Request) -> DeviceClass:
        cls = self.classes.get(request.device_class)
        if cls is None:
            raise AllocationError(
                f"{claim.source}: {claim.label}: request {request.name!r}: unknown DeviceClass "
                f"{request.device_class!r} (known: {', '.join(sorted(self.classes)) or 'none'})"
            )
        return cls

    # --- the search -----------------------------------------------------------------------------

    def allocate(self, node: str, claims: list[Claim]) -> list[Allocation] | None:
        """Allocate every claim on ``node`` (all or nothing), or None. Raises
        :class:`AllocationError` where Kubernetes refuses the claim itself."""
        self.last_error = ""
        pools = self.pools.get(node, [])
        reqdata: list[list[_ReqData]] = []
        for claim in claims:
            rows = []
            min_devices = 0
            for request in claim.spec.requests:
                cls = self.device_class(claim, request)
                rd = _ReqData(request, cls, request.count)
                if request.allocation_mode == "All":
                    rd.all_devices = [
                        (p, d) for p in pools for _, d in p.devices() if self.selectable(rd, p, d)
                    ]
                    rd.num = len(rd.all_devices)
                min_devices += rd.num
                rows.append(rd)
            if min_devices > ALLOCATION_RESULTS_MAX:
                self.last_error = (
                    f"{claim.label} wants {min_devices} devices on {node}, more than the "
                    f"{ALLOCATION_RESULTS_MAX} one claim can hold"
                )
                return None
            reqdata.append(rows)
        constraints = [
            [_MatchAttribute(c.requests, c.match_attribute) for c in claim.spec.constraints]
            for claim in claims
        ]
        results: list[list[tuple[str, Pool, Device]]] = [[] for _ in claims]
        allocating: set[DeviceID] = set()
        consumed: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        steps = [0]

        def in_use(pool: Pool, device: Device) -> bool:
            did = (pool.driver, pool.name, device.name)
            return did in self.allocated or did in allocating

        def counters_ok(pool: Pool, device: Device) -> bool:
            if not device.consumes_counters:
                return True
            key = (pool.driver, pool.name)
            base = self.consumed.get(key, {})
            mine = consumed.get(key, {})
            for cs, counters in device.consumes_counters:
                avail = pool.counters.get(cs, {})
                for name, value in counters:
                    used = base.get(cs, {}).get(name, 0) + mine.get(cs, {}).get(name, 0)
                    if used + value > avail.get(name, 0):
                        return False
            return True

        def take_counters(pool: Pool, device: Device, sign: int) -> None:
            sets = consumed.setdefault((pool.driver, pool.name), {})
            for cs, counters in device.consumes_counters:
                row = sets.setdefault(cs, {})
                for name, value in counters:
                    row[name] = row.get(name, 0) + sign * value

        def tainted(req: Request, device: Device) -> bool:
            for taint in device.taints:
                if taint.effect in ("NoSchedule", "NoExecute") and not any(
                    t.tolerates(taint) for t in req.tolerations
                ):
                    return True
            return False

        def try_device(ci: int, rd: _ReqData, pool: Pool, device: Device, must: bool):
            """allocateDevice: in use, counters, taints, constraints; returns an undo or None."""
            if in_use(pool, device) or not counters_ok(pool, device):
                return None
            if tainted(rd.request, device):
                return None
            added = []
            for con in constraints[ci]:
                if not con.add(rd.request.name, device, pool.driver):
                    for c in added:
                        c.remove(rd.request.name)
                    if must:
                        raise AllocationError(
                            f"{claims[ci].label}, request {rd.request.name}: cannot add device "
                            f"{pool.name}/{device.name} because a claim constraint would not "
                            f"be satisfied (allocationMode All with matchAttribute "
                            f"{con.attribute})"
                        )
                    return None
                added.append(con)
            did = (pool.driver, pool.name, device.name)
            allocating.add(did)
            take_counters(pool, device, +1)
            results[ci].append((rd.request.name, pool, device))

            def undo() -> None:
                for c in constraints[ci]:
                    c.remove(rd.request.name)
                allocating.discard(did)
                take_counters(pool, device, -1)
                results[ci].pop()

            return undo

        def allocate_one(ci: int, ri: int, di: int) -> bool:
            steps[0] += 1
            if steps[0] > self.max_steps:
                raise _Budget
            if ci >= len(claims):
                return True
            if ri >= len(reqdata[ci]):
                return allocate_one(ci + 1, 0, 0)
            rd = reqdata[ci][ri]
            if rd.request.allocation_mode == "All" and not rd.all_devices:
                return False
            if di >= rd.num:
                return allocate_one(ci, ri + 1, 0)
            if rd.request.allocation_mode == "All":
                pool, device = rd.all_devices[di]
                undo = try_device(ci, rd, pool, device, True)
                if undo is None:
                    return False
                if allocate_one(ci, ri, di + 1):
                    return True
                undo()
                return False
            for pool in pools:
                for _, device in pool.devices():
                    if in_use(pool, device) or not self.selectable(rd, pool, device):
                        continue
                    undo = try_device(ci, rd, pool, device, False)
                    if undo is None:
                        continue
                    if allocate_one(ci, ri, di + 1):
                        return True
                    undo()
            return False

        try:
            ok = allocate_one(0, 0, 0)
        except _Budget:
            self.last_error = (
                f"the search on {node} gave up after {self.max_steps} steps (the scheduler "
                "bounds it by a timeout)"
            )
            return None
        if not ok:
            return None
        out = []
        for ci, claim in enumerate(claims):
            devs = tuple(
                AllocatedDevice(req, pool.driver, pool.name, device.name)
                for req, pool, device in results[ci]
            )
            out.append(Allocation(claim.name, node, devs, self._configs(claim, reqdata[ci])))
        return out

    @staticmethod
    def _configs(claim: Claim, rows: list[_ReqData]) -> tuple[OpaqueConfig, ...]:
        """The class configs (once per class) then the claim's configs that apply."""
        out: list[OpaqueConfig] = []
        seen: set[str] = set()
        for rd in rows:
            if rd.cls.name in seen:
                continue
            seen.add(rd.cls.name)
            out += [OpaqueConfig((rd.request.name,), c.driver, c.parameters) for c in rd.cls.config]
        names = {rd.request.name for rd in rows}
        out += [c for c in claim.spec.config if not c.requests or set(c.requests) & names]
        return tuple(out)

    def commit(self, allocations: list[Allocation]) -> None:
        """Mark the devices of ``allocations`` in use (and their counters consumed)."""
        for alloc in allocations:
            for r in alloc.results:
                self.allocated.add((r.driver, r.pool, r.device))
                pool = next(p for p in self.pools[alloc.node] if p.name == r.pool)
                device = next(d for _, d in pool.devices() if d.name == r.device)
                sets = self.consumed.setdefault((pool.driver, pool.name), {})
                for cs, counters in device.consumes_counters:
                    row = sets.setdefault(cs, {})
                    for name, value in counters:
                        row[name] = row.get(name, 0) + value

    def release(self, allocations: list[Allocation]) -> None:
        for alloc in allocations:
            for r in alloc.results:
                self.allocated.discard((r.driver, r.pool, r.device))
                pool = next(p for p in self.pools[alloc.node] if p.name == r.pool)
                device = next(d for _, d in pool.devices() if d.name == r.device)
                sets = self.consumed.setdefault((pool.driver, pool.name), {})
                for cs, counters in device.consumes_counters:
                    row = sets.setdefault(cs, {})
                    for name, value in counters:
                        row[name] = row.get(name, 0) - value


class _Budget(Exception):
    pass
