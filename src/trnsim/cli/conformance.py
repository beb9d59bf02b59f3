"""``trnsim conformance PATH``: AWS's public kernels, run unmodified from a local checkout.

PATH is a checkout of aws-neuron/nki-library or aws-neuron/nki-samples (or the SDK). Each
kernel trnsim has a case for (``trnsim.conformance``) is imported from the checkout, called on
small legal shapes and compared with a NumPy reference written here. With ``--cases FILE``,
PATH is any directory and the cases are the file's (a Python file defining ``CASES``, a list
of ``trnsim.conformance.Case``: kernel path, call shapes, reference; a bad file is one error
line, exit 2). Prints a table (case,
shapes, outcome, max error, time) or ``--json``; ``--profile`` also times each passing kernel
with the timing model. Exit status: 0 when every case passes or is ``external`` (it fails for
a reason outside trnsim: a syntax error in the checkout, a package not installed; ``--strict``
counts those as failures too), 1 otherwise, 2 on a bad PATH.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import nonneg_int
from trnsim.conformance.runner import OUTCOMES, Result, run_checkout
from trnsim.errors import UsageError
from trnsim.report.output import print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        metavar="PATH",
        help="a checkout of nki-library, nki-samples or the SDK; with --cases, any directory",
    )
    parser.add_argument(
        "--cases",
        metavar="FILE",
        help="your own cases (a Python file defining CASES = [trnsim.conformance.Case(...)])",
    )
    parser.add_argument("--only", metavar="TEXT", help="run only the cases whose name has TEXT")
    parser.add_argument(
        "--seed", type=nonneg_int, default=0, help="seed of the inputs' generator (>= 0)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also time each passing kernel (timing model)"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on 'external' cases too (a library bug, a package not installed)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show what the kernels print and log (nki-library's [INFO] lines); hidden otherwise",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    try:
        from trnsim.conformance.runner import all_cases, detect_checkout, load_cases_file

        if args.cases is not None:
            from pathlib import Path

            if not Path(args.path).is_dir():
                raise UsageError(f"PATH {args.path!r} is not a directory")
            checkout = Path(args.path).resolve().name
            total = len(load_cases_file(args.cases, Path(args.path).resolve())[0])
        else:
            checkout = detect_checkout(args.path)
            total = sum(1 for c in all_cases() if c.repo == checkout)
        with progress(f"conformance {checkout}", total=total) as bar:
            checkout, commit, results = run_checkout(
                args.path,
                only=args.only,
                seed=args.seed,
                profile=args.profile,
                on_result=lambda r: bar.advance(),
                verbose=args.verbose,
                cases_file=args.cases,
            )
    except UsageError as exc:
        print(f"trnsim conformance: error: {exc}", file=sys.stderr)
        return 2
    counts = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    if args.json:
        print_json(
            {
                "checkout": checkout,
                "commit": commit,
                "counts": counts,
                "cases": [r.to_dict() for r in results],
            }
        )
    else:
        show(Console(), checkout, commit, results, counts, args.profile)
    accepted = counts["pass"] + (0 if args.strict else counts["external"])
    return 0 if accepted == len(results) else 1


_STYLE = {"pass": "green", "mismatch": "red", "trnsim-error": "red", "kernel-error": "yellow"}


def show(
    console: Console,
    checkout: str,
    commit: str,
    results: list[Result],
    counts: dict[str, int],
    profile: bool,
) -> None:
    t = Table(title=f"{checkout} @ {commit}: {counts['pass']} of {len(results)} pass")
    for col in ("case", "shapes", "outcome", "max error", "time"):
        t.add_column(col, justify="right" if col in ("max error", "time") else "left")
    if profile:
        t.add_column("modelled", justify="right")
    t.add_column("detail")
    for r in results:
        style = _STYLE.get(r.outcome, "magenta")
        err = "" if r.max_error is None else f"{r.max_error:.3g}"
        row = [r.name, r.shapes, f"[{style}]{r.outcome}[/{style}]", err, f"{r.seconds:.2f} s"]
        if profile:
            row.append("" if r.profile_s is None else f"{r.profile_s * 1e6:.1f} us")
        where = f" ({r.location})" if r.location and r.location not in r.detail else ""
        row.append(r.detail + where)
        t.add_row(*row)
    console.print(fit(t))
    console.print(", ".join(f"{o} {n}" for o, n in counts.items() if n))
