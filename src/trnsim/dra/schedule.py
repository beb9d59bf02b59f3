"""Place the pods of a manifest on a fleet, claim by claim, as the Kubernetes scheduler's
DynamicResources plugin does, and say why a claim cannot be satisfied.

Each pod's claims are allocated together on one node (:class:`~trnsim.dra.allocator.Allocator`
per node); nodes are tried in fleet order and the first that fits wins (the scheduler scores
feasible nodes with plugins trnsim does not model; fleet order is the deterministic stand-in).
A LeaderWorkerSet group with an exclusive topology takes one domain of that node label (one
UltraServer for ``ultraserver-server-id-4``, a node pair for ``-2``) that no other group uses,
all its pods or none. A claim that allocates but whose opaque config the driver would refuse
on that hardware (LNC, UltraServer mode) is reported as failing at NodePrepareResources.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trnsim.dra import driver
from trnsim.dra.allocator import AllocationError, Allocator, _ReqData
from trnsim.dra.cel import selector
from trnsim.dra.fleet import Fleet, Node
from trnsim.dra.k8s import Allocation, Claim, DeviceClass, ManifestError, OpaqueConfig
from trnsim.dra.manifests import Manifests, Pod, PodClaimRef


@dataclass
class PodResult:
    pod: str
    node: str | None
    allocations: list[Allocation] = field(default_factory=list)
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.node is not None and not self.reason

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "allocated": self.ok,
            "reason": self.reason or None,
            "notes": self.notes,
            "claims": {a.claim: {"status": a.status()} for a in self.allocations},
        }


@dataclass
class Outcome:
    fleet: str
    pods: list[PodResult]
    ignored: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.pods)

    def as_dict(self) -> dict[str, Any]:
        return {
            "fleet": self.fleet,
            "allocated": self.ok,
            "pods": [p.as_dict() for p in self.pods],
            "ignored": list(self.ignored),
        }


def _instantiate(pod: Pod, manifests: Manifests) -> tuple[list[Claim], list[str]]:
    """The pod's claims: a template gives a claim named ``<pod>-<claim name>``."""
    out, shared = [], []
    for ref in pod.claims:
        c = manifests.claim(ref.target, ref.template)
        if ref.template:
            out.append(
                Claim("ResourceClaim", f"{pod.name}-{ref.name}", c.spec, c.namespace, c.source)
            )
        else:
            out.append(c)
            shared.append(c.name)
    return out, shared


def _applicable(alloc: Allocation) -> tuple[OpaqueConfig, ...]:
    return alloc.config


class Scheduler:
    """Keeps the allocator's state across pods (devices in use, shared claims' nodes)."""

    def __init__(self, fleet: Fleet, classes: list[DeviceClass] | None = None):
        self.fleet = fleet
        self.classes = {driver.DEVICE_CLASS.name: driver.DEVICE_CLASS}
        for c in classes or ():
            self.classes[c.name] = c
        self.allocator = Allocator(driver.slices(fleet), self.classes)
        self.labels = {n.name: driver.node_labels(fleet, n) for n in fleet.nodes}
        self.pods_on: Counter[str] = Counter()
        self.shared: dict[str, Allocation] = {}
        self.domain_owner: dict[tuple[str, str], str] = {}

    # -- one pod on one node -------------------------------------------------------------------

    def _try(self, pod: Pod, claims: list[Claim], node: Node) -> list[Allocation] | None:
        todo = [c for c in claims if c.name not in self.shared]
        for c in claims:
            if c.name in self.shared and self.shared[c.name].node != node.name:
                return None
        return self.allocator.allocate(node.name, todo)

    def place(self, pod: Pod, claims: list[Claim], nodes: list[Node]) -> PodResult | None:
        for node in nodes:
            got = self._try(pod, claims, node)
            if got is None:
                continue
            self.allocator.commit(got)
            for a in got:
                if a.claim in {c.name for c in claims if c.kind == "ResourceClaim"}:
                    self.shared.setdefault(a.claim, a)
            self.pods_on[node.name] += 1
            res = PodResult(pod.name, node.name, got, claims=[c.name for c in claims])
            for a in got:
                why = driver.check_config_hardware(_applicable(a), node)
                if why:
                    res.reason = (
                        f"claim {a.claim} allocated on {node.name}, but the driver "
                        f"would refuse its config at NodePrepareResources: {why}"
                    )
            return res
        return None

    def unplace(self, res: PodResult) -> None:
        self.allocator.release(res.allocations)
        if res.node:
            self.pods_on[res.node] -= 1

    # -- diagnosis ---------------------------------------------------------------------------

    def diagnose(self, claims: list[Claim], nodes: list[Node]) -> str:
        """Why no node fits: the first request or constraint that no node can satisfy."""
        alloc = self.allocator
        for claim in claims:
            for request in claim.spec.requests:
                cls = alloc.device_class(claim, request)
                _ReqData(request, cls, request.count)
                total = class_ok = matched = free = 0
                best_node = 0
                kinds: Counter[str] = Counter()
                for node in nodes:
                    here = 0
                    for pool in alloc.pools.get(node.name, []):
                        for _, dev in pool.devices():
                            total += 1
                            cd = alloc.cel_device(pool, dev)
                            if not all(selector(e).matches(cd) for e in cls.selectors):
                                continue
                            class_ok += 1
                            if not all(selector(e).matches(cd) for e in request.selectors):
                                kinds[node.itype.name] += 1
                                continue
                            matched += 1
                            did = (pool.driver, pool.name, dev.name)
                            if did in alloc.allocated or any(
                                t.effect in ("NoSchedule", "NoExecute")
                                and not any(tt.tolerates(t) for tt in request.tolerations)
                                for t in dev.taints
                            ):
                                continue
                            free += 1
                            here += 1
                    best_node = max(best_node, here)
                want = request.count if request.allocation_mode == "ExactCount" else 1
                what = f"{claim.label}: request {request.name!r}"
                sel = " && ".join(request.selectors) or "(no selector)"
                if class_ok == 0:
                    return (
                        f"{what}: none of the fleet's {total} devices is in DeviceClass {cls.name}"
                    )
                if matched == 0:
                    have = ", ".join(sorted(kinds)) or "none"
                    return (
                        f"{what}: no device matches {sel} ({class_ok} devices of class "
                        f"{cls.name}, on {have})"
                    )
                if free == 0:
                    return f"{what}: all {matched} matching devices are in use or tainted"
                if best_node < want:
                    return (
                        f"{what} wants {want} devices on one node; at most {best_node} free "
                        f"matching devices are on one node ({free} free in the fleet)"
                    )
            for con in claim.spec.constraints:
                return (
                    f"{claim.label}: no node has the requested devices free with one value of "
                    f"{con.match_attribute} (the matchAttribute constraint)"
                )
        if alloc.last_error:
            return alloc.last_error
        return "no node can hold all of the pod's claims at once"

    # -- workloads ---------------------------------------------------------------------------

    def run(self, manifests: Manifests) -> Outcome:
        pods = list(manifests.pods)
        if not pods:  # no workload: one pod per claim or template in the file
            pods = [
                Pod(
                    c.name if c.kind == "ResourceClaim" else f"{c.name}-pod",
                    (PodClaimRef("claim", c.name, c.kind == "ResourceClaimTemplate"),),
                )
                for c in manifests.claims
            ]
        results: list[PodResult] = []
        i = 0
        nodes = list(self.fleet.nodes)
        while i < len(pods):
            pod = pods[i]
            if pod.group and pod.topology_key:
                group = [p for p in pods[i:] if p.group == pod.group]
                results += self.place_group(group, manifests, nodes)
                i += len(group)
                continue
            claims, _ = _instantiate(pod, manifests)
            res = self.place(pod, claims, nodes)
            if res is None:
                res = PodResult(pod.name, None, reason=self.diagnose(claims, nodes))
            self._mode_notes(res, claims, group_size=1)
            results.append(res)
            i += 1
        return Outcome(self.fleet.name, results, manifests.ignored)

    def place_group(self, group: list[Pod], manifests: Manifests, nodes: list[Node]):
        key = group[0].topology_key
        domains: dict[str, list[Node]] = {}
        for n in nodes:
            v = self.labels[n.name].get(key)
            if v is not None:
                domains.setdefault(v, []).append(n)
        claims = [_instantiate(p, manifests)[0] for p in group]
        last_reason = ""
        for value, members in domains.items():
            if (key, value) in self.domain_owner or any(self.pods_on[n.name] for n in members):
                continue
            placed: list[PodResult] = []
            for pod, cl in zip(group, claims, strict=True):
                free_nodes = [n for n in members if not any(r.node == n.name for r in placed)]
                res = self.place(pod, cl, free_nodes)
                if res is None:
                    last_reason = (
                        self.diagnose(cl, free_nodes)
                        if free_nodes
                        else (
                            f"{key}={value} has {len(members)} nodes, fewer than the group's "
                            f"{len(group)} pods"
                        )
                    )
                    break
                placed.append(res)
            if len(placed) == len(group):
                self.domain_owner[(key, value)] = group[0].group
                for res, cl in zip(placed, claims, strict=True):
                    self._mode_notes(res, cl, group_size=len(group), topology_key=key)
                return placed
            for res in placed:
                self.unplace(res)
        if not domains:
            reason = (
                f"group {group[0].group}: no node carries the label {key} (the exclusive "
                "topology); the fleet has no UltraServer nodes"
            )
        else:
            free = sum(
                1
                for v, m in domains.items()
                if (key, v) not in self.domain_owner and not any(self.pods_on[n.name] for n in m)
            )
            reason = (
                f"group {group[0].group}: none of the {len(domains)} domains of {key} "
                f"({free} unused) can hold its {len(group)} pods"
                + (f": {last_reason}" if last_reason else "")
            )
        return [PodResult(p.name, None, reason=reason) for p in group]

    @staticmethod
    def _mode_notes(res: PodResult, claims: list[Claim], group_size: int, topology_key: str = ""):
        for a in res.allocations:
            for cfg in a.config:
                p = cfg.params
                if cfg.driver != driver.DRIVER or p.get("kind") != "UltraServerConfig":
                    continue
                mode = p.get("ultraserverMode")
                want_key = driver.LABEL_SERVER.format(n=mode)
                if group_size != mode or (mode > 1 and topology_key != want_key):
                    res.notes.append(
                        f"ultraserverMode={mode}: the runtime expects {mode} pods on the nodes "
                        f"of one {want_key} domain; this pod's group has {group_size}"
                        + (f" on {topology_key}" if topology_key else "")
                    )


def allocate(manifests: Manifests, fleet: Fleet) -> Outcome:
    """Allocate every pod of ``manifests`` on ``fleet``; the outcome says, per pod, the node
    and the devices, or why not. Raises ``ManifestError`` / ``CelError`` for bad input."""
    for c in manifests.claims:
        driver.check_config_static(c.spec, f"{c.source}: {c.label}")
    sched = Scheduler(fleet, list(manifests.classes))
    # unknown DeviceClasses are refused up front, as the API server's admission does not but
    # every scheduling attempt would
    largest = max(n.devices for n in fleet.nodes)
    for c in manifests.claims:
        for r in c.spec.requests:
            sched.allocator.device_class(c, r)
            if r.allocation_mode == "ExactCount" and r.count > largest:
                raise ManifestError(
                    f"{c.source}: {c.label}: request {r.name!r} wants {r.count} devices, but a "
                    f"claim's devices are on one node and the fleet's largest node has "
                    f"{largest} ({fleet.summary()})"
                )
    return sched.run(manifests)


__all__ = ["AllocationError", "Outcome", "PodResult", "Scheduler", "allocate"]
