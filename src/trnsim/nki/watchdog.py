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
  alive), and a run that was stopped does not go on to its next stage (``Progress``). After
  ``GRACE_S`` of that, ``on_stuck(stop)`` runs if given: the CLI prints the one-line error and
  ends the process (``trnsim.cli.main``); a library caller keeps being interrupted.
- **Alive, not silent**: ``on_beat(text)`` (if given) receives a line now and then (the first
  after ``BEAT_FIRST_S``, then every ``BEAT_EVERY_S`` and less often on long runs): the elapsed
  time, the stage, the user's file and line the main thread is at, and the instructions
  recorded so far.

One helper thread per guard (``_Watch``) keeps the time, repeats the stop and says the progress
lines; it reaches the main thread with a SIGALRM sent to that thread alone (``pthread_kill``),
which also interrupts a system call the main thread waits in (``time.sleep``, ``input``). Not
an interval timer: the kernel may hand a process-wide signal to any thread, and CPython can
lose a signal that arrives while another is being handled (seen here as a run that stopped
answering when Ctrl-C met the timer). Signals belong to the main thread: elsewhere the block
runs with the progress lines only (no time limit). A call into C that never returns to the
interpreter (``sum(range(10**15))``, a huge integer power) holds the interpreter lock, so
nothing in the process can interrupt it until it returns; the CLI's last resort for that case
is ``trnsim.cli.main.hard_deadline``.
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
from typing import Any

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
    state = _State(seconds if main else None, locate, on_stuck, progress)
    watch = _Watch(state, on_beat) if main or on_beat is not None else None
    saved: dict[int, Any] = {}
    if main:
        saved = {s: signal.signal(s, state.on_signal) for s in (signal.SIGALRM, signal.SIGTERM)}
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            saved[signal.SIGINT] = signal.signal(signal.SIGINT, state.on_signal)
    if watch is not None:
        watch.start()
    try:
        yield progress
        if state.stop is not None:  # caught by the user's code, which then returned
            raise state.stop.again()
    finally:
        state.finish()  # no poke after this; one already sent is answered by a no-op
        _answer_pending_signals()
        for s, handler in saved.items():
            signal.signal(s, handler)


class _State:
    """The stop of one ``guard``: which, since when; shared by the main thread's signal
    handler and the watch thread (under ``lock``)."""

    def __init__(
        self,
        seconds: float | None,
        locate: Callable[[FrameType | None], tuple[str, int] | None],
        on_stuck: Callable[[Stop], None] | None,
        progress: Progress,
    ) -> None:
        self.progress = progress
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds if seconds else None
        self.locate = locate
        self.on_stuck = on_stuck
        self.stop: Stop | None = None
        self.since = 0.0
        self.raised = 0
        self.done = False
        self.lock = threading.Lock()
        self.changed = threading.Event()
        self.main = threading.get_ident()

    def request(self, make: Callable[..., Stop], message: str, frame: FrameType | None) -> Stop:
        """Record the run's stop (the first one wins), located at ``frame``."""
        if self.stop is None:
            file, line = self.locate(_kernel_frame(frame)) or (None, None)
            self.stop = make(message, file, line, self.progress.stage)
            self.progress.stopped = self.stop
            self.since = time.monotonic()
            self.changed.set()
        return self.stop

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The main thread's handler of SIGINT, SIGTERM and the watch thread's SIGALRM."""
        if self.done:
            return
        if signum == signal.SIGALRM:
            if self.stop is None:
                return  # not the watch thread's
            if self.raised and _in_trnsim(frame):
                return  # raised before: on its way out through trnsim's own code
        elif self.stop is None:
            make, text = (
                (Interrupted, "interrupted")
                if signum == signal.SIGINT
                else (Terminated, "terminated (SIGTERM)")
            )
            self.request(make, text, frame)
        elif signum == signal.SIGINT and isinstance(self.stop, Interrupted) and self.on_stuck:
            self.on_stuck(self.stop)  # a second Ctrl-C: end now
        assert self.stop is not None
        stop_kernel_threads(type(self.stop))
        self.raised += 1
        raise self.stop.again()

    def poke(self) -> None:
        """From the watch thread: make the main thread raise the pending stop (again), by a
        SIGALRM sent to it alone (it also interrupts a system call the main thread waits in)."""
        with self.lock:
            if not self.done:
                signal.pthread_kill(self.main, signal.SIGALRM)

    def finish(self) -> None:
        with self.lock:
            self.done = True
        self.changed.set()


def _answer_pending_signals() -> None:
    """A Python function call: the interpreter runs the signal handlers a poke left pending
    (the guard's, a no-op once done) before the caller restores the previous handlers."""


class _Watch(threading.Thread):
    """The guard's helper thread: the time limit, raising a stop again while the user's code
    keeps catching it, ending the process after ``GRACE_S`` of that (``on_stuck``), and the
    progress lines. A signal sent by the kernel to the process may be handled by any thread,
    and CPython can lose one that arrives while another is being handled; so the timer and the
    repeats are this thread's, sent to the main thread alone (``pthread_kill``)."""

    def __init__(self, state: _State, on_beat: Callable[[str], None] | None) -> None:
        super().__init__(name="trnsim-watch", daemon=True)
        self.state = state
        self.on_beat = on_beat
        self.next_beat = time.monotonic() + BEAT_FIRST_S

    def run(self) -> None:
        st = self.state
        while not st.done:
            st.changed.wait(self._wait())
            st.changed.clear()
            if st.done:
                return
            now = time.monotonic()
            if st.stop is None and st.deadline is not None and now >= st.deadline:
                limit = f"ran longer than the time limit of {st.seconds:g} s (--timeout)"
                st.request(Deadline, limit, sys._current_frames().get(st.main))
            if st.stop is not None:
                if st.on_stuck is not None and now - st.since > GRACE_S:
                    with st.lock:
                        if not st.done:
                            st.on_stuck(st.stop)  # prints the line and ends the process
                    return
                stop_kernel_threads(type(st.stop), st.main)
                st.poke()
            if self.on_beat is not None and now >= self.next_beat:
                elapsed = st.progress.elapsed()
                self.next_beat = now + min(BEAT_MAX_S, max(BEAT_EVERY_S, elapsed / 4))
                with suppress(Exception):  # a progress line is never worth a failed run
                    self.on_beat(self.text())

    def _wait(self) -> float | None:
        st = self.state
        now = time.monotonic()
        waits = []
        if st.stop is not None:
            waits.append(REFIRE_S)
        elif st.deadline is not None:
            waits.append(st.deadline - now)
        if self.on_beat is not None:
            waits.append(self.next_beat - now)
        return max(0.0, min(waits)) if waits else None

    def text(self) -> str:
        from trnsim.nki.simulate import instructions_so_far

        st = self.state
        frame = sys._current_frames().get(st.main)
        file, line = st.locate(_kernel_frame(frame)) or (None, None)
        at = f" at {os.path.basename(file)}:{line}" if file else ""
        n = instructions_so_far()
        count = f", {n:,} instructions so far" if n else ""
        elapsed = st.progress.elapsed()
        return f"still running after {elapsed:.0f} s: {st.progress.stage}{at}{count}"


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


def kernel_threads(main: int | None = None) -> list[tuple[int, FrameType]]:
    """(thread id, frame) of every thread running a kernel file's code but this one and
    ``main`` (the thread that runs the guarded block: the stop is raised there by its handler)."""
    skip = {threading.get_ident(), main}
    return [
        (tid, frame)
        for tid, frame in sys._current_frames().items()
        if tid not in skip and _in_kernel_file(frame)
    ]


def stop_kernel_threads(exc_type: type[BaseException], main: int | None = None) -> None:
    """Raise ``exc_type`` asynchronously in every other thread running kernel code (the
    programs of an LNC=2 launch), so an interrupted or timed-out run does not leave them
    running (the interpreter would wait for them at exit)."""
    for tid, _ in kernel_threads(main):
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(exc_type))
