"""``trnsim train``: estimate one training configuration (step time, tokens/s, MFU, memory)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import nonneg_int, positive_float, positive_int, rule_type
from trnsim.errors import ConfigError, TrnsimError, UsageError
from trnsim.hw import lookup
from trnsim.hw.specs import ChipSpec, SystemSpec
from trnsim.perf import PRECISIONS, CostInputs, estimate_training, plan_for_chips
from trnsim.perf.mlperf import estimate_time_to_train
from trnsim.perf.plan import MOE_DISPATCHERS
from trnsim.perf.planner import search_training
from trnsim.perf.stacks import STACKS, resolve_stack
from trnsim.perf.table_model import COMPUTE_MODELS, compute_model
from trnsim.perf.train import default_global_batch, default_global_batch_note
from trnsim.report.output import print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit, prose
from trnsim.report.units import pretty, usd
from trnsim.workloads import ModelArgs, resolve_model
from trnsim.workloads.hf_config import MEGATRON_VOCAB, synthetic_gpt

DEFAULT_SYSTEM = "trn3-gen2"


def resolve_system(name: str) -> SystemSpec:
    """``--system`` names a system preset, or a chip (then its smallest system in the catalog);
    an unknown name is a usage error naming the flag. A name that is both a system and a chip
    alias (``v5e``, ``v5p``, ``v6e``, ``trillium``: the pod and the chip) means the system."""
    from trnsim.hw import SYSTEMS

    if name in SYSTEMS:
        return SYSTEMS.get(name)
    try:
        spec = lookup(name)
    except TrnsimError as exc:
        raise UsageError(f"--system {name}: {exc}") from None
    if isinstance(spec, SystemSpec):
        return spec
    if isinstance(spec, ChipSpec):
        for _, s in SYSTEMS:
            if s.chip == spec:
                return s
        raise ConfigError(f"no system preset uses chip {spec.name!r}; name a system")
    raise ConfigError(f"{name!r} is a NeuronCore preset; --system needs a chip or a system")


def chip_systems(name: str) -> list[SystemSpec]:
    """The systems built of the chip ``name`` names, smallest first ([] if ``name`` is a
    system, or not a chip)."""
    from trnsim.hw import SYSTEMS

    if name in SYSTEMS:
        return []
    try:
        spec = lookup(name)
    except TrnsimError:
        return []
    if not isinstance(spec, ChipSpec):
        return []
    return sorted((s for _, s in SYSTEMS if s.chip == spec), key=lambda s: s.chips)


def add_model(parser: argparse.ArgumentParser) -> None:
    """``--model`` (a preset or a Hugging Face config.json) or a synthetic Megatron-style GPT
    model given by ``--hidden --layers --heads [--ffn --vocab]``."""
    parser.add_argument(
        "--model",
        help="model preset (e.g. llama-3.1-70b) or a Hugging Face config.json path",
    )
    g = parser.add_argument_group("synthetic GPT model (instead of --model)")
    g.add_argument("--hidden", type=rule_type("model-hidden"), help="hidden size")
    g.add_argument("--layers", type=rule_type("model-layers"), help="transformer layers")
    g.add_argument("--heads", type=rule_type("model-heads"), help="attention heads")
    g.add_argument(
        "--ffn", type=rule_type("model-ffn"), help="FFN hidden size (default 4 x --hidden)"
    )
    g.add_argument(
        "--vocab",
        type=rule_type("model-vocab"),
        help=f"vocabulary (default {MEGATRON_VOCAB}, the Megatron-Core scaling table's)",
    )


SYNTHETIC_FLAGS = ("hidden", "layers", "heads", "ffn", "vocab")


def model_from_args(args: argparse.Namespace) -> ModelArgs:
    """The model of ``--model`` or of the synthetic GPT flags (exactly one of the two)."""
    given = [f for f in SYNTHETIC_FLAGS if getattr(args, f, None) is not None]
    if args.model is not None:
        if given:
            raise UsageError(
                f"--model {args.model} and --{given[0]} {getattr(args, given[0])}: give a model "
                "preset/config or the synthetic GPT flags, not both"
            )
        try:
            return resolve_model(args.model)
        except TrnsimError as exc:
            raise UsageError(f"--model {args.model}: {exc}") from None
    if not given:
        raise UsageError("--model is required (or --hidden --layers --heads for a GPT model)")
    missing = [f for f in ("hidden", "layers", "heads") if getattr(args, f) is None]
    if missing:
        raise UsageError(f"a synthetic GPT model needs --{missing[0]} (also --hidden --layers)")
    if args.hidden % args.heads:
        raise UsageError(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    return synthetic_gpt(
        args.hidden,
        args.layers,
        args.heads,
        ffn=args.ffn,
        vocab=args.vocab or MEGATRON_VOCAB,
        seq_len=max(
            getattr(args, "seq_len", 0) or 0,
            (getattr(args, "input_tokens", 0) or 0) + (getattr(args, "output_tokens", 0) or 0),
            4096,
        ),
    )


def add_precision(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--precision",
        default="bf16",
        choices=PRECISIONS.names(),
        help="number format: bf16, fp16, fp32, fp8, mxfp8, mxfp4, nvfp4, int8 (weight-only), "
        "fp32-autocast (fp32 storage, bf16 matmuls)",
    )


def add_common(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument(
        "--system",
        default=DEFAULT_SYSTEM,
        help=f"hw preset: chip, instance, UltraServer or cluster (default {DEFAULT_SYSTEM})",
    )
    parser.add_argument(
        "--chips", type=rule_type("chips"), help="chips used (default: the system's chips)"
    )
    parser.add_argument(
        "--tp", type=rule_type("tp"), help="tensor parallel degree (default: chosen by the planner)"
    )
    parser.add_argument("--pp", type=rule_type("pp"), help="pipeline parallel degree")
    parser.add_argument("--ep", type=rule_type("ep"), help="expert parallel degree")
    add_precision(parser)
    parser.add_argument(
        "--ranks-per-chip",
        type=rule_type("ranks-per-chip"),
        default=1,
        help="ranks per chip (2 for Trn1 NeuronCore counts)",
    )
    parser.add_argument(
        "--price", type=rule_type("price"), help="USD per chip-hour (default: perf.cost)"
    )
    parser.add_argument(
        "--compute",
        choices=COMPUTE_MODELS,
        default="auto",
        help="compute model: auto (kernel tables for Trainium, roofline otherwise), table, "
        "roofline",
    )
    parser.add_argument(
        "--moe-imbalance",
        type=rule_type("moe-imbalance"),
        default=1.0,
        help="MoE load imbalance: the busiest expert-parallel rank's tokens over the mean "
        "(>= 1; default 1, uniform routing)",
    )
    parser.add_argument(
        "--stack",
        choices=list(STACKS),
        help="software stack whose fitted efficiency profile is used (default: the system's, "
        "by vendor and chip: see trnsim.perf.stacks)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def check_stack(args: argparse.Namespace, chip: ChipSpec, mode: str) -> None:
    """``--stack`` must run on the chip's vendor and in this mode; ``--moe-imbalance`` >= 1
    (before any work)."""
    if args.moe_imbalance < 1:
        raise UsageError(
            f"--moe-imbalance {args.moe_imbalance}: must be >= 1 (busiest rank / mean)"
        )
    if args.stack is None:
        return
    try:
        resolve_stack(args.stack, chip, mode)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise UsageError(f"--stack {args.stack}: {exc}") from None


def check_moe_imbalance(args: argparse.Namespace, m: ModelArgs) -> None:
    """``--moe-imbalance`` is busiest EP rank / mean: at most the EP ranks, which are at most
    the model's experts (all tokens on one rank); a dense model has no such imbalance."""
    limit = max(1, m.n_experts)
    if args.moe_imbalance > limit:
        what = f"{m.name} has {m.n_experts} experts" if m.n_experts else f"{m.name} is dense"
        raise UsageError(f"--moe-imbalance {args.moe_imbalance:g}: {what} (must be 1..{limit})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument(
        "--dp", type=rule_type("dp"), help="data parallel degree (default: fill the chips)"
    )
    parser.add_argument("--cp", type=rule_type("cp"), help="context parallel degree")
    parser.add_argument(
        "--global-batch",
        type=rule_type("global-batch"),
        help="sequences per step (default: 1,024, or 1,024 tokens per chip when more)",
    )
    parser.add_argument(
        "--micro-batch", type=rule_type("micro-batch"), help="sequences per micro-batch"
    )
    parser.add_argument(
        "--seq-len",
        type=rule_type("seq-len"),
        help="tokens per sequence (default 4,096, or the model's context when shorter)",
    )
    parser.add_argument("--zero", type=int, choices=(0, 1, 2, 3), help="ZeRO stage")
    parser.add_argument("--recompute", choices=("none", "selective", "full"))
    parser.add_argument("--no-sp", action="store_true", help="disable sequence parallelism")
    parser.add_argument(
        "--interleave",
        type=rule_type("interleave"),
        help="virtual pipeline stages per rank (interleaved 1F1B when > 1)",
    )
    parser.add_argument(
        "--tokens", type=rule_type("tokens"), help="tokens to train (time, cost, energy)"
    )
    parser.add_argument(
        "--samples",
        type=positive_float,
        help="MLPerf time to train: samples (sequences) to converge; whole steps of "
        "--global-batch (instead of --tokens)",
    )
    parser.add_argument(
        "--eval-interval",
        type=positive_float,
        help="MLPerf: samples between quality evaluations; training runs to the first one at "
        "or after --samples (needs --samples)",
    )
    g = parser.add_argument_group("pipeline, memory and MoE options of the plan")
    g.add_argument(
        "--first-stage-layers",
        type=positive_int,
        help="layers of the first pipeline stage (default: balanced)",
    )
    g.add_argument(
        "--last-stage-layers",
        type=positive_int,
        help="layers of the last pipeline stage (default: balanced)",
    )
    g.add_argument(
        "--recompute-layers",
        type=positive_int,
        help="with --recompute full: layers per stage recomputed (default: all)",
    )
    g.add_argument(
        "--offload-layers",
        type=nonneg_int,
        help="layers per stage whose activations wait in host memory (default 0)",
    )
    g.add_argument(
        "--etp",
        type=positive_int,
        help="expert tensor parallel degree (default: --tp); 1 folds EP over the TP ranks",
    )
    g.add_argument(
        "--moe-capacity",
        type=positive_float,
        help="expert capacity factor >= 1: pad to it and drop the overflow (default dropless)",
    )
    g.add_argument(
        "--moe-dispatcher",
        choices=MOE_DISPATCHERS,
        help="alltoall: a copy per routed expert; flex: a copy per rank (DeepEP/HybridEP)",
    )
    g.add_argument(
        "--moe-a2a-overlap",
        action="store_true",
        help="overlap the EP all-to-all with another micro-batch's compute",
    )


# Options that apply to every plan, the planner's included: (flag dest, plan field, MoE only).
PLAN_OPTIONS = (
    ("first_stage_layers", "first_stage_layers", False),
    ("last_stage_layers", "last_stage_layers", False),
    ("recompute_layers", "recompute_layers", False),
    ("offload_layers", "offload_layers", False),
    ("etp", "etp", True),
    ("moe_capacity", "moe_capacity", True),
    ("moe_dispatcher", "moe_dispatcher", True),
    ("moe_a2a_overlap", "moe_a2a_overlap", True),
)


def plan_options(args: argparse.Namespace, m: ModelArgs) -> dict[str, Any]:
    """The plan options given on the command line (``PLAN_OPTIONS``), checked before any work:
    the MoE ones need an MoE model (never silently ignored) and a capacity factor is >= 1."""
    out: dict[str, Any] = {}
    for dest, field_name, moe_only in PLAN_OPTIONS:
        value = getattr(args, dest, None)
        if value is None or value is False:
            continue
        flag = "--" + dest.replace("_", "-")
        if moe_only and not m.is_moe:
            raise UsageError(f"{flag}: {m.name} has no experts (an MoE option)")
        if dest == "moe_capacity" and value < 1:
            raise UsageError(f"--moe-capacity {value:g}: a capacity factor must be >= 1")
        out[field_name] = value
    return out


# Plan flags of ``trnsim train``; when none is given the planner chooses the plan.
TRAIN_PLAN_FLAGS = (
    "tp",
    "pp",
    "dp",
    "ep",
    "cp",
    "micro_batch",
    "zero",
    "recompute",
    "interleave",
)


def plan_flags_given(args: argparse.Namespace, flags: tuple[str, ...]) -> bool:
    return any(getattr(args, f, None) is not None for f in flags) or bool(
        getattr(args, "no_sp", False)
    )


def resolve_chips(args: argparse.Namespace, sysm: SystemSpec) -> int:
    """``--chips`` (default: all the system's chips), at most what the system's outermost
    fabric level joins (several instances over EFA, a cluster up to its fat-tree's span)."""
    if args.chips is None:
        return sysm.chips
    limit = max([sysm.chips] + [lvl.span for lvl in sysm.levels])
    if args.chips > limit:
        raise UsageError(
            f"--chips {args.chips}: {sysm.name} reaches at most {limit} chips "
            "(its outermost fabric level's span)"
        )
    return args.chips


def check_ranks_per_chip(args: argparse.Namespace, chip: ChipSpec) -> None:
    if args.ranks_per_chip > chip.cores:
        raise UsageError(
            f"--ranks-per-chip {args.ranks_per_chip}: {chip.name} has {chip.cores} "
            "core(s), so at most that many ranks share one chip"
        )


def cost_inputs(args: argparse.Namespace, chip: ChipSpec) -> CostInputs:
    return CostInputs(prices={chip.name: args.price}) if args.price else CostInputs()


def print_kv(console: Console, title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("quantity", style="bold")
    table.add_column("value")
    for k, v in rows:
        table.add_row(k, v)
    console.print(fit(table))


def dump(data: dict[str, Any]) -> None:
    """Strict JSON on stdout (``default=str`` for dataclass leftovers such as plans)."""
    print_json(json.loads(json.dumps(data, default=str)))


def no_plan(why: str, model: str, system: str, chips: int, res: Any) -> dict[str, Any]:
    """The ``--json`` result when the planner finds no plan: what was searched and why none
    was chosen (strict JSON, like every other result; exit status 1)."""
    return {
        "model": model,
        "system": system,
        "chips": chips,
        "fits": False,
        "found": False,
        "reason": why,
        "considered": res.considered,
        "invalid": res.invalid,
        "over_capacity": res.over_capacity,
        **({"over_slo": res.over_slo} if res.slo is not None else {}),
        "notes": res.notes,
    }


def check_train_args(args: argparse.Namespace, sysm: SystemSpec) -> int:
    """Domain checks of the flags before any work; returns the chip count."""
    chips = resolve_chips(args, sysm)
    check_ranks_per_chip(args, sysm.chip)
    check_stack(args, sysm.chip, "train")
    if args.interleave is not None and args.interleave > 1 and (args.pp or 1) == 1:
        raise UsageError(
            f"--interleave {args.interleave} needs pipeline stages to interleave (--pp > 1), "
            f"got --pp {args.pp or 1}"
        )
    return chips


def default_to_context(args: argparse.Namespace, m: ModelArgs, defaults: dict) -> None:
    """Workload defaults the user did not set (``defaults``: dest -> value) shortened to the
    model's context: the sequence to it, the prompt so that prompt + generation fit (a GPT-3
    preset has 2,048 positions; the defaults are 4,096 tokens and 2,048 + 512)."""
    ctx = m.max_seq_len
    if "seq_len" in defaults and getattr(args, "seq_len", None) is None:
        args.seq_len = min(defaults["seq_len"], ctx)
    if "output_tokens" in defaults and getattr(args, "output_tokens", None) is None:
        args.output_tokens = max(1, min(defaults["output_tokens"], ctx // 4))
    if "input_tokens" in defaults and getattr(args, "input_tokens", None) is None:
        args.input_tokens = max(1, min(defaults["input_tokens"], ctx - args.output_tokens))


def run(args: argparse.Namespace) -> int:
    ttt_args = mlperf_args(args)
    m = model_from_args(args)
    default_to_context(args, m, {"seq_len": 4096})
    check_moe_imbalance(args, m)
    options = plan_options(args, m)
    sysm = resolve_system(args.system)
    chips = check_train_args(args, sysm)
    cm = compute_model(args.compute, sysm.chip, args.ranks_per_chip)
    chosen = None
    gb_note = None
    sys_note = None
    gb_given = args.global_batch is not None
    if not gb_given:
        args.global_batch = default_global_batch(chips, args.seq_len)
        gb_note = default_global_batch_note(chips, args.seq_len)
    if plan_flags_given(args, TRAIN_PLAN_FLAGS):
        try:
            interleave = args.interleave or 1
            plan = plan_for_chips(
                chips,
                tp=args.tp or 1,
                pp=args.pp or 1,
                dp=args.dp,
                ep=args.ep or 1,
                cp=args.cp or 1,
                micro_batch=args.micro_batch or 1,
                zero=1 if args.zero is None else args.zero,
                recompute=args.recompute or "selective",
                sequence_parallel=not args.no_sp,
                ranks_per_chip=args.ranks_per_chip,
                schedule="interleaved" if interleave > 1 else "1f1b",
                chunks=interleave,
                moe_imbalance=args.moe_imbalance,
                **options,
            )
            plan.validate(m, chips, args.global_batch, args.seq_len)
        except ConfigError as exc:
            raise UsageError(f"plan flags: {exc}") from None
    else:
        # --system naming a chip without --chips: the smallest of its systems where a plan fits
        cands = (chip_systems(args.system) if args.chips is None else []) or [sysm]
        tried = []
        for cand in cands:
            c_chips = chips if cand is sysm else cand.chips
            if not gb_given:
                args.global_batch = default_global_batch(c_chips, args.seq_len)
            res = search_training(
                m,
                cand,
                c_chips,
                global_batch=args.global_batch,
                seq_len=args.seq_len,
                precision_name=args.precision,
                top=1,
                ranks_per_chip=args.ranks_per_chip,
                progress=None if args.json else progress,
                compute_model=cm,
                stack=args.stack,
                plan_options=options,
            )
            tried.append(f"{c_chips} chips of {cand.name}")
            if res.top:
                break
        if not res.top:
            why = f"no plan of {m.name} fits on {' or '.join(tried)}"
            if args.json:
                dump(no_plan(why, m.name, cand.name, c_chips, res))
            print(f"trnsim train: {why}: " + "; ".join(res.notes), file=sys.stderr)
            return 1
        if cand is not sysm:
            sysm, chips = cand, c_chips
            if not gb_given:
                gb_note = default_global_batch_note(chips, args.seq_len)
        if len(cands) > 1:
            sys_note = (
                f"system: {sysm.name}, the smallest {sysm.chip.name} system on which a plan "
                f"fits (--system {args.system} names a chip; tried {'; '.join(tried)})"
            )
        plan = res.top[0].plan.replace(moe_imbalance=args.moe_imbalance)
        chosen = (
            f"plan: chosen by the planner (highest tokens/s of the {res.considered} plans "
            f"searched, {res.over_capacity} over capacity) because no plan flag "
            "(--tp/--pp/--dp/--ep/--cp/--micro-batch/--zero/--recompute/--interleave) was given"
        )
    est = estimate_training(
        m,
        sysm,
        plan,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        precision_name=args.precision,
        cost_inputs=cost_inputs(args, sysm.chip),
        tokens_to_train=args.tokens,
        compute_model=cm,
        stack=args.stack,
    )
    ttt = None
    if ttt_args is not None:  # MLPerf: whole steps to the first evaluation past convergence
        ttt = estimate_time_to_train(est, *ttt_args)
        est = estimate_training(
            m,
            sysm,
            plan,
            global_batch=est.global_batch,
            seq_len=args.seq_len,
            precision_name=args.precision,
            cost_inputs=cost_inputs(args, sysm.chip),
            tokens_to_train=ttt.samples_trained * args.seq_len,
            compute_model=cm,
            stack=args.stack,
        )
        est.assumptions.append(
            f"MLPerf time to train: {ttt.samples_to_converge:,.0f} samples to converge"
            + (f", evaluated every {ttt.eval_interval:,.0f}" if ttt.eval_interval else "")
            + f" -> {ttt.steps:,} steps of {est.global_batch:,} = {ttt.samples_trained:,} "
            "samples trained"
        )
    if gb_note:
        est.assumptions.insert(0, gb_note)
    if sys_note:
        est.assumptions.insert(0, sys_note)
    if chosen:
        est.assumptions.insert(0, chosen)
    if args.json:
        doc = est.as_dict()
        if ttt is not None:
            doc["mlperf"] = ttt.as_dict()
        dump(doc)
    else:
        show_training(Console(), est)
    return 0 if est.fits else 1


def mlperf_args(args: argparse.Namespace) -> tuple[float, float | None] | None:
    """(samples, eval_interval) of ``--samples`` / ``--eval-interval``, checked."""
    samples = getattr(args, "samples", None)
    interval = getattr(args, "eval_interval", None)
    if samples is None:
        if interval is not None:
            raise UsageError(f"--eval-interval {interval:g}: needs --samples")
        return None
    if args.tokens is not None:
        raise UsageError(
            f"--samples {samples:g} and --tokens {args.tokens:g}: give one (samples x "
            "--seq-len tokens are trained)"
        )
    return samples, interval


def show_training(console: Console, est: Any) -> None:
    mem = est.memory
    rows = [
        ("plan", est.plan.summary()),
        ("fits in HBM", "yes" if est.fits else "[red]NO[/red]"),
        ("step time", pretty(est.step_time_s, "s")),
        ("throughput", pretty(est.tokens_per_s, "tok/s")),
        ("sequences/s", pretty(est.seq_per_s, "seq/s")),
        ("MFU (6N + attention)", f"{est.mfu:.1%}"),
        ("MFU (6N)", f"{est.mfu_6n:.1%}"),
        ("memory per chip", pretty(mem.total * est.plan.ranks_per_chip, "B")),
    ]
    rows += [(f"  {k.replace('_', ' ')}", pretty(v, "s")) for k, v in est.breakdown.items() if v]
    if est.time_to_train_s is not None:
        rows.append(("time to train", f"{est.time_to_train_s / 86400:,.2f} days"))
        if est.cost and est.cost.usd is not None:
            rows.append(("cost", usd(est.cost.usd)))
        if est.cost and est.cost.energy_j is not None:
            rows.append(("energy", f"{est.cost.energy_j / 3.6e9:,.1f} MWh"))
    title = f"{est.model} training on {est.chips} chips of {est.system} ({est.precision})"
    print_kv(console, title, rows)
    if not est.fits:
        console.print(prose(mem.explain(), style="red"))
    for a in est.assumptions:
        console.print(prose(f"- {a}", style="dim"))
