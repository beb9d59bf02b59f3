"""For the tests that press Ctrl-C on a child process: the child takes SIGINT as a terminal's
foreground process does. A shell without job control starts a background job (``pytest &``,
``nohup ... &``) with SIGINT ignored, a child inherits that, and trnsim rightly keeps an
ignored SIGINT ignored (``trnsim.cli.main._catch_signals``): without this, those tests would
wait forever whenever the suite runs in the background."""

from __future__ import annotations

import signal


def sigint_default() -> None:
    """``preexec_fn`` of such a child: SIGINT at its default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
