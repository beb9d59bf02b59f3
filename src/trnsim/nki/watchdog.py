"""Running a user's code under one budget: a time limit, Ctrl-C and SIGTERM end it wherever it is.

``guard(seconds, locate)`` is the ``with`` block a kernel file's stages run in (loading the
file, ``make_inputs``, the kernel, ``golden``; ``trnsim.nki.kernelfile``):

- **The time limit and the signals raise a stop** in the main thread (``Deadline``,
  ``Interrupted``, ``Terminated``: ``trnsim.errors.Stop``, a ``BaseException``, so a kernel file's
  ``except Exception`` does not swallow it), naming the file and line the user's code was at
  (``locate(frame)``). The programs of an LNC=2 launch, which run in threads, get the same stop
  asynchronously.
- **A stop that the user's code catches is raised again**, every ``REFIRE_S``, whenever the main
  thread is back in code that is not trnsim's (a bare ``except:`` in a loop cannot keep the run
  alive). After ``GRACE_S`` of that, ``on_stuck(stop)`` runs if given: the CLI prints the one-line
  error and exits the process (``trnsim.cli.main``); a library caller keeps being interrupted.
- **Alive, not silent**: ``on_beat(text)`` (if given) receives a line now and then (the first
  after ``BEAT_FIRST_S``, then every ``BEAT_EVERY_S`` and less often on long runs) from a helper
  thread: the elapsed time, the stage, the user's
  file and line the main thread is at, and the instructions recorded so far.

Signals and interval timers belong to the main thread: elsewhere the block runs with the
heartbeat only (no time limit). A call into C that never returns to the interpreter (a huge
integer power, a regular expression that backtracks forever) holds the interpreter lock, so
nothing in the process can interrupt it until it returns; the CLI's last resort for that case
is ``trnsim.cli.main``'s hard deadline.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType

from trnsim.errors import Deadline, Interrupted, Stop, Terminated

REFIRE_S = 0.1
"""Seconds between two raises of a stop the user's code caught."""
GRACE_S = 2.0
"""Seconds a stop may be caught and ignored before ``on_stuck`` ends the process (CLI)."""
BEAT_FIRST_S, BEAT_EVERY_S, BEAT_MAX_S = 5.0, 10.0, 60.0
"""When the first "still running" line comes, and how often the next ones do: every
``BEAT_EVERY_S``, then a quarter of the time elapsed, at most every ``BEAT_MAX_S`` (a 10-minute
run says so about 20 times)."""

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../trnsim/
_KERNEL_MODULE_PREFIX = "trnsim_kernelfile_"  # the module name of a loaded kernel file


class Progress:
    """The stage the run is in (set by the caller as it goes; the heartbeat and the stops name
    it). Entering a stage raises a stop requested before and caught by the user's code: once
    stopped, a run does not go on to its next stage."""

    def __init__(self) -> None:
        self._stage = "loading"
        self.started = time.monotonic()
        self.stopped: Stop | None = None

    @property
    def stage(self) -> str:
        return self._stage

    @stage.setter
    def stage(self, stage: str) -> None:
        if self.stopped is not None:
            raise self.stopped.again()
        self._stage = stage

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@contextmanager
def guard(
    seconds: float | None,
    locate: Callable[[FrameType | None], tuple[str, int] | None],
    *,
    progress: Progress | None = None,
    on_beat: Callable[[str], None] | None = None,
    on_stuck: Callable[[Stop], None] | None = None,
) -> Iterator[Progress]:
    """Run the ``with`` block under a time limit of ``seconds`` (None: none) and the stop
    signals; ``locate(frame)`` says where the user's code is: (file, line), or None."""
    progress = progress or Progress()
    main = threading.current_thread() is threading.main_thread()
    beat = _Heartbeat(progress, locate, on_beat) if on_beat is not None else None
    if beat is not None:
        beat.start()
    if not main:
        try:
            yield progress
        finally:
            if beat is not None:
                beat.stop()
        return
    state = _State(seconds, locate, on_stuck, progress)
    saved = {s: signal.signal(s, state.on_signal) for s in (signal.SIGALRM, signal.SIGTERM)}
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, state.on_signal)
    if seconds:
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield progress
        if state.stop is not None:  # caught by the user's code, which then returned
            raise state.stop.again()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in saved.items():
            signal.signal(s, handler)
        if beat is not None:
            beat.stop()


class _State:
    """The stop of one ``guard``: which, since when, raised how often."""

    def __init__(
        self,
        seconds: float | None,
        locate: Callable[[FrameType | None], tuple[str, int] | None],
        on_stuck: Callable[[Stop], None] | None,
        progress: Progress,
    ) -> None:
        self.progress = progress
        self.seconds = seconds
        self.locate = locate
        self.on_stuck = on_stuck
        self.stop: Stop | None = None
        self.since = 0.0

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop is None:
            file, line = self.locate(_kernel_frame(frame)) or (None, None)
            at = (file, line, self.progress.stage)
            if signum == signal.SIGALRM:
                limit = f"ran longer than the time limit of {self.seconds:g} s (--timeout)"
                self.stop = Deadline(limit, *at)
            elif signum == signal.SIGINT:
                self.stop = Interrupted("interrupted", *at)
            else:
                self.stop = Terminated("terminated (SIGTERM)", *at)
            self.progress.stopped = self.stop
            self.since = time.monotonic()
        elif signum == signal.SIGINT and isinstance(self.stop, Interrupted) and self.on_stuck:
            self.on_stuck(self.stop)  # a second Ctrl-C: stop now
        elif signum != signal.SIGALRM:  # a second signal while a first stop is pending
            pass
        elif _in_trnsim(frame):  # the stop is on its way out through trnsim's own code
            signal.setitimer(signal.ITIMER_REAL, REFIRE_S)
            return
        if self.on_stuck is not None and time.monotonic() - self.since > GRACE_S:
            self.on_stuck(self.stop)
        signal.setitimer(signal.ITIMER_REAL, REFIRE_S)  # again, should the user's code catch it
        stop_kernel_threads(type(self.stop))
        raise self.stop.again()


def _in_trnsim(frame: FrameType | None) -> bool:
    return frame is not None and frame.f_code.co_filename.startswith(_PKG_DIR)


def _kernel_frame(frame: FrameType | None) -> FrameType | None:
    """The frame to locate: the main thread's, or, while it waits for the programs of an LNC=2
    launch, the first program's."""
    if _in_kernel_file(frame):
        return frame
    others = kernel_threads()
    return others[0][1] if others else frame


# ---- the programs of an LNC=2 launch (threads) ---------------------------------------------


def _in_kernel_file(frame: FrameType | None) -> bool:
    """Whether a frame stack runs code of a kernel file (a module the kernel-file loader made)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_KERNEL_MODULE_PREFIX):
            return True
        frame = frame.f_back
    return False


def kernel_threads() -> list[tuple[int, FrameType]]:
    """(thread id, frame) of every thread but this one running a kernel file's code."""
    me = threading.get_ident()
    return [
        (tid, frame)
        for tid, frame in sys._current_frames().items()
        if tid != me and _in_kernel_file(frame)
    ]


def stop_kernel_threads(exc_type: type[BaseException]) -> None:
    """Raise ``exc_type`` asynchronously in every other thread running kernel code (the
    programs of an LNC=2 launch), so an interrupted or timed-out run does not leave them
    running (the interpreter would wait for them at exit)."""
    for tid, _ in kernel_threads():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(exc_type))


# ---- alive, not silent ----------------------------------------------------------------------


class _Heartbeat(threading.Thread):
    """A daemon thread that reports where the main thread's user code is, now and then."""

    def __init__(
        self,
        progress: Progress,
        locate: Callable[[FrameType | None], tuple[str, int] | None],
        on_beat: Callable[[str], None],
    ) -> None:
        super().__init__(name="trnsim-heartbeat", daemon=True)
        self.progress = progress
        self.locate = locate
        self.on_beat = on_beat
        self.main = threading.get_ident()  # the thread the guarded block runs in
        self.done = threading.Event()

    def run(self) -> None:
        wait = BEAT_FIRST_S
        while not self.done.wait(wait):
            wait = min(BEAT_MAX_S, max(BEAT_EVERY_S, self.progress.elapsed() / 4))
            with suppress(Exception):  # a progress line is never worth a failed run
                self.on_beat(self.text())

    def text(self) -> str:
        from trnsim.nki.simulate import instructions_so_far

        frame = sys._current_frames().get(self.main)
        file, line = self.locate(_kernel_frame(frame)) or (None, None)
        at = f" at {os.path.basename(file)}:{line}" if file else ""
        n = instructions_so_far()
        count = f", {n:,} instructions so far" if n else ""
        elapsed = self.progress.elapsed()
        return f"still running after {elapsed:.0f} s: {self.progress.stage}{at}{count}"

    def stop(self) -> None:
        self.done.set()
