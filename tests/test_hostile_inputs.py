"""Every verb, every flag, hostile values: the README's exit-status table and its promise,
"every error is one line on stderr ... never a Python traceback", checked.

For each verb a cheap valid command (``BASES``) has one flag (or positional) at a time replaced
by a hostile value: non-numeric, negative, NaN, infinite, huge, a 5,000-digit integer, empty,
a fraction where a count is due, unknown names, bad paths. Whatever the outcome, its status is
one of the table's, never 3 (an internal error: a bug), never a traceback; a usage error
(status 2) is exactly one line. Runs in process (``main``); kernel files' own faults are in
``test_cli_errors*.py`` and the kernel-runner tests.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
from pathlib import Path

import pytest

from trnsim.cli import main as cli_main
from trnsim.cli.main import build_parser, main
from verb_commands import SERVE_SMALL, TORCH_DEMO_FLAGS, TORCH_PROFILE_SMALL

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "examples" / "kernels"
SOFTMAX = str(KERNELS / "softmax.py")
HBM_COPY = str(KERNELS / "timing" / "hbm_copy.py")
SMALL_COPY = ["--arg", "rows=256", "--arg", "cols=256"]
DRA = ROOT / "examples" / "dra"
DRA_FLEET = ["--fleet", "trn2.48xlarge=2"]

# A cheap, valid command per verb; the hostile value replaces one of its flags or is added.
BASES: dict[str, list[str]] = {
    "specs": ["specs", "trn3"],
    "compare": ["compare", "trn3", "trn2"],
    "demo": ["demo", "--only", "Hardware"],
    "collective": ["collective", "--size", "1MiB", "--ranks", "8"],
    "train": ["train", "--model", "llama-3.1-8b", "--system", "trn3-gen1", "--tp", "4"],
    "infer": ["infer", "--model", "llama-3.1-8b", "--system", "trn3-gen1", "--tp", "4"],
    "plan": ["plan", "--model", "llama-3.1-8b", "--system", "trn3-gen1", "--chips", "4"],
    "compare-workload": [
        "compare-workload",
        "--model",
        "llama-3.1-8b",
        "--systems",
        "trn3-gen1",
        "--chips",
        "4",
    ],
    "validate": ["validate", "--sets", "F"],
    # a directory without the public checkouts: the flags are checked before it is searched
    "calibrate": ["calibrate", str(ROOT / "tests" / "data"), "--only", "gemm"],
    # a verb of sub-commands: one base each ("dra allocate", ...)
    "dra allocate": ["dra", "allocate", str(DRA / "claims" / "connected-4.yaml"), *DRA_FLEET],
    "dra simulate": ["dra", "simulate", "synthetic:8", *DRA_FLEET],
    "dra slices": ["dra", "slices", *DRA_FLEET],
    "serve": [*SERVE_SMALL, "--requests", "20"],
    "microbench": [
        "microbench",
        "h100-sxm",
        "--bench",
        "gemm",
        "--sizes",
        "1024",
        "--dtype",
        "bf16",
    ],
    "run": ["run", SOFTMAX],
    "profile": ["profile", HBM_COPY, *SMALL_COPY, "--no-files"],
    "torch-profile": TORCH_PROFILE_SMALL,
    "torch-demo": ["torch-demo", "--steps", "1", *TORCH_DEMO_FLAGS],
    "sweep": ["sweep", str(ROOT / "tests" / "data" / "sweep_one.json"), "--serial"],
    "tune": ["tune", SOFTMAX, "--param", "N=128,256", "--serial"],
    # a checkout that is not there: every flag value parsed and judged in milliseconds (the
    # runs themselves are tests/test_conformance*.py's)
    "conformance": ["conformance", "/nonexistent/nki-library"],
}

NUMBERS = ["abc", "-1", "nan", "inf", "-inf", "1e300", "9" * 5000, "", "0", "1.5", "0x10"]
NAMES = ["nosuch", "", "-", "5", "x" * 5000, "llama-3.1-8b/../../etc/passwd"]
# Paths read (a device must not be read until memory runs out) ...
PATHS = ["", "/", "/dev/zero", "/nonexistent/dir/file", "/proc/self/x.png", "x" * 5000]
INPUT_FLAGS = {"--model", "--draft-model"}
# ... and paths written. Never a real device here: a writer that renamed its file over one
# would replace it (as root, /dev/zero itself); a FIFO made in the test's directory stands in.
OUTPUTS = ["", "/", "/nonexistent/dir/file", "/proc/self/x.png", "FIFO", "x" * 5000]
OUTPUT_FLAGS = {"--png", "--plot", "--trace", "--out-dir", "--out"}
# Flags whose hostile values would start minutes of legitimate work (a full demo, a refit):
# their values are covered where they are cheap.
SKIP = {("validate", "--build-tables"), ("validate", "--fit")}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _replace(base: list[str], flag: str, value: str) -> list[str]:
    """``base`` with ``flag`` set to ``value`` (its old value dropped), as ``--flag=value``."""
    out, skip = [], False
    for i, tok in enumerate(base):
        if skip:
            skip = False
            continue
        if tok == flag and i + 1 < len(base):
            skip = True
            continue
        out.append(tok)
    return [*out, f"{flag}={value}"]


def _parser_cases(verb: str, parser: argparse.ArgumentParser, depth: int):
    """(verb, argv) for one parser: each of its flags, then its positional, made hostile."""
    base = BASES[verb]
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or "--help" in action.option_strings:
            continue
        flag = action.option_strings[-1]
        if (verb, flag) in SKIP:
            continue
        if flag in OUTPUT_FLAGS:
            values = OUTPUTS
        elif flag in INPUT_FLAGS:
            values = PATHS
        elif action.type is not None and not action.choices:
            values = NUMBERS
        else:
            values = NAMES
        for value in values:
            yield verb, _replace(base, flag, value)
    positionals = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
    if positionals:  # the first positional is base[depth]
        for value in (*PATHS, *NAMES[:2]):
            yield verb, [*base[:depth], value, *base[depth + 1 :]]


def _cases():
    for verb, parser in _parsers().items():
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:  # a verb of sub-commands: each sub-command's flags, and a bad sub-command
            for sub, subparser in nested[0].choices.items():
                yield from _parser_cases(f"{verb} {sub}", subparser, 2)
            for value in NAMES[:2]:
                yield f"{verb} {next(iter(nested[0].choices))}", [verb, value]
            continue
        yield from _parser_cases(verb, parser, 1)


CASES = list(_cases())


def _status_table() -> dict[int, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*(.+?)\s*\|$", section, re.M)
    return {int(code): meaning for code, meaning in rows}


def test_the_readme_table_is_the_cli_s():
    table = _status_table()
    assert set(table) == {
        cli_main.EXIT_OK,
        cli_main.EXIT_CHECK_FAILED,
        cli_main.EXIT_USAGE,
        cli_main.EXIT_INTERNAL,
        cli_main.EXIT_INTERRUPTED,
        cli_main.EXIT_BROKEN_PIPE,
        cli_main.EXIT_TERMINATED,
    }
    assert "internal error" in table[3] and "bad usage" in table[2]


def test_every_verb_and_flag_is_covered():
    verbs = {v for v, _ in CASES}
    assert verbs == set(BASES)
    assert {v.split()[0] for v in verbs} == set(_parsers())
    assert len(CASES) > 400


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSIM_PROGRESS", "0")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)


# Verbs whose legal values run an estimate or the demo (seconds each over ~100 values).
SLOW = {
    "train",
    "infer",
    "plan",
    "compare-workload",
    "demo",
    "dra simulate",
    "serve",
    "torch-profile",
    "torch-demo",
    "sweep",
    "tune",
}


@pytest.mark.parametrize(
    "verb", [pytest.param(v, marks=[pytest.mark.slow] if v in SLOW else []) for v in sorted(BASES)]
)
def test_hostile_values_never_end_in_a_traceback(verb, capsys, tmp_path):
    table = _status_table()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    failures = []
    for _, argv in (c for c in CASES if c[0] == verb):
        argv = [a.replace("=FIFO", f"={fifo}") for a in argv]
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse's own errors
            rc = exc.code
        except BaseException as exc:
            failures.append((argv, f"escaped main: {type(exc).__name__}: {exc}"))
            continue
        out, err = capsys.readouterr()
        why = _judge(rc, out, err, table)
        if why:
            failures.append(([a[:60] for a in argv], why))
    assert not failures, failures[:5]
    assert stat.S_ISFIFO(fifo.stat().st_mode), "a writer replaced the FIFO with a file"


def _judge(rc: int, out: str, err: str, table: dict[int, str]) -> str | None:
    if rc not in table:
        return f"status {rc} is not in the README's table"
    if rc == cli_main.EXIT_INTERNAL or "internal error" in err:
        return f"internal error: {err.strip()[:300]}"
    if "Traceback" in err or "Traceback" in out:
        return "a traceback"
    lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
    if rc == cli_main.EXIT_USAGE:
        if len(lines) != 1 or "error" not in lines[0] or not lines[0].startswith("trnsim"):
            return f"status 2 with {len(lines)} lines: {err.strip()[:300]}"
        if max(len(word) for word in lines[0].split()) > 300:
            return "a 300-character word in the error line (a long value echoed whole)"
    return None


@pytest.mark.parametrize("name", ["fifo", "/dev/null", "/dev/zero"])
def test_an_output_path_must_be_a_regular_file(tmp_path, name):
    """A PNG written whole is renamed over its path: over a device that replaced the device
    (``compare-workload --png /dev/zero``, run as root, left /dev/zero a PNG file).
    ``output_path`` only checks (it never writes the path), so this test is safe to run."""
    from trnsim.errors import UsageError
    from trnsim.report.output import output_path

    path = tmp_path / name if name == "fifo" else Path(name)
    if name == "fifo":
        os.mkfifo(path)
    with pytest.raises(UsageError, match="not a regular file"):
        output_path(path, "--png")
