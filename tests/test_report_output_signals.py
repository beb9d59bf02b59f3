"""``atomic_write`` and ``output_path`` leave no temporary behind when a stop arrives while the
temporary is being made: the instant after the file comes into being, before the call that
made it returns a name to anyone (the race once seen as a flaky SIGTERM test), whichever
thread the signal was delivered to."""

import os
import signal
import threading
from pathlib import Path

import pytest

from trnsim.report import output


class Stopped(Exception):
    pass


def _raise(signum, frame):
    raise Stopped(signum)


def _open_then(stop):
    real = os.open

    def open_then_stop(path, flags, *args, **kwargs):
        fd = real(path, flags, *args, **kwargs)
        if flags & os.O_CREAT:
            stop()  # the file exists; its fd was never returned
        return fd

    return open_then_stop


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGALRM])
def test_a_stop_the_instant_the_temporary_exists_leaves_nothing(tmp_path, monkeypatch, signum):
    me = threading.get_ident()
    monkeypatch.setattr(output.os, "open", _open_then(lambda: signal.pthread_kill(me, signum)))
    old = signal.signal(signum, _raise)
    try:
        with pytest.raises(Stopped):
            output.atomic_write(tmp_path / "out.json", lambda t: open(t, "w").close())
    finally:
        signal.signal(signum, old)
    assert os.listdir(tmp_path) == []


def test_a_signal_taken_by_another_thread_leaves_nothing(tmp_path, monkeypatch):
    """The signal lands on a helper thread (as a process-directed signal may); CPython runs
    the handler in the main thread at its next instruction: a signal mask in the main thread
    could not have held it off."""

    def to_itself():
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    def from_another_thread():
        t = threading.Thread(target=to_itself)
        t.start()
        t.join()
        for _ in range(100):  # the handler runs here, at one of these instructions
            pass

    monkeypatch.setattr(output.os, "open", _open_then(from_another_thread))
    old = signal.signal(signal.SIGTERM, _raise)
    try:
        with pytest.raises(Stopped):
            output.atomic_write(tmp_path / "out.json", lambda t: open(t, "w").close())
    finally:
        signal.signal(signal.SIGTERM, old)
    assert os.listdir(tmp_path) == []


def test_output_paths_write_probe_leaves_nothing_when_stopped(tmp_path, monkeypatch):
    def stop():
        raise Stopped("probe")

    monkeypatch.setattr(output.os, "open", _open_then(stop))
    with pytest.raises(Stopped):
        output.output_path(str(tmp_path / "x.json"), "--out")
    assert os.listdir(tmp_path) == []


def test_a_write_that_fails_or_succeeds_leaves_only_the_file(tmp_path):
    def boom(t):
        raise Stopped("in write")

    with pytest.raises(Stopped):
        output.atomic_write(tmp_path / "a.json", boom)
    assert os.listdir(tmp_path) == []
    output.atomic_write(tmp_path / "a.json", lambda t: Path(t).write_text("{}"))
    assert os.listdir(tmp_path) == ["a.json"]
    assert (tmp_path / "a.json").read_text() == "{}"
