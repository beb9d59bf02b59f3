"""``trnsim plan``: search parallel plans for the best one that fits; show the top plans."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from trnsim.cli.train import dump, resolve_system
from trnsim.perf.planner import search_inference, search_training
from trnsim.report.tables import fit
from trnsim.report.units import pretty


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model preset")
    parser.add_argument("--system", default="trn3-gen2", help="hw preset (default trn3-gen2)")
    parser.add_argument("--chips", type=int, help="chips (default: the system's chips)")
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument(
        "--objective", default="throughput", choices=("throughput", "step_time", "latency", "cost")
    )
    parser.add_argument("--global-batch", type=int, default=1024)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--input-tokens", type=int, default=1024)
    parser.add_argument("--output-tokens", type=int, default=256)
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--ranks-per-chip", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def run(args: argparse.Namespace) -> int:
    sysm = resolve_system(args.system)
    chips = args.chips or sysm.chips
    show = not args.json and sys.stderr.isatty()
    if args.mode == "train":
        obj = args.objective if args.objective in ("throughput", "step_time") else "throughput"
        res = search_training(
            args.model,
            sysm,
            chips,
            global_batch=args.global_batch,
            seq_len=args.seq_len,
            precision_name=args.precision,
            objective=obj,
            top=args.top,
            ranks_per_chip=args.ranks_per_chip,
            progress=show,
        )
    else:
        obj = args.objective if args.objective != "step_time" else "throughput"
        res = search_inference(
            args.model,
            sysm,
            chips,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            precision_name=args.precision,
            objective=obj,
            top=args.top,
            ranks_per_chip=args.ranks_per_chip,
            progress=show,
        )
    if args.json:
        dump(
            {
                "objective": obj,
                "considered": res.considered,
                "invalid": res.invalid,
                "over_capacity": res.over_capacity,
                "notes": res.notes,
                "top": [e.as_dict() for e in res.top],
            }
        )
        return 0 if res.top else 1
    console = Console()
    table = Table(
        title=f"best {args.mode} plans for {args.model} on {chips} x {sysm.name} "
        f"({obj}; {res.considered} considered, {res.over_capacity} over capacity, "
        f"{res.invalid} invalid)",
        title_justify="left",
    )
    if args.mode == "train":
        for c in ("#", "plan", "step time", "tokens/s", "MFU", "memory/chip"):
            table.add_column(c)
        for i, e in enumerate(res.top, 1):
            table.add_row(
                str(i),
                e.plan.describe(),
                pretty(e.step_time_s, "s"),
                pretty(e.tokens_per_s),
                f"{e.mfu:.1%}",
                pretty(e.memory.total * e.plan.ranks_per_chip, "B"),
            )
    else:
        for c in ("#", "plan", "batch", "TTFT", "TPOT", "tokens/s", "USD/Mtok", "memory/chip"):
            table.add_column(c)
        for i, e in enumerate(res.top, 1):
            table.add_row(
                str(i),
                e.plan.describe(),
                str(e.batch),
                pretty(e.ttft_s, "s"),
                pretty(e.tpot_s, "s"),
                pretty(e.throughput_tokens_per_s),
                pretty(e.usd_per_million_tokens),
                pretty(e.memory.total * e.plan.ranks_per_chip, "B"),
            )
    console.print(fit(table))
    for n in res.notes:
        console.print(f"[red]{n}[/red]")
    return 0 if res.top else 1
