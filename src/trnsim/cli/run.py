"""``trnsim run kernel.py``: run an NKI kernel file on the emulated NeuronCore.

The file follows the kernel-file convention of ``trnsim.nki.kernelfile`` (``@nki.jit``
kernels, ``make_inputs(rng)``, optional ``golden(*inputs)`` and ``TOLERANCE``). Prints the
outputs, the max abs / rel error against the golden, the tolerance that applied (the file's, the
flags', or the default for the output dtype), the output elements the kernel never wrote, and
the instruction count by engine. Exit status: 0 pass (or no golden and every output element
written), 1 when the check fails, an output element was never written (unless the file
declares ``UNWRITTEN``) or the kernel breaks a rule, raises or exceeds a bound (with the
kernel's file and line), 2 for a bad file, flag or ``--arg``; 130 / 143 when Ctrl-C / SIGTERM
stop it (naming the line it was at).
"""

from __future__ import annotations

import argparse
from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trnsim.cli.argtypes import nonneg_float
from trnsim.cli.main import hard_deadline, hard_stop
from trnsim.cli.profile import TARGETS, add_kernel_arguments, heartbeat
from trnsim.nki.kernelfile import FileRun, parse_args, run_file
from trnsim.report.output import print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="kernel file (see 'Kernel files' in the README)")
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default=None,
        help="NeuronCore generation (default: the kernel's platform_target, "
        "NEURON_PLATFORM_TARGET_OVERRIDE, else gen4)",
    )
    add_kernel_arguments(parser)
    parser.add_argument(
        "--rtol", type=nonneg_float, help="relative tolerance, >= 0 (overrides TOLERANCE)"
    )
    parser.add_argument(
        "--atol", type=nonneg_float, help="absolute tolerance, >= 0 (overrides TOLERANCE)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    kwargs = parse_args(args.arg)
    with progress(f"running {args.file}") as bar, hard_deadline("run", args.file, args.timeout):
        r = run_file(
            args.file,
            args.kernel,
            target=args.target,
            seed=args.seed,
            rtol=args.rtol,
            atol=args.atol,
            kwargs=kwargs,
            max_instructions=args.max_instructions,
            timeout=args.timeout,
            on_beat=heartbeat("run", bar),
            on_stuck=hard_stop("run"),
        )
    if args.json:
        print_json(r.to_dict())
    else:
        show(Console(), r)
    return 1 if r.passed is False else 0


def show(console: Console, r: FileRun) -> None:
    outs = ", ".join(f"{o.dtype}{list(o.shape)}" for o in r.outputs)
    console.print(f"[bold]{r.kernel}[/bold] from {r.path} on {r.target}: outputs {outs}")
    if r.has_golden:
        verdict = ""
        tol = r.tolerance
        if r.passed is not None and tol is not None:
            mark = "[green]pass[/green]" if r.passed else "[red]FAIL[/red]"
            verdict = f"  {mark} (rtol {tol['rtol']:g}, atol {tol['atol']:g}; {tol['source']})"
        console.print(
            f"vs golden: max abs err {r.max_abs_err:.3g}, max rel err {r.max_rel_err:.3g}{verdict}"
        )
        if r.nonfinite:
            n = sum(o.size for o in r.outputs)
            console.print(
                f"[red]{r.nonfinite:,} of {n:,} compared output elements are NaN or Inf where "
                "the golden is not[/red]"
            )
    else:
        verdict = (
            "outputs not compared (add 'def golden(*inputs): return expected', in NumPy, "
            "to check them)"
            if r.passed is None
            else "[red]FAIL[/red]"
        )
        console.print(f"no golden() in the file: {verdict}")
    for u in r.unwritten:
        if r.unwritten_declared is not None:
            console.print(
                f"{u.describe()} (declared: {escape(r.unwritten_declared)}; not compared)"
            )
        else:
            console.print(
                f"[red]{escape(u.describe())}[/red] (the kernel never wrote them; if it "
                "leaves them on purpose, say why: UNWRITTEN = '...' in the file)"
            )
    t = Table(title=f"{r.instructions} instructions")
    t.add_column("engine")
    t.add_column("instructions", justify="right")
    t.add_column("top opcodes")
    pairs = Counter((i.engine.value, i.opcode.value) for i in r.result.instructions)
    for eng, n in r.by_engine.items():
        ops = [f"{op} {c}" for (e, op), c in pairs.most_common() if e == eng]
        t.add_row(eng, str(n), ", ".join(ops[:4]))
    console.print(fit(t))
