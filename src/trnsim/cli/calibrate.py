"""``trnsim calibrate ROOT``: the kernel timing model against public measurements.

ROOT holds local checkouts by name (``autocomp``, ``trainium-kernel-fusion``, ``sdk226``; or
give each with ``--checkout NAME=PATH``). Each row of ``trnsim.conformance.timing_rows`` whose
checkout is there runs: its kernel, unmodified from the checkout, functionally against a
NumPy reference written here (``--no-check`` skips that), and timing-only at the measured
shape on the measured generation. Prints every row's measured and modelled latency and
error, then the MAPE over the rows timed (per set and overall); ``--markdown`` prints the
table for ``benchmarks/RESULTS.md``; ``--json`` for machines. Exit status 0 when every row ran
and passed its check, 1 otherwise, 2 for a bad ROOT or flag.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import nonneg_int
from trnsim.errors import UsageError
from trnsim.report.output import print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "root", metavar="ROOT", nargs="?", help="a directory holding the checkouts by name"
    )
    parser.add_argument(
        "--checkout",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a checkout's path (autocomp, trainium-kernel-fusion, sdk226)",
    )
    parser.add_argument("--only", metavar="TEXT", help="run only the rows whose name has TEXT")
    parser.add_argument("--no-check", action="store_true", help="time only; skip the numerics")
    parser.add_argument(
        "--seed", type=nonneg_int, default=0, help="seed of the checks' inputs (>= 0)"
    )
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _given(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        name, sep, path = p.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--checkout {p!r}: expected NAME=PATH")
        out[name] = path
    return out


def run(args: argparse.Namespace) -> int:
    from trnsim.conformance.timing import find_checkouts, mape, run_rows
    from trnsim.conformance.timing_rows import ROWS

    given = _given(args.checkout)
    if args.root is None and not given:
        raise UsageError("give ROOT (a directory of checkouts) or --checkout NAME=PATH")
    checkouts = find_checkouts(args.root, given)
    if not checkouts:
        raise UsageError(
            f"no checkout found under {args.root!r} (looked for autocomp, "
            "trainium-kernel-fusion, sdk226)"
        )
    rows = [r for r in ROWS if r.repo in checkouts and (not args.only or args.only in r.name)]
    if not rows:
        raise UsageError(f"--only {args.only!r} matches no row of the checkouts found")
    with progress("calibrating the timing model", total=len(rows)) as bar:
        results = run_rows(
            rows,
            checkouts,
            seed=args.seed,
            check=not args.no_check,
            on_result=lambda r: bar.advance(),
        )
    sets = sorted({r.name.split("/")[0] for r in results})
    per_set = {s: mape([r for r in results if r.name.startswith(s + "/")]) for s in sets}
    overall = mape(results)
    defects = [r for r in results if r.source_defect]
    failed = [
        r for r in results if r not in defects and (r.error or (r.check and r.check != "pass"))
    ]
    if args.json:
        print_json(
            {
                "checkouts": {k: str(v) for k, v in checkouts.items()},
                "rows": [r.to_dict() for r in results],
                "mape": overall,
                "mape_by_set": per_set,
                "timed": sum(r.modelled_s is not None for r in results),
                "failed": len(failed),
                "source_defects": len(defects),
            }
        )
    elif args.markdown:
        markdown(results, per_set, overall)
    else:
        show(Console(), results, per_set, overall)
    return 0 if not failed else 1


def _defects(results) -> str:  # type: ignore[no-untyped-def]
    from trnsim.conformance.timing import DEFECT

    n = sum(r.source_defect for r in results)
    return f" ({n} whose public source cannot be what ran: {DEFECT})" if n else ""


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.4g} ms"


def show(console: Console, results, per_set, overall) -> None:  # type: ignore[no-untyped-def]
    t = Table(title="timing model vs published measurements", title_justify="left")
    for col in ("row", "measured", "modelled", "error", "check / failure"):
        t.add_column(col, justify="left" if col in ("row", "check / failure") else "right")
    for r in results:
        err = "-" if r.rel_error is None else f"{r.rel_error:+.1%}"
        why = r.error or r.check
        t.add_row(r.name, _ms(r.measured_s), _ms(r.modelled_s), err, why)
    console.print(fit(t))
    for s, m in per_set.items():
        console.print(f"{s}: MAPE {'-' if m is None else f'{m:.1%}'}")
    timed = sum(r.modelled_s is not None for r in results)
    console.print(
        f"overall: MAPE {'-' if overall is None else f'{overall:.1%}'} over {timed} of "
        f"{len(results)} rows timed{_defects(results)}"
    )


def markdown(results, per_set, overall) -> None:  # type: ignore[no-untyped-def]
    out = sys.stdout
    out.write("| row | instance | source | measured | modelled | error | check |\n")
    out.write("|---|---|---|---:|---:|---:|---|\n")
    for r in results:
        err = "-" if r.rel_error is None else f"{r.rel_error:+.1%}"
        why = (r.error or r.check).replace("|", "/")
        out.write(
            f"| {r.name} | {r.instance} | {r.repo}: {r.source} | {_ms(r.measured_s)} | "
            f"{_ms(r.modelled_s)} | {err} | {why} |\n"
        )
    out.write("\n")
    for s, m in per_set.items():
        out.write(f"- {s}: MAPE {'-' if m is None else f'{m:.1%}'}\n")
    timed = sum(r.modelled_s is not None for r in results)
    out.write(
        f"- overall: MAPE {'-' if overall is None else f'{overall:.1%}'} over {timed} of "
        f"{len(results)} rows timed{_defects(results)}\n"
    )
