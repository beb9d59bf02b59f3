"""Legacy ``nki.benchmark`` / ``nki.profile``: timing-only runs report trnsim's model estimate."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as tnki
from trnsim.errors import KernelError

tnki.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import neuronxcc.nki.typing as nt  # noqa: E402

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


# ---- benchmark / profile ----------------------------------------------------------------------


def _matmul_kernel():
    @nki.jit
    def mm(lhs_t, rhs):
        out = nl.ndarray((lhs_t.shape[1], rhs.shape[1]), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(lhs_t.shape[1] // 128):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(lhs_t.shape[0] // 128):
                a = nl.load(lhs_t[kk * 128 : (kk + 1) * 128, m * 128 : (m + 1) * 128])
                b = nl.load(rhs[kk * 128 : (kk + 1) * 128, 0:512])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(out[m * 128 : (m + 1) * 128, 0:512], value=nl.copy(acc, dtype=out.dtype))
        return out

    return mm


def test_benchmark_with_placeholders_reports_the_model_latency_for_every_percentile() -> None:
    bench = nki.benchmark(warmup=5, iters=10)(_matmul_kernel())
    bench(nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, 512], nl.bfloat16])
    lat = bench.benchmark_result.nc_latency
    p50, p99 = lat.get_latency_percentile(50), lat.get_latency_percentile(99)
    assert p50 == p99 > 0
    prof = tnki.benchmark.profile_kernel(
        _matmul_kernel(),
        np.zeros((512, 256), ml_dtypes.bfloat16),
        np.zeros((512, 512), ml_dtypes.bfloat16),
    )
    assert p50 == pytest.approx(prof.total_s * 1e6)
    with pytest.raises(KernelError, match="percentile"):
        lat.get_latency_percentile(42)


def test_benchmark_target_follows_platform_target(monkeypatch: pytest.MonkeyPatch) -> None:
    args = (nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, 512], nl.bfloat16])
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    b1 = nki.benchmark(_matmul_kernel())
    b1(*args)
    b3 = nki.benchmark(_matmul_kernel(), platform_target="trn3")
    b3(*args)
    assert b1.benchmark_result.nc_latency.target == "gen2"
    assert b3.benchmark_result.nc_latency.target == "gen4"
    assert b1.benchmark_result.nc_latency.seconds != b3.benchmark_result.nc_latency.seconds


def test_profile_writes_trace_and_timeline(tmp_path) -> None:
    prof = nki.profile(working_directory=str(tmp_path), save_trace_name="t.json")(_matmul_kernel())
    prof(nt.tensor[[256, 128], nl.bfloat16], nt.tensor[[256, 512], nl.bfloat16])
    assert (tmp_path / "t.json").stat().st_size > 0
    assert (tmp_path / "timeline.png").stat().st_size > 0
    assert sorted(os.listdir(tmp_path)) == ["file.neff", "t.json", "timeline.png"]


def test_save_names_write_the_trace_and_the_instruction_summary(tmp_path, monkeypatch) -> None:
    import json

    monkeypatch.chdir(tmp_path)
    bench = nki.benchmark(save_neff_name="file.neff", save_trace_name="profile.ntff")(
        _matmul_kernel()
    )
    bench(nt.tensor[[256, 128], nl.bfloat16], nt.tensor[[256, 512], nl.bfloat16])
    summary = json.loads((tmp_path / "file.neff").read_text())
    assert summary["instruction_counts"]["nc_matmul"] == 2
    assert summary["instructions"] == sum(summary["instruction_counts"].values())
    npf = summary["neuron_profile"]  # the neuron-profile figures under their names
    assert npf["total_time"] == pytest.approx(summary["latency_s"])
    assert npf["hardware_flops"] > 0 and npf["hbm_read_bytes"] > 0
    assert 0 < npf["tensor_engine_active_time_percent"] <= 1
    assert json.loads((tmp_path / "profile.ntff").read_text())["traceEvents"]
