"""Fleet scheduling over time: one small event loop and a placement policy.

The loop (SimPy's shape: a heap of ``(time, priority, seq, event)``, the sequence number breaking
ties deterministically) handles arrivals, completions, device failures and repairs. After the
events of one instant it offers the queue to the policy in arrival order; a job that does not
fit waits and later jobs may start (``queue="backfill"``, what Kubernetes does: every pending
pod is retried) or block the queue (``queue="fifo"``). A job runs for its duration times its
slowdown where it landed (:mod:`trnsim.dra.speed`).

A failed device is tainted NoExecute: the job on it is evicted and queued again with its
remaining work (it restarts from a checkpoint), and no policy places work on the device until
it is repaired (if the failure gives a repair time).

Metrics: utilisation (busy device-seconds over usable device-seconds, time-weighted),
queueing delay per job (first start minus arrival), fragmentation (free devices stranded on
partly used nodes, whole free nodes stranded in partly used UltraServers, time-weighted), and
per job the slowdown and the nodes and UltraServers it spans.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trnsim.dra import speed
from trnsim.dra.fleet import Fleet
from trnsim.dra.policies import POLICY_HELP, Policy, Shape, policy
from trnsim.dra.state import FleetState, Placement
from trnsim.dra.trace import Job, Trace, TraceError
from trnsim.errors import UsageError

FINISH, FAIL, REPAIR, ARRIVE = 0, 1, 2, 3  # priorities at one instant: free resources first


@dataclass
class JobRecord:
    job: Job
    shape: Shape
    duration: float  # ideal seconds of work (packed placement)
    remaining: float
    first_start: float | None = None
    start: float | None = None
    end: float | None = None
    placement: Placement | None = None
    slowdown: float = 1.0
    slowdowns: list[float] = field(default_factory=list)
    spans: dict[str, int] = field(default_factory=dict)
    evictions: int = 0
    run_token: int = 0
    history: list[tuple[float, float, Placement]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.job.name,
            "arrival_s": self.job.arrival,
            "chips": self.shape.chips,
            "nodes_requested": self.shape.nodes,
            "ideal_duration_s": self.duration,
            "start_s": self.first_start,
            "end_s": self.end,
            "queue_delay_s": None
            if self.first_start is None
            else self.first_start - self.job.arrival,
            "slowdown": self.slowdown,
            "nodes": self.spans.get("nodes"),
            "ultraservers": self.spans.get("ultraservers"),
            "evictions": self.evictions,
        }


@dataclass
class SimResult:
    policy: str
    fleet: str
    records: list[JobRecord]
    makespan_s: float
    utilisation: float
    node_fragmentation: float
    ultraserver_fragmentation: float
    series: dict[str, np.ndarray]
    assumptions: list[str]
    unplaceable: list[str]

    def summary(self) -> dict[str, Any]:
        done = [r for r in self.records if r.end is not None]
        delays = np.array([r.first_start - r.job.arrival for r in done]) if done else np.zeros(1)
        slow = np.array([r.slowdown for r in done]) if done else np.ones(1)
        multi_us = sum(1 for r in done if r.spans.get("ultraservers", 0) > 1)
        return {
            "policy": self.policy,
            "fleet": self.fleet,
            "jobs": len(self.records),
            "completed": len(done),
            "unplaceable": len(self.unplaceable),
            "makespan_s": self.makespan_s,
            "utilisation": self.utilisation,
            "queue_delay_s": {
                "mean": float(delays.mean()),
                "p50": float(np.percentile(delays, 50)),
                "p95": float(np.percentile(delays, 95)),
                "max": float(delays.max()),
            },
            "slowdown": {
                "mean": float(slow.mean()),
                "p95": float(np.percentile(slow, 95)),
                "max": float(slow.max()),
            },
            "jobs_across_ultraservers": multi_us,
            "evictions": sum(r.evictions for r in self.records),
            "fragmentation": {
                "node": self.node_fragmentation,
                "ultraserver": self.ultraserver_fragmentation,
            },
        }

    def as_dict(self, jobs: bool = True) -> dict[str, Any]:
        out = {"summary": self.summary(), "assumptions": self.assumptions}
        out["unplaceable_jobs"] = self.unplaceable
        if jobs:
            out["jobs"] = [r.as_dict() for r in self.records]
        return out


# ---------------------------------------------------------------------------------------------
# Shapes of claim jobs
# ---------------------------------------------------------------------------------------------


def claim_shape(path: Path, fleet: Fleet, state: FleetState) -> Shape:
    """A claim file's request as a job shape: devices counted, the connected group its
    matchAttribute names, whole nodes for ``neuron_node`` requests, and the nodes whose devices
    match its selectors (evaluated with CEL on the driver's attributes)."""
    from trnsim.dra import driver, manifests
    from trnsim.dra.cel import CelDevice, selector

    m = manifests.load(path)
    if not m.claims:
        raise TraceError(f"{path}: no ResourceClaim or ResourceClaimTemplate in the file")
    claim = m.claims[0]
    driver.check_config_static(claim.spec, f"{path}: {claim.label}")
    if len(claim.spec.requests) != 1:
        raise TraceError(f"{path}: a trace job's claim must have one request (simulated shape)")
    req = claim.spec.requests[0]
    classes = {driver.DEVICE_CLASS.name: driver.DEVICE_CLASS, **{c.name: c for c in m.classes}}
    if req.device_class not in classes:
        raise TraceError(
            f"{path}: {claim.label}: unknown DeviceClass {req.device_class!r} "
            f"(known: {', '.join(sorted(classes))})"
        )
    exprs = (*classes[req.device_class].selectors, *req.selectors)
    sels = [selector(e) for e in exprs]
    n = len(fleet.nodes)
    match_dev = np.zeros(n, dtype=np.int64)
    match_node = np.zeros(n, dtype=bool)
    for node in fleet.nodes:
        for i in range(node.devices):
            cd = CelDevice(
                driver.Device("d", driver.device_attributes(fleet, node, i)), driver.DRIVER
            )
            if all(s.matches(cd) for s in sels):
                match_dev[node.index] += 1
        if node.ultraserver is not None:
            cd = CelDevice(
                driver.Device(driver.NODE_DEVICE, driver.node_device_attributes(fleet, node)),
                driver.DRIVER,
            )
            match_node[node.index] = all(s.matches(cd) for s in sels)
    group = None
    for con in claim.spec.constraints:
        tail = con.match_attribute.rsplit("/", 1)[-1]
        for size in driver.GROUP_SIZES:
            if tail in (f"devicegroup{size}_id", f"topology{size}_id"):
                group = size
    key = f"claim:{path}"
    if match_node.any() and not match_dev.any():
        count = req.count if req.allocation_mode == "ExactCount" else 1
        return Shape(0, nodes=count, eligible=match_node, key=key)
    if req.allocation_mode == "All":
        chips = int(match_dev.max())
    else:
        chips = req.count
    eligible = match_dev >= max(chips, 1)
    if not eligible.any():
        raise TraceError(
            f"{path}: {claim.label} matches no node of the fleet with {chips} devices "
            f"(the most on one node: {int(match_dev.max())})"
        )
    return Shape(chips, group=group, eligible=eligible, key=key)


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def simulate(
    trace: Trace,
    fleet: Fleet,
    policy_name: str = "dra",
    queue: str = "backfill",
    on_progress: Callable[[int], None] | None = None,
    place: Policy | None = None,
) -> SimResult:
    """Run ``trace`` on ``fleet`` under ``policy_name`` (or the policy ``place``)."""
    if queue not in ("backfill", "fifo"):
        raise UsageError(f"queue must be backfill or fifo, got {queue!r}")
    pol = place or policy(policy_name)
    state = FleetState(fleet)
    max_node = int(state.devices.max())
    max_nodes_total = len(fleet.nodes)
    records: list[JobRecord] = []
    shapes: dict[str, Shape] = {}
    unplaceable: list[str] = []
    for job in trace.jobs:
        if job.claim:
            path = (trace.base / job.claim).resolve()
            key = str(path)
            if key not in shapes:
                shapes[key] = claim_shape(path, fleet, state)
            shape = shapes[key]
        else:
            shape = Shape(job.chips, nodes=job.nodes)
        need_nodes = shape.nodes or math.ceil(shape.chips / max_node)
        if need_nodes > max_nodes_total or shape.chips > state.usable_devices():
            unplaceable.append(f"{job.describe()}: more than the fleet's {fleet.summary()}")
            continue
        records.append(JobRecord(job, shape, job.duration or 0.0, job.duration or 0.0))

    heap: list[tuple[float, int, int, int, Any]] = []
    seq = 0

    def push(t: float, prio: int, payload: Any) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, prio, seq, prio, payload))
        seq += 1

    for rec in records:
        push(rec.job.arrival, ARRIVE, rec)
    for f in trace.failures:
        node = fleet.node(f.node)
        if not 0 <= f.device < node.devices:
            raise TraceError(
                f"{trace.source}: failure on {node.name} device {f.device}: the node has "
                f"{node.devices} devices"
            )
        push(f.time, FAIL, (node.index, f.device, f.repair))

    queue_list: list[JobRecord] = []
    running: dict[int, JobRecord] = {}  # id(record) -> record
    owner = np.full((state.n_nodes, state.dmax), -1, dtype=np.int64)  # record index per device
    index_of = {id(r): i for i, r in enumerate(records)}
    now = 0.0
    t0 = min((r.job.arrival for r in records), default=0.0)
    busy_area = usable_area = frag_n = frag_u = 0.0
    last = t0
    series_t: list[float] = []
    series_busy: list[int] = []
    series_queue: list[int] = []
    usable = state.usable_devices()
    finished = 0

    def start(rec: JobRecord, p: Placement) -> None:
        state.apply(p)
        rec.placement = p
        rec.start = now
        if rec.first_start is None:
            rec.first_start = now
            if isinstance(rec.job.work, speed.Training):
                rec.duration = rec.remaining = speed.ideal_duration(state, p, rec.job.work)
        rec.slowdown = speed.slowdown(state, p, rec.job.work)
        rec.slowdowns.append(rec.slowdown)
        rec.spans = speed.spans(state, p)
        rec.run_token += 1
        running[id(rec)] = rec
        owner[state._index(p)] = index_of[id(rec)]
        push(now + rec.remaining * rec.slowdown, FINISH, (rec, rec.run_token))

    def stop(rec: JobRecord) -> None:
        p = rec.placement
        assert p is not None
        state.release(p)
        rec.history.append((now if rec.start is None else rec.start, now, p))
        owner[state._index(p)] = -1
        running.pop(id(rec), None)
        rec.placement = None

    def schedule() -> None:
        failed: dict[str, int] = {}  # shape key -> smallest size that did not fit
        kept: list[JobRecord] = []
        blocked = False
        for rec in queue_list:
            if blocked:
                kept.append(rec)
                continue
            size = rec.shape.nodes * max_node or rec.shape.chips
            if failed.get(rec.shape.key, 1 << 62) <= size and rec.shape.group is None:
                kept.append(rec)
                continue
            p = pol(state, rec.shape)
            if p is None:
                failed[rec.shape.key] = min(failed.get(rec.shape.key, 1 << 62), size)
                kept.append(rec)
                blocked = queue == "fifo"
                continue
            start(rec, p)
        queue_list[:] = kept

    while heap:
        t = heap[0][0]
        dt = t - last
        if dt > 0:
            busy = state.busy_devices()
            busy_area += busy * dt
            usable_area += usable * dt
            frag_n += state.node_fragmentation() * dt
            frag_u += state.ultraserver_fragmentation() * dt
            last = t
        now = t
        while heap and heap[0][0] == t:
            _, _, _, kind, payload = heapq.heappop(heap)
            if kind == ARRIVE:
                queue_list.append(payload)
            elif kind == FINISH:
                rec, token = payload
                if token != rec.run_token or rec.placement is None:
                    continue  # evicted earlier
                stop(rec)
                rec.end = now
                rec.remaining = 0.0
                finished += 1
                if on_progress and finished % 100 == 0:
                    on_progress(finished)
            elif kind == FAIL:
                node, dev, repair = payload
                victim = records[owner[node, dev]] if owner[node, dev] >= 0 else None
                if victim is not None:
                    began = now if victim.start is None else victim.start
                    ran = (now - began) / victim.slowdown
                    victim.remaining = max(victim.remaining - ran, 0.0)
                    victim.evictions += 1
                    stop(victim)
                    queue_list.insert(0, victim)
                    queue_list.sort(key=lambda r: r.job.arrival)
                state.taint(node, dev)
                usable = state.usable_devices()
                if repair is not None:
                    push(now + repair, REPAIR, (node, dev))
            elif kind == REPAIR:
                node, dev = payload
                state.untaint(node, dev)
                usable = state.usable_devices()
        schedule()
        series_t.append(now)
        series_busy.append(state.busy_devices())
        series_queue.append(len(queue_list))
    if on_progress:
        on_progress(finished)
    span = last - t0
    assumptions = [
        f"policy {policy_name}: {POLICY_HELP.get(policy_name, 'a given policy')}",
        f"queue {queue}: "
        + (
            "later jobs may start while one waits (Kubernetes retries every pending pod)"
            if queue == "backfill"
            else "strict arrival order"
        ),
        "slowdown: fabric time on the placement (each level's span capped at the job's chips "
        "in one domain) over the packed placement; duration-only jobs are a data-parallel step "
        f"of step_s (default {speed.DEFAULT_STEP_S:g} s) plus an all-reduce of allreduce_bytes "
        f"(default {speed.DEFAULT_ALLREDUCE_BYTES / 2**30:g} GiB)",
        "evicted jobs (failed device) restart from a checkpoint with their remaining work",
        "a job holds every device of its placement (a 3-node dra gang on Trn2 holds 4 nodes)",
    ]
    return SimResult(
        policy=policy_name,
        fleet=fleet.summary(),
        records=records,
        makespan_s=span,
        utilisation=busy_area / usable_area if usable_area else 0.0,
        node_fragmentation=frag_n / span if span else 0.0,
        ultraserver_fragmentation=frag_u / span if span else 0.0,
        series={
            "t": np.array(series_t),
            "busy": np.array(series_busy),
            "queue": np.array(series_queue),
        },
        assumptions=assumptions,
        unplaceable=unplaceable,
    )
