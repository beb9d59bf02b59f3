"""``trnsim infer``: estimate serving (TTFT, TPOT, throughput, KV cache, cost per token)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console

from trnsim import inputs
from trnsim.cli.argtypes import batch_size, fraction_list, rule_type
from trnsim.cli.plan import add_slo_flags, slo_from_args
from trnsim.cli.train import (
    add_common,
    check_moe_imbalance,
    check_ranks_per_chip,
    check_stack,
    cost_inputs,
    dump,
    model_from_args,
    no_plan,
    print_kv,
    resolve_chips,
    resolve_system,
)
from trnsim.errors import ConfigError, TrnsimError, UsageError
from trnsim.perf import ParallelPlan, Speculative, estimate_inference
from trnsim.perf.infer import SPEC_METHODS, max_batch
from trnsim.perf.planner import search_inference
from trnsim.perf.precision import KV_CACHE_BYTES
from trnsim.perf.table_model import compute_model
from trnsim.report.progress import progress
from trnsim.report.tables import prose
from trnsim.report.units import pretty, usd
from trnsim.workloads import resolve_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument(
        "--batch",
        type=batch_size,
        default=1,
        help="sequences per replica, or max: the largest batch whose KV cache fits (maximum "
        "throughput, as trtllm-bench sizes it; needs plan flags)",
    )
    parser.add_argument(
        "--input-tokens", type=rule_type("input-tokens"), default=1024, help="prompt tokens"
    )
    parser.add_argument(
        "--output-tokens", type=rule_type("output-tokens"), default=256, help="generated tokens"
    )
    parser.add_argument(
        "--max-seq-len", type=rule_type("max-seq-len"), help="KV cache length to allocate"
    )
    parser.add_argument(
        "--draft-model",
        help="speculative decoding: the draft model (preset or config.json), eagle3 (an "
        "EAGLE-3 head on the model) or mtp (the model's multi-token-prediction modules)",
    )
    parser.add_argument(
        "--spec-tokens",
        type=rule_type("spec-tokens"),
        help="speculative decoding: tokens the draft proposes per step (default 4; eagle3 3; "
        "mtp 1; needs --draft-model)",
    )
    parser.add_argument(
        "--spec-acceptance",
        type=rule_type("spec-acceptance"),
        help="speculative decoding: per-token acceptance rate (default: the method's published "
        "rate: eagle3 0.86, mtp 0.875; a draft model 0.7, assumed; needs --draft-model)",
    )
    parser.add_argument(
        "--spec-per-position",
        type=fraction_list,
        help="speculative decoding: measured acceptance of each draft position, comma-separated "
        "(vLLM's per-position acceptance, e.g. 0.865,0.725,0.635); one per --spec-tokens",
    )
    parser.add_argument(
        "--kv-cache-dtype",
        choices=("auto", *KV_CACHE_BYTES),
        default="auto",
        help="store the KV cache in this dtype (auto: the precision's; fp8 as vLLM's and "
        "TensorRT-LLM's FP8 KV cache)",
    )
    parser.add_argument(
        "--prefix-hit",
        type=rule_type("prefix-hit"),
        default=0.0,
        help="prefix caching: fraction of each prompt already in the KV cache (default 0)",
    )
    add_slo_flags(parser)
    parser.add_argument(
        "--pad-heads",
        action="store_true",
        help="pad attention heads to a multiple of tp (Transformers-NeuronX)",
    )


INFER_PLAN_FLAGS = ("tp", "pp", "ep")
SPEC_DEFAULT_TOKENS = {"draft": 4, "eagle3": 3}  # eagle3: the vLLM-Neuron tutorial's 3


def speculative_from_args(args: argparse.Namespace, m: Any) -> Speculative | None:
    """The ``Speculative`` of ``--draft-model`` and its flags (None without a draft)."""
    per_pos = getattr(args, "spec_per_position", None)
    if args.draft_model is None:
        for flag, value in (
            ("--spec-tokens", args.spec_tokens),
            ("--spec-acceptance", args.spec_acceptance),
            ("--spec-per-position", per_pos),
        ):
            if value is not None:
                shown = ",".join(f"{x:g}" for x in value) if isinstance(value, tuple) else value
                raise UsageError(f"{flag} {shown}: speculative decoding needs --draft-model")
        return None
    if args.spec_acceptance is not None and per_pos is not None:
        raise UsageError("--spec-acceptance and --spec-per-position: give one of the two")
    if args.draft_model in SPEC_METHODS:
        draft: Any = args.draft_model
        method = args.draft_model
    else:
        try:
            draft = resolve_model(args.draft_model)
        except TrnsimError as exc:
            raise UsageError(f"--draft-model {args.draft_model}: {exc}") from None
        method = "draft"
    if method == "mtp" and not m.n_mtp_modules:
        raise UsageError(f"--draft-model mtp: {m.name} has no multi-token-prediction modules")
    default = m.n_mtp_modules if method == "mtp" else SPEC_DEFAULT_TOKENS[method]
    tokens = args.spec_tokens or (len(per_pos) if per_pos else default)
    if tokens > args.output_tokens:
        raise UsageError(
            f"--spec-tokens {tokens}: more than --output-tokens {args.output_tokens} to generate"
        )
    if method == "mtp" and tokens > m.n_mtp_modules:
        raise UsageError(
            f"--spec-tokens {tokens}: mtp drafts one token per MTP module ({m.name} has "
            f"{m.n_mtp_modules})"
        )
    if per_pos is not None and len(per_pos) != tokens:
        raise UsageError(
            f"--spec-per-position gives {len(per_pos)} rates for --spec-tokens {tokens}"
        )
    try:
        spec = Speculative(draft, tokens, args.spec_acceptance, tuple(per_pos or ()))
    except ConfigError as exc:
        if isinstance(exc, UsageError):  # a rule of trnsim.inputs, naming its flag
            raise
        raise UsageError(f"--spec-per-position: {exc}") from None
    if method == "draft":  # smaller than the target, the same vocabulary (rule draft-model)
        inputs.check_speculative(spec, draft, m, args.output_tokens)
    return spec


def run(args: argparse.Namespace) -> int:
    m = model_from_args(args)
    check_moe_imbalance(args, m)
    sysm = resolve_system(args.system)
    chips = resolve_chips(args, sysm)
    check_ranks_per_chip(args, sysm.chip)
    check_stack(args, sysm.chip, "serve")
    inputs.check_inference(
        m,
        batch=None if args.batch == "max" else args.batch,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        max_seq_len=args.max_seq_len,
        prefix_hit=args.prefix_hit,
    )
    spec = speculative_from_args(args, m)
    ranks = chips * args.ranks_per_chip
    cm = compute_model(args.compute, sysm.chip, args.ranks_per_chip)
    chosen = None
    if any(getattr(args, f) is not None for f in INFER_PLAN_FLAGS) or args.pad_heads:
        try:
            tp, pp = args.tp or 1, args.pp or 1
            if ranks % (tp * pp):
                raise ConfigError(
                    f"plan: chips({chips}) x ranks_per_chip({args.ranks_per_chip}) = {ranks} "
                    f"is not divisible by tp({tp}) * pp({pp})"
                )
            plan = ParallelPlan(
                tp=tp,
                pp=pp,
                dp=ranks // (tp * pp),
                ep=args.ep or 1,
                zero=0,
                recompute="none",
                ranks_per_chip=args.ranks_per_chip,
                pad_heads=args.pad_heads,
                moe_imbalance=args.moe_imbalance,
            )
            plan.check_model(m)
        except ConfigError as exc:
            raise UsageError(f"plan flags: {exc}") from None
    elif args.batch == "max":
        raise UsageError(
            "--batch max: give the plan (--tp/--pp/--ep); the planner searches plans at a "
            "given batch"
        )
    else:
        res = search_inference(
            m,
            sysm,
            chips,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            batches=(args.batch,),
            precision_name=args.precision,
            objective="latency",
            top=1,
            ranks_per_chip=args.ranks_per_chip,
            progress=None if args.json else progress,
            compute_model=cm,
            stack=args.stack,
            slo=None,  # the lowest TPOT at this batch; the bound is reported, not imposed
        )
        if not res.top:
            why = f"no plan of {m.name} fits on {chips} chips of {sysm.name}"
            if args.json:
                dump(no_plan(why, m.name, sysm.name, chips, res))
            print(f"trnsim infer: {why}: " + "; ".join(res.notes), file=sys.stderr)
            return 1
        plan = res.top[0].plan.replace(moe_imbalance=args.moe_imbalance)
        chosen = (
            f"plan: chosen by the planner (lowest TPOT at batch {args.batch} of the "
            f"{res.considered} plans searched, {res.over_capacity} over capacity) because no "
            "plan flag (--tp/--pp/--ep/--pad-heads) was given"
        )
    batch = args.batch
    if batch == "max":
        batch = max_batch(
            m,
            sysm,
            plan,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            precision_name=args.precision,
            max_seq_len=args.max_seq_len,
            speculative=spec,
            kv_cache_dtype=args.kv_cache_dtype,
        )
        if batch < 1:
            print(
                f"trnsim infer: not one sequence of {args.input_tokens + args.output_tokens} "
                f"tokens fits beside the weights of {m.name} with {plan.describe()} on "
                f"{chips} chips of {sysm.name}",
                file=sys.stderr,
            )
            return 1
    est = estimate_inference(
        m,
        sysm,
        plan,
        batch=batch,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        precision_name=args.precision,
        max_seq_len=args.max_seq_len,
        cost_inputs=cost_inputs(args, sysm.chip),
        compute_model=cm,
        stack=args.stack,
        speculative=spec,
        prefix_hit=args.prefix_hit,
        kv_cache_dtype=args.kv_cache_dtype,
    )
    if chosen:
        est.assumptions.insert(0, chosen)
    slo = slo_from_args(args)
    met = slo.met(est.ttft_s, est.tpot_s)
    est.assumptions.append(
        f"{slo.describe()}: {'met' if met else 'NOT met'} (TTFT {pretty(est.ttft_s, 's')}, "
        f"TPOT {pretty(est.tpot_s, 's')})"
    )
    if args.json:
        dump({**est.as_dict(), "slo": {**slo.as_dict(), "met": met}})
    else:
        show_inference(Console(), est)
    return 0 if est.fits else 1


def show_inference(console: Console, est: Any) -> None:
    rows = [
        ("plan", f"{est.plan.summary('serve')} (DP = replicas)"),
        ("fits in HBM", "yes" if est.fits else "[red]NO[/red]"),
        ("TTFT", pretty(est.ttft_s, "s")),
        ("TPOT", pretty(est.tpot_s, "s")),
        ("end-to-end latency", pretty(est.e2e_latency_s, "s")),
        ("output rate (all replicas)", pretty(est.throughput_tokens_per_s, "tok/s")),
        ("decode rate", pretty(est.decode_tokens_per_s, "tok/s")),
        ("memory per chip", pretty(est.memory.total * est.plan.ranks_per_chip, "B")),
        ("  KV cache per chip", pretty(est.memory.kv_cache * est.plan.ranks_per_chip, "B")),
        ("cost per million tokens", usd(est.usd_per_million_tokens)),
        ("energy per token", pretty(est.joules_per_token, "J")),
    ]
    print_kv(
        console,
        f"{est.model} serving on {est.chips} chips of {est.system} "
        f"(batch {est.batch:,}, {est.input_tokens:,} in, {est.output_tokens:,} out, "
        f"{est.precision})",
        rows,
    )
    if not est.fits:
        console.print(prose(est.memory.explain(), style="red"))
    for a in est.assumptions:
        console.print(prose(f"- {a}", style="dim"))
