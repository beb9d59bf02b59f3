"""``trnsim collective`` flag domains: each bad value is refused before any work, in one line
naming the flag and the value, with exit status 2 (usage); a sweep with --json writes no PNG."""

from __future__ import annotations

import json
import os

import pytest

from trnsim.cli.main import build_parser, main
from trnsim.errors import UsageError


def _exit_code(argv: list[str]) -> int:
    """The status ``main`` ends with (argparse exits 2 by raising SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


@pytest.mark.parametrize(
    "flag,value,words",
    [
        ("--size", "0", "whole number of bytes from 1 B"),
        ("--size", "1.5", "whole number of bytes"),
        ("--size", "1e30", "1 TiB"),
        ("--size", "-5MiB", "negative"),
        ("--size", "big", "cannot read size 'big'"),
        ("--size", "nan", "cannot read size"),
        ("--min-size", "0", "whole number of bytes"),
        ("--ranks", "1", "at least 2 ranks"),
        ("--ranks", "0", "positive integer"),
        ("--ranks", "-3", "positive integer"),
        ("--ranks", "2.5", "whole number"),
        ("--factor", "3", "invalid choice"),
    ],
)
def test_bad_flag_values_are_usage_errors(flag, value, words, capsys):
    assert _exit_code(["collective", flag, value]) == 2
    err = capsys.readouterr().err
    assert flag in err and words in err and value in err


def _run(argv: list[str]):
    args = build_parser().parse_args(["collective", *argv])
    return args._run(args)


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--op", "a2a", "--size", "100"], "at least 144 B"),
        (["--op", "all-gather", "--ranks", "64", "--size", "63"], "at least 64 B"),
        (["--sweep", "--min-size", "1MiB", "--max-size", "1KiB"], "must not exceed --max-size"),
        (["--sweep", "--op", "rs", "--min-size", "16"], "--min-size 16 B is too small"),
        (["--sweep", "--plot", "/no/such/dir/x.png"], "--plot: directory '/no/such/dir'"),
    ],
)
def test_domain_rules_raise_usage_errors_before_work(argv, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        _run(argv)


def test_ranks_beyond_the_system_are_said_not_silent(capsys):
    assert main(["collective", "--ranks", "1000", "--size", "1MiB", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ranks"] == 1000
    assert "1000 ranks exceed the 144 chips" in captured.err and "'efa'" in captured.err


def test_sweep_with_json_writes_no_png_unless_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["collective", "--sweep", "--min-size", "1KiB", "--max-size", "16KiB", "--json"]
    assert main(argv) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    assert os.listdir(tmp_path) == []
    assert main([*argv, "--plot", "s.png"]) == 0
    assert os.listdir(tmp_path) == ["s.png"]
    assert os.stat(tmp_path / "s.png").st_mode & 0o777 == 0o644
