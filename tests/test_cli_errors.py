"""The CLI's one error path, per class of mistake, through a real ``trnsim`` process.

Every class ends in its exit status (0 ok, 1 a check failed, 2 bad usage or input, 130 Ctrl-C,
141 closed stdout, 143 SIGTERM) and, for errors, exactly one stderr line and no traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from foreground import sigint_default

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "kernels"
SOFTMAX = str(EXAMPLES / "softmax.py")
TUTORIAL = str(EXAMPLES / "timing" / "matmul_tutorial.py")
HBM_COPY = str(EXAMPLES / "timing" / "hbm_copy.py")
SMALL = ["--arg", "rows=256", "--arg", "cols=256"]


def trnsim(
    *argv: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRNSIM_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "trnsim", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=env,
    )


def one_line_error(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("trnsim"), lines[0]
    return lines[0]


def kernel_file(tmp_path: Path, body: str, name: str = "k.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


GOOD = """\
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, t)
    return out


def make_inputs(rng, rows=128, cols=64):
    return rng.standard_normal((rows, cols)).astype(np.float32)
"""


# ---- 2: bad flag values and names, for every verb owned here --------------------------------

BAD_USAGE = [  # (argv, text the one line must hold: the value, and what exists where useful)
    (["run", SOFTMAX, "--seed", "-1"], "'-1'"),
    (["run", SOFTMAX, "--seed", "abc"], "'abc'"),
    (["run", SOFTMAX, "--rtol", "-1"], "--rtol"),
    (["run", SOFTMAX, "--rtol", "nan"], "'nan'"),
    (["run", SOFTMAX, "--atol", "inf"], "'inf'"),
    (["run", SOFTMAX, "--target", "gen9"], "'gen9'"),
    (["run", SOFTMAX, "--kernel", "nope"], "softmax"),
    (["run", SOFTMAX, "--max-instructions", "0"], "'0'"),
    (["run", SOFTMAX, "--timeout", "-5"], "'-5'"),
    (["run", SOFTMAX, "--arg", "n=1"], "n"),
    (["run", SOFTMAX, "--nosuch-flag"], "--nosuch-flag"),
    (["run", "/nonexistent/kernel.py"], "/nonexistent/kernel.py"),
    (["run", "/tmp"], "directory"),
    (["run", "/dev/null"], "not a regular file"),
    (["run", SOFTMAX, "--kernel", ""], "kernels: softmax"),
    (["run", SOFTMAX, "--timeout", "1e12"], "'1e12'"),
    (["profile", TUTORIAL, "--arg", "M=abc"], "M=abc"),
    (["profile", TUTORIAL, "--arg", "M=nan"], "M=nan"),
    (["profile", TUTORIAL, "--arg", "M=1e400"], "M=1e400"),
    (["profile", TUTORIAL, "--arg", "M=-128", "--arg", "empty=true"], "M=-128"),
    (["profile", TUTORIAL, "--arg", "M=99999999999", "--arg", "empty=true"], "M=99999999999"),
    (["profile", TUTORIAL, "--arg", "M=1.5", "--arg", "empty=true"], "matmul_tutorial.py:"),
    (["profile", TUTORIAL, "--arg", "nosuch=1"], "M, K, N, empty"),
    (["profile", TUTORIAL, "--arg", "M"], "KEY=VALUE"),
    (["profile", TUTORIAL, "--seed", "-1"], "'-1'"),
    (["profile", HBM_COPY, "--active-cores", "0"], "'0'"),
    (["profile", HBM_COPY, "--active-cores", "-1"], "'-1'"),
    (["profile", HBM_COPY, "--active-cores", "100"], "1..8"),
    (["profile", HBM_COPY, *SMALL, "--trace", "/nonexistent/dir/t.json"], "/nonexistent/dir"),
    (["profile", HBM_COPY, *SMALL, "--png", "/tmp"], "directory"),
    (["profile", HBM_COPY, *SMALL, "--out-dir", "/nonexistent/dir"], "/nonexistent/dir"),
    (["profile", HBM_COPY, *SMALL, "--json", "--trace", "/"], "directory"),
    (["profile", HBM_COPY, *SMALL, "--trace", ""], "empty path"),
    (["profile", HBM_COPY, *SMALL, "--out-dir", ""], "empty path"),
    (["profile", HBM_COPY, *SMALL, "--png", "/proc/x.png"], "/proc"),
    (["specs", "trn9"], "trn3-gen2-ultraserver"),
    (["specs", ""], "valid"),
    (["specs", "trn3", "--nosuch"], "--nosuch"),
    (["compare", "trn3"], "two presets"),
    (["compare", "trn3", "trn9"], "trn9"),
    (["compare", "trn3", "trn3-gen2"], "one kind"),
    (["compare", "trn3", "trn2", "--keys", "nosuch"], "peak_flops"),
    (["demo", "--only", "nosuch"], "Hardware catalog"),
    (["nosuch-verb"], "nosuch-verb"),
]


@pytest.mark.parametrize("argv,text", BAD_USAGE, ids=[" ".join(a) for a, _ in BAD_USAGE])
def test_bad_usage_exits_2_with_one_line(argv, text, tmp_path):
    line = one_line_error(trnsim(*argv, cwd=tmp_path), 2)
    assert "error" in line and text in line
    assert not list(tmp_path.iterdir()), "nothing written on a usage error"


# ---- 2: kernel files that cannot be loaded or fed ----------------------------------------------

BAD_FILES = {
    "syntax": ("import nki\ndef f(:\n    pass\n", "k.py:2", "SyntaxError"),
    "name_at_import": ("import nki\nx = undefined_name\n", "k.py:2", "NameError"),
    "import_error": ("import nki\nimport no_such_module_xyz\n", "k.py:2", "ModuleNotFoundError"),
    "raise_at_import": ("raise RuntimeError('boom')\n", "k.py:1", "RuntimeError: boom"),
    "no_kernel": ("x = 1\n", "defines no @nki.jit kernel", ""),
    "make_inputs_raises": (
        GOOD.replace("    return rng.standard_normal", "    1 / 0\n    return rng.standard_normal"),
        "k.py:16",
        "ZeroDivisionError",
    ),
    "golden_raises": (GOOD + "\n\ndef golden(x):\n    return x.nosuch\n", "k.py:20", "golden"),
    "bad_tolerance": (
        GOOD + "\n\ndef golden(x):\n    return x\n\n\nTOLERANCE = {'rtol': -1}\n",
        "TOLERANCE",
        "-1",
    ),
    "nan_tolerance": (
        GOOD + "\n\ndef golden(x):\n    return x\n\n\nTOLERANCE = {'atol': float('nan')}\n",
        "TOLERANCE",
        "nan",
    ),
}


@pytest.mark.parametrize("verb", ["run", "profile"])
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_kernel_file_exits_2_at_its_line(case, verb, tmp_path):
    body, where, what = BAD_FILES[case]
    if verb == "profile" and case in ("golden_raises", "bad_tolerance", "nan_tolerance"):
        pytest.skip("profile does not check a golden")
    path = kernel_file(tmp_path, body)
    line = one_line_error(trnsim(verb, path, "--json", cwd=tmp_path), 2)
    assert where in line and what in line


# ---- 1: a check failed -----------------------------------------------------------------------

FAILING = {
    "raises_while_running": (
        GOOD.replace("    t = nl.load(x)\n", "    t = nl.load(x)\n    y = undefined_helper(t)\n"),
        "k.py:11",
        "NameError",
    ),
    "illegal": (
        GOOD.replace(
            "    t = nl.load(x)\n",
            "    t = nl.load(x)\n    u = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)\n",
        ),
        "k.py:11",
        "partition",
    ),
    "python_loop_timeout": (
        GOOD.replace("    t = nl.load(x)\n", "    while True:\n        pass\n"),
        "k.py:10",
        "--timeout",
    ),
    "instruction_budget": (
        GOOD.replace("    t = nl.load(x)\n", "    while True:\n        t = nl.load(x)\n"),
        "k.py:11",
        "--max-instructions",
    ),
}


@pytest.mark.parametrize("verb", ["run", "profile"])
@pytest.mark.parametrize("case", sorted(FAILING))
def test_kernel_errors_exit_1_at_the_kernel_line(case, verb, tmp_path):
    body, where, what = FAILING[case]
    path = kernel_file(tmp_path, body)
    bounds = ["--timeout", "2", "--max-instructions", "500"]
    line = one_line_error(trnsim(verb, path, "--json", *bounds, cwd=tmp_path), 1)
    assert where in line and what in line


def test_lnc2_kernel_looping_in_python_is_stopped(tmp_path):
    body = GOOD.replace("    t = nl.load(x)\n", "    while True:\n        pass\n")
    path = kernel_file(tmp_path, body + "\n\ncopy2 = copy[2]\nKERNEL = 'copy2'\n")
    start = time.monotonic()
    line = one_line_error(trnsim("run", path, "--timeout", "1"), 1)
    assert "k.py:10" in line and time.monotonic() - start < 30


def test_wrong_output_without_tolerance_fails(tmp_path):
    # max abs error 3.9 and no TOLERANCE: the dtype's default tolerance applies and fails
    body = GOOD + "\n\ndef golden(x):\n    y = x.copy()\n    y[3, 5] += 3.9\n    return y\n"
    proc = trnsim("run", kernel_file(tmp_path, body), "--json")
    assert proc.returncode == 1, proc.stderr
    assert '"passed": false' in proc.stdout and "default for float32" in proc.stdout


# ---- signals, pipes, files -------------------------------------------------------------------

LOOP = GOOD.replace("    t = nl.load(x)\n", "    while True:\n        pass\n")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_and_terminate(sig, code, tmp_path):
    started = tmp_path / "started"  # make_inputs touches it: the kernel is about to loop
    body = LOOP.replace(
        "def make_inputs(rng, rows=128, cols=64):\n",
        f"def make_inputs(rng, rows=128, cols=64):\n    open({str(started)!r}, 'w').close()\n",
    )
    path = kernel_file(tmp_path, body)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trnsim", "run", path],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,  # Ctrl-C reaches it even when the tests run in background
    )
    deadline = time.monotonic() + 60  # a loaded machine may take a while to import
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv", [["specs", "--json"], ["run", SOFTMAX, "--json"], ["compare", "trn3", "trn2"]]
)
def test_closed_stdout_is_quiet(argv):
    proc = subprocess.Popen(
        [sys.executable, "-m", "trnsim", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader went away (like `| head -1`)
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert proc.returncode == 141 and err == ""


def test_sigterm_during_profile_leaves_no_temporary(tmp_path):
    body = GOOD.replace(
        "    t = nl.load(x)\n    nl.store(out, t)\n",
        "    t = nl.load(x)\n    for _ in range(n):\n        nl.store(out, t)\n",
    ).replace("def copy(x):", "def copy(x, n):")
    body = body.replace(
        "    return rng.standard_normal((rows, cols)).astype(np.float32)",
        "    return rng.standard_normal((rows, cols)).astype(np.float32), 40000",
    )
    path = kernel_file(tmp_path, body)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trnsim", "profile", path, "--out-dir", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = False
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.suffix == ".tmp" for p in out.iterdir()):
            proc.send_signal(signal.SIGTERM)
            seen = True
            break
        time.sleep(0.002)
    _, err = proc.communicate(timeout=60)
    assert seen, "the write was not caught in progress"
    assert proc.returncode == 143, err
    assert not [p for p in out.iterdir() if p.suffix == ".tmp"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_directory_is_refused_before_work(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    line = one_line_error(trnsim("profile", HBM_COPY, *SMALL, "--out-dir", str(locked)), 2)
    assert "not writable" in line and str(locked) in line


def test_profile_json_writes_nothing_unless_asked(tmp_path):
    proc = trnsim("profile", HBM_COPY, *SMALL, "--json", cwd=tmp_path)
    assert proc.returncode == 0 and '"files": {}' in proc.stdout
    assert not list(tmp_path.iterdir())
    proc = trnsim("profile", HBM_COPY, *SMALL, "--json", "--out-dir", str(tmp_path))
    assert proc.returncode == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["hbm_copy.hbm_copy.gen4.timeline.png", "hbm_copy.hbm_copy.gen4.trace.json"]
    assert {p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == {0o644}
