"""``trnsim compare-workload``: one workload on several systems side by side, with a PNG chart."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from trnsim.cli.train import dump
from trnsim.perf.compare import DEFAULT_SYSTEMS, compare
from trnsim.report.tables import fit
from trnsim.report.units import pretty


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model preset")
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument(
        "--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated system presets"
    )
    parser.add_argument(
        "--chips",
        type=int,
        help="chips per system (default: each system's rack/UltraServer, 64 for a pod)",
    )
    parser.add_argument("--global-batch", type=int, default=1152)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--input-tokens", type=int, default=2048)
    parser.add_argument("--output-tokens", type=int, default=512)
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--png", help="write a bar chart to this PNG file")
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def run(args: argparse.Namespace) -> int:
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    rows = compare(
        args.model,
        args.mode,
        systems,
        args.chips,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        precision_name=args.precision,
    )
    if args.png:
        from trnsim.report.plots import comparison_chart

        comparison_chart(rows, args.png, f"{args.model} {args.mode} ({args.precision})")
    if args.json:
        dump(
            {
                "model": args.model,
                "mode": args.mode,
                "rows": [r.as_dict() for r in rows],
                "png": args.png,
            }
        )
        return 0
    console = Console()
    table = Table(title=f"{args.model} {args.mode}, best plan per system", title_justify="left")
    cols = ["system", "chips", "plan", "tokens/s", "tokens/s/chip"]
    cols += ["MFU"] if args.mode == "train" else ["TTFT", "TPOT"]
    cols += ["USD/Mtok", "J/token"]
    for c in cols:
        table.add_column(c)
    for r in rows:
        cells = [
            r.system,
            str(r.chips),
            r.plan,
            pretty(r.tokens_per_s),
            pretty(r.tokens_per_s_per_chip),
        ]
        if args.mode == "train":
            cells.append(f"{r.mfu:.1%}" if r.mfu is not None else "-")
        else:
            cells += [pretty(r.ttft_s, "s"), pretty(r.tpot_s, "s")]
        cells += [pretty(r.usd_per_million_tokens), pretty(r.joules_per_token)]
        table.add_row(*cells)
    console.print(fit(table))
    for r in rows:
        console.print(f"[dim]{r.system}: " + "; ".join(r.assumptions) + "[/dim]")
    if args.png:
        console.print(f"chart: {args.png}")
    return 0
