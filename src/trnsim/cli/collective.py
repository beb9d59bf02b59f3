"""``trnsim collective``: time a collective on a system (closed form or flow simulation).

    trnsim collective --op all-reduce --system trn3-gen2 --ranks 144 --size 1GiB [--algo ring]
    trnsim collective --op all-to-all --system trn2-ultraserver --sweep --plot a2a.png
    trnsim collective --op all-reduce --size 64MiB --evaluator flow --json
    trnsim collective --system p5.48xlarge --op all-reduce --size 256MiB   # NCCL (ring/tree/NVLS)

Each system's collectives run on its vendor's stack (``--stack`` overrides): ``neuron`` (Neuron
runtime), ``nccl`` (GPUs) or ``tpu-ici`` (TPUs); the output names the stack and its algorithms.

Bandwidths follow nccl-tests: algbw = size / time, busbw = algbw x (2(n-1)/n for all-reduce,
(n-1)/n for all-gather / reduce-scatter / all-to-all, 1 for broadcast and permute). Tables show
decimal GB/s; ``--json`` prints SI units (seconds, bytes, bytes/s).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import tempfile
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from trnsim.errors import ConfigError
from trnsim.fabric import OPS, CollectiveResult, collective_time
from trnsim.fabric.collectives import ALGOS, NCCL_ALGOS, flow_overheads, resolve_system
from trnsim.fabric.stacks import STACKS, canonical_stack

UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> float:
    """'1GiB' -> 2**30, '64KiB' -> 65536, '1e6' -> 1e6, '2 GB' -> 2e9 (bytes)."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in UNITS:
        valid = "KiB, MiB, GiB, TiB (powers of 2), KB, MB, GB, TB (powers of 10), or plain bytes"
        raise ConfigError(f"cannot read size {text!r}; write a number with a unit: {valid}")
    return float(match.group(1)) * UNITS[unit]


def human_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ops = ", ".join(OPS)
    parser.add_argument("--op", default="all-reduce", help=f"collective ({ops}; aliases ok)")
    parser.add_argument("--system", default="trn3-gen2", help="system preset (trnsim specs)")
    parser.add_argument("--ranks", type=int, help="chips taking part (default: the system's)")
    parser.add_argument("--size", default="1GiB", help="nccl-tests size per rank, e.g. 64KiB")
    parser.add_argument(
        "--algo",
        help=f"force an algorithm (Neuron / TPU: {', '.join(ALGOS)}, mesh, kangaring; NCCL: "
        f"{', '.join(NCCL_ALGOS)}) or 'best'",
    )
    parser.add_argument(
        "--stack",
        choices=tuple(STACKS),
        help="collective library (default: the system's vendor's: neuron, nccl or tpu-ici)",
    )
    parser.add_argument("--placement", default="packed", choices=("packed", "spread"))
    parser.add_argument("--evaluator", default="closed", choices=("closed", "flow"))
    parser.add_argument("--sweep", action="store_true", help="1 KiB .. 1 GiB table and plot")
    parser.add_argument("--min-size", default="1KiB", help="sweep start (default 1KiB)")
    parser.add_argument("--max-size", default="1GiB", help="sweep end (default 1GiB)")
    parser.add_argument("--factor", type=int, default=4, choices=(2, 4), help="sweep step factor")
    parser.add_argument(
        "--plot", default="collective_sweep.png", help="PNG path for --sweep ('' to skip)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def evaluate(args: argparse.Namespace, size: float, ranks: int) -> CollectiveResult:
    if args.evaluator == "flow":
        from trnsim.fabric.flowsim import simulate

        ov = flow_overheads(args.system, args.stack)
        res = simulate(args.op, size, ranks, args.system, args.algo, args.placement, overheads=ov)
        stack = canonical_stack(args.stack, resolve_system(args.system)).name
        return dataclasses.replace(res, stack=f"{stack}-flow" if stack != "neuron" else stack)
    return collective_time(
        args.op, size, ranks, args.system, args.algo, args.placement, stack=args.stack
    )


def _stack_line(r: CollectiveResult) -> str:
    if r.stack.endswith("-flow"):
        return (
            f"stack {r.stack}: the flow simulator runs the Neuron-family algorithms with the "
            f"{r.stack[:-5]} stack's constants (trnsim.fabric.collectives.flow_overheads)"
        )
    if r.stack not in STACKS:
        return f"stack {r.stack}: the Neuron-family algorithms with caller-given constants"
    stk = STACKS[r.stack]
    proto = f", protocol {r.protocol}" if r.protocol else ""
    return f"stack {stk.name} ({stk.library}{proto}): {stk.algorithms}; constants: {stk.constants}"


def run(args: argparse.Namespace) -> int:
    console = Console()
    spec = resolve_system(args.system)
    ranks = args.ranks if args.ranks is not None else spec.chips
    if not args.sweep:
        res = evaluate(args, parse_size(args.size), ranks)
        if args.json:
            print(json.dumps(res.to_dict(), indent=2))
        else:
            _print_one(console, res)
        return 0
    lo, hi = parse_size(args.min_size), parse_size(args.max_size)
    if not 0 < lo <= hi:
        raise ConfigError(f"sweep needs 0 < --min-size <= --max-size, got {lo:g} and {hi:g}")
    sizes = []
    s = lo
    while s <= hi * (1 + 1e-12):
        sizes.append(s)
        s *= args.factor
    results = []
    start = time.perf_counter()
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("sweeping", total=len(sizes), visible=False)
        for size in sizes:
            results.append(evaluate(args, size, ranks))
            progress.advance(task)
            if time.perf_counter() - start > 1.0:
                progress.update(task, visible=True)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        _print_sweep(console, results)
    if args.plot:
        write_plot(results, args.plot)
        if not args.json:
            console.print(f"plot written to {args.plot}")
    return 0


def _print_one(console: Console, r: CollectiveResult) -> None:
    t = Table(title=f"{r.op} of {human_bytes(r.nbytes)} on {r.ranks} ranks of {r.system}")
    t.add_column("level")
    t.add_column("latency (us)", justify="right")
    t.add_column("bandwidth (us)", justify="right")
    for level, part in r.breakdown.items():
        t.add_row(level, f"{part['latency_s'] * 1e6:.2f}", f"{part['bandwidth_s'] * 1e6:.2f}")
    console.print(t)
    console.print(
        f"time {r.time_s * 1e6:.2f} us   algbw {r.algbw / 1e9:.2f} GB/s   "
        f"busbw {r.busbw / 1e9:.2f} GB/s   algorithm {r.algo}   ({r.evaluator} form, "
        f"{r.placement} placement)"
    )
    console.print(_stack_line(r))


def _print_sweep(console: Console, results: list[CollectiveResult]) -> None:
    r0 = results[0]
    t = Table(title=f"{r0.op} on {r0.ranks} ranks of {r0.system} ({r0.evaluator})")
    for col in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm"):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            f"{r.nbytes:,.0f}",
            f"{r.time_s * 1e6:,.1f}",
            f"{r.algbw / 1e9:.2f}",
            f"{r.busbw / 1e9:.2f}",
            r.algo + (f"/{r.protocol}" if r.protocol else ""),
        )
    console.print(t)
    console.print(_stack_line(r0))


def write_plot(results: list[CollectiveResult], path: str) -> None:
    """busbw and time against size (log axes), written atomically (temp file, then replace)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r.nbytes for r in results]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(sizes, [r.busbw / 1e9 for r in results], marker="o")
    ax1.set(xscale="log", xlabel="size (bytes)", ylabel="busbw (GB/s)", title="bus bandwidth")
    ax2.plot(sizes, [r.time_s * 1e6 for r in results], marker="o")
    ax2.set(xscale="log", yscale="log", xlabel="size (bytes)", ylabel="time (us)", title="time")
    r0 = results[0]
    fig.suptitle(f"{r0.op}, {r0.ranks} ranks, {r0.system} ({r0.evaluator})")
    fig.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=directory)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
