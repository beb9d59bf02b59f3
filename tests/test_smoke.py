"""Seconds-long smoke test: every layer that exists runs end to end, and the demo finishes."""

import importlib

import pytest

from trnsim.cli import demo
from trnsim.cli.main import VERBS, main


def test_every_layer_imports():
    for layer in ("hw", "numerics", "core", "nki", "fabric", "workloads", "perf", "report"):
        importlib.import_module(f"trnsim.{layer}")


def test_every_cli_verb_has_a_parser_and_help(capsys):
    for verb in VERBS:
        with pytest.raises(SystemExit) as info:
            main([verb, "--help"])
        assert info.value.code == 0
        assert "usage: trnsim " + verb in capsys.readouterr().out


def test_demo_runs_every_section(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for title, _ in demo.SECTIONS:
        assert title in out
    assert "demo finished" in out


def test_the_torch_section_without_torch_says_the_extra_by_name(monkeypatch):
    """Rich read '[torch]' in the install hint as markup and printed 'pip install "trnsim"'."""
    import io

    from rich.console import Console

    from trnsim.cli import demo_torch
    from trnsim.torch import _door

    monkeypatch.setattr(_door, "available", lambda: False)
    buf = io.StringIO()
    demo_torch.section(Console(file=buf, width=200))
    assert "trnsim[torch]" in buf.getvalue()
