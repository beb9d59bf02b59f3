"""CLI: trnsim specs / compare (JSON in SI units, errors)."""

import json

import pytest

from trnsim.cli.main import main


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_specs_json_reports_gen2_figures_in_si(capsys):
    data = run_json(capsys, "specs", "trn3-gen2-ultraserver", "--json")
    v = data["values"]
    assert v["chips"] == 144
    assert v["peak_flops.mxfp8"] == pytest.approx(362.5e15, rel=2e-3)
    assert v["peak_flops.bf16"] == pytest.approx(96.624e15)
    assert v["peak_flops.fp32"] == pytest.approx(26.352e15)
    assert v["hbm_bytes"] == pytest.approx(20.7e12, rel=2e-3)
    assert v["hbm_bw"] == pytest.approx(705.6e12)
    assert data["units"]["hbm_bw"] == "B/s"
    assert data["sources"]["peak_flops.mxfp8"].startswith("derived")


def test_specs_lists_presets(capsys):
    data = run_json(capsys, "specs", "--json")
    assert {"core", "chip", "system"} <= set(data)


def test_compare_shows_ratio_to_first(capsys):
    data = run_json(capsys, "compare", "trn2-ultraserver", "trn3-gen2", "--json")
    row = next(r for r in data["rows"] if r["key"] == "peak_flops.fp8")
    assert row["ratios"][1] == pytest.approx(4.36, abs=0.01)


def test_compare_refuses_mixed_kinds(capsys):
    assert main(["compare", "trn3", "trn3-gen2"]) == 2
    err = capsys.readouterr().err
    assert "one kind" in err and "trn3 (chip)" in err


def test_unknown_preset_lists_valid(capsys):
    assert main(["specs", "trn9"]) == 2
    assert "valid:" in capsys.readouterr().err


def test_table_output_renders(capsys):
    assert main(["specs", "neuroncore-v4"]) == 0
    assert "sbuf_bytes_per_partition" in capsys.readouterr().out
