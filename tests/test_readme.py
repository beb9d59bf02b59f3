"""The README's two set-up commands are what CI runs, and every CLI verb is in its tour."""

from pathlib import Path

from trnsim.cli.main import VERBS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def test_readme_has_exactly_two_setup_commands_and_ci_runs_them():
    setup = README.split("## Set up")[1].split("\n## ")[0]
    commands = [line for line in setup.splitlines() if line.startswith("python3 -m venv")]
    assert len(commands) == 2
    assert commands[0].endswith("pip install -e . && trnsim demo")
    assert commands[1].endswith('pip install -e ".[test]" && pytest')
    assert "pip install --quiet -e . && trnsim demo" in CI
    assert 'pip install --quiet -e ".[test]"' in CI and "\npytest\n" in CI


def test_every_verb_is_in_the_readme_tour():
    for verb in VERBS:
        assert f"`trnsim {verb}" in README, verb
