"""``atomic_write`` leaves no temporary behind when a stop signal arrives while the temporary
is being made (before its name is held): the race seen as a flaky SIGTERM test."""

import os
import signal
import tempfile
import threading

import pytest

from trnsim.report import output


class Stopped(Exception):
    pass


def _raise(signum, frame):
    raise Stopped(signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGALRM])
def test_a_stop_while_the_temporary_is_made_leaves_nothing(tmp_path, monkeypatch, signum):
    real = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        # to this thread (the mask is per thread: a process-directed os.kill may be taken by
        # another thread an earlier test left running, and then arrives unmasked here)
        signal.pthread_kill(threading.get_ident(), signum)  # unmasked, the name would be lost
        return made

    monkeypatch.setattr(output.tempfile, "mkstemp", mkstemp_then_signal)
    old = signal.signal(signum, _raise)
    try:
        with pytest.raises(Stopped):
            output.atomic_write(tmp_path / "out.json", lambda t: open(t, "w").close())
    finally:
        signal.signal(signum, old)
    assert os.listdir(tmp_path) == []
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == set()  # the mask is restored
