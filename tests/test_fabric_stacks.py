"""Collectives as each vendor runs them: Neuron runtime, NCCL (fitted to calibration G), TPU ICI."""

import json

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError, UnknownNameError
from trnsim.fabric import FITTED, collective_time
from trnsim.fabric.nccl_calibration import G_ROWS, fit, report
from trnsim.fabric.stacks import NCCL, stack_for
from trnsim.hw import system

KiB, MiB, GiB = 2**10, 2**20, 2**30


@pytest.mark.parametrize(
    "name, stack",
    [
        ("p5.48xlarge", "nccl"),
        ("gb200-nvl72", "nccl"),
        ("gb300-nvl72", "nccl"),
        ("h100-ib-cluster", "nccl"),
        ("v5p-128", "tpu-ici"),
        ("tpu-v7-pod", "tpu-ici"),
        ("trn2.48xlarge", "neuron"),
        ("inf2.48xlarge", "neuron"),
    ],
)
def test_each_vendor_runs_its_own_stack(name, stack):
    assert stack_for(system(name)).name == stack
    r = collective_time("all-reduce", MiB, min(system(name).chips, 64), name)
    assert r.stack == stack


@pytest.mark.parametrize("name", ["p5", "dgx-b200", "gb200-nvl72", "v6e", "h100-roce-cluster"])
def test_gpus_and_tpus_never_take_the_neuron_constants(name):
    for size in (KiB, 64 * MiB):
        r = collective_time("all-reduce", size, min(system(name).chips, 256), name)
        assert r.overhead_s != pytest.approx(FITTED.software_s)
    # full link rate on ICI (no 0.63 link efficiency): dimension by dimension, a bidirectional
    # ring on 2 of the 4 ICI links; all-gather busbw tends to that ring's bandwidth
    r = collective_time("all-gather", 8 * GiB, 16, "v6e-16")
    lvl = system("v6e-16").levels[0]
    assert r.busbw == pytest.approx(lvl.bw_per_direction * 2 / 4, rel=0.01)


def test_neuron_results_are_unchanged():
    r = collective_time("all-reduce", 64 * MiB, 16, "trn2.48xlarge")
    assert r.stack == "neuron" and r.overhead_s == FITTED.software_s and r.protocol == ""


def test_nccl_fit_reproduces_the_stored_constants_and_reports_every_row():
    f = fit()
    assert f.params == NCCL
    assert len(f.rows) == len(G_ROWS) == 14
    assert f.mape < 0.05 and f.max_error < 0.10
    assert report().mape == pytest.approx(f.mape)
    assert all(0 < p.efficiency <= 1 for p in NCCL.protocols)


def test_nccl_picks_ll_small_and_nvls_large_on_one_node():
    small = collective_time("all-reduce", KiB, 8, "p5")
    big = collective_time("all-reduce", GiB, 8, "p5")
    assert (small.algo, small.protocol) == ("ring", "LL")
    assert (big.algo, big.protocol) == ("nvls", "Simple")
    # NVLS busbw at 1 GiB near the published ~466 GB/s; ring near ~370 (nccl-tests #212)
    assert big.busbw == pytest.approx(466.35e9, rel=0.03)
    ring = collective_time("all-reduce", 8 * GiB, 8, "p5", algo="ring")
    assert ring.algo == "ring" and ring.busbw == pytest.approx(370e9, rel=0.03)


def test_nccl_across_nodes_uses_the_scale_out_network():
    one = collective_time("all-reduce", GiB, 8, "h100-ib-cluster")
    many = collective_time("all-reduce", GiB, 16_384, "h100-ib-cluster")
    assert many.time_s > one.time_s
    assert {s.level for s in many.steps} >= {"infiniband"}
    # a GPU cannot push more than its NVLink + NIC per direction
    egress = sum(lvl.bw_per_direction for lvl in system("h100-ib-cluster").levels)
    assert many.busbw <= egress
    small = collective_time("all-reduce", 64 * KiB, 16_384, "h100-ib-cluster")
    assert "tree" in small.algo  # log-depth latency wins for small messages at scale


def test_nccl_forced_algorithms_and_errors():
    assert collective_time("all-reduce", GiB, 8, "p5", algo="nvls").algo == "nvls"
    with pytest.raises(ConfigError, match=r"not one NCCL runs.*valid: ring, tree, nvls"):
        collective_time("all-reduce", GiB, 8, "p5", algo="rdh")
    with pytest.raises(ConfigError, match="is an NCCL algorithm"):
        collective_time("all-reduce", GiB, 16, "trn2.48xlarge", algo="nvls")
    with pytest.raises(UnknownNameError, match="valid: neuron, nccl, tpu-ici"):
        collective_time("all-reduce", GiB, 8, "p5", stack="mpi")


def test_explicit_stack_is_used_as_asked():
    r = collective_time("all-reduce", GiB, 16, "trn2.48xlarge", stack="nccl")
    assert r.stack == "nccl" and "ring" in r.algo and "nvls" not in r.algo  # no NVSwitch


def test_tpu_all_reduce_is_a_ring_per_torus_dimension():
    m = GiB
    r = collective_time("all-reduce", m, 256, "v5e")
    assert r.stack == "tpu-ici" and r.algo == "hierarchical"
    lvl = system("v5e").levels[0]
    ring_bw = lvl.bw_per_direction * 2 / 4  # a bidirectional ring uses 2 of the 4 ICI links
    f = 15 / 16
    expect_bw = 2 * f * m * (1 + 1 / 16) / ring_bw  # RS x then y (on M/16), AG y then x
    expect_lat = 4 * 15 * lvl.latency_s
    assert r.bandwidth_s == pytest.approx(expect_bw, rel=1e-9)
    assert r.latency_s == pytest.approx(expect_lat, rel=1e-9)
    assert [s.algo for s in r.steps] == ["ring"] * 4


def test_tpu_multislice_crosses_the_dcn():
    r = collective_time("all-reduce", GiB, 128, "v5p-128")  # 2 x v5p-128
    assert "dcn" in {s.level for s in r.steps}


def test_cli_collective_names_the_stack(capsys):
    assert main(["collective", "--system", "p5.48xlarge", "--op", "all-reduce", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stack"] == "nccl" and data["protocol"] == "Simple" and data["ranks"] == 8
    assert main(["collective", "--system", "v5p-128", "--size", "64MiB"]) == 0
    out = capsys.readouterr().out
    assert "stack tpu-ici" in out
    assert main(["collective", "--system", "trn2.48xlarge", "--stack", "nccl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"] == "nccl"


def test_flow_evaluator_takes_the_stacks_constants(capsys):
    from trnsim.fabric.collectives import TPU_ICI, flow_overheads

    ov = flow_overheads("p5")
    assert ov.software_s == NCCL.protocol("Simple").latency_s
    assert ov.link_efficiency == NCCL.ring_efficiency
    assert flow_overheads("v5e") == TPU_ICI and flow_overheads("trn2.48xlarge") == FITTED
    argv = ["collective", "--system", "p5", "--evaluator", "flow", "--size", "1MiB", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stack"] == "nccl-flow" and data["overhead_s"] == ov.software_s


def test_two_nodes_run_nccls_flat_ring_bounded_by_the_rails():
    r = collective_time("all-reduce", GiB, 16, "dgx-h100")
    nic = system("dgx-h100").scale_out_level
    assert r.algo == "ring" and r.protocol == "Simple"
    # 8 rails of 400 Gb/s: a flat ring's busbw cannot exceed 8 x 50 GB/s (x the ring efficiency)
    assert r.busbw <= nic.rails * nic.bw_per_direction * NCCL.ring_efficiency
    assert r.busbw > 0.5 * nic.rails * nic.bw_per_direction * NCCL.ring_efficiency


def test_cli_foreign_stack_is_named_a_what_if_on_stderr(capsys):
    assert main(["collective", "--system", "trn2.48xlarge", "--stack", "nccl", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["stack"] == "nccl"
    assert "whose vendor's stack is neuron: a what-if" in " ".join(cap.err.split())
    assert main(["collective", "--system", "trn2.48xlarge", "--stack", "neuron", "--json"]) == 0
    assert "what-if" not in capsys.readouterr().err
