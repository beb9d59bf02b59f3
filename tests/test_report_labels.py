"""What a person reads names its formats and its kind of evidence: a chip's peak with its
number format, ``compare``'s ratios and formats, ``validate``'s fitted sets as fits."""

from __future__ import annotations

import json

import pytest

from trnsim import hw
from trnsim.cli.main import main
from trnsim.cli.specs import peak_summary
from trnsim.perf import calsets


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")


def test_a_chips_peak_names_its_format():
    """``specs`` listed "15 PFLOP/s peak" (B300, FP4) beside "2.517 PFLOP/s peak" (Trn3,
    FP8) as if they were the same kind of figure."""
    assert peak_summary(hw.lookup("b300")) == "15 PFLOP/s dense FP4"
    assert peak_summary(hw.lookup("trn3")).startswith("2.517 PFLOP/s dense FP8")


def test_specs_listing_says_the_format(capsys):
    assert main(["specs"]) == 0
    out = capsys.readouterr().out
    assert "15 PFLOP/s dense FP4" in out and "peak;" not in out


def test_compare_names_its_ratio_and_formats(capsys):
    assert main(["compare", "trn3", "b300", "--keys", "peak"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(ratio: to trn3)" in out and "never fp8 against fp4" in out


def test_validate_marks_fits_and_validation(capsys):
    assert main(["validate", "--sets", "F,X", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["set_kind"] == {"F": "fit", "X": "validation"}
    assert {"X"} <= calsets.CHECK_SETS
    assert main(["validate", "--sets", "F,X"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "F: fit: scored on the rows its stack's profile was fitted to (not a validation)" in out
    assert "MAPE, validation: held out, never fitted to: mape_X" in out
