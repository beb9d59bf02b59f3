"""Progress on stderr: a rich bar on a terminal, plain rate-limited lines elsewhere
(``trnsim.report.progress``). Before, nothing at all was shown when stderr was not a terminal.
"""

from __future__ import annotations

import time

import pytest

from trnsim.report import progress as P


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.delenv("TRNSIM_PROGRESS", raising=False)
    monkeypatch.setattr(P, "PLAIN_DELAY", 0.05)
    monkeypatch.setattr(P, "PLAIN_INTERVAL", 0.1)


def test_not_a_terminal_means_plain_lines(fast, capsys):
    assert P.mode() == "plain"  # capsys' stderr is not a terminal
    with P.progress("planning x", total=10) as bar:
        for _ in range(10):
            bar.advance()
            time.sleep(0.035)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("trnsim: planning x: ") and "/10 (" in lines[0]
    assert lines[-1].startswith("trnsim: planning x: done in ")
    assert 2 <= len(lines) <= 0.35 / 0.1 + 3  # rate-limited: about one line per interval


def test_quick_work_prints_nothing(monkeypatch, capsys):
    monkeypatch.delenv("TRNSIM_PROGRESS", raising=False)
    with P.progress("quick", total=3) as bar:
        bar.advance(3)
    assert capsys.readouterr().err == ""


def test_zero_hides_it(fast, monkeypatch, capsys):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    with P.progress("hidden", total=2) as bar:
        bar.advance()
        time.sleep(0.2)
    assert capsys.readouterr().err == ""


def test_a_failed_run_does_not_say_done(fast, capsys):
    with pytest.raises(KeyboardInterrupt), P.progress("stopped"):
        time.sleep(0.12)
        raise KeyboardInterrupt
    err = capsys.readouterr().err
    assert "trnsim: stopped, " in err and "done" not in err
