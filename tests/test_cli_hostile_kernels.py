"""Hostile kernel files and flags for ``trnsim run`` and ``trnsim profile``: every one ends in the
README's exit status, one line on stderr naming the file and line, no traceback, no "internal
error".

The cases are generated: each exception type raised at each stage of a kernel file (loading,
``make_inputs``, the kernel, ``golden``), syntax errors, weird module-level names, weird inputs,
weird returns, float and negative shapes, huge numbers, bad flags, infinite loops under a short
``--timeout``. They run in this process through ``trnsim.cli.main.main`` (fast: no interpreter
start per case); the ones that need a real process (signals, a process ended by its watchdog)
start one.
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
from trnsim.cli.main import main
from trnsim.nki import install

install()  # the nki shim's imports are done once, not inside the first case's time limit

ROOT = Path(__file__).resolve().parents[1]
HBM_COPY = str(ROOT / "examples" / "kernels" / "timing" / "hbm_copy.py")

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\nimport numpy as np\n"
COPY = """

@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out
"""
INPUTS = """

def make_inputs(rng):
    return rng.standard_normal((128, 64)).astype(np.float32)
"""
GOLDEN = """

def golden(x):
    return x
"""
GOOD = HEAD + COPY + INPUTS + GOLDEN

# ---- the one-line contract -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_process_exit(monkeypatch):
    """In this process the CLI's last resorts (ending the process when a kernel file's code
    keeps catching a stop, or never returns to Python) would end pytest: off here; the tests
    that need them start a process of their own."""
    import contextlib

    import trnsim.cli.main
    import trnsim.cli.run

    for module in (trnsim.cli.main, trnsim.cli.run):
        monkeypatch.setattr(module, "hard_stop", lambda verb: lambda exc: None)
        monkeypatch.setattr(module, "hard_deadline", lambda *a: contextlib.nullcontext())


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``trnsim ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's one-line usage error
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, out: str, err: str, want: int) -> str:
    """The README's promise: status ``want``, exactly one stderr line, no traceback, no
    internal error."""
    assert code == want, (code, err, out[-500:])
    assert "Traceback" not in err and "Traceback" not in out
    assert "internal error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("trnsim"), lines[0]
    return lines[0]


def marked_line(text: str, marker: str = "# HERE") -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if marker in s)


def write(tmp_path: Path, text: str, name: str = "k.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- any exception, at any stage -------------------------------------------------------------

# what the user's code raises: (id, the body of a helper function, its raising line marked)
RAISES = [
    ("ValueError", "raise ValueError('bad value')  # HERE"),
    ("ZeroDivisionError", "return 1 / 0  # HERE"),
    ("AssertionError", "assert False, 'nope'  # HERE"),
    ("ImportError", "import nosuch_module_xyz  # HERE"),
    ("MemoryError", "raise MemoryError  # HERE"),
    ("RecursionError", "def f(n):\n    return f(n + 1)  # HERE\nf(0)"),
    ("SystemExit(0)", "raise SystemExit(0)  # HERE"),
    ("SystemExit(3)", "raise SystemExit(3)  # HERE"),
    ("sys.exit(text)", "import sys\nsys.exit('bye')  # HERE"),
    ("KeyboardInterrupt", "raise KeyboardInterrupt  # HERE"),
    ("GeneratorExit", "raise GeneratorExit('g')  # HERE"),
    ("BaseException", "raise BaseException('base')  # HERE"),
    ("custom BaseException", "class Boom(BaseException):\n    pass\nraise Boom('boom')  # HERE"),
    ("StopIteration", "raise StopIteration  # HERE"),
    ("ExceptionGroup", "raise ExceptionGroup('eg', [ValueError(1)])  # HERE"),
    (
        "__str__ raises",
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n"
        "raise E()  # HERE",
    ),
    (
        "__str__ raises BaseException",
        "class E(Exception):\n    def __str__(self):\n        raise SystemExit(9)\n"
        "raise E()  # HERE",
    ),
    ("multi-line message", "raise ValueError('first\\nsecond\\nthird')  # HERE"),
    ("huge message", "raise ValueError('x' * 1_000_000)  # HERE"),
    ("non-str argument", "raise ValueError(object(), 3, [1])  # HERE"),
]

# where it is raised: (stage, how the file calls the helper, exit status, words in the line)
STAGES = [
    ("module", HEAD + COPY + INPUTS + "\n_boom()\n", 2, "while loading the kernel file"),
    (
        "make_inputs",
        HEAD + COPY + "\n\ndef make_inputs(rng):\n    return _boom()\n",
        2,
        "make_inputs",
    ),
    ("golden", HEAD + COPY + INPUTS + "\n\ndef golden(x):\n    return _boom()\n", 2, "golden"),
    (
        "kernel",
        HEAD + "\n\n@nki.jit\ndef copy(x):\n    _boom()\n    return x\n" + INPUTS,
        1,
        "raised by kernel 'copy'",
    ),
]


def _with_helper(stage_text: str, body: str) -> str:
    helper = "\n\ndef _boom():\n" + textwrap.indent(body, "    ") + "\n"
    head, rest = stage_text[: len(HEAD)], stage_text[len(HEAD) :]
    return head + helper + rest


@pytest.mark.parametrize("stage,text,status,words", STAGES, ids=[s[0] for s in STAGES])
@pytest.mark.parametrize("exc,body", RAISES, ids=[r[0] for r in RAISES])
def test_any_exception_at_any_stage_is_one_line_at_its_line(
    stage, text, status, words, exc, body, tmp_path, capsys
):
    src = _with_helper(text, body)
    path = write(tmp_path, src)
    line = one_line(*cli(["run", path], capsys), status)
    assert f"k.py:{marked_line(src)}:" in line, line
    assert words in line, line
    assert len(line) < 600, line  # a million-character message is cut


# ---- files that cannot be read or compiled ---------------------------------------------------

SYNTAX = [  # (id, file bytes, the line the error must name)
    ("unclosed paren", b"import nki\nx = (\n", 2),
    ("bad indent", b"import nki\n\tx = 1\n", 2),
    ("return outside def", b"x = 1\nreturn x\n", 2),
    ("nonlocal at module", b"x = 1\n\nnonlocal x\n", 3),
    ("null byte", b"x = 1\ny = 2\x00\n", 2),
    ("invalid utf-8", b"x = 1\ny = '\xff\xfe'\n", 2),
    ("bad coding cookie", b"# -*- coding: nosuch -*-\nx = 1\n", 1),
    ("f-string", b"x = 1\ny = f'{'\n", 2),
    ("lone else", b"x = 1\nelse:\n    pass\n", 2),
    ("deep nesting", b"x = " + b"(" * 300 + b"1" + b")" * 300 + b"\n", 1),
    ("binary", bytes(range(256)) * 4, 1),
    ("only a BOM and garbage", b"\xef\xbb\xbf)))\n", 1),
]


@pytest.mark.parametrize("data,line", [s[1:] for s in SYNTAX], ids=[s[0] for s in SYNTAX])
def test_a_file_that_does_not_compile_names_its_line(data, line, tmp_path, capsys):
    path = tmp_path / "k.py"
    path.write_bytes(data)
    msg = one_line(*cli(["run", str(path)], capsys), 2)
    assert f"k.py:{line}: SyntaxError" in msg, msg
    assert "frozen" not in msg and "importlib" not in msg


BAD_PATHS = [  # (id, make the path, words)
    ("missing", lambda d: str(d / "nosuch.py"), "does not exist"),
    ("directory", lambda d: str(d), "is a directory"),
    ("not .py", lambda d: write(d, GOOD, "k.txt"), "not a Python file"),
    ("device", lambda d: "/dev/null", "not a regular file"),
    ("empty name", lambda d: "", "does not exist"),
]


@pytest.mark.parametrize("make,words", [b[1:] for b in BAD_PATHS], ids=[b[0] for b in BAD_PATHS])
@pytest.mark.parametrize("verb", ["run", "profile"])
def test_a_path_that_is_no_kernel_file(verb, make, words, tmp_path, capsys):
    msg = one_line(
        *cli([verb, make(tmp_path), "--no-files"][: 2 if verb == "run" else 3], capsys), 2
    )
    assert words in msg, msg


def test_an_unreadable_file_names_it(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, GOOD)
    real_open = open

    def refuse(file, *args, **kwargs):  # root reads any file: refuse as the kernel sees it
        if str(file) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refuse)
    msg = one_line(*cli(["run", path], capsys), 2)
    assert "cannot read kernel file" in msg and "Permission denied" in msg and "k.py" in msg


# ---- module-level names of the convention ----------------------------------------------------

NAMES = [  # (id, text appended to a good file, status, words)
    ("KERNEL list", "KERNEL = ['copy']", 2, "KERNEL = ['copy'] must be a kernel's name"),
    ("KERNEL int", "KERNEL = 3", 2, "KERNEL = 3"),
    ("KERNEL unknown", "KERNEL = 'nosuch'", 2, "kernel 'nosuch' not found"),
    ("KERNEL dict", "KERNEL = {'a': 1}", 2, "KERNEL ="),
    ("make_inputs int", "make_inputs = 3", 2, "make_inputs is int"),
    ("make_inputs str", "make_inputs = 'x' * 10_000", 2, "not a function"),
    ("golden int", "golden = 3", 2, "golden is int"),
    (
        "golden class",
        "class golden:\n    def __init__(self, x):\n        raise TypeError('g')",
        2,
        "golden",
    ),
    ("TOLERANCE 400 digits", "TOLERANCE = {'rtol': 10**400}", 2, "TOLERANCE: rtol"),
    ("TOLERANCE nan", "TOLERANCE = {'atol': float('nan')}", 2, "TOLERANCE: atol"),
    ("TOLERANCE negative", "TOLERANCE = {'rtol': -1}", 2, "TOLERANCE: rtol"),
    ("TOLERANCE str", "TOLERANCE = {'rtol': 'tight'}", 2, "TOLERANCE: rtol"),
    ("TOLERANCE list value", "TOLERANCE = {'rtol': [1e-3]}", 2, "TOLERANCE: rtol"),
    ("TOLERANCE bad key", "TOLERANCE = {'tol': 1}", 2, "TOLERANCE"),
    ("TOLERANCE list", "TOLERANCE = [1e-3]", 2, "TOLERANCE"),
    ("TOLERANCE huge int key", "TOLERANCE = {10**5000 - 10**5000: 1}", 2, "TOLERANCE"),
    ("UNWRITTEN empty", "UNWRITTEN = ''", 2, "UNWRITTEN"),
    ("UNWRITTEN int", "UNWRITTEN = 3", 2, "UNWRITTEN"),
    ("UNWRITTEN list", "UNWRITTEN = ['a']", 2, "UNWRITTEN"),
    (
        "module __getattr__ raises",
        "def __getattr__(name):\n    raise SystemExit('no ' + name)",
        0,
        "",
    ),
    ("INPUTS too", "INPUTS = (1, 2, 3)", 0, ""),  # make_inputs comes first
]


@pytest.mark.parametrize("extra,status,words", [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_module_level_names_are_checked(extra, status, words, tmp_path, capsys):
    path = write(tmp_path, GOOD + "\n\n" + extra + "\n")
    code, out, err = cli(["run", path], capsys)
    if status == 0:
        assert code == 0 and err == "", err
        return
    msg = one_line(code, out, err, status)
    assert words in msg, msg


# ---- inputs ----------------------------------------------------------------------------------

INPUT_CASES = [  # (id, what make_inputs returns, status, words)
    ("None", "None", 2, "input 0 = None"),
    ("dict", "{'x': np.zeros((4, 4), np.float32)}", 2, "as a dict"),
    ("set", "{1, 2}", 2, "as a set"),
    ("generator", "(np.zeros((4, 4)) for _ in range(2))", 2, "as a generator"),
    ("string", "'x'", 1, "raised by kernel 'copy'"),  # the kernel's x.shape
    ("object", "object()", 1, "raised by kernel 'copy'"),
    ("object array", "np.array([object(), object()])", 2, "not an NKI dtype"),
    ("complex", "np.zeros((4, 4), np.complex64)", 2, "not an NKI dtype"),
    ("structured", "np.zeros(4, dtype=[('a', 'f4'), ('b', 'i4')])", 2, "not an NKI dtype"),
    ("empty", "np.zeros((0, 4), np.float32)", 2, "empty tensor"),
    ("too many", "(np.zeros((4, 4), np.float32),) * 3", 2, "3 input(s)"),
    ("too few", "()", 2, "0 input(s)"),
    ("str dtype", "np.array(['a', 'b'])", 2, "not an NKI dtype"),
    ("datetime", "np.array(['2020-01-01'], dtype='datetime64[D]')", 2, "not an NKI dtype"),
    ("huge int", "10**100", 1, ""),
    ("nan float", "float('nan')", 1, ""),
    ("list of None", "[None]", 2, "input 0 = None"),
    ("matrix", "np.asmatrix(np.ones((128, 64), np.float32))", 0, ""),
    ("masked", "np.ma.masked_array(np.ones((128, 64), np.float32))", 0, ""),
    ("read-only", "np.lib.stride_tricks.as_strided(np.ones((128, 64), np.float32))", 0, ""),
    ("non-contiguous", "np.ones((128, 128), np.float32)[:, ::2]", 0, ""),
    ("fortran order", "np.asfortranarray(np.ones((128, 64), np.float32))", 0, ""),
    ("big-endian", "np.ones((128, 64), dtype='>f4')", None, ""),
]


@pytest.mark.parametrize(
    "returns,status,words", [c[1:] for c in INPUT_CASES], ids=[c[0] for c in INPUT_CASES]
)
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.asmatrix
def test_inputs_of_any_type(returns, status, words, tmp_path, capsys):
    text = HEAD + COPY + f"\n\ndef make_inputs(rng):\n    return {returns}\n" + GOLDEN
    code, out, err = cli(["run", write(tmp_path, text)], capsys)
    if status == 0:
        assert code == 0, err
        return
    if status is None:  # either accepted or refused, but in one line
        status = code if code in (0, 1, 2) else -1
        if code == 0:
            return
    msg = one_line(code, out, err, status)
    assert words in msg, msg


# ---- what a kernel returns -------------------------------------------------------------------

RETURNS = [  # (id, kernel body, status, words)
    ("None", "nl.load(x)\n    return None", 1, "returns None"),
    ("nothing", "nl.load(x)", 1, "returns None"),
    ("int", "return 3", 1, "returns int"),
    ("SBUF tile", "return nl.load(x)", 1, "output-not-hbm"),
    ("PSUM tile", "return nl.ndarray((128, 64), nl.float32, buffer=nl.psum)", 1, "in PSUM"),
    ("tuple with an SBUF tile", "return (x, nl.load(x))", 1, "in SBUF"),
    ("tuple with None", "return (x, None)", 1, "returns NoneType"),
    ("dict with an SBUF tile", "return {'a': nl.load(x)}", 1, "in SBUF"),
    ("the input, unwritten", "return x", 0, ""),
    (
        "a new tensor, unwritten",
        "return nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)",
        1,
        "never written",
    ),
]


@pytest.mark.parametrize("body,status,words", [r[1:] for r in RETURNS], ids=[r[0] for r in RETURNS])
def test_what_a_kernel_returns(body, status, words, tmp_path, capsys):
    text = HEAD + f"\n\n@nki.jit\ndef copy(x):\n    {body}\n" + INPUTS
    code, out, err = cli(["run", write(tmp_path, text)], capsys)
    if status == 0:
        assert code == 0, err
        return
    if words == "never written":  # a report and a FAIL, not an error line
        assert code == 1 and "never written" in " ".join(out.split()) and err == "", (out, err)
        return
    msg = one_line(code, out, err, status)
    assert words in msg and "k.py:" in msg, msg


# ---- shapes ----------------------------------------------------------------------------------

SHAPES = [  # (id, shape text, words)
    ("float", "(128, 64.5)", "64.5"),
    ("nan", "(128, float('nan'))", "nan"),
    ("inf", "(128, float('inf'))", "inf"),
    ("string", "(128, '64')", "'64'"),
    ("None", "(128, None)", "None"),
    ("negative", "(-1, 64)", "-1"),
    ("bool", "(True, 64)", "True"),
    ("huge", "(128, 10**30)", "sbuf-capacity"),
    ("complex", "(128, 1j)", "1j"),
]


@pytest.mark.parametrize("shape,words", [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize("buffer", ["sbuf", "shared_hbm"])
def test_a_shape_is_whole_numbers(shape, words, buffer, tmp_path, capsys):
    if words == "sbuf-capacity" and buffer == "shared_hbm":
        words = "hbm-capacity"
    text = (
        HEAD
        + (
            "\n\n@nki.jit\ndef copy(x):\n"
            f"    t = nl.ndarray({shape}, nl.float32, buffer=nl.{buffer})  # HERE\n    return x\n"
        )
        + INPUTS
    )
    msg = one_line(*cli(["run", write(tmp_path, text)], capsys), 1)
    assert words in msg and f"k.py:{marked_line(text)}" in msg, msg


def test_a_float_shape_is_never_truncated_in_reshape(tmp_path, capsys):
    text = (
        HEAD
        + ("\n\n@nki.jit\ndef copy(x):\n    t = x.reshape((128, 32.5, 2))  # HERE\n    return x\n")
        + INPUTS
    )
    msg = one_line(*cli(["run", write(tmp_path, text)], capsys), 1)
    assert "32.5" in msg and f"k.py:{marked_line(text)}" in msg, msg


# ---- flags -----------------------------------------------------------------------------------

FLAGS = [  # (id, argv after the file, status, words)
    ("seed negative", ["--seed", "-1"], 2, "'-1'"),
    ("seed inf", ["--seed", "1e400"], 2, "1e400"),
    ("seed text", ["--seed", "abc"], 2, "abc"),
    ("seed huge", ["--seed", str(10**40)], 0, ""),
    ("timeout zero", ["--timeout", "0"], 2, "'0'"),
    ("timeout negative", ["--timeout", "-3"], 2, "'-3'"),
    ("timeout nan", ["--timeout", "nan"], 2, "nan"),
    ("timeout huge", ["--timeout", "1e300"], 2, "out of range"),
    ("max-instructions zero", ["--max-instructions", "0"], 2, "'0'"),
    ("max-instructions fraction", ["--max-instructions", "1.5"], 2, "1.5"),
    ("max-instructions 1", ["--max-instructions", "1"], 1, "instruction-budget"),
    ("max-instructions huge", ["--max-instructions", "1e30"], 0, ""),
    ("arg no =", ["--arg", "rows"], 2, "KEY=VALUE"),
    ("arg bad key", ["--arg", "1x=2"], 2, "not a parameter name"),
    ("arg not literal", ["--arg", "rows=abc"], 2, "not a Python literal"),
    ("arg nan", ["--arg", "rows=nan"], 2, "not a Python literal"),
    ("arg inf", ["--arg", "rows=1e999"], 2, "finite"),
    ("arg nan in tuple", ["--arg", "rows=(1, 1e999)"], 2, "finite"),
    ("arg 5000 digits", ["--arg", "rows=" + "9" * 5000], 2, "at most 4,300 digits"),
    (
        "arg deep nesting",
        ["--arg", "rows=" + "(" * 10_000 + ")" * 10_000],
        2,
        "not a Python literal",
    ),
    ("arg twice", ["--arg", "rows=1", "--arg", "rows=2"], 2, "given twice"),
    ("arg unknown", ["--arg", "nosuch=1"], 2, "no such parameter"),
    ("arg rejected", ["--arg", "rows='x'"], 2, "rejected --arg"),
    ("arg float rows", ["--arg", "rows=64.5"], 2, "rejected --arg"),
    ("arg huge rows", ["--arg", "rows=10**12"], 2, "not a Python literal"),
    ("arg negative rows", ["--arg", "rows=-4"], 2, "rejected --arg"),
    ("kernel unknown", ["--kernel", "nosuch"], 2, "not found"),
    ("kernel empty", ["--kernel", ""], 2, "not found"),
    ("target unknown", ["--target", "gen9"], 2, "gen9"),
    ("rtol negative", ["--rtol", "-1"], 2, "'-1'"),
    ("atol nan", ["--atol", "nan"], 2, "nan"),
]
SIZED = (
    HEAD
    + COPY
    + """

def make_inputs(rng, rows=128, cols=64):
    return rng.standard_normal((rows, cols)).astype(np.float32)
"""
    + GOLDEN
)


@pytest.mark.parametrize("argv,status,words", [f[1:] for f in FLAGS], ids=[f[0] for f in FLAGS])
def test_run_flags(argv, status, words, tmp_path, capsys):
    code, out, err = cli(["run", write(tmp_path, SIZED), *argv], capsys)
    if status == 0:
        assert code == 0, err
        return
    msg = one_line(code, out, err, status)
    assert words in msg, msg


PROFILE_FLAGS = [  # (id, argv after the file, status, words)
    ("trace = png", ["--trace", "{d}/a.json", "--png", "{d}/a.json"], 2, "same file"),
    ("trace = kernel file", ["--trace", "{k}"], 2, "the kernel file"),
    ("png = kernel file", ["--png", "{k}", "--trace", "{d}/t.json"], 2, "the kernel file"),
    ("png = trace via ..", ["--trace", "{d}/a.json", "--png", "{d}/../{n}/a.json"], 2, "same file"),
    ("trace into a missing dir", ["--trace", "{d}/no/t.json"], 2, "does not exist"),
    ("trace is a dir", ["--trace", "{d}"], 2, "is a directory"),
    ("out-dir missing", ["--out-dir", "{d}/nosuch"], 2, "not an existing directory"),
    ("no-files and trace", ["--no-files", "--trace", "{d}/t.json"], 2, "contradicts"),
    ("active-cores 0", ["--active-cores", "0", "--no-files"], 2, "'0'"),
    ("active-cores 9", ["--active-cores", "9", "--no-files"], 2, "1..8"),
    ("timeout 1e-9", ["--timeout", "1e-9", "--no-files"], 2, "out of range"),
]


@pytest.mark.parametrize(
    "argv,status,words", [f[1:] for f in PROFILE_FLAGS], ids=[f[0] for f in PROFILE_FLAGS]
)
def test_profile_output_flags(argv, status, words, tmp_path, capsys):
    k = write(tmp_path, GOOD)
    argv = [a.format(d=tmp_path, k=k, n=tmp_path.name) for a in argv]
    msg = one_line(*cli(["profile", k, *argv], capsys), status)
    assert words in msg, msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.py"]  # nothing written


def test_profile_refuses_a_symlink_to_the_other_output(tmp_path, capsys):
    k = write(tmp_path, GOOD)
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    argv = ["profile", k, "--trace", str(tmp_path / "a.json"), "--png", str(tmp_path / "b.json")]
    msg = one_line(*cli(argv, capsys), 2)
    assert "same file" in msg


# ---- a kernel beside its modules -------------------------------------------------------------


def test_a_kernel_file_imports_a_module_beside_it(tmp_path, capsys):
    (tmp_path / "helpers_beside.py").write_text("ROWS = 128\n")
    text = (
        HEAD
        + "import helpers_beside\n"
        + COPY
        + (
            "\n\ndef make_inputs(rng):\n    import helpers_beside as h\n"
            "    return np.ones((h.ROWS, 8), np.float32)\n"
        )
        + GOLDEN
    )
    code, out, err = cli(["run", write(tmp_path, text)], capsys)
    assert code == 0 and "pass" in out, err
    assert "helpers_beside" not in sys.modules  # forgotten after the run
    assert str(tmp_path) not in sys.path


def test_an_error_in_a_module_beside_it_names_that_module(tmp_path, capsys):
    (tmp_path / "broken_beside.py").write_text("x = 1\ny = (\n")
    text = HEAD + "import broken_beside  # HERE\n" + COPY + INPUTS
    msg = one_line(*cli(["run", write(tmp_path, text)], capsys), 2)
    assert "broken_beside.py:2: SyntaxError" in msg, msg


def test_a_raise_in_a_module_beside_it_names_that_module(tmp_path, capsys):
    (tmp_path / "raising_beside.py").write_text("x = 1\nraise SystemExit('gone')\n")
    text = HEAD + "import raising_beside\n" + COPY + INPUTS
    msg = one_line(*cli(["run", write(tmp_path, text)], capsys), 2)
    assert "raising_beside.py:2: SystemExit: gone" in msg, msg


# ---- runs that end ---------------------------------------------------------------------------

LOOPS = [  # (id, file text, words)
    ("module", HEAD + "\nwhile True:  # HERE\n    pass\n", "loading k.py"),
    (
        "make_inputs",
        HEAD + COPY + "\n\ndef make_inputs(rng):\n    while True:  # HERE\n        pass\n",
        "make_inputs",
    ),
    (
        "kernel",
        HEAD + "\n\n@nki.jit\ndef copy(x):\n    while True:  # HERE\n        pass\n" + INPUTS,
        "kernel 'copy'",
    ),
    (
        "golden",
        HEAD + COPY + INPUTS + "\n\ndef golden(x):\n    while True:  # HERE\n        pass\n",
        "golden()",
    ),
    (
        "kernel issuing instructions",
        HEAD
        + "\n\n@nki.jit\ndef copy(x):\n    while True:\n        t = nl.load(x)  # HERE\n"
        + INPUTS,
        "kernel 'copy'",
    ),
    (
        "except Exception swallows nothing",
        HEAD
        + COPY
        + "\n\ndef make_inputs(rng):\n    while True:\n        try:\n"
        + "            sum(range(1000))  # HERE\n        except Exception:\n            pass\n",
        "make_inputs",
    ),
]


@pytest.mark.parametrize("text,words", [c[1:] for c in LOOPS], ids=[c[0] for c in LOOPS])
def test_a_loop_anywhere_ends_at_the_time_limit(text, words, tmp_path, capsys):
    t0 = time.monotonic()
    late = words in ("kernel 'copy'", "golden()")  # the stages before it must fit in the limit
    limit = "1.5" if late else "0.5"
    msg = one_line(*cli(["run", write(tmp_path, text), "--timeout", limit], capsys), 1)
    assert "timeout" in msg and f"{limit} s" in msg and words in msg, msg
    here = marked_line(text)
    assert any(f"k.py:{n})" in msg for n in (here, here + 1)), msg
    assert time.monotonic() - t0 < 20
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_profile_ends_at_the_time_limit_too(tmp_path, capsys):
    text = LOOPS[1][1]
    msg = one_line(*cli(["profile", write(tmp_path, text), "--timeout", "0.3"], capsys), 1)
    assert "timeout" in msg and "make_inputs" in msg


# ---- a real process: signals, and a stop the file's code keeps catching ----------------------


def _spawn(path: str, *argv: str) -> subprocess.Popen:
    env = {**os.environ, "TRNSIM_PROGRESS": "0"}
    return subprocess.Popen(
        [sys.executable, "-m", "trnsim", "run", path, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_default,  # Ctrl-C reaches it even when the tests run in background
    )


def _wait_for_loop(proc: subprocess.Popen, marker: Path) -> None:
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)


LOOPING = (
    HEAD
    + COPY
    + """

def make_inputs(rng):
    open(MARK, "w").close()
    while True:
        try:
            while True:  # HERE
                x = 1
        except {catch}:
            pass
"""
)


@pytest.mark.parametrize(
    "sig,status,words",
    [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_signal_ends_a_python_loop_naming_its_line(sig, status, words, tmp_path):
    mark = tmp_path / "started"
    text = f"MARK = {str(mark)!r}\n" + LOOPING.format(catch="Exception")
    proc = _spawn(write(tmp_path, text))
    _wait_for_loop(proc, mark)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    line = one_line(proc.returncode, out, err, status)
    assert words in line and "make_inputs" in line, line
    here = marked_line(text)
    assert any(f"k.py:{n})" in line for n in (here, here + 1)), line


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig,status,words",
    [(None, 1, "timeout"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
    ids=["timeout", "SIGTERM"],
)
def test_a_loop_that_catches_every_stop_still_ends(sig, status, words, tmp_path):
    mark = tmp_path / "started"
    text = f"MARK = {str(mark)!r}\n" + LOOPING.format(catch="BaseException")
    proc = _spawn(write(tmp_path, text), "--timeout", "3" if sig is None else "600")
    if sig is not None:
        _wait_for_loop(proc, mark)
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    line = one_line(proc.returncode, out, err, status)
    assert words in line and "kept catching the stop" in line and "k.py:" in line, line


def test_a_second_ctrl_c_ends_a_loop_that_catches_it(tmp_path):
    mark = tmp_path / "started"
    text = f"MARK = {str(mark)!r}\n" + LOOPING.format(catch="BaseException")
    proc = _spawn(write(tmp_path, text))
    _wait_for_loop(proc, mark)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    line = one_line(proc.returncode, out, err, 130)
    assert "interrupted" in line and "make_inputs" in line, line


@pytest.mark.slow
def test_a_call_that_never_returns_to_python_still_ends(tmp_path):
    # sum(range(...)) runs in C and never checks for signals: only the CLI's hard deadline
    # (faulthandler's C watchdog, trnsim.cli.main.hard_deadline) can end it
    text = HEAD + COPY + ("\n\ndef make_inputs(rng):\n    return sum(range(10**15))  # HERE\n")
    t0 = time.monotonic()
    proc = _spawn(write(tmp_path, text), "--timeout", "0.5")
    out, err = proc.communicate(timeout=120)
    line = one_line(proc.returncode, out, err, 1)
    assert "timeout" in line and "never returned to Python" in line, line
    assert f"k.py:{marked_line(text)})" in line, line
    assert time.monotonic() - t0 < 60


def test_a_bug_in_trnsim_is_still_an_internal_error(tmp_path, capsys, monkeypatch):
    # the bad-input cases above assert there is none; trnsim's own bugs must keep the line
    from trnsim.nki import kernelfile

    # (a builtin that fails as compare: a function defined here would be "the user's code")
    monkeypatch.setattr(kernelfile, "compare", divmod)
    code, _, err = cli(["run", write(tmp_path, GOOD)], capsys)
    assert code == 3 and "internal error: TypeError: divmod expected 2 arguments" in err, err
