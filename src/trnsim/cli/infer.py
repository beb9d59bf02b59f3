"""``trnsim infer``: estimate serving (TTFT, TPOT, throughput, KV cache, cost per token)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from trnsim.cli.train import add_common, cost_inputs, dump, print_kv, resolve_system
from trnsim.errors import ConfigError
from trnsim.perf import ParallelPlan, estimate_inference
from trnsim.perf.table_model import compute_model
from trnsim.report.units import pretty


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--batch", type=int, default=1, help="sequences per replica")
    parser.add_argument("--input-tokens", type=int, default=1024, help="prompt tokens")
    parser.add_argument("--output-tokens", type=int, default=256, help="generated tokens")
    parser.add_argument("--max-seq-len", type=int, help="KV cache length to allocate")
    parser.add_argument(
        "--pad-heads",
        action="store_true",
        help="pad attention heads to a multiple of tp (Transformers-NeuronX)",
    )


def run(args: argparse.Namespace) -> int:
    sysm = resolve_system(args.system)
    chips = args.chips or sysm.chips
    ranks = chips * args.ranks_per_chip
    if ranks % (args.tp * args.pp):
        raise ConfigError(
            f"plan: chips({chips}) x ranks_per_chip({args.ranks_per_chip}) = {ranks} is not "
            f"divisible by tp({args.tp}) * pp({args.pp})"
        )
    plan = ParallelPlan(
        tp=args.tp,
        pp=args.pp,
        dp=ranks // (args.tp * args.pp),
        ep=args.ep,
        zero=0,
        recompute="none",
        ranks_per_chip=args.ranks_per_chip,
        pad_heads=args.pad_heads,
    )
    est = estimate_inference(
        args.model,
        sysm,
        plan,
        batch=args.batch,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        precision_name=args.precision,
        max_seq_len=args.max_seq_len,
        cost_inputs=cost_inputs(args, sysm.chip),
        compute_model=compute_model(args.compute, sysm.chip, plan.ranks_per_chip),
    )
    if args.json:
        dump(est.as_dict())
        return 0
    show_inference(Console(), est)
    return 0


def show_inference(console: Console, est: Any) -> None:
    rows = [
        ("plan", f"{est.plan.describe()} (dp = replicas)"),
        ("fits in HBM", "yes" if est.fits else "[red]NO[/red]"),
        ("TTFT", pretty(est.ttft_s, "s")),
        ("TPOT", pretty(est.tpot_s, "s")),
        ("end-to-end latency", pretty(est.e2e_latency_s, "s")),
        ("output tokens/s (all replicas)", pretty(est.throughput_tokens_per_s)),
        ("decode tokens/s", pretty(est.decode_tokens_per_s)),
        ("memory per chip", pretty(est.memory.total * est.plan.ranks_per_chip, "B")),
        ("  KV cache per chip", pretty(est.memory.kv_cache * est.plan.ranks_per_chip, "B")),
        ("USD per million tokens", pretty(est.usd_per_million_tokens)),
        ("joules per token", pretty(est.joules_per_token)),
    ]
    print_kv(
        console,
        f"{est.model} serving on {est.chips} x {est.system} "
        f"(batch {est.batch}, {est.input_tokens} in, {est.output_tokens} out, "
        f"{est.precision})",
        rows,
    )
    if not est.fits:
        console.print(f"[red]{est.memory.explain()}[/red]")
    for a in est.assumptions:
        console.print(f"[dim]- {a}[/dim]")
