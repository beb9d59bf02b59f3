"""``trnsim run`` / ``trnsim profile`` run legacy kernel files with the same commands."""

from __future__ import annotations

import json
import textwrap

from trnsim.cli.main import main

LEGACY_FILE = textwrap.dedent(
    """
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl


    @nki.jit
    def legacy_add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:512]
        nl.store(out[i_p, i_f], value=nl.add(nl.load(a[i_p, i_f]), nl.load(b[i_p, i_f])))
        return out


    def make_inputs(rng):
        return (rng.standard_normal((128, 512)).astype(np.float32),
                rng.standard_normal((128, 512)).astype(np.float32))


    def golden(a, b):
        return a + b


    TOLERANCE = {"rtol": 0.0, "atol": 0.0}
    """
)


def test_trnsim_run_runs_a_legacy_kernel_file(tmp_path, capsys) -> None:
    path = tmp_path / "legacy_add.py"
    path.write_text(LEGACY_FILE)
    assert main(["run", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernel"] == "legacy_add" and out["passed"] is True
    assert out["instructions_by_opcode"]["dma_copy"] == 3


def test_trnsim_profile_runs_a_legacy_kernel_file(tmp_path, capsys) -> None:
    path = tmp_path / "legacy_add.py"
    path.write_text(LEGACY_FILE)
    assert main(["profile", str(path), "--json", "--no-files"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total_s"] > 0
