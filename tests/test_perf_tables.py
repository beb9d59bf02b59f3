"""Kernel compute tables (trnsim.perf.tables) and the table compute model."""

import itertools
import json

import pytest

from trnsim.hw import system
from trnsim.perf import ParallelPlan, estimate_inference, estimate_training, plan_for_chips
from trnsim.perf import tables as T
from trnsim.perf.compute import RooflineComputeModel
from trnsim.perf.table_model import TableComputeModel, covers, default_model, split_seconds

SLICE = {"m": (1, 128), "k": (256,), "n": (512,)}


def test_cache_equals_a_regenerated_slice():
    """The cached tables are what the timing model gives today (they cannot drift)."""
    doc = json.loads(T.DATA_FILE.read_text())
    specs = [s for s in T.SPECS if s.key in ("neuroncore-v2/bf16", "neuroncore-v3/fp8")]
    fresh = T.build(axes=SLICE, specs=specs)
    ax = doc["axes"]
    for s in specs:
        cached, new = doc["tables"][s.key], fresh["tables"][s.key]
        for i, m in enumerate(SLICE["m"]):
            for j, k in enumerate(SLICE["k"]):
                for l, n in enumerate(SLICE["n"]):
                    ci, cj, cl = ax["m"].index(m), ax["k"].index(k), ax["n"].index(n)
                    for key in ("compute_s", "total_s", "orientation"):
                        assert new[key][i][j][l] == cached[key][ci][cj][cl], (s.key, m, k, n)
    assert doc["trnsim_version"] and doc["generator"] == "python -m trnsim.perf.tables build"


def test_cache_covers_the_grid():
    doc = json.loads(T.DATA_FILE.read_text())
    assert doc["axes"] == {k: list(v) for k, v in T.AXES.items()}
    assert set(doc["tables"]) == {s.key for s in T.SPECS}


def test_lookup_hits_grid_points_and_pads_tiles():
    tbl = T.table_for("neuroncore-v2", "bf16")
    doc = json.loads(T.DATA_FILE.read_text())
    raw = doc["tables"]["neuroncore-v2/bf16"]["compute_s"]
    ax = doc["axes"]
    i, j, l = ax["m"].index(512), ax["k"].index(4096), ax["n"].index(1024)
    assert tbl.seconds(512, 4096, 1024) == pytest.approx(raw[i][j][l], rel=1e-12)
    # a ragged width runs as whole 128-wide tiles
    assert tbl.seconds(512, 4096, 900) == tbl.seconds(512, 4096, 1024)
    assert tbl.seconds(512, 160, 1024) == tbl.seconds(512, 256, 1024)


def test_lookup_is_monotonic_and_extrapolates_linearly():
    tbl = T.table_for("neuroncore-v4", "bf16")
    ts = [tbl.seconds(m, 4096, 1024) for m in (1, 48, 128, 700, 3000, 4096, 9000)]
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(ts))
    # beyond the measured M: linear in M blocks
    a, b, c = (tbl.seconds(m, 4096, 1024) for m in (4096, 8192, 12288))
    assert c - b == pytest.approx(b - a, rel=1e-9)
    # large matmuls approach the Tensor-engine peak: 2 x 128 x 128 FLOP per cycle at 2.4 GHz
    big = 2 * 4096 * 8192 * 2048 / tbl.seconds(4096, 8192, 2048)
    assert 0.8 < big / (2 * 128 * 128 * 2.4e9) <= 1.0


def test_fp8_is_faster_than_bf16_on_large_shapes():
    bf, f8 = T.table_for("neuroncore-v3", "bf16"), T.table_for("neuroncore-v3", "fp8")
    assert f8.seconds(2048, 8192, 2048) < 0.7 * bf.seconds(2048, 8192, 2048)
    assert T.table_for("neuroncore-v2", "fp8") is None  # no double-row fp8 on v2


def test_split_over_cores_is_faster():
    tbl = T.table_for("neuroncore-v3", "bf16")
    one = split_seconds(tbl, 4096, 4096, 4096, 1)
    assert split_seconds(tbl, 4096, 4096, 4096, 8) < one / 4


def test_default_model_is_the_table_for_trainium_only():
    assert covers(system("trn1.32xlarge").chip)
    assert isinstance(default_model(system("trn1.32xlarge").chip, 2), TableComputeModel)
    gpu = system("gb300-nvl72").chip
    assert isinstance(default_model(gpu, 1), RooflineComputeModel)


def test_estimates_name_their_compute_model():
    plan = ParallelPlan(tp=32, ranks_per_chip=2, pad_heads=True, zero=0, recompute="none")
    kw = dict(batch=1, input_tokens=1024, output_tokens=128)
    tab = estimate_inference("llama-2-70b", "trn1.32xlarge", plan, **kw)
    roof = estimate_inference(
        "llama-2-70b", "trn1.32xlarge", plan, compute_model=RooflineComputeModel(2), **kw
    )
    assert tab.assumptions[0].startswith("compute: table model")
    assert roof.assumptions[0].startswith("compute: roofline model")
    assert tab.ttft_s != roof.ttft_s
    gpu = estimate_training(
        "llama-3.1-8b", "gb300-nvl72", plan_for_chips(72, tp=8), global_batch=72, seq_len=4096
    )
    assert gpu.assumptions[0].startswith("compute: roofline model")


def test_cli_compute_flag_selects_the_model(capsys):
    from trnsim.cli.main import main

    argv = ["infer", "--model", "llama-2-7b", "--system", "trn1.32xlarge", "--tp", "32"]
    argv += ["--ranks-per-chip", "2", "--json"]
    models = []
    for flag in ([], ["--compute", "roofline"]):
        assert main(argv + flag) == 0
        models.append(json.loads(capsys.readouterr().out)["assumptions"][0].split()[1])
    assert models == ["table", "roofline"]


def test_matmuls_without_a_table_use_the_fitted_roofline_efficiency():
    """MX dtypes have no kernel table: the table model's roofline fallback must use the fitted
    roofline matmul efficiency, so its prefill stays close to the roofline model's."""
    from trnsim.perf.infer import estimate_inference

    kw = dict(batch=8, input_tokens=2048, output_tokens=256, precision_name="mxfp8")
    plan = ParallelPlan(tp=8)
    table = estimate_inference("llama-2-70b", "trn3-gen1-ultraserver", plan, **kw)
    roof = estimate_inference(
        "llama-2-70b",
        "trn3-gen1-ultraserver",
        plan,
        compute_model=RooflineComputeModel(1),
        **kw,
    )
    assert table.ttft_s == pytest.approx(roof.ttft_s, rel=0.05)


def test_tables_build_from_the_installed_package_alone(tmp_path):
    """The table kernel ships in the package: a copy of ``trnsim`` with no ``examples/`` beside
    it (as installed) rebuilds a slice of the tables, equal to the cache."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import trnsim

    site = tmp_path / "site"
    shutil.copytree(Path(trnsim.__file__).parent, site / "trnsim")
    script = (
        "import json, sys, trnsim\n"
        "from trnsim.perf import tables as T\n"
        "assert trnsim.__file__.startswith(sys.argv[1]), trnsim.__file__\n"
        "assert not any('examples' in p for p in sys.path), sys.path\n"
        "spec = [s for s in T.SPECS if s.key == 'neuroncore-v2/bf16']\n"
        "doc = T.build(axes={'m': (4,), 'k': (256,), 'n': (256,)}, specs=spec)\n"
        "print(json.dumps(doc['tables']['neuroncore-v2/bf16']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", script, str(site)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    new = json.loads(out.stdout)
    doc = json.loads(T.DATA_FILE.read_text())
    ax, cached = doc["axes"], doc["tables"]["neuroncore-v2/bf16"]
    i, j, l = ax["m"].index(4), ax["k"].index(256), ax["n"].index(256)
    for key in ("compute_s", "total_s", "orientation"):
        assert new[key][0][0][0] == cached[key][i][j][l], key
    assert new["compute_s"][0][0][0] > 0
