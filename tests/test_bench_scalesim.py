"""The pure helpers of benchmarks/bench_scalesim.py (SCALE-Sim itself is never run here)."""

import configparser
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

from trnsim.core.costs import DmaModel
from trnsim.hw import core

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_scalesim", ROOT / "benchmarks" / "bench_scalesim.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    yield mod
    del sys.modules[spec.name]


# A hand-written report in SCALE-Sim 3.0's column layout (numbers invented for the test).
COMPUTE_CSV = """\
LayerID, Total Cycles (incl. prefetch), Total Cycles, Stall Cycles, Overall Util %, \
Mapping Efficiency %, Compute Util %,
0, 1500, 1200, 200, 40.0, 100.0, 75.5,
"""
DETAIL_CSV = """\
LayerID, SRAM IFMAP Start Cycle, SRAM IFMAP Stop Cycle, SRAM IFMAP Reads, \
SRAM Filter Start Cycle, SRAM Filter Stop Cycle, SRAM Filter Reads, SRAM OFMAP Start Cycle, \
SRAM OFMAP Stop Cycle, SRAM OFMAP Writes, DRAM IFMAP Start Cycle, DRAM IFMAP Stop Cycle, \
DRAM IFMAP Reads, DRAM Filter Start Cycle, DRAM Filter Stop Cycle, DRAM Filter Reads, \
DRAM OFMAP Start Cycle, DRAM OFMAP Stop Cycle, DRAM OFMAP Writes,
0, 1.0, 1199.0, 4096, 1.0, 1100.0, 512, 10.0, 1200.0, 300, -300.0, -1.0, 1000, -300.0, -1.0, 24, \
50.0, 1300.0, 77,
"""


def test_parse_reports(bench):
    r = bench.parse_reports(COMPUTE_CSV, DETAIL_CSV)
    assert (r.total_incl_prefetch, r.total_cycles, r.stall_cycles) == (1500, 1200, 200)
    assert r.compute_cycles == 1000
    assert r.overall_util == pytest.approx(0.40)
    assert r.compute_util == pytest.approx(0.755)
    assert (r.dram_reads, r.dram_writes) == (1024, 77)


def test_parse_reports_names_a_missing_column(bench):
    broken = COMPUTE_CSV.replace("Stall Cycles", "Stalls")
    with pytest.raises(bench.ScaleSimError, match="Stall Cycles"):
        bench.parse_reports(broken, DETAIL_CSV)


@pytest.mark.parametrize("gen", ["gen2", "gen4"])
def test_config_mapping_reads_trnsim_hw(bench, gen):
    spec = core(gen)
    c = bench.neuroncore_config(spec, "ws")
    assert (c.rows, c.cols) == (spec.tensor.rows, spec.tensor.cols)
    # sizes are in Ki elements: half of SBUF per operand (bf16), PSUM in fp32 accumulators
    assert c.ifmap_kwords * 1024 * 2 * 2 == spec.sbuf_bytes == c.filter_kwords * 1024 * 2 * 2
    assert c.ofmap_kwords * 1024 * 4 == spec.psum_bytes
    bw = DmaModel.for_core(spec).core_bw
    assert c.write_bw_exact * spec.tensor.clock_hz * 2 == pytest.approx(bw)
    assert c.read_bw_exact == pytest.approx(c.write_bw_exact / 2)
    assert abs(c.write_bw - c.write_bw_exact) <= 0.5 and abs(c.read_bw - c.read_bw_exact) <= 0.5


def test_config_text_has_every_key_scalesim_reads(bench):
    c = bench.neuroncore_config(core("gen3"), "os")
    cp = configparser.ConfigParser()
    cp.read_string(bench.config_text(c))
    arch = cp["architecture_presets"]
    assert int(arch["ArrayHeight"]) == 128 and arch["Dataflow"] == "os"
    assert int(arch["IfmapSramSzkB"]) == c.ifmap_kwords
    assert int(cp["layout"]["IfmapSRAMBankBandwidth"]) == c.read_bw
    assert int(arch["Bandwidth"]) == c.write_bw
    assert cp["run_presets"]["InterfaceBandwidth"] == "USER"
    assert cp["sparsity"]["SparsitySupport"] == "false"
    with pytest.raises(ValueError, match="dataflow"):
        bench.neuroncore_config(core("gen3"), "rs")


def test_topology_row_as_scalesim_splits_it(bench):
    row = bench.topology_text(1024, 512, 256).splitlines()[1]
    name, m, n, k = (e.strip() for e in row.split(",")[:-1])  # SCALE-Sim drops the last field
    assert (name, int(m), int(n), int(k)) == ("gemm", 1024, 512, 256)


def test_trnsim_side_is_the_ideal_on_the_tensor_engine(bench):
    t = bench.trnsim_gemm("gen2", bench.SHAPE)
    assert t.ideal_cycles == 1024**3 // (128 * 128)
    assert t.matmuls == 128
    assert t.tensor_busy_cycles == pytest.approx(t.ideal_cycles)
    assert t.total_cycles > t.tensor_busy_cycles  # the loads and the store are not free


def test_gemm_kernel_matches_numpy(bench):
    from trnsim.nki.kernelfile import load_module

    mod = load_module(str(bench.KERNEL_FILE))
    lhsT, rhs = mod.make_inputs(np.random.default_rng(3), M=256, N=1024, K=384)
    got = mod.gemm(lhsT, rhs).astype(np.float32)
    ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    # one bf16 rounding of an fp32 sum: within 1 bf16 ulp (2^-7 relative) of the fp32 product
    np.testing.assert_array_less(np.abs(got - ref), np.abs(ref) * 2**-7 + 1e-3)
