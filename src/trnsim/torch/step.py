"""``profile_step``: one training step of a real ``nn.Module`` timed with no memory and no data.

The model (an ``nn.Module``, or a ``trnsim.workloads.ModelArgs`` / preset name / Hugging Face
``config.json`` built as ``trnsim.torch.models.Llama``) runs one micro-batch forward and backward
under ``FakeTensorMode`` (shapes only: a 70B model costs no memory), inside the front end's
capture (``trnsim.torch.mode.Capture``): every ATen op is recorded with its module, FLOPs and
bytes. Parallelism is real PyTorch code on a fake process group (``torch.distributed``'s
``fake`` backend, ``world_size = tp x dp``; this process plays rank 0):

- ``tp > 1``: each block's projections are split with DTensor's ``parallelize_module``
  (q/k/v, gate/up column-wise; o, down row-wise: one all-reduce after attention and one after
  the MLP, each way), the embedding and the head replicated;
- ``zero == 3``: FSDP2 ``fully_shard`` on each block and on the root over the DP mesh
  (all-gathers of weights in forward and backward, reduce-scatters of gradients);
  ``zero`` 0, 1, 2: the gradients are synchronised after the backward as the optimizer would
  (an all-reduce, or a reduce-scatter plus an all-gather of the updated weights), issued as
  ``torch.distributed`` calls on the fake group so they are captured the same way.

Every captured collective names its process group; its size and rank stride come from the
group's ranks, and ``trnsim.perf.comm.group_time`` (``trnsim.fabric`` on ``system``) times it.
Ops are priced by ``trnsim.torch.costs`` with the compute model, efficiency profile and
precision ``trnsim train`` uses. The step (``StepProfile``), as
``trnsim.perf.train.step_model`` composes one, with the same stack parameters:

    micro-batch  = captured forward + backward ops
                   + TP collectives not hidden (``trnsim.perf.train.hide``: at most
                     ``tp_overlap`` of them, under at most the matmuls)
                   + FSDP collectives not hidden (per layer, under ``dp_overlap`` of the
                     previous layer's compute in the same pass)
    step         = micro-batches x micro-batch + exposed DP + optimizer
    exposed DP   = ZeRO 0-2: the captured all-reduce or reduce-scatter beyond ``dp_overlap`` of
                   a backward, the all-gather beyond ``dp_overlap`` of a forward;
                   ZeRO 3: the step's first all-gather
    optimizer    = an HBM pass over the rank's optimizer shard (``trnsim.perf.train``'s)

What differs from ``trnsim train`` (the estimates agree within 10% on Llama-3-8B; RESULTS.md):
the backward is the captured one (flash-attention backward is 2.5x its forward, five matmuls
for two, where ``train`` takes 2x), every elementwise op the model runs is priced (RoPE as
written here, the loss, the gradient accumulation) instead of ``train``'s per-layer op list,
and the activation recomputation is whatever the module does (flash attention recomputes the
attention core; ``recompute="full"`` checkpoints each block).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trnsim import inputs as input_rules
from trnsim.errors import ConfigError, InputError
from trnsim.hw import SystemSpec
from trnsim.hw import system as lookup_system
from trnsim.perf.memory import params_per_rank
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import precision as lookup_precision
from trnsim.perf.train import hide
from trnsim.torch import _door
from trnsim.torch.costs import Pricer, price
from trnsim.torch.mode import Capture, Functions, Session
from trnsim.torch.profile import OpRecord, Profile, fuse
from trnsim.workloads import ModelArgs, resolve_model

torch = _door.torch()
dist = _door.submodule("torch.distributed")
_fake_tensor = _door.submodule("torch._subclasses.fake_tensor")


@dataclass(slots=True)
class StepProfile:
    """One training step, shapes only. Times in seconds; ``profile``: the micro-batch's ops."""

    model: str
    system: str
    chips: int
    plan: ParallelPlan
    precision: str
    global_batch: int
    seq_len: int
    micro_batches: int
    step_time_s: float
    tokens_per_s: float
    mfu: float
    breakdown: dict[str, float]
    profile: Profile
    wall_s: float
    assumptions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "system": self.system,
            "chips": self.chips,
            "plan": {
                "tp": self.plan.tp,
                "dp": self.plan.dp,
                "zero": self.plan.zero,
                "micro_batch": self.plan.micro_batch,
                "recompute": self.plan.recompute,
            },
            "precision": self.precision,
            "global_batch": self.global_batch,
            "seq_len": self.seq_len,
            "micro_batches": self.micro_batches,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "breakdown_s": self.breakdown,
            "ops": len(self.profile.records),
            "fallbacks": self.profile.fallbacks,
            "wall_s": self.wall_s,
            "assumptions": self.assumptions,
        }


# ---------------------------------------------------------------------------------------------
# the fake process group
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def fake_world(world: int) -> Iterator[None]:
    """A ``fake`` process group of ``world`` ranks (this process is rank 0) for the block."""
    fake_pg = _door.submodule("torch.testing._internal.distributed.fake_pg")
    if dist.is_initialized():
        raise ConfigError(
            "profile_step needs its own (fake) process group; torch.distributed is already "
            "initialised in this process"
        )
    dist.init_process_group("fake", rank=0, world_size=world, store=fake_pg.FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def group_ranks(name: str, args: tuple) -> tuple[int, int]:
    """(ranks, rank stride) of the process group a collective call names."""
    c10d = dist.distributed_c10d
    pg = None
    for a in torch.utils._pytree.tree_leaves(args):
        if isinstance(a, dist.ProcessGroup):
            pg = a
            break
        if isinstance(a, torch._C.ScriptObject):  # a ProcessGroup as the dispatcher sees it
            with contextlib.suppress(Exception):
                pg = dist.ProcessGroup.unbox(a)
                break
        if isinstance(a, str) and not pg:
            with contextlib.suppress(Exception):
                pg = c10d._resolve_process_group(a)
                break
    if pg is None:
        return dist.get_world_size(), 1
    ranks = sorted(dist.get_process_group_ranks(pg))
    stride = ranks[1] - ranks[0] if len(ranks) > 1 else 1
    return len(ranks), stride


# ---------------------------------------------------------------------------------------------
# flash attention: forward and backward each one kernel
# ---------------------------------------------------------------------------------------------


class _Flash(torch.autograd.Function):
    """Scaled-dot-product attention whose backward is one kernel too (recomputing the scores
    from Q and K, as flash attention does)."""

    @staticmethod
    def forward(ctx, q, k, v, sess, causal, gqa):
        from trnsim.torch.mode import sdpa_math

        ctx.save_for_backward(q, k, v)
        ctx.sess, ctx.causal, ctx.gqa = sess, causal, gqa
        label = "flash attention" + (", causal" if causal else "")
        with sess.in_kernel(label), torch.no_grad():
            return sdpa_math(q, k, v, is_causal=causal, enable_gqa=gqa)

    @staticmethod
    def backward(ctx, grad):
        from trnsim.torch.mode import sdpa_math

        q, k, v = ctx.saved_tensors
        label = "flash attention backward" + (", causal" if ctx.causal else "")
        with ctx.sess.in_kernel(label), torch.enable_grad():
            q2, k2, v2 = (t.detach().requires_grad_() for t in (q, k, v))
            out = sdpa_math(q2, k2, v2, is_causal=ctx.causal, enable_gqa=ctx.gqa)
            dq, dk, dv = torch.autograd.grad(out, (q2, k2, v2), grad)
        return dq, dk, dv, None, None, None


class _Norm(torch.autograd.Function):
    """RMSNorm whose backward is one kernel too (as nki-library's norm kernels pair a forward
    with a backward kernel), recomputing the normalisation from its input."""

    @staticmethod
    def forward(ctx, x, weight, eps, sess):
        ctx.save_for_backward(x, weight)
        ctx.eps, ctx.sess = eps, sess
        with sess.in_kernel("RMSNorm"), torch.no_grad():
            return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        with ctx.sess.in_kernel("RMSNorm backward"), torch.enable_grad():
            x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
            out = torch.nn.functional.rms_norm(x2, (x2.shape[-1],), w2, ctx.eps)
            dx, dw = torch.autograd.grad(out, (x2, w2), grad)
        return dx, dw, None, None


class _ShapesFunctions(Functions):
    """The function mode of shapes-only runs: attention through ``_Flash``, RMSNorm over the
    last dimension through ``_Norm`` (each direction one kernel)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None):
        kwargs = kwargs or {}
        if func is getattr(torch.nn.functional, "rms_norm", None):
            x, shape = args[0], args[1]
            weight = args[2] if len(args) > 2 else kwargs.get("weight")
            eps = args[3] if len(args) > 3 else kwargs.get("eps")
            if weight is not None and len(shape) == 1:
                return _Norm.apply(x, weight, 1e-6 if eps is None else eps, self.sess)
        if func is torch.nn.functional.scaled_dot_product_attention:
            q, k, v = args[:3]
            return _Flash.apply(
                q, k, v, self.sess, bool(kwargs.get("is_causal")), bool(kwargs.get("enable_gqa"))
            )
        return super().__torch_function__(func, types, args, kwargs)


# ---------------------------------------------------------------------------------------------
# profile_step
# ---------------------------------------------------------------------------------------------


DTYPES = {"fp32": "float32", "fp16": "float16"}
"""Parameter dtype of a model built from a config, by precision (default bf16: mixed
precision keeps bf16 weights, as ``trnsim.perf.precision``'s 2-byte weights)."""


def _build(
    model_or_config: Any, fake: Any, prec: str = "bf16"
) -> tuple[Any, ModelArgs | None, str]:
    from trnsim.torch.models import Llama

    if isinstance(model_or_config, torch.nn.Module):
        return model_or_config, None, type(model_or_config).__name__
    args = (
        model_or_config
        if isinstance(model_or_config, ModelArgs)
        else resolve_model(str(model_or_config))
    )
    before = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, DTYPES.get(prec, "bfloat16")))
    try:
        with fake:
            model = Llama(args)
    finally:
        torch.set_default_dtype(before)
    return model, args, args.name


def _parallelize(model: Any, plan: ParallelPlan, custom: Any = None) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (plan.dp, plan.tp), mesh_dim_names=("dp", "tp"))
    tp_mesh, dp_mesh = mesh["tp"], mesh["dp"]
    if custom is not None:
        custom(model, tp_mesh, dp_mesh)
        return
    blocks = getattr(model, "layers", None)
    if (plan.tp > 1 or plan.zero == 3) and blocks is None:
        raise ConfigError(
            f"profile_step parallelises trnsim.torch.Llama-shaped models (blocks in .layers); "
            f"pass parallelize=fn(model, tp_mesh, dp_mesh) for {type(model).__name__}"
        )
    if plan.tp > 1:
        tensor_parallel(model, tp_mesh, plan.sequence_parallel)
    if plan.zero == 3 and plan.dp > 1:
        from torch.distributed.fsdp import fully_shard

        for blk in blocks:
            fully_shard(blk, mesh=dp_mesh)
        fully_shard(model, mesh=dp_mesh)


def tensor_parallel(model: Any, tp_mesh: Any, sequence_parallel: bool) -> None:
    """torchtitan's Llama tensor-parallel plan (torchtitan v0.2.0
    ``torchtitan/models/llama3/infra/parallelize.py``, ``apply_tp``) on
    ``trnsim.torch.models.Llama``: q/k/v and gate/up column-wise, o and down row-wise, each
    block's attention and MLP input prepared once (so their input gradients are reduced once),
    the head column-wise with a vocabulary-parallel loss (``loss_parallel``); with sequence
    parallelism the norms run on sequence shards (all-gather before attention and MLP,
    reduce-scatter after), the embedding row-wise."""
    tpar = _door.submodule("torch.distributed.tensor.parallel")
    placements = _door.submodule("torch.distributed.tensor")
    Replicate, Shard = placements.Replicate, placements.Shard
    col, row, prep = tpar.ColwiseParallel, tpar.RowwiseParallel, tpar.PrepareModuleInput
    seq = Shard(1) if sequence_parallel else Replicate()
    top = {"head": col(input_layouts=seq, output_layouts=Shard(-1), use_local_output=False)}
    if sequence_parallel:
        top["embed"] = row(input_layouts=Replicate(), output_layouts=Shard(1))
        top["norm"] = tpar.SequenceParallel()
    tpar.parallelize_module(model, tp_mesh, top)
    for blk in model.layers:
        spec: dict[str, Any] = {
            "attn": prep(
                input_layouts=(seq, None, None),
                desired_input_layouts=(Replicate(), None, None),
                use_local_output=False,
            ),
            "attn.q": col(),
            "attn.k": col(),
            "attn.v": col(),
            "attn.o": row(output_layouts=seq),
            "mlp": prep(
                input_layouts=(seq,), desired_input_layouts=(Replicate(),), use_local_output=False
            ),
            "mlp.gate": col(),
            "mlp.up": col(),
            "mlp.down": row(output_layouts=seq),
        }
        if sequence_parallel:
            spec["attn_norm"] = tpar.SequenceParallel()
            spec["ffn_norm"] = tpar.SequenceParallel()
        tpar.parallelize_module(blk, tp_mesh, spec)


def _sync_grads(model: Any, plan: ParallelPlan) -> None:
    """ZeRO 0-2: the gradient synchronisation of one step over the DP group, as the
    optimizer issues it (one flat bucket of every gradient)."""
    if plan.dp <= 1 or plan.zero == 3:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return
    local = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
    flat = torch.cat([g.reshape(-1) for g in local])
    flat = flat[: flat.numel() - flat.numel() % plan.dp]
    group = _dp_group(plan)
    if plan.zero == 0:
        dist.all_reduce(flat, group=group)
    else:
        shard = torch.empty(flat.numel() // plan.dp, dtype=flat.dtype)
        # the names of torch >= 2.13 (the older ones warn there), else those of 2.6 - 2.12
        reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        reduce_scatter(shard, flat, group=group)
        all_gather(flat, shard, group=group)


def _dp_group(plan: ParallelPlan) -> Any:
    ranks = list(range(0, plan.dp * plan.tp, plan.tp))
    return dist.new_group(ranks) if plan.tp > 1 else None


def profile_step(
    model_or_config: Any,
    inputs: Any = None,
    *,
    system: str | SystemSpec = "trn3-gen2-ultraserver",
    parallel: ParallelPlan | None = None,
    global_batch: int | None = None,
    seq_len: int = 4096,
    precision: str = "bf16",
    stack: str | None = None,
    parallelize: Any = None,
) -> StepProfile:
    """Time one training step of ``model_or_config`` (module docstring).

    ``inputs``: the micro-batch ``(idx, targets)`` of one rank (fake or real int64 tensors),
    or None for ``plan.micro_batch`` random sequences of ``seq_len`` tokens. ``parallel``: a
    ``ParallelPlan`` (tp, dp, zero, micro_batch, recompute; pp, cp and ep must be 1),
    default one rank. ``global_batch`` defaults to dp x micro_batch (one micro-batch).
    ``parallelize``: ``fn(model, tp_mesh, dp_mesh)`` applying your own DTensor / FSDP2 plan
    (default: ``tensor_parallel`` and FSDP2 for ``trnsim.torch.models.Llama``).
    """
    t0 = time.perf_counter()
    seq_len = input_rules.check("seq-len", seq_len)
    if global_batch is not None:
        global_batch = input_rules.check("global-batch", global_batch)
        input_rules.check_step_tokens(global_batch, seq_len)
    plan = parallel or ParallelPlan(dp=1, tp=1)
    if plan.pp != 1 or plan.cp != 1 or plan.ep != 1:
        raise ConfigError(
            f"profile_step captures tensor and data parallelism (tp, dp, zero); pp={plan.pp}, "
            f"cp={plan.cp}, ep={plan.ep} are not captured yet (use trnsim train for those)"
        )
    sysm = system if isinstance(system, SystemSpec) else lookup_system(system)
    chips = math.ceil(plan.tp * plan.dp / plan.ranks_per_chip)
    if chips > sysm.chips:
        raise ConfigError(f"plan needs {chips} chips; {sysm.name} has {sysm.chips}")
    prec = lookup_precision(precision)
    gb = global_batch or plan.dp * plan.micro_batch
    micro = plan.check_batch(gb, seq_len)
    fake = _fake_tensor.FakeTensorMode(allow_non_fake_inputs=True)
    sess = Session(None, record=True, group_ranks=group_ranks)
    with fake_world(plan.tp * plan.dp):
        model, margs, name = _build(model_or_config, fake, prec.name)
        if margs is not None:
            if seq_len > margs.max_seq_len:  # the rotary table of trnsim.torch.Llama ends there
                label = input_rules.RULES["seq-len"].label()
                raise InputError(
                    f"{label} {seq_len:,}: longer than {name}'s context of "
                    f"{margs.max_seq_len:,} tokens, where trnsim.torch.Llama's rotary table "
                    "ends (rule context-length)"
                )
            plan.check_model(margs)
        _parallelize(model, plan, parallelize)
        if plan.recompute == "full":
            _checkpoint_blocks(model)
        with fake:
            if inputs is None:
                vocab = margs.vocab if margs else 2
                idx = torch.randint(0, vocab, (plan.micro_batch, seq_len))
                inputs = (idx, torch.randint(0, vocab, (plan.micro_batch, seq_len)))
            loss_ctx = (
                _door.submodule("torch.distributed.tensor.parallel").loss_parallel()
                if plan.tp > 1 and parallelize is None
                else contextlib.nullcontext()
            )
            with sess.tracker, _ShapesFunctions(sess), Capture(sess), loss_ctx:
                loss = model(*inputs)
                if hasattr(loss, "full_tensor"):  # a vocabulary-parallel loss (DTensor)
                    loss = loss.full_tensor() if loss.numel() != 1 else loss
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                    raise ConfigError(
                        "profile_step needs the model to return a scalar loss for its inputs "
                        "(forward(idx, targets) -> loss)"
                    )
                loss.backward()
                n_rec = len(sess.records)
                _sync_grads(model, plan)
    records = sess.records
    fuse(records)
    pricer = Pricer.make(sysm.chip, plan.ranks_per_chip, prec, sysm, False, stack)
    price(records, pricer)
    step_records, sync = records[:n_rec], records[n_rec:]
    return _compose(
        name, margs, sysm, plan, prec.name, gb, seq_len, micro, step_records, sync, pricer, t0
    )


def _checkpoint_blocks(model: Any) -> None:
    cp = _door.submodule("torch.utils.checkpoint")
    blocks = getattr(model, "layers", None) or getattr(model, "blocks", None) or []
    for blk in blocks:
        fwd = blk.forward
        blk.forward = lambda *a, _f=fwd, **k: cp.checkpoint(_f, *a, use_reentrant=False, **k)


def _compose(
    name: str,
    margs: ModelArgs | None,
    sysm: SystemSpec,
    plan: ParallelPlan,
    prec: str,
    gb: int,
    seq_len: int,
    micro: int,
    records: list[OpRecord],
    sync: list[OpRecord],
    pricer: Pricer,
    t0: float,
) -> StepProfile:
    """The step from one captured micro-batch, as ``trnsim.perf.train.step_model`` composes
    one (its ``hide`` for tensor-parallel overlap, its FSDP prefetch and DP overlap rules)."""
    eff = pricer.eff
    is_comm = lambda r: r.kind == "collective"  # noqa: E731
    fwd = _sum_of(records, lambda r: not is_comm(r) and r.phase == "forward")
    bwd = _sum_of(records, lambda r: not is_comm(r) and r.phase == "backward")
    mm = _sum_of(records, lambda r: r.kind == "matmul" and r.group < 0)
    tp_c = _sum_of(records, lambda r: is_comm(r) and _is_tp(r, plan))
    compute = fwd + bwd
    # tensor parallelism: at most the stack's tp_overlap of it, under the matmuls
    hidden = hide({"tp": tp_c}, {"tp": eff.tp_overlap * tp_c}, {"tp": mm}, compute)["tp"]
    tp_exposed = tp_c - hidden
    # FSDP: each layer's gathers and reduce-scatters prefetched one layer ahead under the
    # previous layer's compute (dp_overlap of it); the step's first gather exposed
    f_comm = f_exp = first = 0.0
    layers = margs.n_layers if margs else 1
    if plan.zero == 3 and plan.dp > 1:
        for phase, comp in (("forward", fwd), ("backward", bwd)):
            c = _sum_of(records, lambda r, p=phase: is_comm(r) and not _is_tp(r, plan)
                        and r.phase == p)  # fmt: skip
            f_comm += c
            f_exp += layers * max(0.0, c / layers - eff.dp_overlap * comp / layers)
        first = max(
            (r.seconds for r in records if is_comm(r) and r.collective[0] == "all-gather"
             and not _is_tp(r, plan)),
            default=0.0,
        )  # fmt: skip
    t_mb = compute + tp_exposed + f_exp
    # data parallelism (ZeRO 0-2: the captured gradient synchronisation of the step)
    rs = _sum_of(sync, lambda r: is_comm(r) and r.collective[0] in ("all-reduce", "reduce-scatter"))
    ag = _sum_of(sync, lambda r: is_comm(r) and r.collective[0] == "all-gather")
    if plan.zero == 3:
        t_dp = first
        exposed_dp = first
    else:
        t_dp = rs + ag
        exposed_dp = max(0.0, rs - eff.dp_overlap * bwd) + max(0.0, ag - eff.dp_overlap * fwd)
    t_opt = _optimizer_time(margs, records, plan, pricer)
    step = micro * t_mb + exposed_dp + t_opt
    tokens = gb * seq_len
    chip = pricer.chip
    chips = math.ceil(plan.tp * plan.dp / plan.ranks_per_chip)
    # model FLOPs of the step: rank 0's captured FLOPs x tp (TP ranks split them) x dp x
    # micro-batches
    flops = sum(r.flops for r in records) * plan.tp * plan.dp * micro
    rank_peak = chip.peak(_peak_dtype(chip, pricer.prec.compute)) / plan.ranks_per_chip
    prof = Profile(
        records + sync,
        f"one rank of {chip.name} ({plan.ranks_per_chip} per chip) in {sysm.name}",
        rank_peak,
        assumptions=[],
    )
    breakdown = {
        "forward": fwd * micro,
        "backward": bwd * micro,
        "tp_comm": tp_c * micro,
        "tp_comm_exposed": tp_exposed * micro,
        "fsdp_comm": f_comm * micro,
        "fsdp_exposed": f_exp * micro,
        "dp_comm": t_dp,
        "dp_comm_exposed": exposed_dp,
        "optimizer": t_opt,
    }
    assumptions = [
        f"captured under FakeTensorMode on a fake process group of {plan.tp * plan.dp} ranks "
        f"(tp {plan.tp}, dp {plan.dp}, zero {plan.zero}); one micro-batch, x {micro}",
        f"compute model: {pricer.model.name}, efficiency "
        + ", ".join(f"{k}={v:g}" for k, v in eff.as_dict().items()),
        f"collectives: trnsim.fabric on {sysm.name} (trnsim.perf.comm.group_time); overlap "
        "as trnsim.perf.train composes it (hide, FSDP prefetch, DP under the backward)",
        f"precision: {pricer.prec.name}",
    ]
    return StepProfile(
        model=name,
        system=sysm.name,
        chips=chips,
        plan=plan,
        precision=prec,
        global_batch=gb,
        seq_len=seq_len,
        micro_batches=micro,
        step_time_s=step,
        tokens_per_s=tokens / step,
        mfu=flops / (step * chips * chip.peak(_peak_dtype(chip, pricer.prec.compute))),
        breakdown=breakdown,
        profile=prof,
        wall_s=time.perf_counter() - t0,
        assumptions=assumptions,
    )


def _sum_of(records: list[OpRecord], pred: Any) -> float:
    return sum(r.seconds for r in records if pred(r))


def _is_tp(r: OpRecord, plan: ParallelPlan) -> bool:
    return r.collective is not None and plan.tp > 1 and r.collective[2] == 1


def _peak_dtype(chip: Any, dt: str) -> str:
    from trnsim.perf.precision import compute_dtype

    return compute_dtype(chip, dt)[0]


def _optimizer_time(
    margs: ModelArgs | None, records: list[OpRecord], plan: ParallelPlan, pricer: Pricer
) -> float:
    """``trnsim.perf.train``'s optimizer pass: read and write the master weights and Adam
    moments, read the gradients, write the weights, over the rank's optimizer shard at the
    stack's HBM efficiency."""
    prec = pricer.prec
    if margs is not None:
        dense, experts = params_per_rank(margs, plan)
        n_rank = dense + experts
    else:
        return 0.0
    shard = plan.dp * plan.cp if plan.zero >= 1 else 1
    per_param = 2 * (prec.master_bytes + prec.optimizer_bytes) + prec.grad_bytes + prec.weight_bytes
    return n_rank / shard * per_param / (pricer.chip.hbm_bw / plan.ranks_per_chip * pricer.eff.hbm)
