"""``trnsim run kernel.py``: run an NKI kernel file on the emulated NeuronCore.

The file follows the kernel-file convention of ``trnsim.nki.kernelfile`` (``@nki.jit``
kernels, ``make_inputs(rng)``, optional ``golden(*inputs)`` and ``TOLERANCE``). Prints the
outputs, the max abs / rel error against the golden and the instruction count by engine; exit
status 1 when a tolerance is set and not met (or on an illegal kernel, with the rule and the
kernel's file and line).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from rich.console import Console
from rich.table import Table

from trnsim.nki.kernelfile import FileRun, run_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="kernel file (see 'Kernel files' in the README)")
    parser.add_argument(
        "--target",
        choices=["gen2", "gen3", "gen4", "trn1", "trn2", "trn3"],
        default=None,
        help="NeuronCore generation (default: the kernel's platform_target, "
        "NEURON_PLATFORM_TARGET_OVERRIDE, else gen4)",
    )
    parser.add_argument("--kernel", metavar="NAME", help="which @nki.jit kernel of the file")
    parser.add_argument("--seed", type=int, default=0, help="seed passed to make_inputs(rng)")
    parser.add_argument("--rtol", type=float, help="relative tolerance (overrides TOLERANCE)")
    parser.add_argument("--atol", type=float, help="absolute tolerance (overrides TOLERANCE)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    r = run_file(
        args.file, args.kernel, target=args.target, seed=args.seed, rtol=args.rtol, atol=args.atol
    )
    if args.json:
        print(json.dumps(r.to_dict(), indent=2))
    else:
        show(Console(), r)
    return 1 if r.passed is False else 0


def show(console: Console, r: FileRun) -> None:
    outs = ", ".join(f"{o.dtype}{list(o.shape)}" for o in r.outputs)
    console.print(f"[bold]{r.kernel}[/bold] from {r.path} on {r.target}: outputs {outs}")
    if r.has_golden:
        verdict = ""
        if r.passed is not None:
            tol = r.tolerance or {}
            mark = "[green]pass[/green]" if r.passed else "[red]FAIL[/red]"
            verdict = f"  {mark} (rtol {tol['rtol']:g}, atol {tol['atol']:g})"
        console.print(
            f"vs golden: max abs err {r.max_abs_err:.3g}, max rel err {r.max_rel_err:.3g}{verdict}"
        )
    else:
        console.print("no golden() in the file: outputs not checked")
    t = Table(title=f"{r.instructions} instructions")
    t.add_column("engine")
    t.add_column("instructions", justify="right")
    t.add_column("top opcodes")
    pairs = Counter((i.engine.value, i.opcode.value) for i in r.result.instructions)
    for eng, n in r.by_engine.items():
        ops = [f"{op} {c}" for (e, op), c in pairs.most_common() if e == eng]
        t.add_row(eng, str(n), ", ".join(ops[:4]))
    console.print(t)
