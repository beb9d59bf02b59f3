"""CLI verbs of the performance model (--json, SI units, errors)."""

import json

from trnsim.cli.main import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_train_json(capsys):
    d = _json(
        capsys,
        [
            "train",
            "--model",
            "llama-3.1-8b",
            "--system",
            "trn3-gen1",
            "--tp",
            "4",
            "--global-batch",
            "64",
            "--seq-len",
            "2048",
            "--json",
        ],
    )
    assert d["plan"]["dp"] == 16 and d["step_time_s"] > 0 and 0 < d["mfu"] < 1


def test_infer_json(capsys):
    d = _json(
        capsys,
        [
            "infer",
            "--model",
            "llama-3-8b",
            "--system",
            "trn1.32xlarge",
            "--tp",
            "32",
            "--ranks-per-chip",
            "2",
            "--batch",
            "1",
            "--input-tokens",
            "128",
            "--output-tokens",
            "128",
            "--precision",
            "int8",
            "--json",
        ],
    )
    assert d["tpot_s"] > d["ttft_s"] / 100 and d["chips"] == 16


def test_plan_error_names_values(capsys):
    assert (
        main(
            [
                "train",
                "--model",
                "llama-2-7b",
                "--system",
                "trn3-gen2",
                "--chips",
                "144",
                "--tp",
                "7",
            ]
        )
        == 2  # bad input (README, "Exit status")
    )
    assert "not divisible by tp(7)" in capsys.readouterr().err


def test_validate_json(capsys):
    d = _json(capsys, ["validate", "--json"])
    assert set(d["summary"]) >= {"mape_B", "mape_C_ttft", "mape_C_tpot"}
