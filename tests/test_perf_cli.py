"""CLI verbs of the performance model (--json, SI units, errors)."""

import json
from pathlib import Path

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


def test_train_defaults_pick_a_plan_that_fits(capsys):
    """`trnsim train --model M` with nothing else plans on the default system and fits."""
    d = _json(capsys, ["train", "--model", "llama-3.1-70b", "--json"])
    assert d["fits"] and d["chips"] == 144
    assert d["assumptions"][0].startswith("plan: chosen by the planner")


def test_infer_defaults_pick_a_plan_that_fits(capsys):
    d = _json(capsys, ["infer", "--model", "llama-3.1-70b", "--json"])
    assert d["fits"] and d["plan"]["tp"] > 1
    assert d["assumptions"][0].startswith("plan: chosen by the planner")


def test_title_says_chips_of_system(capsys):
    assert main(["train", "--model", "llama-3.1-8b", "--chips", "16"]) == 0
    assert "16 chips of trn3-gen2-ultraserver" in " ".join(capsys.readouterr().out.split())


def test_bad_flags_name_the_value(capsys):
    cases = [
        (["train", "--model", "llama-3.1-8b", "--chips", "10000000"], "--chips 10000000"),
        (["train", "--model", "llama-3.1-8b", "--interleave", "3"], "--interleave 3"),
        (["train", "--model", "llama-3.1-8b", "--ranks-per-chip", "64"], "--ranks-per-chip 64"),
        (
            ["infer", "--model", "llama-3.1-8b", "--max-seq-len", "100"],
            "--max-seq-len 100",
        ),
        (
            ["plan", "--model", "llama-3.1-8b", "--objective", "latency"],
            "--objective latency",
        ),
    ]
    for argv, needle in cases:
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err


def test_numeric_flags_refuse_nonsense(capsys):
    import pytest

    for argv in (
        ["train", "--model", "llama-3.1-8b", "--global-batch", "0"],
        ["train", "--model", "llama-3.1-8b", "--tokens", "nan"],
        ["train", "--model", "llama-3.1-8b", "--price", "-1"],
        ["plan", "--model", "llama-3.1-8b", "--top", "0"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert argv[-2] in capsys.readouterr().err


def test_synthetic_gpt_and_hf_config_models(capsys):
    d = _json(
        capsys,
        ["train", "--hidden", "2048", "--layers", "24", "--heads", "16", "--chips", "8", "--json"],
    )
    assert d["model"].startswith("gpt-1.8B") and d["fits"]
    cfg = str(Path(__file__).parent / "data" / "hf" / "qwen3-30b-a3b.json")
    d = _json(capsys, ["infer", "--model", cfg, "--chips", "4", "--json"])
    assert d["model"] == "qwen3-30b-a3b" and d["tpot_s"] > 0


def test_model_and_synthetic_flags_conflict(capsys):
    assert main(["train", "--model", "llama-3.1-8b", "--hidden", "1024"]) != 0
    assert "--hidden 1024" in capsys.readouterr().err


def test_compare_workload_refuses_bad_systems_and_paths(capsys):
    assert main(["compare-workload", "--model", "llama-3.1-8b", "--systems", ""]) != 0
    assert "--systems ''" in capsys.readouterr().err
    argv = ["compare-workload", "--model", "llama-3.1-8b", "--png", "/nonexistent/x.png"]
    assert main(argv) != 0
    assert "--png" in capsys.readouterr().err


def test_stack_flag_is_checked_against_the_vendor(capsys):
    argv = ["train", "--model", "llama-3.1-8b", "--system", "p5", "--stack", "nxd-training"]
    assert main(argv) != 0
    assert "--stack nxd-training" in capsys.readouterr().err
    d = _json(capsys, ["infer", "--model", "llama-3.1-8b", "--system", "trn2", "--json"])
    assert d["stack"] == "nxd-inference"


def test_unknown_names_and_plan_flags_are_usage_errors(capsys):
    cases = [
        (["train", "--model", "nope"], "--model nope"),
        (["train", "--model", "llama-3.1-8b", "--system", "foo"], "--system foo"),
        (["infer", "--model", "llama-3.1-8b", "--draft-model", "nope"], "--draft-model nope"),
        (["train", "--model", "llama-3.1-8b", "--tp", "3"], "tp(3)"),
        (["infer", "--model", "llama-3.1-8b", "--ep", "3"], "ep(3)"),
    ]
    for argv, needle in cases:
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err


def test_default_global_batch_scales_with_the_chips(capsys):
    """1,024 sequences, or 1,024 tokens per chip when that is more (power of two); the
    estimate says which it used and why."""
    from trnsim.perf.train import default_global_batch

    assert default_global_batch(144, 4096) == 1024
    assert default_global_batch(24576, 4096) == 6144  # 24,576 / 4
    assert default_global_batch(16384, 8192) == 2048  # Llama 3 405B: 16M tokens
    assert default_global_batch(999936, 4096) == 249984  # 2^9 x 1,953 chips: / 4
    assert default_global_batch(5000, 2048) == 2500  # 5,000 chips / 2
    assert main(["train", "--model", "llama-3.1-8b", "--chips", "64", "--tp", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["global_batch"] == 1024
    assert any(a.startswith("global batch: 1,024 sequences") for a in d["assumptions"])
    args = ["train", "--model", "llama-3.1-8b", "--global-batch", "512", "--chips", "64"]
    args += ["--tp", "8", "--json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["global_batch"] == 512
    assert not any(a.startswith("global batch:") for a in d["assumptions"])


def test_system_name_that_is_also_a_chip_means_the_system(capsys):
    """README: ``v5e`` is the pod as a system (the chip in ``trnsim specs``)."""
    from trnsim.cli.train import resolve_system

    assert resolve_system("v5e").name == "tpu-v5e-256"
    assert resolve_system("v5p").name == "tpu-v5p-pod"
    assert resolve_system("trillium").name == "tpu-v6e-256"
    assert resolve_system("tpu-v5e").name == "tpu-v5e-4"  # a chip: its smallest system


def test_train_on_a_chip_name_takes_its_smallest_system_that_fits(capsys):
    """Llama-3.1-8B does not fit on tpu-v5e-4 or -8: `--system tpu-v5e` plans on the smallest
    v5e slice where a plan fits and says which it tried."""
    d = _json(capsys, ["train", "--model", "llama-3.1-8b", "--system", "tpu-v5e", "--json"])
    assert d["system"] == "tpu-v5e-16" and d["chips"] == 16 and d["fits"]
    note = next(a for a in d["assumptions"] if a.startswith("system: "))
    assert "tpu-v5e-4" in note and "tpu-v5e-8" in note
    # with --chips the named chip's smallest system is used as it is, and refused if too small
    assert main(["train", "--model", "llama-3.1-8b", "--system", "tpu-v5e", "--chips", "4"]) == 1
    assert "no plan of llama-3.1-8b fits on 4 chips of tpu-v5e-4" in capsys.readouterr().err


def test_pipeline_memory_and_moe_flags(capsys):
    """Issue 22's plan options reach the estimate and show in its JSON."""
    argv = [
        "train", "--model", "qwen3-235b-a22b", "--system", "h100-ib-cluster", "--chips", "256",
        "--tp", "2", "--pp", "8", "--ep", "32", "--etp", "1", "--interleave", "4",
        "--global-batch", "2048", "--precision", "fp8", "--moe-a2a-overlap",
        "--moe-dispatcher", "flex", "--recompute", "none", "--json",
    ]  # fmt: skip
    d = _json(capsys, argv)
    p = d["plan"]
    assert (p["etp"], p["ep"], p["moe_dispatcher"], p["moe_a2a_overlap"]) == (1, 32, "flex", True)
    argv = [
        "train", "--model", "llama-3-70b", "--system", "gb200-nvl72-ib-cluster", "--chips", "64",
        "--zero", "3", "--micro-batch", "2", "--global-batch", "256", "--seq-len", "8192",
        "--precision", "fp8", "--recompute", "none", "--offload-layers", "40", "--json",
    ]  # fmt: skip
    d = _json(capsys, argv)
    assert d["fits"] and d["plan"]["offload_layers"] == 40


def test_new_plan_flags_refuse_bad_values_in_one_line(capsys):
    import pytest

    cases = [
        (["train", "--model", "llama-3.1-8b", "--etp", "1"], "--etp: llama-3.1-8b has no experts"),
        (
            ["train", "--model", "mixtral-8x7b", "--moe-capacity", "0.5"],
            "--moe-capacity 0.5",
        ),
        (
            ["train", "--model", "llama-3.1-8b", "--recompute-layers", "4", "--recompute", "none"],
            "recompute_layers(4) needs recompute='full'",
        ),
        (
            ["train", "--model", "llama-3.1-8b", "--pp", "2", "--first-stage-layers", "40"],
            "first_stage_layers(40)",
        ),
        (
            ["train", "--model", "llama-3.1-8b", "--offload-layers", "99", "--pp", "1"],
            "offload_layers(99)",
        ),
        (["train", "--model", "qwen3-30b-a3b", "--moe-dispatcher", "mail"], "--moe-dispatcher"),
    ]
    for argv, needle in cases:
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code
        assert code == 2, argv
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
    with pytest.raises(SystemExit) as exc:
        main(["train", "--model", "llama-3.1-8b", "--offload-layers", "-1"])
    assert exc.value.code == 2
