"""``trnsim run kernel.py``: every example kernel file through the CLI, JSON keys, errors."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from trnsim.cli.main import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "kernels"
FILES = [
    ("matmul.py", None),
    ("matmul.py", "matmul_tiled"),
    ("softmax.py", None),
    ("norms.py", "rmsnorm"),
    ("norms.py", "layernorm"),
    ("flash_attention.py", None),
    ("mx_matmul.py", None),
    ("fp8_matmul.py", None),
    ("mxfp4_matmul.py", None),
    ("embedding_gather.py", None),
    ("embedding_gather.py", "embedding_update"),
    ("column_gather.py", None),
    ("column_gather.py", "scatter_columns"),
]


@pytest.mark.parametrize("name,kernel", FILES)
def test_every_example_runs_and_matches_its_golden(name, kernel, capsys):
    argv = ["run", str(EXAMPLES / name), "--json"] + (["--kernel", kernel] if kernel else [])
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["golden"] is True and out["passed"] is True
    assert out["max_rel_err"] < 0.01
    assert out["instructions"] == sum(out["instructions_by_engine"].values()) > 0
    if kernel:
        assert out["kernel"] == kernel


def test_table_output_names_errors_and_engines(capsys):
    assert main(["run", str(EXAMPLES / "softmax.py")]) == 0
    text = capsys.readouterr().out
    assert "max abs err" in text and "max rel err" in text and "pass" in text
    assert "vector" in text and "dma" in text


def test_tolerance_failure_exits_1(capsys):
    # bf16 output vs bf16 golden differs by up to 1 ulp somewhere: rtol=atol=0 must fail
    assert main(["run", str(EXAMPLES / "matmul.py"), "--rtol", "0", "--atol", "0"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_target_flag_selects_generation(capsys):
    assert main(["run", str(EXAMPLES / "softmax.py"), "--target", "gen2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "neuroncore-v2"


def test_mx_kernel_on_gen3_is_an_explained_error(capsys):
    assert main(["run", str(EXAMPLES / "mx_matmul.py"), "--target", "gen3"]) == 1
    err = capsys.readouterr().err
    assert "generation" in err and "quantize_mx needs NeuronCore-v4" in err
    assert "mx_matmul.py:" in err


def test_unknown_kernel_lists_the_kernels(capsys):
    assert main(["run", str(EXAMPLES / "norms.py"), "--kernel", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope' not found" in err and "rmsnorm, layernorm" in err


def _write(tmp_path, body: str) -> str:
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_illegal_kernel_names_rule_values_file_and_line(tmp_path, capsys):
    path = _write(
        tmp_path,
        """\
        import nki
        import nki.isa as nisa
        import nki.language as nl
        import numpy as np


        @nki.jit
        def bad(x):
            t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)
            return x


        def make_inputs(rng):
            return np.zeros((256, 4), np.float32)
        """,
    )
    assert main(["run", path]) == 1
    err = capsys.readouterr().err
    assert "partition-dim" in err and "256 partitions" in err and "128" in err
    assert "k.py:9" in err


def test_missing_inputs_and_no_golden(tmp_path, capsys):
    body = textwrap.dedent(
        """\
        import nki
        import nki.language as nl


        @nki.jit
        def k(x):
            return x
        """
    )
    path = _write(tmp_path, body)
    assert main(["run", path]) == 2
    assert "add 'def make_inputs(rng): return (x,)'" in capsys.readouterr().err
    path = _write(
        tmp_path, body + "\nimport numpy as np\nINPUTS = (np.ones((2, 3), np.float32),)\n"
    )
    assert main(["run", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["golden"] is False and out["max_abs_err"] is None


def test_no_kernel_and_missing_file(tmp_path, capsys):
    assert main(["run", _write(tmp_path, "x = 1\n")]) == 2
    assert "defines no @nki.jit kernel" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "absent.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_python_dash_m_goes_through_the_same_path():
    proc = subprocess.run(
        [sys.executable, "-m", "trnsim", "run", str(EXAMPLES / "softmax.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["passed"] is True


def test_demo_section_checks_kernels_against_goldens():
    from rich.console import Console

    from trnsim.cli.demo_kernels import KERNELS, section

    console = Console(record=True, width=200)
    section(console)
    text = console.export_text()
    assert text.count("pass") == len(KERNELS) and "FAIL" not in text
    assert "matmul_blocked" in text and "tensor" in text
