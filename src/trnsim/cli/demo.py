"""``trnsim demo``: a tour of the whole system on built-in defaults, in under a minute.

Each layer contributes one section: a function ``section(console) -> None`` that prints a short,
real computation (no canned output). ``SECTIONS`` is the explicit list, in tour order; add a
layer's section by adding one line.
"""

from __future__ import annotations

import argparse
import importlib
import time

from rich.console import Console
from rich.rule import Rule

from trnsim.errors import UsageError

# (title, "module:function") in tour order.
SECTIONS: list[tuple[str, str]] = [
    ("Hardware catalog", "trnsim.cli.demo_hw:section"),
    ("Number formats: MX, stochastic rounding, sparsity", "trnsim.cli.demo_numerics:section"),
    ("NKI kernels on the emulated NeuronCore", "trnsim.cli.demo_kernels:section"),
    ("Timing model and profiles", "trnsim.cli.demo_timing:section"),
    ("Fabric and collectives", "trnsim.cli.demo_fabric:section"),
    ("LLM training and inference performance", "trnsim.cli.demo_perf:section"),
    ("Serving under load", "trnsim.cli.demo_serve:section"),
    ("Kubernetes DRA on a Trainium fleet", "trnsim.cli.demo_dra:section"),
    ("PyTorch on Trainium3", "trnsim.cli.demo_torch:section"),
    (
        "Sweeps on every core: serving at 30 points, the Pareto front",
        "trnsim.cli.demo_sweep:section",
    ),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only", metavar="TITLE", help="run only the sections whose title contains TITLE"
    )


def run(args: argparse.Namespace) -> int:
    console = Console()
    start = time.perf_counter()
    chosen = [s for s in SECTIONS if not args.only or args.only.lower() in s[0].lower()]
    if not chosen:
        titles = "; ".join(t for t, _ in SECTIONS)
        raise UsageError(f"--only {args.only!r} matches no section; sections: {titles}")
    for i, (title, target) in enumerate(chosen, 1):
        console.print(Rule(f"[bold]{i}/{len(chosen)}  {title}"))
        module_name, func_name = target.split(":")
        t0 = time.perf_counter()
        getattr(importlib.import_module(module_name), func_name)(console)
        console.print(f"[dim]({time.perf_counter() - t0:.2f} s)[/dim]")
    console.print(Rule(f"demo finished in {time.perf_counter() - start:.1f} s"))
    return 0
