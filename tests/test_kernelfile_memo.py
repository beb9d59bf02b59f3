"""``run_file(memo=...)``: a process's runs of one kernel file share its inputs and goldens
(what ``trnsim tune``'s candidates do), and sharing never changes a result."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from trnsim.nki.kernelfile import Memo, run_file

# A kernel whose schedule parameter does not change the result, that writes its input in
# place, and a make_inputs/golden that count their calls in a file beside the kernel.
KERNEL = textwrap.dedent(
    """
    import os
    import numpy as np
    import nki
    import nki.language as nl

    HERE = os.path.dirname(__file__)


    def _count(name):
        with open(os.path.join(HERE, name), "a") as f:
            f.write("x")


    @nki.jit
    def double(x, STEP=64):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for j in nl.affine_range(x.shape[1] // STEP):
            t = nl.load(x[:, j * STEP:(j + 1) * STEP])
            nl.store(out[:, j * STEP:(j + 1) * STEP], value=nl.multiply(t, 2.0))
            nl.store(x[:, j * STEP:(j + 1) * STEP], value=nl.multiply(t, 0.0))  # in place
        return out


    def make_inputs(rng, N=256):
        _count("inputs.count")
        return (rng.standard_normal((128, N)).astype(np.float32),)


    def golden(x):
        _count("golden.count")
        out = 2 * x
        x[...] = 7.0  # a golden that writes its input must not reach the next run
        return out
    """
)


def _file(tmp_path: Path) -> str:
    p = tmp_path / "k.py"
    p.write_text(KERNEL)
    return str(p)


def _count(tmp_path: Path, name: str) -> int:
    p = tmp_path / name
    return len(p.read_text()) if p.exists() else 0


def test_runs_sharing_a_memo_make_inputs_and_golden_once_and_agree_with_fresh_runs(tmp_path):
    path = _file(tmp_path)
    memo = Memo()
    shared = [run_file(path, kernel_kwargs={"STEP": s}, memo=memo) for s in (32, 64, 128, 32)]
    assert _count(tmp_path, "inputs.count") == 1
    assert _count(tmp_path, "golden.count") == 1
    fresh = [run_file(path, kernel_kwargs={"STEP": s}) for s in (32, 64, 128, 32)]
    assert _count(tmp_path, "inputs.count") == 1 + 4
    for a, b in zip(shared, fresh, strict=True):
        assert a.passed is True and b.passed is True  # every run saw the inputs as made
        assert np.array_equal(a.outputs[0], b.outputs[0])
        assert a.max_abs_err == b.max_abs_err


def test_other_inputs_or_another_seed_make_new_inputs(tmp_path):
    path = _file(tmp_path)
    memo = Memo()
    run_file(path, memo=memo)
    run_file(path, kwargs={"N": 128}, memo=memo)
    run_file(path, kwargs={"N": 128}, seed=1, memo=memo)
    run_file(path, kwargs={"N": 128}, seed=1, memo=memo)
    assert _count(tmp_path, "inputs.count") == 3
    assert _count(tmp_path, "golden.count") == 3


def test_an_edited_file_is_not_served_from_the_memo(tmp_path):
    path = _file(tmp_path)
    memo = Memo()
    run_file(path, memo=memo)
    Path(path).write_text(KERNEL.replace("2 * x", "2.0 * x") + "\n# edited\n")
    run_file(path, memo=memo)
    assert _count(tmp_path, "inputs.count") == 2


def test_a_golden_taking_the_tuned_parameter_is_run_for_each_value(tmp_path):
    path = _file(tmp_path)
    Path(path).write_text(KERNEL.replace("def golden(x):", "def golden(x, STEP=64):"))
    memo = Memo()
    for s in (32, 64, 64):
        assert run_file(path, kernel_kwargs={"STEP": s}, memo=memo).passed is True
    assert _count(tmp_path, "inputs.count") == 1
    assert _count(tmp_path, "golden.count") == 2  # 32, then 64 (kept for the second 64)
