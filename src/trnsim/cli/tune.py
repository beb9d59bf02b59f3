"""``trnsim tune KERNEL.py --param NAME=v1,v2,...``: autotune an NKI kernel file's parameters.

    trnsim tune examples/kernels/matmul.py --param TILES_IN_BLOCK_M=1,2,4,8 \\
        --param TILES_IN_BLOCK_N=1,2,4,8 --arg K=1024 --arg M=1024 --arg N=2048
    trnsim tune kernel.py --param TILE=128,256,512 --ray --out tune.csv --json

Every combination of the values is a candidate: run on the emulator, checked against the
file's golden, timed on the timing model (``trnsim.sweep.tune``). Prints every candidate,
fastest first (failures last, with their error), and the best's profile; ``--trace`` and
``--png`` write the best's Perfetto trace and timeline. Candidates run on a local process pool
by default (``--serial``, ``--workers N``, ``--ray [ADDRESS]``), with the same results on each.
Exit status: 0 when a candidate passed, 1 when none did, 2 for a bad file or flag.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from trnsim.cli.argtypes import nonneg_float
from trnsim.cli.main import Terminated
from trnsim.cli.profile import TARGETS, add_kernel_arguments
from trnsim.cli.sweep import add_backend_arguments, backend_from_args, stopped
from trnsim.errors import UsageError
from trnsim.report.output import output_path, print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit


def param_arg(text: str) -> tuple[str, list[Any]]:
    """argparse type of ``--param NAME=v1,v2,...``."""
    from trnsim.sweep.tune import parse_param

    try:
        return parse_param(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="kernel file (the 'trnsim run' convention, with a golden)")
    parser.add_argument(
        "--param",
        type=param_arg,
        action="append",
        default=[],
        metavar="NAME=v1,v2,...",
        help="a parameter of make_inputs or of the kernel (one with a default) and its values "
        "(Python literals); repeat for more: every combination is a candidate",
    )
    parser.add_argument(
        "--target", choices=TARGETS, default="gen4", help="NeuronCore generation (default gen4)"
    )
    add_kernel_arguments(parser)
    parser.add_argument(
        "--rtol", type=nonneg_float, help="relative tolerance (overrides TOLERANCE)"
    )
    parser.add_argument(
        "--atol", type=nonneg_float, help="absolute tolerance (overrides TOLERANCE)"
    )
    parser.add_argument(
        "--out",
        metavar="TABLE",
        help="every candidate to a table (.csv, .jsonl, .parquet), resumed when it exists",
    )
    parser.add_argument("--fresh", action="store_true", help="start the --out table over")
    parser.add_argument("--trace", metavar="PATH", help="Perfetto trace of the best candidate")
    parser.add_argument("--png", metavar="PATH", help="PNG timeline of the best candidate")
    add_backend_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output, SI units")


def run(args: argparse.Namespace) -> int:
    from trnsim.nki.kernelfile import parse_args
    from trnsim.sweep import tune
    from trnsim.sweep.engine import drive, pending
    from trnsim.sweep.spec import point_id, table_format
    from trnsim.sweep.table import Table

    if not args.param:
        raise UsageError("give at least one --param NAME=v1,v2,... to tune")
    fixed = parse_args(args.arg)
    names = [n for n, _ in args.param]
    both = sorted(set(names) & set(fixed))
    if both:
        raise UsageError(f"--param {both[0]} and --arg {both[0]}: tune it or fix it, not both")
    t = tune.tunable(args.file, args.kernel)
    tune.check_params(t, args.file, names)
    for flag, path in (("--trace", args.trace), ("--png", args.png)):
        if path is not None:
            output_path(path, flag)
    if args.out is not None:
        output_path(args.out, "--out")
        table_format(args.out)
    backend = backend_from_args(args, tune.PRELOAD)
    cands = tune.candidates(args.param)
    path = os.path.abspath(args.file)
    jobs = []
    for c in cands:
        inputs = {**fixed, **{k: v for k, v in c.items() if k in t.inputs}}
        sched = {k: v for k, v in c.items() if k in t.schedule}
        jobs.append(
            tune.CandidateJob(
                path,
                t.kernel,
                args.target,
                args.seed,
                tuple(inputs.items()),
                tuple(sched.items()),
                args.rtol,
                args.atol,
                args.max_instructions,
                args.timeout,
            )
        )
    ids = [
        point_id(
            {
                "file": args.file,
                "kernel": t.kernel,
                "target": args.target,
                "seed": args.seed,
                "args": fixed,
                **c,
            }
        )
        for c in cands
    ]
    order = {pid: i for i, pid in enumerate(ids)}
    columns = ("point", *names, "status", "exit", "error", *tune.METRICS)
    table = Table(args.out, columns, fresh=args.fresh)
    values = dict(zip(ids, cands, strict=True))
    by_id = dict(zip(ids, jobs, strict=True))

    todo = pending(ids, table.done, False)

    def row_of(pid: str, cells: dict[str, Any]) -> dict[str, Any]:
        return {"point": pid, **values[pid], **cells}

    if not args.json:
        Console(stderr=True).print(
            f"tune {t.kernel}: {len(cands):,} candidates"
            + (
                f", {len(cands) - len(todo):,} already in {args.out}"
                if len(todo) < len(cands)
                else ""
            )
            + f"; running {len(todo):,} {backend.describe()}",
            highlight=False,
        )
    try:
        with progress(f"tune {t.kernel}", total=len(todo), eta=True) as bar:
            outcome = drive(
                [(pid, by_id[pid]) for pid in todo], tune.run_candidate, row_of, table, backend, bar
            )
    except (KeyboardInterrupt, Terminated) as exc:
        tune.forget()
        left = len(todo) - sum(1 for r in table.rows if r["point"] in set(todo))
        return stopped(exc, args.out, len(table.rows), left)
    table.finish(order)
    rows = [_typed(r, values[r["point"]]) for r in table.rows if r["point"] in order]
    for r in rows:  # workers ran the file by its absolute path; people know it as given
        r["error"] = (r.get("error") or "").replace(path, args.file)
    winner = tune.best(rows, order)
    prof = None
    written: dict[str, str] = {}
    if winner is not None:
        _, prof = tune.best_profile(by_id[winner["point"]], float(winner["latency_s"]))
        written = _write(prof, args)
    tune.forget()  # the inputs and goldens this process kept for its candidates
    if args.json:
        print_json(
            {
                "file": args.file,
                "kernel": t.kernel,
                "target": args.target,
                "parameters": {n: list(v) for n, v in args.param},
                "candidates": _ranked(rows),
                "best": winner,
                "profile": prof.to_json() if prof is not None else None,
                "table": args.out,
                "seconds": outcome.seconds,
                "backend": backend.name,
                "files": written,
            }
        )
    else:
        _show(Console(), t.kernel, names, rows, winner, prof, written)
    return 0 if winner is not None else 1


def _typed(row: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A row read back from a CSV table has text cells: the parameters and metrics typed
    again."""
    from trnsim.sweep.table import number

    out = {**row, **params}
    for k in ("latency_s", "max_abs_err", "max_rel_err", "mfu", "mbu", "flops_per_s"):
        out[k] = number(row.get(k))
    if isinstance(row.get("passed"), str):
        out["passed"] = {"true": True, "false": False}.get(row["passed"])
    if isinstance(row.get("instructions"), str):
        out["instructions"] = int(row["instructions"]) if row["instructions"] else None
    if isinstance(row.get("exit"), str):
        out["exit"] = int(row["exit"]) if row["exit"] else None
    return out


def _ranked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Passed candidates fastest first, then the failed ones (timed first), then the rest."""

    def key(r: dict[str, Any]) -> tuple[int, float]:
        lat = r.get("latency_s")
        rank = 0 if r.get("status") == "ok" else 1 if lat is not None else 2
        return rank, float(lat) if lat is not None else 0.0

    return sorted(rows, key=key)


def _write(prof: Any, args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    if args.trace:
        from trnsim.report.perfetto import write_trace

        out["trace"] = str(write_trace(prof, Path(args.trace)))
    if args.png:
        from trnsim.report.timeline import write_timeline

        out["png"] = str(write_timeline(prof, Path(args.png)))
    return out


def _show(
    console: Console,
    kernel: str,
    names: list[str],
    rows: list[dict[str, Any]],
    winner: dict[str, Any] | None,
    prof: Any,
    written: dict[str, str],
) -> None:
    from trnsim.cli.profile import show

    t = RichTable(title=f"{kernel}: {len(rows)} candidates, fastest first", title_justify="left")
    t.add_column("candidate")
    for col in ("latency", "MFU", "check", "error"):
        t.add_column(col, justify="right" if col in ("latency", "MFU") else "left")
    for r in _ranked(rows):
        lat = r.get("latency_s")
        check = {"ok": "pass", "failed": "FAIL"}.get(str(r.get("status")), str(r.get("status")))
        if r.get("status") == "failed" and r.get("passed") is None:
            check = "error"
        t.add_row(
            ", ".join(f"{n}={r.get(n)!r}" for n in names),
            f"{lat * 1e6:,.2f} us" if lat is not None else "-",
            f"{r['mfu']:.1%}" if r.get("mfu") is not None else "-",
            check,
            r.get("error") or "",
        )
    console.print(fit(t))
    if winner is None:
        console.print("[red]no candidate passed its check[/red]")
        return
    chosen = ", ".join(f"{n}={winner.get(n)}" for n in names)
    console.print(f"[bold]best: {chosen}[/bold]")
    show(console, kernel, prof)
    for kind, p in written.items():
        console.print(f"{kind}: {p}")
