"""One step of a serving engine: a forward pass over a batch of sequences of different shapes.

This is the per-step cost model that ``trnsim infer`` and ``trnsim.serve`` share (one
definition, so a request served alone reproduces ``trnsim infer``'s TTFT and TPOT exactly):

- ``trnsim infer`` (a static batch): TTFT is one prefill step of the whole batch; TPOT is the
  mean decode step over the generation (``decode_offsets``: the step time at the midpoints of
  four equal segments of the contexts the generation runs through), divided by the tokens a
  step yields (one, or the expected tokens of speculative decoding).
- ``trnsim.serve`` (continuous batching): every step the engine's scheduler plans, a mix of
  prefill chunks and decode steps (``SeqGroup``s), each at its own context.

A step's time (``StepTime``):

- **compute**: the forward pass on one rank (``trnsim.perf.compute.pass_time``: the op graph
  of the step, ``trnsim.workloads.step_graph``, timed by the compute model with the stack's
  efficiency profile); with speculative decoding a decode sequence's pass covers ``tokens + 1``
  positions.
- **comm**: the tensor/expert-parallel collectives of the pass (2 all-reduces per layer, or a
  reduce-scatter and an all-gather with sequence parallelism; an all-to-all dispatch and
  combine per MoE layer with ``ep > 1``), of which ``comm_overlap`` is hidden, plus the
  ``pp - 1`` point-to-point sends between stages (``trnsim.perf.comm`` over ``trnsim.fabric``).
- **draft**, **draft_comm** (speculative decoding, ``Speculative.draft_model``): the draft's
  passes and their exposed collectives: ``tokens`` draft decode passes for the decode
  sequences, each with the stack's ``draft_step_overhead_s`` (in ``draft_comm``), and one
  draft pass over the prompt chunks (the draft keeps its own KV cache and features).
- **host**: the stack's fixed host work per forward pass (``Efficiency.step_overhead_s``),
  plus ``prefill_overhead_s`` in a step with prompt chunks (a context-encoding pass).

A step with a prefill chunk runs as the stack runs prefills (``sequence_parallel_prefill``
when its longest prompt spans the TP ranks; MoE prefill as a blockwise matmul when the stack
says so; attention without a flash kernel where the stack's rule says so for a compiled
graph's padded prefill, ``SoftwareStack.prefill_flash``); a decode-only step does not. The
stack's efficiency profile is the one of the chip's family and the weights' precision
(``SoftwareStack.profile``, its per-precision variants).

Speed: every op but attention depends only on the step's tokens and sequence count, so the
rest of the pass is kept per (tokens, sequences, prefill flags) (the ``REST_CACHE`` most recent
shapes) and only the attention op is re-timed for each step's contexts
(``trnsim.perf.compute.op_seconds``, the same function ``pass_time`` uses). The total differs
from timing the whole graph again only by the order of the floating-point additions.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

from trnsim.errors import ConfigError
from trnsim.hw import SystemSpec
from trnsim.perf import comm
from trnsim.perf.compute import ComputeModel, Efficiency, op_seconds, pass_time, rank_plan
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import Precision, precision
from trnsim.perf.stacks import SoftwareStack, resolve_stack
from trnsim.perf.table_model import default_model
from trnsim.workloads import ModelArgs, SeqGroup, attention_op, resolve_model, step_graph
from trnsim.workloads.graph import attention_kinds

DECODE_POINTS = 4
REST_CACHE = 1024  # step shapes kept (least recently used dropped): bounded memory


def base_precision(prec: Precision) -> str:
    """The weights' precision name of ``prec`` (without a separate KV-cache dtype): the key of
    a stack's per-precision variants (``trnsim.perf.stacks.SoftwareStack.variant``)."""
    return prec.name.split("+kv-")[0]


def decode_offsets(steps: int) -> tuple[int, ...]:
    """Context offsets (from the first step's) at which a run of ``steps`` decode steps is
    timed: the midpoints of ``DECODE_POINTS`` equal segments of the run, rounded. The mean of
    the step times there is exact where the step time is linear in the context, which it is
    between roofline kinks."""
    return tuple(round((i + 0.5) * steps / DECODE_POINTS) for i in range(DECODE_POINTS))


@dataclass(frozen=True, slots=True)
class StepTime:
    """Seconds of one step: the target's compute and exposed communication, host work, and the
    speculative draft's passes and their communication and fixed overhead (module docstring)."""

    compute: float
    comm: float
    host: float
    draft: float = 0.0
    draft_comm: float = 0.0

    @property
    def device(self) -> float:
        return self.compute + self.comm + self.draft + self.draft_comm

    @property
    def total(self) -> float:
        return self.compute + self.comm + self.host + self.draft + self.draft_comm


def comm_parts(
    m: ModelArgs, plan: ParallelPlan, sysm: SystemSpec, tokens: int, prec: Precision
) -> tuple[float, float, float]:
    """(tp, ep, pp) communication seconds of one forward pass over ``tokens`` tokens."""
    act = tokens * m.d_model * prec.act_bytes
    tp_c = 0.0
    if plan.tp > 1 and plan.sequence_parallel:
        # sequence parallel: each all-reduce becomes a reduce-scatter and an all-gather
        tp_c = (
            2
            * m.n_layers
            * (
                comm.tp_time("reduce-scatter", act, plan, sysm)
                + comm.tp_time("all-gather", act, plan, sysm)
            )
        )
    elif plan.tp > 1:
        tp_c = 2 * m.n_layers * comm.tp_time("all-reduce", act, plan, sysm)
    ep_c = 0.0
    if m.is_moe and plan.ep > 1:
        a2a = comm.moe_dispatch_bytes(tokens, m.top_k, m.d_model, prec.act_bytes, plan)
        ep_c = 2 * m.n_moe_layers * comm.ep_time("all-to-all", a2a, plan, sysm)
    pp_c = (plan.pp - 1) * comm.pp_time(act, plan, sysm)
    return tp_c, ep_c, pp_c


class StepCost:
    """Step times of one deployment: ``model`` on ``plan`` over ``system`` with a serving
    ``stack`` (its profile unless ``eff`` is given), a compute model and, optionally,
    speculative decoding (``trnsim.perf.infer.Speculative``). See the module docstring."""

    def __init__(
        self,
        model: ModelArgs | str,
        system: SystemSpec,
        plan: ParallelPlan,
        *,
        prec: Precision | str = "bf16",
        stack: str | SoftwareStack | None = None,
        eff: Efficiency | None = None,
        compute_model: ComputeModel | None = None,
        speculative: object | None = None,
    ) -> None:
        self.model = resolve_model(model)
        if not self.model.causal:
            raise ConfigError(
                f"serving: {self.model.name} is an encoder (bidirectional attention): it has "
                "no autoregressive decoding to serve"
            )
        self.system = system
        self.plan = plan
        self.prec = precision(prec) if isinstance(prec, str) else prec
        chip = system.chip
        self.cm = compute_model or default_model(chip, plan.ranks_per_chip)
        self.stack = resolve_stack(stack, chip, "serve")
        self.eff = eff or self.stack.profile(self.cm, chip, base_precision(self.prec))
        # The compiler's attention, for prefills the stack runs without a flash kernel.
        native = self.stack.native_score_bytes[1 if self.cm.name == "table" else 0]
        self._native_eff = replace(self.eff, score_bytes=native) if native else self.eff
        self._lnc = max(1, chip.cores // plan.ranks_per_chip) if chip.cores else 1
        self.speculative = speculative
        self.draft = speculative.draft_model(self.model) if speculative is not None else None
        self._rest: OrderedDict[tuple, tuple[float, object]] = OrderedDict()
        self._comm: dict[tuple, float] = {}

    @property
    def spec_positions(self) -> int:
        """Positions a decode sequence's target pass covers: ``tokens + 1`` with speculation."""
        return self.speculative.tokens + 1 if self.speculative is not None else 1

    @property
    def tokens_per_decode(self) -> float:
        """Tokens a decode step yields per sequence (the expected tokens with speculation)."""
        return self.speculative.expected_tokens if self.speculative is not None else 1.0

    # --- the step ---------------------------------------------------------------------------

    def step(self, seqs: tuple[SeqGroup, ...], compiled: bool = False) -> StepTime:
        """One forward pass over ``seqs`` (decode groups already at ``spec_positions`` new
        tokens each). ``compiled``: the shapes are a compiled graph's (padded to a bucket),
        the only lengths the stack's flash-attention rule (``SoftwareStack.prefill_flash``)
        is applied to; an unpadded prompt would be padded to a bucket the model does not
        know, so it is taken to run the kernel."""
        plan, sw = self.plan, self.stack
        prefills = [s for s in seqs if not s.decode]
        sp = bool(
            prefills
            and sw.sequence_parallel_prefill
            and plan.tp > 1
            and max(s.context for s in prefills) >= plan.tp
        )
        block = sw.moe_prefill_block if prefills else 0
        tokens = sum(s.count * s.q_len for s in seqs)
        eff = self.eff
        attn_eff = eff
        if (
            compiled
            and prefills
            and not self.stack.prefill_flash(max(s.q_len for s in prefills), self._lnc)
        ):
            attn_eff = self._native_eff
        compute = self._pass(self.model, seqs, tokens, sp, block, attn_eff)
        exposed = self._comm_seconds(self.model, tokens, sp)
        host = eff.step_overhead_s + (eff.prefill_overhead_s if prefills else 0.0)
        draft = draft_comm = 0.0
        if self.draft is not None:
            if prefills:  # the draft's pass over the prompt chunks
                pt = sum(s.count * s.q_len for s in prefills)
                draft += self._pass(self.draft, tuple(prefills), pt, sp, 0)
                draft_comm += self._comm_seconds(self.draft, pt, sp)
            drafts = tuple(SeqGroup(s.count, 1, s.context, True) for s in seqs if s.decode)
            if drafts:
                n = self.speculative.tokens
                dt = sum(s.count for s in drafts)
                draft += n * self._pass(self.draft, drafts, dt, False, 0)
                draft_comm += n * (
                    self._comm_seconds(self.draft, dt, False) + eff.draft_step_overhead_s
                )
        return StepTime(compute, exposed, host, draft, draft_comm)

    def prefill(self, batch: int, new_tokens: int, context: int) -> StepTime:
        """``batch`` prompts computing ``new_tokens`` each at the end of ``context`` tokens."""
        return self.step((SeqGroup(batch, new_tokens, context, False),))

    def decode(self, batch: int, context: float) -> StepTime:
        """One decode step of ``batch`` sequences at ``context`` tokens (the new one included)."""
        q = self.spec_positions
        return self.step((SeqGroup(batch, q, max(context, q), True),))

    # --- memoised parts ---------------------------------------------------------------------

    def _pass(
        self,
        m: ModelArgs,
        seqs: tuple[SeqGroup, ...],
        tokens: int,
        sp: bool,
        block: int,
        attn_eff: Efficiency | None = None,
    ) -> float:
        plan = self.plan
        n_seq = sum(s.count for s in seqs)
        key = (m.name, tokens, n_seq, sp, block)
        hit = self._rest.get(key)
        if hit is not None:
            self._rest.move_to_end(key)
        else:
            g = step_graph(m, seqs, "prefill" if block or sp else "decode")
            # pass_time's own cache is for planners that time a graph again; a serving run
            # times each shape once here, so it calls the function beneath the cache.
            pt = pass_time.__wrapped__(
                g,
                plan.tp,
                plan.ep,
                sp,
                plan.ranks_per_chip,
                self.system.chip,
                self.prec,
                self.eff,
                self.cm,
                plan.moe_imbalance,
                block,
            )
            hit = (pt.layers + pt.pre + pt.post - pt.kind("attention"), g)
            self._rest[key] = hit
            if len(self._rest) > REST_CACHE:
                self._rest.popitem(last=False)
        rest, g = hit
        rp = rank_plan(plan.tp, plan.ep, sp, plan.ranks_per_chip, plan.moe_imbalance)
        chip = self.system.chip
        attn = 0.0
        ae = attn_eff or self.eff
        for _name, layers, window in attention_kinds(m):
            op = attention_op(m, tokens, seqs, window)
            attn += layers * op_seconds(op, g, rp, chip, self.prec, ae, self.cm, block)
        return rest + attn

    def _comm_seconds(self, m: ModelArgs, tokens: int, sp: bool) -> float:
        key = (m.name, tokens, sp)
        t = self._comm.get(key)
        if t is None:
            plan = self.plan.replace(sequence_parallel=sp)
            tp_c, ep_c, pp_c = comm_parts(m, plan, self.system, tokens, self.prec)
            t = (tp_c + ep_c) * (1 - self.eff.comm_overlap) + pp_c
            self._comm[key] = t
        return t
