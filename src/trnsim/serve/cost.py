"""Step times of a replica's plans: ``trnsim.perf.step.StepCost`` on the shapes a plan runs,
plus the engine's host terms.

Shapes. A Neuron plan runs compiled graphs (``StepPlan.graphs``), one after another: a
prefill segment of padded tokens attending to the cached tokens before it, or a decode of a
padded batch whose sequences each read the context bucket's tokens of KV (padding costs like
real work). Those times are kept per shape, and the set of shapes is the compiled-graph set,
so it stays small. A vLLM plan runs its
exact shape: each prefill chunk its own ``SeqGroup``, the decodes one group at their mean
context (attention is linear in the context), split at the model's sliding window so the
windowed layers see each sequence's own ``min(context, window)``.

A run of ``k`` identical decode steps (the batch unchanged, each sequence one token longer per
step) is timed by ``trnsim.perf.step.decode_offsets``, the same quadrature ``trnsim infer``'s
TPOT uses: so one request served alone reproduces ``trnsim infer`` exactly.

Host terms (``trnsim.serve.fitted`` holds the fitted constants and names their rows):

- the stack's host work per forward pass (``Efficiency.step_overhead_s``, inside ``StepTime``);
- sampling on the host: a step whose logits go to the CPU pays a round trip,
  ``HOST_SAMPLING_STEP_S``, plus ``HOST_SAMPLING_S_PER_LOGIT`` x vocabulary for each sequence
  sampled (the real ones: padding rows are not sampled); some graphs always sample on the host
  (``StepPlan.host_samples``);
- the engine's own host work where its policy states it (``StepPlan.host_s``: optimum-neuron's
  runner, fitted);
- async scheduling: while the batch is unchanged, host work overlaps the device: a steady step
  costs ``max(device, host)`` instead of ``device + host`` (the first step of a run pays both).
"""

from __future__ import annotations

from trnsim.perf.step import StepCost, StepTime, decode_offsets
from trnsim.serve.engine import Deployment, Limits, StepPlan
from trnsim.serve.fitted import HOST_SAMPLING_S_PER_LOGIT, HOST_SAMPLING_STEP_S
from trnsim.workloads import SeqGroup


class StepModel:
    """Seconds of a replica's steps (module docstring)."""

    def __init__(self, dep: Deployment, lim: Limits, prec: object) -> None:
        self.sc = StepCost(
            dep.model,
            dep.system,
            dep.plan,
            prec=prec,
            stack=dep.stack,
            compute_model=dep.compute_model,
            speculative=dep.speculative,
        )
        self.lim = lim
        self.qd = self.sc.spec_positions
        self.per_step = self.sc.tokens_per_decode
        self.window = dep.model.sliding_window
        self.vocab = dep.model.vocab
        self.host_sampling = lim.sampling == "host"
        self._memo: dict[tuple, StepTime] = {}

    # --- shapes -------------------------------------------------------------------------------

    def groups(
        self, plan: StepPlan, offset: float = 0.0, mean: float | None = None
    ) -> tuple[SeqGroup, ...]:
        """The ``SeqGroup``s of ``plan`` (decode contexts ``offset`` tokens further on;
        ``mean``: the decodes' mean computed tokens, if the caller has it)."""
        out: list[SeqGroup] = []
        for r, n in plan.chunks:
            out.append(SeqGroup(1, n, r.computed + n, False))
        if plan.decodes:
            qd, w = self.qd, self.window
            n = len(plan.decodes)
            if w is None:
                if mean is None:
                    mean = sum(r.computed for r in plan.decodes) / n
                out.append(SeqGroup(n, qd, mean + qd + offset, True))
            else:
                short = [r.computed for r in plan.decodes if r.computed + qd + offset < w]
                long_ = [r.computed for r in plan.decodes if r.computed + qd + offset >= w]
                for cs in (short, long_):
                    if cs:
                        out.append(SeqGroup(len(cs), qd, sum(cs) / len(cs) + qd + offset, True))
        return tuple(out)

    def graph(self, kind: str, a: int, b: int) -> StepTime:
        """One compiled graph: ``("p", tokens, prior)`` or ``("d", batch, context)``."""
        key = (kind, a, b)
        t = self._memo.get(key)
        if t is None:
            if kind == "p":
                t = self.sc.step((SeqGroup(1, a, b + a, False),), compiled=True)
            else:
                t = self.sc.step((SeqGroup(a, self.qd, b, True),), compiled=True)
            self._memo[key] = t
        return t

    def _padded(self, plan: StepPlan) -> StepTime | None:
        if not plan.graphs:
            return None
        if len(plan.graphs) == 1:
            return self.graph(*plan.graphs[0])
        ts = [self.graph(*g) for g in plan.graphs]  # run one after another
        return StepTime(
            sum(t.compute for t in ts), sum(t.comm for t in ts), sum(t.host for t in ts)
        )

    # --- times --------------------------------------------------------------------------------

    def sampled(self, plan: StepPlan) -> int:
        """Sequences whose logits a step samples: each decode and each prompt whose last chunk
        the step runs (real sequences; a compiled batch's padding rows are not sampled)."""
        ends = sum(1 for r, n in plan.chunks if r.pending() - n <= 0)
        return ends + len(plan.decodes)

    def host_sampling_s(self, plan: StepPlan) -> float:
        """Seconds of host work of one step of ``plan`` beyond the stack's: sampling on the
        host and the engine's own (``StepPlan.host_s``)."""
        n = self.sampled(plan) if self.host_sampling else plan.host_samples
        if not n:
            return plan.host_s
        return HOST_SAMPLING_STEP_S + HOST_SAMPLING_S_PER_LOGIT * n * self.vocab + plan.host_s

    def step(self, plan: StepPlan) -> tuple[float, float]:
        """(device seconds, host seconds) of one step of ``plan``."""
        t = self._padded(plan) or self.sc.step(self.groups(plan))
        return t.device, t.host + self.host_sampling_s(plan)

    def run(self, plan: StepPlan, steps: int) -> float:
        """Mean seconds per step of ``steps`` consecutive steps of the decode plan ``plan``
        (quadrature over the run; async overlap after its first step)."""
        padded = self._padded(plan)
        if padded is not None:
            device, host = padded.device, padded.host
        else:
            offsets = decode_offsets(steps * self.per_step)
            mean = sum(r.computed for r in plan.decodes) / len(plan.decodes)
            seen: dict[float, StepTime] = {}
            pts = []
            for off in offsets:  # short runs repeat offsets: time each context once
                p = seen.get(off)
                if p is None:
                    p = seen[off] = self.sc.step(self.groups(plan, off, mean))
                pts.append(p)
            device = sum(p.device for p in pts) / len(pts)
            host = sum(p.host for p in pts) / len(pts)
        host += self.host_sampling_s(plan)
        first = device + host
        if not self.lim.async_scheduling or steps == 1:
            return first
        return (first + (steps - 1) * max(device, host)) / steps
