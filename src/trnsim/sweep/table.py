"""The results table of a sweep or a tune: CSV, JSON Lines or Parquet, valid at every moment.

- CSV and JSONL stream: each finished point is appended as one whole line by one ``write`` to
  a file opened for appending, so a Ctrl-C (or a SIGTERM) between two points, or while one
  runs, leaves every row complete. A line cut short by a crash (power loss, SIGKILL in the
  middle of a write) is dropped when the table is opened again, and its point runs again.
- Parquet (pyarrow, the ``ray`` extra) has no append: the whole table is rewritten, through a
  temporary file renamed over it (``trnsim.report.output.atomic_write``), at most every
  ``FLUSH_S`` seconds and when the sweep ends or stops, so the file on disk is always a
  complete table.

Opening a table that exists resumes it: its rows are kept, and ``done`` maps each point id to
its status (the last row of a point wins, e.g. after ``--retry-failed``). A table whose columns
are not the sweep's is refused before any work. When the sweep ends, the table is rewritten
once in the spec's point order (rows of points no longer in the spec last), so a finished
table is the same file whatever the backend and whatever order the points finished in.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trnsim.errors import UsageError
from trnsim.report.output import atomic_write, output_path
from trnsim.sweep.spec import table_format

FLUSH_S = 2.0
"""Seconds between two rewrites of a Parquet table while a sweep runs."""


def cell(value: Any) -> str:
    """A CSV cell: empty for None, ``true``/``false``, exact floats (``repr``), one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return " ".join(str(value).splitlines())


def number(value: Any) -> float | None:
    """A cell as a finite number, or None (text, a boolean, an empty cell)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        x = float(value)
    else:
        try:
            x = float(str(value))
        except ValueError:
            return None
    return x if math.isfinite(x) else None


class Table:
    """An open results table (module docstring). ``rows`` are in file order."""

    def __init__(
        self, path: str | os.PathLike[str] | None, columns: tuple[str, ...], fresh: bool = False
    ) -> None:
        self.columns = tuple(columns)
        self._rows: dict[str, dict[str, Any]] = {}  # point id -> its last row, file order
        self._flush_cost = 0.0
        self.repaired = False
        self._last_flush = time.monotonic()
        self._dirty = False
        if path is None:  # rows in memory only (a tune without --out)
            self.path, self.format = None, ".memory"
            return
        self.path = output_path(path, "--out")
        self.format = table_format(str(self.path))
        if self.format == ".parquet":
            from trnsim import extras

            self._pa, self._pq = extras.pyarrow_parquet()
        if not fresh and self.path.exists() and self.path.stat().st_size > 0:
            self._read()
        else:
            self._create()

    # ---- state ------------------------------------------------------------------------------

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One row per point (its last), in file order."""
        return list(self._rows.values())

    @rows.setter
    def rows(self, rows: list[dict[str, Any]]) -> None:
        self._rows = {}
        for r in rows:  # a point's last row wins, at the place of that last row
            self._rows.pop(str(r["point"]), None)
            self._rows[str(r["point"])] = r

    @property
    def done(self) -> dict[str, str]:
        """Point id -> status of its last row."""
        return {pid: str(r.get("status") or "") for pid, r in self._rows.items()}

    def _refuse(self, found: Iterable[str]) -> None:
        found = list(found)
        extra = [c for c in found if c not in self.columns]
        missing = [c for c in self.columns if c not in found]
        what = (
            "; ".join(
                s
                for s in (
                    f"it has {', '.join(extra[:4])}" if extra else "",
                    f"it lacks {', '.join(missing[:4])}" if missing else "",
                )
                if s
            )
            or "its columns are in another order"
        )
        raise UsageError(
            f"{self.path}: holds another sweep's table ({what}); give another --out, or "
            "--fresh to start it over"
        )

    # ---- reading ----------------------------------------------------------------------------

    def _read(self) -> None:
        if self.format == ".parquet":
            try:
                t = self._pq.read_table(self.path)
            except Exception as exc:
                raise UsageError(f"{self.path}: not a readable Parquet table: {exc}") from None
            if tuple(t.column_names) != self.columns:
                self._refuse(t.column_names)
            self.rows = t.to_pylist()
            return
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):  # a line cut short: drop it, its point runs again
            cut = data.rfind(b"\n") + 1
            os.truncate(self.path, cut)
            data = data[:cut]
            self.repaired = True
        text = data.decode("utf-8", errors="replace")
        if self.format == ".csv":
            reader = csv.reader(io.StringIO(text))
            header = next(reader, None)
            if header is None:
                self._create()
                return
            if tuple(header) != self.columns:
                self._refuse(header)
            rows = [dict(zip(header, r, strict=False)) for r in reader if r]
        else:
            rows = []
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise UsageError(f"{self.path}:{n}: not a JSON Lines row") from None
                if not isinstance(row, dict) or tuple(row) != self.columns:
                    self._refuse(row if isinstance(row, dict) else [])
                rows.append(row)
        self.rows = rows

    # ---- writing ----------------------------------------------------------------------------

    def _create(self) -> None:
        self.rows = []
        if self.format == ".parquet":
            self.flush(force=True)
        elif self.format == ".csv":
            atomic_write(self.path, lambda tmp: Path(tmp).write_text(self._csv([])))
        else:
            atomic_write(self.path, lambda tmp: Path(tmp).write_text(""))

    def _csv(self, rows: list[dict[str, Any]], header: bool = True) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        if header:
            w.writerow(self.columns)
        for r in rows:
            w.writerow(
                [r.get(c) if isinstance(r.get(c), str) else cell(r.get(c)) for c in self.columns]
            )
        return buf.getvalue()

    def _line(self, row: dict[str, Any]) -> str:
        if self.format == ".csv":
            return self._csv([row], header=False)
        return (
            json.dumps(
                {c: row.get(c) for c in self.columns}, allow_nan=False, separators=(",", ":")
            )
            + "\n"
        )

    def append(self, row: dict[str, Any]) -> None:
        """Add one finished point (replacing an earlier row of the same point)."""
        row = {c: row.get(c) for c in self.columns}
        if self.format == ".csv":
            row = {c: cell(v) for c, v in row.items()}
        pid = row["point"]
        self._rows.pop(str(pid), None)
        self._rows[str(pid)] = row
        if self.path is None:
            return
        if self.format == ".parquet":
            self._dirty = True
            self.flush()
            return
        data = self._line(row).encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise UsageError(f"cannot write {str(self.path)!r}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def flush(self, force: bool = False) -> None:
        """Parquet: rewrite the file when due or forced; CSV/JSONL: nothing. Due: ``FLUSH_S``
        after the last rewrite, or ten times that rewrite's cost when longer, so rewriting a
        large table never takes more than a tenth of the sweep."""
        if self.format != ".parquet":
            return
        wait = max(FLUSH_S, 10 * self._flush_cost)
        if not force and (not self._dirty or time.monotonic() - self._last_flush < wait):
            return
        t0 = time.monotonic()
        table = self._arrow(self.rows)
        atomic_write(self.path, lambda tmp: self._pq.write_table(table, tmp))
        self._last_flush = time.monotonic()
        self._flush_cost = self._last_flush - t0
        self._dirty = False

    def _arrow(self, rows: list[dict[str, Any]]) -> Any:
        pa = self._pa
        fields, arrays = [], []
        for c in self.columns:
            values = [r.get(c) for r in rows]
            kind, values = _arrow_column(values)
            fields.append(pa.field(c, getattr(pa, kind)()))
            arrays.append(pa.array(values, type=getattr(pa, kind)()))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    def finish(self, order: dict[str, int]) -> None:
        """Rewrite the table whole in the spec's point order (``order``: point id -> index)."""
        last = len(order)
        keyed = sorted(
            enumerate(self.rows), key=lambda ir: (order.get(str(ir[1]["point"]), last), ir[0])
        )
        self.rows = [r for _, r in keyed]
        if self.path is None:
            return
        if self.format == ".parquet":
            self._dirty = True
            self.flush(force=True)
        elif self.format == ".csv":
            atomic_write(self.path, lambda tmp: Path(tmp).write_text(self._csv(self.rows)))
        else:
            text = "".join(self._line(r) for r in self.rows)
            atomic_write(self.path, lambda tmp: Path(tmp).write_text(text))

    def close(self) -> None:
        """Write what is pending (Parquet); the file is complete after it."""
        if self._dirty:
            self.flush(force=True)


def _arrow_column(values: list[Any]) -> tuple[str, list[Any]]:
    """A column's Arrow type name and its values: bool, int64, float64, else string."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bool_", values
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "int64", values
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "float64", [None if v is None else float(v) for v in values]
    return "string", [
        None if v is None else v if isinstance(v, str) else json.dumps(v) for v in values
    ]
