"""``trnsim train``: estimate one training configuration (step time, tokens/s, MFU, memory)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim.errors import ConfigError
from trnsim.hw import lookup
from trnsim.hw.specs import ChipSpec, SystemSpec
from trnsim.perf import CostInputs, estimate_training, plan_for_chips
from trnsim.perf.table_model import COMPUTE_MODELS, compute_model
from trnsim.report.tables import fit
from trnsim.report.units import pretty


def resolve_system(name: str) -> SystemSpec:
    """``--system`` names a system preset, or a chip (then its smallest system in the catalog)."""
    spec = lookup(name)
    if isinstance(spec, SystemSpec):
        return spec
    if isinstance(spec, ChipSpec):
        from trnsim.hw import SYSTEMS

        for _, s in SYSTEMS:
            if s.chip == spec:
                return s
        raise ConfigError(f"no system preset uses chip {spec.name!r}; name a system")
    raise ConfigError(f"{name!r} is a NeuronCore preset; --system needs a chip or a system")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model preset (e.g. llama-3.1-70b)")
    parser.add_argument(
        "--system",
        default="trn3-gen2",
        help="hw preset: chip, instance, UltraServer or cluster (default trn3-gen2)",
    )
    parser.add_argument("--chips", type=int, help="chips used (default: the system's chips)")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel degree")
    parser.add_argument("--pp", type=int, default=1, help="pipeline parallel degree")
    parser.add_argument("--ep", type=int, default=1, help="expert parallel degree")
    parser.add_argument(
        "--precision",
        default="bf16",
        help="bf16, fp16, fp32, fp8, mxfp8, mxfp4, int8 (weight-only)",
    )
    parser.add_argument(
        "--ranks-per-chip",
        type=int,
        default=1,
        help="ranks per chip (2 for Trn1 NeuronCore counts)",
    )
    parser.add_argument("--price", type=float, help="USD per chip-hour (default: perf.cost)")
    parser.add_argument(
        "--compute",
        choices=COMPUTE_MODELS,
        default="auto",
        help="compute model: auto (kernel tables for Trainium, roofline otherwise), table, "
        "roofline",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--dp", type=int, help="data parallel degree (default: fill the chips)")
    parser.add_argument("--cp", type=int, default=1, help="context parallel degree")
    parser.add_argument("--global-batch", type=int, default=1024, help="sequences per step")
    parser.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch")
    parser.add_argument("--seq-len", type=int, default=4096, help="tokens per sequence")
    parser.add_argument("--zero", type=int, default=1, choices=(0, 1, 2, 3), help="ZeRO stage")
    parser.add_argument("--recompute", default="selective", choices=("none", "selective", "full"))
    parser.add_argument("--no-sp", action="store_true", help="disable sequence parallelism")
    parser.add_argument(
        "--interleave",
        type=int,
        default=1,
        help="virtual pipeline stages per rank (interleaved 1F1B when > 1)",
    )
    parser.add_argument("--tokens", type=float, help="tokens to train (time, cost, energy)")


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
    print(json.dumps(data, indent=2, default=str))


def run(args: argparse.Namespace) -> int:
    sysm = resolve_system(args.system)
    chips = args.chips or sysm.chips
    plan = plan_for_chips(
        chips,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        ep=args.ep,
        cp=args.cp,
        micro_batch=args.micro_batch,
        zero=args.zero,
        recompute=args.recompute,
        sequence_parallel=not args.no_sp,
        ranks_per_chip=args.ranks_per_chip,
        schedule="interleaved" if args.interleave > 1 else "1f1b",
        chunks=args.interleave,
    )
    est = estimate_training(
        args.model,
        sysm,
        plan,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        precision_name=args.precision,
        cost_inputs=cost_inputs(args, sysm.chip),
        tokens_to_train=args.tokens,
        compute_model=compute_model(args.compute, sysm.chip, plan.ranks_per_chip),
    )
    if args.json:
        dump(est.as_dict())
        return 0
    console = Console()
    show_training(console, est)
    return 0


def show_training(console: Console, est: Any) -> None:
    mem = est.memory
    rows = [
        ("plan", est.plan.describe()),
        ("fits in HBM", "yes" if est.fits else "[red]NO[/red]"),
        ("step time", pretty(est.step_time_s, "s")),
        ("tokens/s", pretty(est.tokens_per_s)),
        ("sequences/s", pretty(est.seq_per_s)),
        ("MFU (6N + attention)", f"{est.mfu:.1%}"),
        ("MFU (6N)", f"{est.mfu_6n:.1%}"),
        ("memory per chip", pretty(mem.total * est.plan.ranks_per_chip, "B")),
    ]
    rows += [(f"  {k}", pretty(v, "s")) for k, v in est.breakdown.items() if v]
    if est.time_to_train_s is not None:
        rows.append(("time to train", f"{est.time_to_train_s / 86400:,.2f} days"))
        if est.cost and est.cost.usd is not None:
            rows.append(("cost", f"${est.cost.usd:,.0f}"))
        if est.cost and est.cost.energy_j is not None:
            rows.append(("energy", f"{est.cost.energy_j / 3.6e9:,.1f} MWh"))
    print_kv(console, f"{est.model} training on {est.chips} x {est.system}", rows)
    if not est.fits:
        console.print(f"[red]{mem.explain()}[/red]")
    for a in est.assumptions:
        console.print(f"[dim]- {a}[/dim]")
