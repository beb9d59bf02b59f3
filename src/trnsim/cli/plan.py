"""``trnsim plan``: search parallel plans for the best one that fits; show the top plans."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import rule_type
from trnsim.cli.train import (
    DEFAULT_SYSTEM,
    add_model,
    add_precision,
    check_ranks_per_chip,
    default_to_context,
    dump,
    model_from_args,
    resolve_chips,
    resolve_system,
)
from trnsim.errors import UsageError
from trnsim.perf.planner import search_inference, search_training
from trnsim.perf.slo import DEFAULT_SLO, ServingSLO
from trnsim.perf.train import default_global_batch, default_global_batch_note
from trnsim.report.progress import progress
from trnsim.report.tables import fit, prose
from trnsim.report.units import pretty, usd

TRAIN_OBJECTIVES = ("throughput", "step_time")
INFER_OBJECTIVES = ("throughput", "latency", "cost")


# Workload flags by mode: the other mode's are refused (they would be silently ignored).
MODE_FLAGS = {"train": ("global_batch", "seq_len"), "infer": ("input_tokens", "output_tokens")}
# None: computed from the chips (``default_global_batch``: 1,024, or 1,024 tokens per chip when
# more), after the mode check
PLAN_DEFAULTS = {"global_batch": None, "seq_len": 4096, "input_tokens": 1024, "output_tokens": 256}
# Workload defaults shortened to the model's context (``train.default_to_context``).
CONTEXT = ("seq_len", "input_tokens", "output_tokens")
MODE_HELP = {
    "global_batch": "sequences per step (train)",
    "seq_len": "tokens per sequence (train)",
    "input_tokens": "prompt tokens (infer)",
    "output_tokens": "generated tokens (infer)",
}


def add_mode_flags(parser: argparse.ArgumentParser, defaults: dict[str, int | None]) -> None:
    """``--global-batch --seq-len`` (train) and ``--input-tokens --output-tokens`` (infer)."""
    for dest, default in defaults.items():
        shown = "1,024, or 1,024 tokens per chip when more" if default is None else f"{default}"
        parser.add_argument(
            f"--{dest.replace('_', '-')}",
            type=rule_type(dest.replace("_", "-")),
            help=f"{MODE_HELP[dest]}; default {shown}",
        )


def apply_mode_defaults(args: argparse.Namespace, defaults: dict[str, int | None]) -> None:
    """Refuse the other mode's workload flags (before any work), then fill in defaults."""
    other = "infer" if args.mode == "train" else "train"
    given = [f"--{f.replace('_', '-')}" for f in MODE_FLAGS[other] if getattr(args, f) is not None]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise UsageError(f"{', '.join(given)} only {verb} with --mode {other}, not {args.mode}")
    for dest, default in defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)


def add_slo_flags(parser: argparse.ArgumentParser) -> None:
    """``--slo-ttft`` and ``--slo-tpot``: the serving latency bound (``trnsim.perf.slo``)."""
    parser.add_argument(
        "--slo-ttft",
        type=rule_type("slo-ttft"),
        metavar="SECONDS",
        help=f"serving: time to first token a plan must meet (default {DEFAULT_SLO.ttft_s:g} s, "
        "MLPerf Inference's server-scenario bound)",
    )
    parser.add_argument(
        "--slo-tpot",
        type=rule_type("slo-tpot"),
        metavar="SECONDS",
        help=f"serving: time per output token a plan must meet (default {DEFAULT_SLO.tpot_s:g} "
        "s, MLPerf Inference's server-scenario bound)",
    )


def slo_from_args(args: argparse.Namespace, mode: str = "infer") -> ServingSLO | None:
    """The latency bound of ``--slo-ttft`` / ``--slo-tpot`` (defaults: ``DEFAULT_SLO``); None
    in training mode, where the flags are refused (they would be ignored)."""
    given = [f for f in ("slo_ttft", "slo_tpot") if getattr(args, f, None) is not None]
    if mode != "infer":
        if given:
            flags = ", ".join(f"--{f.replace('_', '-')}" for f in given)
            verb = "applies" if len(given) == 1 else "apply"
            raise UsageError(f"{flags} only {verb} with --mode infer, not {mode}")
        return None
    if not given:
        return DEFAULT_SLO
    source = "given" if len(given) == 2 else f"{given[0].split('_')[1].upper()} given; the other: "
    if len(given) == 1:
        source += DEFAULT_SLO.source
    return ServingSLO(
        ttft_s=args.slo_ttft if args.slo_ttft is not None else DEFAULT_SLO.ttft_s,
        tpot_s=args.slo_tpot if args.slo_tpot is not None else DEFAULT_SLO.tpot_s,
        source=source,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument(
        "--system", default=DEFAULT_SYSTEM, help=f"hw preset (default {DEFAULT_SYSTEM})"
    )
    parser.add_argument(
        "--chips", type=rule_type("chips"), help="chips (default: the system's chips)"
    )
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument(
        "--objective",
        choices=("throughput", "step_time", "latency", "cost"),
        help="train: throughput or step_time; infer: throughput, latency or cost "
        "(default throughput)",
    )
    add_mode_flags(parser, PLAN_DEFAULTS)
    add_slo_flags(parser)
    add_precision(parser)
    parser.add_argument("--top", type=rule_type("top"), default=5, help="plans shown")
    parser.add_argument("--ranks-per-chip", type=rule_type("ranks-per-chip"), default=1)
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def run(args: argparse.Namespace) -> int:
    obj = args.objective or "throughput"
    context_defaults = {k: v for k, v in PLAN_DEFAULTS.items() if getattr(args, k) is None}
    apply_mode_defaults(args, {k: v for k, v in PLAN_DEFAULTS.items() if k not in CONTEXT})
    allowed = TRAIN_OBJECTIVES if args.mode == "train" else INFER_OBJECTIVES
    if obj not in allowed:
        raise UsageError(
            f"--objective {obj} does not apply to --mode {args.mode} (use {', '.join(allowed)})"
        )
    m = model_from_args(args)
    default_to_context(args, m, {k: PLAN_DEFAULTS[k] for k in context_defaults if k in CONTEXT})
    sysm = resolve_system(args.system)
    chips = resolve_chips(args, sysm)
    check_ranks_per_chip(args, sysm.chip)
    bar = None if args.json else progress
    gb_note = None
    if args.global_batch is None:
        args.global_batch = default_global_batch(chips, args.seq_len)
        gb_note = default_global_batch_note(chips, args.seq_len)
    slo = slo_from_args(args, args.mode)
    if args.mode == "train":
        res = search_training(
            m,
            sysm,
            chips,
            global_batch=args.global_batch,
            seq_len=args.seq_len,
            precision_name=args.precision,
            objective=obj,
            top=args.top,
            ranks_per_chip=args.ranks_per_chip,
            progress=bar,
        )
    else:
        res = search_inference(
            m,
            sysm,
            chips,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            precision_name=args.precision,
            objective=obj,
            top=args.top,
            ranks_per_chip=args.ranks_per_chip,
            progress=bar,
            slo=slo,
        )
    if args.json:
        serving = {"slo": slo.as_dict(), "over_slo": res.over_slo} if slo else {}
        dump(
            {
                "objective": obj,
                **({"global_batch": args.global_batch} if args.mode == "train" else {}),
                "found": bool(res.top),
                "considered": res.considered,
                "invalid": res.invalid,
                "over_capacity": res.over_capacity,
                **serving,
                "notes": res.notes,
                "top": [e.as_dict() for e in res.top],
            }
        )
        return 0 if res.top else 1
    console = Console()
    missed = f", {res.over_slo} over the latency bound" if slo else ""
    table = Table(
        title=f"best {args.mode} plans for {m.name} ({args.precision}) on {chips} chips of "
        f"{sysm.name} ({obj}; {res.considered} considered, {res.over_capacity} over "
        f"capacity{missed}, {res.invalid} invalid)",
        title_justify="left",
    )
    if args.mode == "train":
        for c in ("#", "plan", "step time", "tokens/s", "MFU", "memory/chip"):
            table.add_column(c)
        for i, e in enumerate(res.top, 1):
            table.add_row(
                str(i),
                e.plan.summary(),
                pretty(e.step_time_s, "s"),
                pretty(e.tokens_per_s, "tok/s"),
                f"{e.mfu:.1%}",
                pretty(e.memory.total * e.plan.ranks_per_chip, "B"),
            )
    else:
        cols = ("#", "plan", "batch", "TTFT", "TPOT", "tokens/s", "USD/Mtok", "memory/chip")
        for c in cols:
            table.add_column(c)
        for i, e in enumerate(res.top, 1):
            table.add_row(
                str(i),
                e.plan.summary("serve"),
                f"{e.batch:,}",
                pretty(e.ttft_s, "s"),
                pretty(e.tpot_s, "s"),
                pretty(e.throughput_tokens_per_s, "tok/s"),
                usd(e.usd_per_million_tokens),
                pretty(e.memory.total * e.plan.ranks_per_chip, "B"),
            )
    if res.top:
        console.print(fit(table))
    else:
        console.print(prose(table.title))
    if slo is not None:
        console.print(prose(slo.describe(), style="dim"))
    if gb_note and args.mode == "train":
        console.print(prose(gb_note, style="dim"))
    for n in res.notes:
        console.print(prose(n, style="red"))
    return 0 if res.top else 1
