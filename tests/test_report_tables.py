"""Tables at 80 columns: labels fold, numbers are never cut (``trnsim.report.tables.fit``)."""

from __future__ import annotations

import re

import pytest
from rich.console import Console
from rich.table import Table

from trnsim.cli.main import main
from trnsim.report.tables import fit, is_number


@pytest.mark.parametrize(
    "text", ["144", "96.62 PFLOP/s", "0.44x", "1,073,741,824", "12.2%", "-", "+20.8%", "3.9e-05"]
)
def test_numbers_are_recognised(text):
    assert is_number(text)


@pytest.mark.parametrize("text", ["trn3-gen2-ultraserver", "AWS Graviton", "", "llama-2-7b 16n"])
def test_labels_are_not_numbers(text):
    assert not is_number(text)


def _render(table: Table, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


@pytest.mark.parametrize("systems", [2, 3, 4])
def test_wide_table_keeps_every_number_whole(systems):
    names = [f"trn3-gen2-ultraserver-{i}" for i in range(systems)]
    t = Table(title="figures")
    t.add_column("figure")
    for n in names:
        t.add_column(n, justify="right")
    values = [f"{83.14 + i:.2f} PFLOP/s" for i in range(systems)]
    t.add_row("peak_flops.fp8 (dense, per system)", *values)
    text = _render(fit(t, 80))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for v in values:  # each figure's digits on one line, never split
        assert re.search(re.escape(v.split()[0]), text), v


def test_unfitted_table_would_cut_a_number():
    """The check above can fail: without ``fit`` rich truncates with an ellipsis."""
    t = Table()
    t.add_column("figure")
    for i in range(3):
        t.add_column(f"trn3-gen2-ultraserver-{i}", justify="right")
    t.add_row("peak_flops.fp8 (dense, per system)", *["83.14 PFLOP/s"] * 3)
    assert "…" in _render(t)


VERBS = [
    ["specs", "trn3-gen2-ultraserver"],
    ["specs"],
    ["compare", "trn3-gen2", "trn2-ultraserver"],
    ["compare", "trn3-gen2", "trn2-ultraserver", "gb300-nvl72"],
    ["collective", "--sweep", "--plot", ""],
    ["collective"],
    [
        "train",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "4",
        "--pp",
        "4",
        "--global-batch",
        "1152",
        "--seq-len",
        "8192",
        "--tokens",
        "1e12",
    ],
    ["infer", "--model", "llama-3.1-70b"],
    ["plan", "--model", "llama-3.1-70b"],
    ["validate"],
    ["compare-workload", "--model", "gpt-oss-120b", "--mode", "infer"],
]


@pytest.mark.parametrize("argv", VERBS, ids=" ".join)
def test_verb_tables_fit_80_columns(argv, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc in (0, 1) and out.strip()
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
