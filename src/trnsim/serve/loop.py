"""The event loop: one heap of ``(time, priority, seq, event)`` (a sequence number breaks ties
deterministically; SimPy's kernel is the model), replicas stepping through their schedulers'
plans, requests arriving (open loop, closed loop or a trace), a router in front of the
replicas, and optionally a prefill pool handing each request's KV cache to a decode pool.

A replica at a step boundary asks its policy for a plan (``trnsim.serve.policies``), applies
it (preemptions, admissions with their prefix hits, KV blocks for the new tokens), and takes
the plan's step time (``trnsim.serve.cost.StepModel``). A ``stable`` decode plan is run for
``k`` steps at once, ``k`` the fewest steps until a request finishes, the policy's own horizon
(KV blocks, a context bucket) or ``max_run``; an arrival at a replica in the middle of such a
run cuts it at the first step boundary after the arrival, so the scheduler sees every request
exactly when a step-by-step simulation would. At equal times arrivals come before step ends,
as vLLM's engine adds the requests that arrived during a step before it schedules the next.

Disaggregated serving: a request is prefilled on a replica of the prefill pool (its output cut
to the first token), then its KV cache travels to a replica of the decode pool: each rank
sends its share to the matching rank, a point-to-point transfer timed by ``trnsim.fabric``
(``trnsim.perf.comm.group_time``, "permute" between two chips as far apart as the two replicas;
the pools are laid out prefill first). The decode replica produces the first token the client
sees (as vLLM's prefill/decode proxy streams from the decode instance).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

from trnsim.errors import ConfigError
from trnsim.perf import comm
from trnsim.serve.cost import StepModel
from trnsim.serve.engine import Deployment, Limits, Live, Queues, StepPlan
from trnsim.serve.kv import KVCache
from trnsim.serve.metrics import Collector
from trnsim.serve.workload import Request

ARRIVE, TRANSFER, STEP = 0, 1, 2
ROUTERS = ("round-robin", "least-loaded", "prefix-affinity")
EPS = 1e-9


@dataclass(slots=True)
class Run:
    start: float
    end: float
    steps: int
    tau: float
    plan: StepPlan
    version: int


@dataclass
class ReplicaStats:
    steps: int = 0
    busy_s: float = 0.0
    prefill_steps: int = 0
    decode_steps: int = 0
    mixed_steps: int = 0
    tokens: float = 0.0
    padded_tokens: float = 0.0
    kv_block_seconds: float = 0.0
    kv_peak: int = 0
    preemptions: int = 0
    prefix_hit_tokens: int = 0
    prompt_tokens: int = 0


@dataclass
class TraceLog:
    """Steps and requests kept for a Perfetto trace (up to the caps)."""

    max_steps: int = 0
    max_requests: int = 0
    steps: list[tuple] = field(default_factory=list)
    requests: list[tuple] = field(default_factory=list)
    dropped_steps: int = 0
    dropped_requests: int = 0


class Replica:
    """One engine: its queues, KV cache, limits, step model and policy."""

    def __init__(
        self,
        idx: int,
        role: str,
        dep: Deployment,
        lim: Limits,
        model: StepModel,
        policy: ModuleType,
        sim: Simulation,
        kv: KVCache | None = None,
    ) -> None:
        self.idx = idx
        self.role = role
        self.lim = lim
        self.model = model
        self.policy = policy
        self.sim = sim
        self.q = Queues()
        # ``kv``: a pool shared with the replica's other streams (pipeline micro-batches)
        self.kv = kv or KVCache(lim.num_blocks, lim.block_size, lim.prefix_caching)
        self.run: Run | None = None
        self.last_tau = 0.0  # the latest decode run's step time (a guess for the next)
        self.version = 0
        self.stats = ReplicaStats()

    @property
    def load(self) -> int:
        return len(self.q.running) + len(self.q.waiting)

    # --- arrivals -----------------------------------------------------------------------------

    def enqueue(self, r: Live, now: float) -> None:
        r.replica = self.idx
        self.q.waiting.append(r)
        if self.run is None:
            self.start(now)
        else:
            self.interrupt(now)

    def interrupt(self, now: float) -> None:
        """Cut a multi-step run at the first step boundary at or after ``now``."""
        run = self.run
        if run is None or run.steps == 1:
            return
        k = int((now - run.start) / run.tau) + 1 if run.tau > 0 else 1
        if k >= run.steps:
            return
        tau = run.tau
        if self.sim.exact_cuts:  # time the shorter run as such
            while True:
                tau = self.model.run(run.plan, k)
                if run.start + k * tau >= now - EPS:
                    break
                k += 1
                if k >= run.steps:  # no shorter run ends at or after ``now``: keep the run
                    return
        self.version += 1
        run.steps, run.tau, run.end, run.version = k, tau, run.start + k * tau, self.version
        self.sim.push(run.end, STEP, self, self.version)

    # --- steps --------------------------------------------------------------------------------

    def start(self, now: float) -> None:
        plan = self.policy.schedule(self.q, self.kv, self.lim, self.model.qd)
        self._apply_queue_changes(plan, now)
        if plan.empty:
            self.run = None
            return
        steps = 1
        if plan.stable:  # decode steps timed as a run (even of one), as trnsim infer's TPOT
            steps = self._horizon(plan)
            hint = self.sim.next_arrival(self)
            if hint is not None and steps > 1:  # end the run at the next arrival here
                guess = self.last_tau or self.model.run(plan, 1)
                steps = min(steps, max(1, math.ceil((hint - now) / guess - EPS)))
            tau = self.model.run(plan, steps)
            self.last_tau = tau
        else:
            device, host = self.model.step(plan)
            tau = device + host
        kv = self.kv
        bs = kv.block_size
        for r, n in plan.chunks:
            kv.allocate(r.hold, r.computed + n)
        extra = (steps - 1) * self.model.per_step + self.model.qd
        for r in plan.decodes:
            tokens = r.computed + extra
            if tokens > r.hold.n * bs:  # a new block is needed
                kv.allocate(r.hold, tokens)
        self.version += 1
        self.run = Run(now, now + steps * tau, steps, tau, plan, self.version)
        self.sim.push(self.run.end, STEP, self, self.version)

    def _apply_queue_changes(self, plan: StepPlan, now: float) -> None:
        q, kv = self.q, self.kv
        for v in plan.preempted:
            kv.free_all(v.hold)
            v.computed = 0.0
            v.preemptions += 1
            q.running.remove(v)
            q.waiting.appendleft(v)
        self.stats.preemptions += len(plan.preempted)
        for r, hits in plan.admitted:
            head = q.waiting.popleft()
            if head is not r:
                raise ConfigError("serve: a policy admitted a request out of queue order (bug)")
            if hits:
                r.cached = len(hits) * kv.block_size
                r.computed = max(r.computed, float(r.cached))
                self.stats.prefix_hit_tokens += r.cached
            kv.allocate(r.hold, r.computed, hits)
            q.running.append(r)
            if r.scheduled < 0:
                r.scheduled = now
        for r, _n in plan.chunks:
            if r.scheduled < 0:
                r.scheduled = now

    def _horizon(self, plan: StepPlan) -> int:
        per = self.model.per_step
        k = self.sim.max_run
        for r in plan.decodes:
            left = r.output - r.generated
            k = min(k, max(1, math.ceil(left / per - EPS)))
        k = self.policy.horizon(self.q, self.kv, self.lim, plan, per, self.model.qd, k)
        return max(1, k)

    def finish(self, now: float, version: int) -> None:
        run = self.run
        if run is None or version != run.version:
            return  # a run cut short by an arrival left this event behind
        plan, k, tau = run.plan, run.steps, run.tau
        st, kv, per = self.stats, self.kv, self.model.per_step
        st.steps += k
        st.busy_s += now - run.start
        st.kv_block_seconds += kv.used * (now - run.start)
        st.kv_peak = max(st.kv_peak, kv.used)
        kind = plan.kind
        if kind == "prefill":
            st.prefill_steps += k
        elif kind == "decode":
            st.decode_steps += k
        else:
            st.mixed_steps += k
        real = sum(n for _r, n in plan.chunks) + k * len(plan.decodes) * self.model.qd
        st.tokens += real
        padded = real
        if plan.graphs:
            padded = sum(a if g == "p" else k * a * self.model.qd for g, a, _b in plan.graphs)
        st.padded_tokens += padded
        log = self.sim.trace
        if log is not None:
            if len(log.steps) < log.max_steps:
                log.steps.append(
                    (
                        self.idx,
                        run.start,
                        now,
                        kind,
                        k,
                        len(plan.chunks) + len(plan.decodes),
                        real,
                        padded,
                    )
                )
            else:
                log.dropped_steps += 1
        done: list[Live] = []
        for r, n in plan.chunks:
            r.computed += n
            kv.register(r.hold, r.computed)
            if r.pending() <= EPS:
                if r.last >= 0:  # a preempted request's next token, after its recompute
                    self.sim.metrics.itl.add(now - r.last)
                self._emit(r, now, 1.0)
            if r.generated >= r.output - EPS:
                done.append(r)
        if plan.decodes:
            itl = self.sim.metrics.itl
            start = run.start
            first_end = start + tau
            steady = (k - 1) * len(plan.decodes)
            kp = k * per
            for r in plan.decodes:
                last = r.last
                if last == start:  # its previous token ended the previous step
                    steady += 1
                elif last >= 0:  # a longer gap: prefill steps ran in between
                    itl.add(first_end - last)
                else:
                    r.first = first_end
                r.computed += kp
                r.generated += kp
                r.last = now
                if r.generated >= r.output - EPS:
                    done.append(r)
            itl.add(tau, steady)
        for r in done:
            kv.free_all(r.hold)
            self.q.running.remove(r)
            self.sim.completed(self, r, now)
        self.run = None
        self.start(now)

    def _emit(self, r: Live, now: float, tokens: float) -> None:
        if r.generated <= 0:
            r.first = now
        r.generated += tokens
        r.last = now


class Router:
    """Chooses the replica of a new request: ``round-robin``; ``least-loaded`` (fewest running
    plus waiting requests, lowest index on ties); ``prefix-affinity`` (requests whose first
    prefix block is the same go to the same replica, by rendezvous hashing; requests without
    one go to the least loaded)."""

    def __init__(self, kind: str) -> None:
        if kind not in ROUTERS:
            raise ConfigError(f"router must be one of {', '.join(ROUTERS)}, got {kind!r}")
        self.kind = kind
        self.turn = 0

    def choose(self, req: Request, replicas: list[Replica]) -> Replica:
        if len(replicas) == 1:
            return replicas[0]
        if self.kind == "round-robin":
            r = replicas[self.turn % len(replicas)]
            self.turn += 1
            return r
        if self.kind == "prefix-affinity" and req.hash_ids:
            first = req.hash_ids[0]
            return max(replicas, key=lambda x: hash((first, x.idx)))
        return min(replicas, key=lambda x: (x.load, x.idx))


class Simulation:
    """The kernel: events, replicas, the arrival stream and the collector."""

    def __init__(
        self,
        dep: Deployment,
        lim: Limits,
        policy: ModuleType,
        prec: object,
        metrics: Collector,
        *,
        router: str = "least-loaded",
        disagg: tuple[int, int] | None = None,
        max_run: int = 1 << 30,
        trace: TraceLog | None = None,
        on_done: Callable[[int], None] | None = None,
    ) -> None:
        self.dep = dep
        self.lim = lim
        self.metrics = metrics
        self.max_run = max_run
        self.trace = trace
        self.on_done = on_done
        self.heap: list[tuple] = []
        self.seq = 0
        self.now = 0.0
        self.router = Router(router)
        model = StepModel(dep, lim, prec)
        self.disagg = disagg
        if disagg is None:
            # pipeline micro-batches run as streams, those of one replica on one KV pool
            s = lim.streams
            pools = [
                KVCache(lim.num_blocks, lim.block_size, lim.prefix_caching)
                for _ in range(dep.replicas)
            ]
            self.replicas = [
                Replica(i, "both", dep, lim, model, policy, self, pools[i // s])
                for i in range(dep.replicas * s)
            ]
            self.front = self.replicas
            self.back: list[Replica] = []
        else:
            p, d = disagg
            self.front = [Replica(i, "prefill", dep, lim, model, policy, self) for i in range(p)]
            self.back = [Replica(p + i, "decode", dep, lim, model, policy, self) for i in range(d)]
            self.replicas = self.front + self.back
        self.transfers = 0
        self.transfer_s = 0.0
        self.stream: Iterator[Request] | None = None
        self.closed = False
        self.next_t = math.inf

    @property
    def exact_cuts(self) -> bool:
        """Runs cut by an arrival are re-timed (exact) when few arrivals cut them: with one
        entry replica or round-robin routing, runs already end at the next arrival. With
        load-dependent routing to several replicas, a cut run keeps the step time of the run
        it was planned as (its steps' contexts reach a little further: slightly slower)."""
        return len(self.front) == 1 or self.router.kind == "round-robin"

    def next_arrival(self, rep: Replica) -> float | None:
        """When the next request of the stream reaches ``rep``, if that is known now."""
        if self.stream is None or self.closed or rep.role == "decode":
            return None
        if len(self.front) == 1:
            return self.next_t
        if (
            self.router.kind == "round-robin"
            and self.front[self.router.turn % len(self.front)] is rep
        ):
            return self.next_t
        return None

    def push(self, t: float, kind: int, obj: object, data: object = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, obj, data))

    # --- requests -----------------------------------------------------------------------------

    def _next_from_stream(self, at: float | None = None) -> None:
        req = next(self.stream, None) if self.stream is not None else None
        if req is None:
            self.stream = None
            return
        self.next_t = req.arrival if at is None else at
        self.push(self.next_t, ARRIVE, req)

    def arrive(self, req: Request, now: float) -> None:
        self.metrics.arrived(now)
        lim = self.lim
        if req.prompt >= lim.max_model_len:
            self.metrics.rejected += 1
            if self.closed:
                self._next_from_stream(now)
            return
        out = req.output
        if req.prompt + out > lim.max_model_len:
            out = lim.max_model_len - req.prompt
            self.metrics.capped += 1
        live = Live(req, out, now)
        if self.disagg is not None:  # the prefill pool produces one token; the rest later
            self._targets[req.rid] = out
            live.output = 1
        self.router.choose(req, self.front).enqueue(live, now)

    def completed(self, rep: Replica, r: Live, now: float) -> None:
        if rep.role == "prefill":
            self._handoff(rep, r, now)
            return
        self.metrics.finished(r, now)
        log = self.trace
        if log is not None:
            if len(log.requests) < log.max_requests:
                log.requests.append(
                    (r.req.rid, r.replica, r.arrival, r.scheduled, r.first, now, r.prompt, r.output)
                )
            else:
                log.dropped_requests += 1
        if self.on_done is not None:
            self.on_done(1)
        if self.closed:
            self._next_from_stream(now)

    def _handoff(self, rep: Replica, r: Live, now: float) -> None:
        out = self._targets.pop(r.req.rid)
        target = self.router.choose(r.req, self.back)
        nbytes = self.lim.kv_bytes_per_token * r.prompt
        # Replicas sit side by side; the fabric's strided view takes power-of-two distances,
        # so the distance is rounded up to one (never nearer than the replicas really are).
        hops = 1 << max(0, (target.idx - rep.idx) - 1).bit_length()
        stride = hops * self.dep.replica_ranks
        plan = self.dep.plan
        t = comm.group_time("permute", nbytes, 2, stride, self.dep.system, plan.ranks_per_chip)
        self.transfers += 1
        self.transfer_s += t
        moved = Live(r.req, out, r.arrival)
        moved.computed = float(r.prompt)
        moved.scheduled = r.scheduled
        moved.preemptions = r.preemptions
        moved.cached = r.cached
        self.push(now + t, TRANSFER, moved, target)

    # --- the loop -----------------------------------------------------------------------------

    def run(
        self,
        requests: Iterator[Request],
        closed_concurrency: int | None = None,
        until: float = math.inf,
    ) -> float:
        self._targets: dict[int, int] = {}
        self.stream = iter(requests)
        if closed_concurrency is not None:
            self.closed = True
            for _ in range(closed_concurrency):
                self._next_from_stream(0.0)
        else:
            self._next_from_stream()
        heap = self.heap
        while heap:
            t, kind, _seq, obj, data = heapq.heappop(heap)
            if t > until:  # the benchmark window closed: what is unfinished is not counted
                self.now = until
                break
            self.now = t
            if kind == ARRIVE:
                if not self.closed:
                    self._next_from_stream()
                self.arrive(obj, t)
            elif kind == STEP:
                obj.finish(t, data)
            else:
                data.enqueue(obj, t)
        return self.now
