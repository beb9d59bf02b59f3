"""Calibration: trnsim's versions of the four NKI matmul-tutorial kernels at the tutorial's
shape (M=4096, K=8192, N=8192, bf16), timed in timing-only mode, against the published
NeuronCore-v2 latencies (calibration/trainium.md A; published with SDK 2.20, so timed with
that toolchain's fitted DMA efficiency); plus v4 efficiency and an HBM copy. The wider
calibration on public measurements is ``trnsim calibrate`` (tests/test_calibrate_harness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trnsim.core import calibration
from trnsim.core.costs import DmaModel
from trnsim.core.timing import schedule
from trnsim.hw import core
from trnsim.nki.benchmark import profile_kernel, record
from trnsim.nki.kernelfile import load_module

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing"


@pytest.fixture(scope="module")
def tutorial():
    return load_module(str(EXAMPLES / "matmul_tutorial.py"))


@pytest.fixture(scope="module")
def streams(tutorial):
    """Each variant's instruction stream at full size, recorded once (timing-only)."""
    M, K, N = calibration.SHAPE
    lhsT, rhs = tutorial.make_inputs(M=M, K=K, N=N, empty=True)
    return {
        m.variant: record(tutorial.VARIANTS[m.variant], lhsT, rhs, target=calibration.TARGET)
        for m in calibration.MEASUREMENTS
    }


TUTORIAL_EFF = calibration.TUTORIAL_TOOLCHAIN.dma_efficiency


@pytest.fixture(scope="module")
def modelled(streams):
    return {
        v: schedule(s, calibration.TARGET, dma_efficiency=TUTORIAL_EFF) for v, s in streams.items()
    }


@pytest.mark.parametrize("row", calibration.MEASUREMENTS, ids=lambda m: m.variant)
def test_each_variant_within_tolerance_of_published_v2_latency(modelled, row):
    err = modelled[row.variant].total_s / row.latency_s - 1
    assert abs(err) <= calibration.TOLERANCE, f"{row.variant}: {err:+.1%}"


def test_variants_keep_the_published_order(modelled):
    times = [modelled[m.variant].total_s for m in calibration.MEASUREMENTS]
    assert times == sorted(times, reverse=True)


def test_optimized_hfu_close_to_published(modelled):
    # published: 85.24% HFU for optimization 3 (calibration/trainium.md A)
    assert modelled["optimized"].mfu == pytest.approx(0.8524, abs=0.08)


def test_calibration_table_reports_every_row(modelled):
    table = calibration.error_table({v: p.total_s for v, p in modelled.items()})
    assert [r.variant for r in table] == [m.variant for m in calibration.MEASUREMENTS]
    assert all(abs(r.error) <= calibration.TOLERANCE for r in table)


def test_blocked_bf16_matmul_on_v4_reaches_85_percent_of_peak(streams):
    p = schedule(streams["optimized"], "gen4")
    assert p.peak_dtype == "bf16"
    assert p.mfu >= 0.85
    assert p.flops_per_s <= core("gen4").tensor.peak_flops("bf16")


def test_newer_generations_are_not_slower_on_dma_bound_variants(streams):
    for v in ("tiled", "hoisted", "blocked"):
        t2, t3, t4 = (schedule(streams[v], g).total_s for g in ("gen2", "gen3", "gen4"))
        assert t2 >= t3 >= t4, v


@pytest.mark.slow
def test_current_toolchain_is_faster_than_the_tutorials_on_dma_bound_variants(streams):
    """The documents' DMA figures (efficiency 1) against the 2.20-era fit: the same kernels,
    DMA-bound, run faster; the compute-bound one barely moves (calibration docstring)."""
    for v in ("tiled", "hoisted", "blocked"):
        assert (
            schedule(streams[v], "gen2").total_s
            < 0.85 * schedule(streams[v], "gen2", dma_efficiency=TUTORIAL_EFF).total_s
        )
    opt = [
        schedule(streams["optimized"], "gen2", dma_efficiency=e).total_s for e in (1, TUTORIAL_EFF)
    ]
    assert opt[0] == pytest.approx(opt[1], rel=0.15)


def test_toolchains_are_named_with_their_source():
    assert calibration.TOOLCHAINS["current"].dma_efficiency == 1.0
    for t in calibration.TOOLCHAINS.values():
        assert 0 < t.dma_efficiency <= 1 and t.source


@pytest.mark.parametrize("target", ["gen2", "gen4"])
def test_hbm_copy_is_bounded_by_dma_and_hbm_bandwidth(target):
    copy = load_module(str(EXAMPLES / "hbm_copy.py"))
    (src,) = copy.make_inputs(rows=8192, cols=4096, empty=True)
    p = profile_kernel(copy.hbm_copy, src, target=target)
    moved = dict(p.bytes_by_memory)["hbm"]
    assert moved == 2 * src.nbytes  # read once, written once
    bound = min(DmaModel.for_core(core(target)).core_bw, p.dma_bw)
    achieved = moved / p.total_s
    assert achieved <= bound * 1.0001
    assert achieved >= 0.8 * bound  # DMA-bound: close to the bound, not far below it
    # DMA active (data moving, as neuron-profile counts it) over the latency with the launch
    assert p.flops == 0 and p.engine("dma").utilisation > 0.85
    assert p.hbm_read_bytes == p.hbm_write_bytes == src.nbytes
