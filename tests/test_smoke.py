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
