"""``trnsim compare-workload``: one workload on several systems side by side, with a PNG chart."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import rule_type
from trnsim.cli.plan import (
    CONTEXT,
    add_mode_flags,
    add_slo_flags,
    apply_mode_defaults,
    slo_from_args,
)
from trnsim.cli.train import add_precision, default_to_context, dump
from trnsim.errors import TrnsimError, UsageError
from trnsim.hw import system as lookup_system
from trnsim.perf.compare import DEFAULT_SYSTEMS, compare
from trnsim.report.output import output_path
from trnsim.report.progress import progress
from trnsim.report.tables import fit, prose
from trnsim.report.units import pretty, usd
from trnsim.workloads import resolve_model

COMPARE_DEFAULTS = {
    "global_batch": 1152,
    "seq_len": 4096,
    "input_tokens": 2048,
    "output_tokens": 512,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="model preset or a Hugging Face config.json path"
    )
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument(
        "--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated system presets"
    )
    parser.add_argument(
        "--chips",
        type=rule_type("chips"),
        help="chips per system (default: each system's rack/UltraServer, 64 for a pod)",
    )
    add_mode_flags(parser, COMPARE_DEFAULTS)
    add_slo_flags(parser)
    add_precision(parser)
    parser.add_argument("--png", help="write a bar chart to this PNG file")
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def chart_note(rows: list) -> str:
    """The chart's footnote: the compute model and the stack profile each system's figures
    came from (from the rows' own assumptions, so it names what was actually used)."""
    used: dict[str, list[str]] = {}
    for r in rows:
        parts = [a for a in r.assumptions if a.startswith(("compute:", "stack:"))]
        key = "; ".join(p.split(",")[0].split(" (")[0] for p in parts) or "no plan fits"
        used.setdefault(key, []).append(r.system)
    if len(used) == 1:
        return f"best plan per system by trnsim's perf model; {next(iter(used))}"
    return "best plan per system by trnsim's perf model; " + " | ".join(
        f"{', '.join(names)}: {key}" for key, names in used.items()
    )


def run(args: argparse.Namespace) -> int:
    context_defaults = {k: v for k, v in COMPARE_DEFAULTS.items() if getattr(args, k) is None}
    apply_mode_defaults(args, {k: v for k, v in COMPARE_DEFAULTS.items() if k not in CONTEXT})
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    if not systems:
        raise UsageError(f"--systems {args.systems!r}: name at least one system preset")
    for name in systems:
        try:
            spec = lookup_system(name)
        except TrnsimError as exc:
            raise UsageError(f"--systems: {exc}") from None
        if args.chips is not None:
            limit = max([spec.chips] + [lvl.span for lvl in spec.levels])
            if args.chips > limit:
                raise UsageError(f"--chips {args.chips}: {spec.name} reaches at most {limit} chips")
    if args.png:
        output_path(args.png, "--png")
    try:
        m = resolve_model(args.model)
    except TrnsimError as exc:
        raise UsageError(f"--model {args.model}: {exc}") from None
    model_name = m.name
    default_to_context(args, m, {k: v for k, v in context_defaults.items() if k in CONTEXT})
    slo = slo_from_args(args, args.mode)
    rows = compare(
        m,
        args.mode,
        systems,
        args.chips,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        precision_name=args.precision,
        progress=None if args.json else progress,
        slo=slo,
    )
    if args.png:
        from trnsim.report.plots import comparison_chart

        title = f"{model_name} {args.mode} ({args.precision})"
        bound = {"slo": slo} if slo else {}  # serving: the latency bound on the chart
        comparison_chart(rows, args.png, title, chart_note(rows), **bound)
    if args.json:
        dump(
            {
                "model": model_name,
                "mode": args.mode,
                **({"slo": slo.as_dict()} if slo else {}),
                "rows": [r.as_dict() for r in rows],
                "png": args.png,
            }
        )
        return 0
    console = Console()
    what = "best plan per system" + (" within the latency bound" if slo else "")
    table = Table(
        title=f"{model_name} {args.mode} ({args.precision}), {what}", title_justify="left"
    )
    cols = ["system", "chips", "plan", "tokens/s", "tokens/s/chip"]
    cols += ["MFU"] if args.mode == "train" else ["TTFT", "TPOT"]
    cols += ["USD/Mtok", "J/token"]
    for c in cols:
        table.add_column(c)
    for r in rows:
        fits = r.fits
        cells = [
            r.system,
            f"{r.chips:,}",
            r.plan_summary or r.plan,
            pretty(r.tokens_per_s, "tok/s") if fits else "-",
            pretty(r.tokens_per_s_per_chip, "tok/s") if fits else "-",
        ]
        if args.mode == "train":
            cells.append(f"{r.mfu:.1%}" if r.mfu is not None else "-")
        else:
            cells += [pretty(r.ttft_s, "s"), pretty(r.tpot_s, "s")]
        cells += [usd(r.usd_per_million_tokens), pretty(r.joules_per_token, "J")]
        table.add_row(*cells)
    console.print(fit(table))
    if slo is not None:
        console.print(prose(slo.describe()))
    for r in rows:
        console.print(prose(f"{r.system}: " + "; ".join(r.assumptions), style="dim"))
    if args.png:
        console.print(prose(f"chart: {args.png}"))
    return 0
