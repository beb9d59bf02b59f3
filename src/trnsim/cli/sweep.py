"""``trnsim sweep SPEC``: run a verb (train, infer, serve, collective, profile) at every point of a
YAML/JSON spec, on a local process pool (default), in this process or on Ray; results stream
to one table (CSV, JSONL, Parquet) that a second run resumes; a Pareto front and its PNG.

    trnsim sweep examples/sweeps/train_llama.yaml                 # pool of every core
    trnsim sweep spec.json --out results.parquet --ray            # a local Ray runtime
    trnsim sweep spec.yaml --ray 10.0.0.5:6379 --pareto cost.cost_usd,tokens_per_s

The spec's format: ``trnsim.sweep.spec``. Each point runs the verb's own code in a worker (its
flags checked by the verb's own rules), so a row holds exactly what ``trnsim VERB ... --json``
gives, plus its exit status and one-line error. A failed point is a row, never the end of the
sweep; Ctrl-C leaves the table complete, and running the same command again runs only the
points it lacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from trnsim.cli.argtypes import bounded_int
from trnsim.cli.main import Terminated
from trnsim.errors import UsageError
from trnsim.report.output import output_path, print_json
from trnsim.report.progress import progress
from trnsim.report.tables import fit

MAX_WORKERS = 256
"""The most local worker processes (each holds an interpreter and trnsim: ~100 MB; more than
the cores only adds contention)."""


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the points run: ``--workers N`` (default), ``--serial`` or ``--ray [ADDRESS]``."""
    g = parser.add_argument_group("where points run (default: a pool of every core)")
    x = g.add_mutually_exclusive_group()
    x.add_argument(
        "--workers",
        type=bounded_int(1, MAX_WORKERS),
        metavar="N",
        help=f"local worker processes, 1..{MAX_WORKERS} (default: every core this process may use)",
    )
    x.add_argument("--serial", action="store_true", help="every point in this process")
    x.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="Ray tasks: a new local runtime on 127.0.0.1, or the cluster at ADDRESS "
        "(host:port, ray://host:port, auto); needs the ray extra",
    )


def backend_from_args(args: argparse.Namespace, preload: tuple[str, ...] = ()) -> Any:
    """The backend the flags ask for, checked before any work: Ray installed, its address
    reachable (one line and exit 2 otherwise)."""
    from trnsim.sweep.backends import Pool, RayBackend, Serial

    if args.serial:
        return Serial()
    if args.ray is not None:
        from trnsim import extras

        extras.ray()  # installed, or one line naming the extra
        address = args.ray.strip() or None
        if address is not None:
            extras.check_reachable(address)
        return RayBackend(address)
    return Pool(args.workers, preload)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="sweep spec, YAML or JSON (see the README, trnsim sweep)")
    parser.add_argument(
        "--out",
        metavar="TABLE",
        help="results table: .csv, .jsonl or .parquet (default: the spec's output, else "
        "SPEC.results.csv here); an existing one is resumed",
    )
    parser.add_argument("--fresh", action="store_true", help="start the table over")
    parser.add_argument(
        "--retry-failed", action="store_true", help="run again the points whose row failed"
    )
    parser.add_argument(
        "--pareto",
        metavar="X,Y",
        help="Pareto front of two metrics (dotted paths of the verb's JSON; overrides the spec's)",
    )
    parser.add_argument(
        "--png", metavar="PATH", help="Pareto chart (default: TABLE's name with .pareto.png)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list the points and what would run, run none"
    )
    add_backend_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable summary, SI units")


def _pareto_override(spec: Any, text: str) -> Any:
    from trnsim.sweep.spec import pareto_of, with_axes

    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--pareto {text!r}: give two metrics, X,Y (e.g. cost.cost_usd,mfu)")
    png = spec.pareto.png if spec.pareto else None
    pareto = pareto_of(spec.verb, parts[0], parts[1], png=png)
    metrics = with_axes(spec.metrics, pareto, spec.params)
    return dataclasses.replace(spec, pareto=pareto, metrics=metrics)


def run(args: argparse.Namespace) -> int:
    from trnsim.sweep import spec as specs
    from trnsim.sweep.engine import pending, run_spec
    from trnsim.sweep.table import Table

    spec = specs.load(args.spec)
    if args.pareto is not None:
        spec = _pareto_override(spec, args.pareto)
    out = args.out if args.out is not None else spec.output
    out = out if out is not None else f"{Path(args.spec).stem}.results.csv"
    output_path(out, "--out")
    specs.table_format(out)
    if out.endswith(".parquet"):
        from trnsim import extras

        extras.pyarrow_parquet()
    backend = backend_from_args(args, (f"trnsim.cli.{spec.verb.module}",))
    png = None
    if spec.pareto is not None:
        png = args.png or spec.pareto.png or str(Path(out).with_suffix(".pareto.png"))
        if spec.pareto.png and not args.png and not Path(png).is_absolute():
            png = str(spec.base_dir / png)
        output_path(png, "--png")
    elif args.png:
        raise UsageError("--png draws the Pareto front: give --pareto X,Y (or pareto: in the spec)")
    if args.dry_run:
        return _dry_run(args, spec, out, backend)
    table = Table(out, spec.columns, fresh=args.fresh)
    todo = pending([p.id for p in spec.points], table.done, args.retry_failed)
    err = Console(stderr=True)
    if not args.json:
        err.print(_plan_line(spec, out, len(todo), backend, table.repaired))
    try:
        with progress(f"sweep {spec.verb.name}", total=len(todo), eta=True) as bar:
            _, outcome = run_spec(spec, table, backend, bar, args.retry_failed)
    except (KeyboardInterrupt, Terminated) as exc:
        left = pending([p.id for p in spec.points], table.done, False)
        return stopped(exc, out, len(table.rows), len(left))
    doc = summary(spec, out, table, outcome, backend, png)
    if args.json:
        print_json(doc)
    else:
        show_summary(Console(), doc)
    return 0


def stopped(exc: BaseException, out: str | None, rows: int, left: int) -> int:
    """Ctrl-C or SIGTERM: say what the table holds and how to finish; exit 130 or 143."""
    from trnsim.cli.main import EXIT_INTERRUPTED, EXIT_TERMINATED

    how = "interrupted" if isinstance(exc, KeyboardInterrupt) else "terminated (SIGTERM)"
    where = (
        f"{out} holds {rows:,} complete rows; the same command runs the {left:,} left"
        if out
        else f"{rows:,} candidates were done (give --out to keep them)"
    )
    Console(stderr=True).print(f"trnsim: {how}; {where}", highlight=False)
    return EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else EXIT_TERMINATED


def _plan_line(spec: Any, out: str, todo: int, backend: Any, repaired: bool) -> str:
    n = len(spec.points)
    pruned = f", {spec.pruned:,} pruned by constraints" if spec.pruned else ""
    drawn = " drawn" if spec.sampled else ""
    have = n - todo
    resumed = f", {have:,} already in {out}" if have else ""
    note = " (its cut-off last row was dropped)" if repaired else ""
    return (
        f"sweep {spec.verb.name}: {n:,} points{drawn}{pruned}{resumed}{note}; running {todo:,} "
        f"{backend.describe()}"
    )


def _dry_run(args: argparse.Namespace, spec: Any, out: str, backend: Any) -> int:
    from trnsim.sweep.table import Table

    done = {}
    if os.path.exists(out) and not args.fresh:
        done = Table(out, spec.columns).done
    from trnsim.sweep.engine import pending

    todo = pending([p.id for p in spec.points], done, args.retry_failed)
    if args.json:
        print_json(
            {
                "verb": spec.verb.name,
                "points": [{"point": p.id, **p.as_dict()} for p in spec.points],
                "pruned": spec.pruned,
                "to_run": todo,
                "table": out,
                "columns": list(spec.columns),
            }
        )
        return 0
    console = Console()
    console.print(_plan_line(spec, out, len(todo), backend, False))
    t = RichTable(title=f"first points of {len(spec.points):,}", title_justify="left")
    t.add_column("#", justify="right")
    for name in spec.params:
        t.add_column(name)
    for p in spec.points[:20]:
        values = p.as_dict()
        t.add_row(str(p.index), *(str(values.get(k, "")) for k in spec.params))
    console.print(fit(t))
    first = " ".join(spec.job(spec.points[0]).argv)
    console.print(f"command of point 0: trnsim {spec.verb.name} {first}", highlight=False)
    return 0


def summary(
    spec: Any, out: str, table: Any, outcome: Any, backend: Any, png: str | None
) -> dict[str, Any]:
    by_status = Counter(str(r.get("status")) for r in table.rows)
    errors = Counter(str(r.get("error")) for r in table.rows if r.get("status") != "ok")
    doc: dict[str, Any] = {
        "spec": spec.source,
        "verb": spec.verb.name,
        "table": out,
        "rows": len(table.rows),
        "points": len(spec.points),
        "pruned": spec.pruned,
        "ran": outcome.ran,
        "seconds": outcome.seconds,
        "backend": backend.name,
        "where": backend.describe(),
        "status": dict(sorted(by_status.items())),
        "ran_status": dict(sorted(outcome.counts.items())),
        "errors": [{"error": e, "points": n} for e, n in errors.most_common(5)],
        "pareto": None,
    }
    if spec.pareto is not None:
        doc["pareto"] = _pareto(spec, table, png)
    return doc


def _pareto(spec: Any, table: Any, png: str | None) -> dict[str, Any]:
    from trnsim.sweep import pareto
    from trnsim.sweep.spec import axis_column
    from trnsim.sweep.table import number

    p = spec.pareto
    cx, cy = axis_column(spec, p.x), axis_column(spec, p.y)
    rows = [
        r
        for r in table.rows
        if r.get("status") == "ok"
        and number(r.get(cx)) is not None
        and number(r.get(cy)) is not None
    ]
    xy = [(number(r[cx]), number(r[cy])) for r in rows]
    on = pareto.front(xy, p.x_better, p.y_better)  # type: ignore[arg-type]
    varying = [k for k in spec.params if len({str(r.get(k)) for r in table.rows}) > 1]
    labels = [pareto.label(r, varying) for r in rows]
    written = None
    if png and rows:
        title = f"trnsim sweep {spec.verb.name}: {len(rows)} points ({spec.source})"
        written = str(
            pareto.chart(
                xy,
                on,
                labels,
                (p.x, spec.verb.metric(p.x).unit, p.x_better),
                (p.y, spec.verb.metric(p.y).unit, p.y_better),
                title,
                png,
            )
        )
    front = []
    for i in on:
        row = {k: rows[i].get(k) for k in ("point", *varying) if k not in (cx, cy)}
        row[cx], row[cy] = xy[i]
        front.append(row)
    return {
        "x": p.x,
        "y": p.y,
        "x_better": p.x_better,
        "y_better": p.y_better,
        "x_unit": spec.verb.metric(p.x).unit,
        "y_unit": spec.verb.metric(p.y).unit,
        "points": len(rows),
        "front": front,
        "png": written,
    }


def show_summary(console: Console, s: dict[str, Any]) -> None:
    counts = ", ".join(f"{k} {v:,}" for k, v in s["status"].items())
    console.print(
        f"sweep {s['verb']}: {s['ran']:,} points run in {s['seconds']:.1f} s {s['where']}",
        highlight=False,
    )
    console.print(f"table {s['table']}: {s['rows']:,} rows: {counts}", highlight=False)
    if s["errors"]:
        t = RichTable(title="most common errors", title_justify="left")
        t.add_column("points", justify="right")
        t.add_column("error")
        for e in s["errors"]:
            t.add_row(f"{e['points']:,}", e["error"] or "-")
        console.print(fit(t))
    p = s["pareto"]
    if p is None:
        return
    if not p["front"]:
        console.print(f"Pareto front: no point has both {p['x']} and {p['y']}")
        return
    t = RichTable(
        title=f"Pareto front: {p['x']} ({p['x_better']}) vs {p['y']} ({p['y_better']}), "
        f"{len(p['front'])} of {p['points']} points",
        title_justify="left",
    )
    keys = [k for k in p["front"][0] if k != "point"]
    units = dict(zip(keys[-2:], (p["x_unit"], p["y_unit"]), strict=True))
    for k in keys:
        t.add_column(k, justify="right" if k in units else "left")
    for row in p["front"]:
        t.add_row(*(_fmt(row.get(k), units.get(k, "")) for k in keys))
    console.print(fit(t))
    if p["png"]:
        console.print(f"chart: {p['png']}")


def _fmt(v: Any, unit: str = "") -> str:
    """A cell for people: figures to 4 significant digits with their unit (CSV cells are
    text), '-' for none."""
    from trnsim.report.units import pretty

    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        if unit == "USD":
            return f"${v:,.0f}" if abs(v) >= 100 else f"${v:.3g}"
        if unit == "s" and abs(v) >= 3 * 3600:  # a time to train: hours or days
            return f"{v / 86400:,.3g} days" if abs(v) >= 2 * 86400 else f"{v / 3600:.3g} h"
        return pretty(v, unit) if unit else (f"{v:,}" if isinstance(v, int) else f"{v:.4g}")
    for kind in (int, float):
        try:
            return _fmt(kind(v), unit)
        except ValueError:
            pass
    return str(v)
