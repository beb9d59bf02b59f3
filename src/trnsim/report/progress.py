"""Progress for long work (anything that can take more than about two seconds), on stderr.

``with progress("fitting", total=n) as bar: ... bar.advance()``. Progress goes to stderr
(never mixing with ``--json`` on stdout):

- on a terminal, a transient rich bar (a spinner when there is no total);
- elsewhere (a pipe, a log file, CI), plain lines, rate-limited: nothing for work that ends
  within ``PLAIN_DELAY`` seconds, then one line every ``PLAIN_INTERVAL`` seconds
  (``trnsim: planning llama-3.1-70b on 144 chips: 120/336 (36%), 6 s``) and a last line when
  it ends;
- ``TRNSIM_PROGRESS=0`` hides both; ``TRNSIM_PROGRESS=1`` forces the rich bar.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PLAIN_DELAY = 2.0  # seconds of work before the first plain line
PLAIN_INTERVAL = 5.0  # seconds between plain lines

# The plain lines' printer and the bar's redraw take this lock to print, and a fork waits
# for it (the child never inherits stderr's lock held by a thread it does not have): they
# are fork-safe, so a process pool may fork its workers while they run
# (``trnsim.sweep.backends.Pool``).
_PRINT_LOCK = threading.Lock()
_FORK_SAFE: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_PRINT_LOCK.acquire,
        after_in_parent=_PRINT_LOCK.release,
        after_in_child=_PRINT_LOCK.release,
    )


def fork_safe(thread: threading.Thread) -> bool:
    """Whether ``thread`` is one of ours that holds no lock across a fork (the plain lines'
    printer, the bar's redraw)."""
    return thread in _FORK_SAFE


class _Quiet:
    """The bar when nothing is shown: same methods, no output."""

    def advance(self, steps: float = 1) -> None:
        pass

    def update(self, **kwargs: Any) -> None:
        pass


def mode() -> str:
    """``bar`` (a rich bar), ``plain`` (rate-limited lines) or ``off``."""
    flag = os.environ.get("TRNSIM_PROGRESS")
    if flag is not None:
        return "off" if flag in ("", "0") else "bar"
    return "bar" if sys.stderr.isatty() else "plain"


def enabled() -> bool:
    return mode() != "off"


class _Bar:
    def __init__(self, bar: Any, task: Any) -> None:
        self._bar, self._task = bar, task

    def advance(self, steps: float = 1) -> None:
        self._bar.advance(self._task, steps)

    def update(self, **kwargs: Any) -> None:
        self._bar.update(self._task, **kwargs)


class _Plain:
    """Counts the work; a daemon thread prints a line every ``interval`` seconds after
    ``delay`` (so it also reports a single long step), and one when the work ends."""

    def __init__(
        self,
        description: str,
        total: float | None,
        delay: float,
        interval: float,
        eta: bool = False,
    ) -> None:
        self.description, self.total, self.eta = description, total, eta
        self._err = sys.stderr  # the stderr of the start (module docstring)
        self.done = 0.0
        self.start = time.monotonic()
        self.printed = False
        self._stop = threading.Event()
        self._delay, self._interval = delay, interval
        self._thread = threading.Thread(target=self._run, name="trnsim-progress", daemon=True)
        _FORK_SAFE.add(self._thread)
        self._thread.start()

    def advance(self, steps: float = 1) -> None:
        self.done += steps

    def update(self, **kwargs: Any) -> None:
        if "description" in kwargs:
            self.description = str(kwargs["description"])
        if "total" in kwargs:
            self.total = kwargs["total"]
        if "completed" in kwargs:
            self.done = float(kwargs["completed"])

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        if self.total:
            share = min(1.0, self.done / self.total)
            count = f": {self.done:,.0f}/{self.total:,.0f} ({share:.0%})"
            if self.eta and 0 < self.done < self.total:
                left = elapsed * (self.total - self.done) / self.done
                return f"trnsim: {self.description}{count}, {elapsed:,.0f} s, eta {left:,.0f} s"
        else:
            count = ""
        return f"trnsim: {self.description}{count}, {elapsed:,.0f} s"

    def _say(self, text: str) -> None:
        with _PRINT_LOCK, contextlib.suppress(OSError, ValueError):  # stderr closed: no line
            print(text, file=self._err, flush=True)
        self.printed = True

    def _run(self) -> None:
        if self._stop.wait(self._delay):
            return
        while True:
            self._say(self.line())
            if self._stop.wait(self._interval):
                return

    def close(self, finished: bool = True) -> None:
        """Stop the lines; say how long it took if a line was printed and the work ended."""
        self._stop.set()
        self._thread.join()
        if self.printed and finished:
            elapsed = time.monotonic() - self.start
            self._say(f"trnsim: {self.description}: done in {elapsed:,.1f} s")


@contextmanager
def progress(
    description: str, total: float | None = None, eta: bool = False
) -> Iterator[_Bar | _Quiet | _Plain]:
    """Progress on stderr for the ``with`` block (module docstring); ``eta``: also the
    estimated time left. The bar and the lines keep the stderr of their start, so work that
    captures stderr meanwhile (a sweep point) does not capture them."""
    how = mode()
    if how == "off":
        yield _Quiet()
        return
    if how == "plain":
        plain = _Plain(description, total, PLAIN_DELAY, PLAIN_INTERVAL, eta)
        try:
            yield plain
        except BaseException:
            plain.close(finished=False)
            raise
        plain.close()
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
    # redrawn by a thread of ours that a fork waits for (rich's own refresher is not
    # fork-safe: a pool would have to start its workers from the fork server)
    with Progress(
        *columns, console=Console(file=sys.stderr), transient=True, auto_refresh=False
    ) as bar:
        stop = threading.Event()

        def redraw() -> None:
            while not stop.wait(0.1):
                with _PRINT_LOCK, contextlib.suppress(OSError, ValueError):
                    bar.refresh()

        thread = threading.Thread(target=redraw, name="trnsim-progress-bar", daemon=True)
        _FORK_SAFE.add(thread)
        thread.start()
        try:
            yield _Bar(bar, bar.add_task(description, total=total))
        finally:
            stop.set()
            thread.join()
