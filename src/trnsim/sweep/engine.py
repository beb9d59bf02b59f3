"""The sweep loop: which points run (a pure policy), then one loop that hands them to a backend
and writes each result to the table as it arrives, advancing the progress bar.

``pending(ids, done, retry_failed)`` is the policy: the spec's points, in its order, less
those the table already has (a failed one too, unless ``retry_failed``). ``drive`` is the
loop; it never decides anything about a point. An exception raised by the point function (a
bug) or a worker that died becomes that point's ``internal-error`` row: never fatal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from trnsim.sweep.backends import Backend, WorkerDied
from trnsim.sweep.points import one_line
from trnsim.sweep.spec import Point, Spec
from trnsim.sweep.table import Table


def pending(ids: Iterable[str], done: dict[str, str], retry_failed: bool) -> list[str]:
    """The point ids still to run, in the given (the spec's) order: those the table lacks, and
    with ``retry_failed`` those whose row is not ``ok``."""
    return [i for i in ids if i not in done or (retry_failed and done[i] != "ok")]


def error_row(exc: BaseException) -> dict[str, Any]:
    """The outcome cells of a point whose run raised (a bug) or whose worker died."""
    if isinstance(exc, WorkerDied):
        return {"status": "internal-error", "exit": 3, "error": one_line(str(exc))}
    text = one_line(f"internal error: {type(exc).__name__}: {exc}")
    return {"status": "internal-error", "exit": 3, "error": text}


@dataclass
class Outcome:
    """What one run of the loop did."""

    ran: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    interrupted: bool = False


def drive(
    items: list[tuple[str, Any]],
    fn: Callable[[Any], dict[str, Any]],
    row_of: Callable[[str, dict[str, Any]], dict[str, Any]],
    table: Table,
    backend: Backend,
    bar: Any,
) -> Outcome:
    """Run ``fn`` on each ``(point id, argument)`` with ``backend``; each result becomes a row
    (``row_of(point id, cells)``) appended to ``table``. A Ctrl-C leaves the table complete
    (the exception propagates after the table is closed)."""
    out = Outcome()
    start = time.perf_counter()  # the clock every verb times itself by
    try:
        for pid, result in backend.run(fn, items):
            cells = error_row(result) if isinstance(result, BaseException) else result
            table.append(row_of(pid, cells))
            out.ran += 1
            status = str(cells.get("status"))
            out.counts[status] = out.counts.get(status, 0) + 1
            bar.advance()
    finally:
        table.close()
        out.seconds = time.perf_counter() - start
    return out


def run_spec(
    spec: Spec, table: Table, backend: Backend, bar: Any, retry_failed: bool = False
) -> tuple[list[Point], Outcome]:
    """Run a spec's pending points into ``table``; then put the table in the spec's order."""
    from trnsim.sweep.points import run_point

    by_id = {p.id: p for p in spec.points}
    todo = [by_id[i] for i in pending(by_id, table.done, retry_failed)]
    values = {p.id: p.as_dict() for p in todo}

    def row_of(pid: str, cells: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {"point": pid, **values[pid]}
        row["status"], row["exit"], row["error"] = cells["status"], cells["exit"], cells["error"]
        for path, column in zip(spec.metrics, spec.metric_columns, strict=True):
            row[column] = cells.get(path)
        return row

    outcome = drive([(p.id, spec.job(p)) for p in todo], run_point, row_of, table, backend, bar)
    table.finish({p.id: p.index for p in spec.points})
    return todo, outcome
