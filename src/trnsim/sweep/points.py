"""One sweep point, run where a backend puts it (this process, a pool worker, a Ray worker).

``run_point(job)`` parses the point's command line with the verb's own parser and calls the
verb's ``run`` in this process with ``--json``, stdout and stderr captured and progress bars
off, exactly as ``trnsim VERB ... --json`` would run; the result is the verb's exit status, its
one-line error (what ``trnsim`` would print) and the figures ``job.metrics`` names from its JSON
document. Nothing here reads a clock, a process id or a global random state: a point's row
depends on its parameters alone, so every backend gives the same rows, bit for bit.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trnsim.errors import KernelError, TrnsimError

# exit status -> the row's status (README, "Exit status")
STATUS = {0: "ok", 1: "failed", 2: "invalid", 3: "internal-error"}
ERROR_CHARS = 400  # an error cell holds one line of at most this many characters


@dataclass(frozen=True, slots=True)
class PointJob:
    """What a worker needs to run one point: the verb, its command line, the figures to keep."""

    verb: str
    argv: tuple[str, ...]
    metrics: tuple[str, ...]


@contextlib.contextmanager
def quiet() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Capture stdout and stderr, and hide progress bars (``TRNSIM_PROGRESS=0``), for the
    ``with`` block; everything is restored after it."""
    out, err = io.StringIO(), io.StringIO()
    saved = os.environ.get("TRNSIM_PROGRESS")
    os.environ["TRNSIM_PROGRESS"] = "0"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        if saved is None:
            os.environ.pop("TRNSIM_PROGRESS", None)
        else:
            os.environ["TRNSIM_PROGRESS"] = saved


def one_line(text: str) -> str:
    """The first non-empty line of ``text``, clipped to ``ERROR_CHARS``."""
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


def _last_line(text: str, verb: str) -> str:
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    line = lines[-1] if lines else ""
    for prefix in (f"trnsim {verb}: error: ", f"trnsim {verb}: "):
        if line.startswith(prefix):
            line = line[len(prefix) :]
    return one_line(line)


def execute(verb: str, argv: list[str] | tuple[str, ...]) -> tuple[int, str, str]:
    """``(exit status, stdout, error line)`` of ``trnsim VERB ARGV`` run in this process, the
    way ``trnsim.cli.main`` maps outcomes to statuses (0 ok, 1 a check failed, 2 bad usage or
    input, 3 an internal error). Ctrl-C and SIGTERM are not caught: they stop the sweep."""
    from trnsim.sweep.verbs import parser

    with quiet() as (out, err):
        try:
            args = parser(verb).parse_args(list(argv))
            status = int(args._run(args) or 0)
            message = ""
        except TrnsimError as exc:
            status = 1 if isinstance(exc, KernelError) else 2
            message = one_line(str(exc))
        except Exception as exc:  # a bug in trnsim: recorded, the sweep goes on
            status = 3
            message = one_line(f"internal error: {type(exc).__name__}: {exc}")
    if status and not message:
        message = _last_line(err.getvalue(), verb) or f"trnsim {verb} exited {status}"
    return status, out.getvalue(), message


def lookup_path(doc: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a JSON document (None when absent); a list or an
    object becomes its compact JSON text, so every cell is a scalar."""
    node = doc
    for key in path.split("."):
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    if isinstance(node, dict | list):
        return json.dumps(node, separators=(",", ":"), sort_keys=True)
    return node


def run_point(job: PointJob) -> dict[str, Any]:
    """The result cells of one point: ``status``, ``exit``, ``error`` and each metric."""
    status, stdout, message = execute(job.verb, job.argv)
    doc = None
    if stdout.strip():
        try:
            doc = json.loads(stdout)
        except ValueError:
            status, message = 3, f"internal error: trnsim {job.verb} printed no JSON document"
    if status == 0 and doc is None:
        status, message = 3, f"internal error: trnsim {job.verb} printed no JSON document"
    row: dict[str, Any] = {"status": STATUS.get(status, "internal-error"), "exit": status}
    row["error"] = message
    for path in job.metrics:
        row[path] = lookup_path(doc, path) if isinstance(doc, dict) else None
    return row
