"""Issue 21 for trnsim.torch: the small GPT's sizes, the study's steps and profile_step's
sequence follow rules of trnsim.inputs, from the CLI and the Python API alike (before this,
``torch-profile --seq-len 1e20`` was an internal error, ``--layers 100000000`` and
``torch-demo --steps 1e12`` ran until killed, and a sequence past a Llama's context a
traceback from inside FakeTensor)."""

from __future__ import annotations

import warnings

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError, InputError
from trnsim.inputs import InputWarning

pytest.importorskip("torch")

from trnsim.torch.models import GPTConfig
from trnsim.torch.study import StudyConfig


@pytest.mark.parametrize(
    "kw,rule",
    [
        ({"d_model": 100_000}, "gpt-width"),
        ({"n_layers": 0}, "gpt-layers"),
        ({"n_layers": 2.5}, "gpt-layers"),
        ({"n_heads": float("nan")}, "gpt-heads"),
        ({"seq_len": 2**30}, "gpt-seq-len"),
        ({"d_model": 16_384, "n_layers": 2}, "gpt-size"),
    ],
)
def test_gpt_config_follows_the_rules(kw, rule):
    with pytest.raises(InputError, match=f"rule {rule}"):
        GPTConfig(**kw)


def test_an_input_error_is_still_a_config_error_for_callers_that_catch_those():
    with pytest.raises(ConfigError):
        GPTConfig(d_model=-1)


def test_study_steps_and_batch_follow_the_rules():
    with pytest.raises(InputError, match="rule study-steps"):
        StudyConfig(steps=10**12)
    with pytest.raises(InputError, match="rule gpt-size"):
        StudyConfig(batch=65_536, model=GPTConfig(seq_len=4096))
    with pytest.warns(InputWarning, match="10,000 steps"):
        StudyConfig(steps=20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        StudyConfig(steps=300)  # the default study: no warning


def _one_line(capsys, argv, status=2):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    assert rc == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0] and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["torch-profile", "--mode", "shapes", "--seq-len", "1e20"], "rule seq-len"),
        (["torch-profile", "--layers", "100000000"], "rule gpt-layers"),
        (["torch-profile", "--batch", "65536", "--seq-len", "4096"], "rule gpt-size"),
        (["torch-profile", "--mode", "shapes", "--global-batch", "1e12"], "rule global-batch"),
        (["torch-demo", "--steps", "1e12", "--no-png"], "rule study-steps"),
        (["torch-demo", "--heads", "5000", "--no-png"], "rule gpt-heads"),
        (["torch-demo", "--seed", str(10**23), "--no-png"], "rule study-seed"),
        (["torch-demo", "--lr", "1e300", "--no-png"], "rule study-lr"),
    ],
)
def test_the_cli_refuses_with_one_line(argv, needle, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.chdir(tmp_path)
    line = _one_line(capsys, [*argv, "--no-files"] if argv[0] == "torch-profile" else argv)
    assert needle in line


@pytest.mark.slow
def test_a_sequence_past_the_models_context_is_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.chdir(tmp_path)
    argv = ["torch-profile", "--mode", "shapes", "--model", "llama-3-8b", "--seq-len", "200000"]
    line = _one_line(capsys, [*argv, "--no-files"])
    assert "context of 8,192 tokens" in line and "rule context-length" in line
