"""Progress bars for long work (anything that can take more than about two seconds).

``with progress("fitting", total=n) as bar: ... bar.advance()``. The bar goes to stderr (never
mixing with ``--json`` on stdout), is transient, and is shown only when stderr is a terminal
or ``TRNSIM_PROGRESS=1``; ``TRNSIM_PROGRESS=0`` hides it. With no total it is a spinner.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Quiet:
    """The bar when nothing is shown: same methods, no output."""

    def advance(self, steps: float = 1) -> None:
        pass

    def update(self, **kwargs: Any) -> None:
        pass


def enabled() -> bool:
    flag = os.environ.get("TRNSIM_PROGRESS")
    if flag is not None:
        return flag not in ("", "0")
    return sys.stderr.isatty()


class _Bar:
    def __init__(self, bar: Any, task: Any) -> None:
        self._bar, self._task = bar, task

    def advance(self, steps: float = 1) -> None:
        self._bar.advance(self._task, steps)

    def update(self, **kwargs: Any) -> None:
        self._bar.update(self._task, **kwargs)


@contextmanager
def progress(
    description: str, total: float | None = None, eta: bool = False
) -> Iterator[_Bar | _Quiet]:
    """A progress bar on stderr for the ``with`` block (a no-op when not shown); ``eta``: also
    the estimated time left. The bar keeps the stderr of its start, so work that captures
    stderr meanwhile (a sweep point) does not capture the bar."""
    if not enabled():
        yield _Quiet()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    if eta and total is not None:
        columns += [TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        yield _Bar(bar, bar.add_task(description, total=total))
