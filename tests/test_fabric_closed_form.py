"""Closed-form collectives: conventions, selection rule, physical invariants, errors."""

from __future__ import annotations

import itertools
import time

import pytest

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.fabric import IDEAL, OPS, Overheads, collective_time
from trnsim.fabric.calibration import MESH_MAX_BYTES, RDH_MAX_BYTES
from trnsim.fabric.collectives import algorithms
from trnsim.hw import system

GiB, MiB, KiB = 2**30, 2**20, 2**10
BUS = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "permute": lambda n: 1.0,
}
SYSTEMS = [
    ("trn3-gen2", 144),
    ("trn3-gen1", 64),
    ("trn2-ultraserver", 64),
    ("trn2.48xlarge", 16),
    ("trn1.32xlarge", 16),
    ("gb300-nvl72", 72),
    ("tpu-v7-pod", 4096),
]


@pytest.mark.parametrize("op", list(OPS))
def test_busbw_follows_nccl_tests_conventions(op):
    r = collective_time(op, 64 * MiB, 144, "trn3-gen2")
    assert r.algbw == pytest.approx(r.nbytes / r.time_s)
    assert r.busbw == pytest.approx(r.algbw * BUS[op](144))


ALIASES = [
    ("allreduce", "all-reduce"),
    ("AllGather", "all-gather"),
    ("reduce_scatter", "reduce-scatter"),
    ("a2a", "all-to-all"),
    ("sendrecv", "permute"),
    ("bcast", "broadcast"),
]


@pytest.mark.parametrize("alias,canon", ALIASES)
def test_op_aliases(alias, canon):
    assert collective_time(alias, MiB, 8, "trn3-gen2").op == canon


def test_unknown_op_lists_valid_ones():
    with pytest.raises(UnknownNameError, match=r"all-reduce.*all-gather.*permute"):
        collective_time("allsum", MiB, 8, "trn3-gen2")


def test_unknown_algo_and_inapplicable_algo():
    with pytest.raises(UnknownNameError, match="ring"):
        collective_time("all-reduce", MiB, 8, "trn3-gen2", algo="butterfly")
    with pytest.raises(ConfigError, match="'tree' does not apply to all-gather"):
        collective_time("all-gather", MiB, 8, "trn3-gen2", algo="tree")


def test_ranks_beyond_chips_only_over_scale_out():
    assert collective_time("all-reduce", MiB, 288, "trn3-gen2").ranks == 288  # two UltraServers
    with pytest.raises(ConfigError, match=r"ranks \(10000\) exceed .*tpu-v7-pod.*9216"):
        collective_time("all-reduce", MiB, 10_000, "tpu-v7-pod")
    with pytest.raises(ConfigError, match=r"ranks 0: .*\(rule ranks\)"):
        collective_time("all-reduce", MiB, 0, "trn3-gen2")


def test_bad_size_is_an_error():
    for bad in (-1, float("nan"), "lots"):
        with pytest.raises(ConfigError, match="nbytes"):
            collective_time("all-reduce", bad, 8, "trn3-gen2")


def test_single_rank_costs_nothing():
    r = collective_time("all-reduce", GiB, 1, "trn3-gen2")
    assert r.time_s == 0 and r.steps == ()


@pytest.mark.parametrize("name,ranks", SYSTEMS)
@pytest.mark.parametrize("op", list(OPS))
def test_time_grows_with_size_and_parts_add_up(name, ranks, op):
    times = [collective_time(op, s, ranks, name).time_s for s in (KiB, MiB, 64 * MiB, GiB)]
    assert all(b >= a for a, b in itertools.pairwise(times))
    r = collective_time(op, 64 * MiB, ranks, name)
    assert r.time_s == pytest.approx(r.overhead_s + r.latency_s + r.bandwidth_s)
    parts = r.breakdown
    assert sum(p["latency_s"] + p["bandwidth_s"] for p in parts.values()) == pytest.approx(r.time_s)


@pytest.mark.parametrize("name,ranks", SYSTEMS)
def test_bus_bandwidth_never_exceeds_a_chips_links(name, ranks):
    """Physical bound: a rank cannot push more than the sum of its links at every level."""
    spec = system(name)
    egress = sum(lvl.bw_per_chip for lvl in spec.levels)
    for op in ("all-reduce", "all-gather", "all-to-all"):
        for algo in OPS[op].algos:
            r = collective_time(op, GiB, ranks, name, algo=algo, overheads=IDEAL)
            assert r.busbw <= egress * (1 + 1e-9), (op, algo, r.busbw, egress)


def test_two_rank_ring_on_a_switch_is_latency_plus_bytes_over_bandwidth():
    """Hand formula from hw figures: 2 steps of (hop + M/2 / B) on the in-server switch."""
    lvl = system("trn3-gen2").level("server")
    m = 8 * MiB
    ov = Overheads(software_s=10e-6, link_efficiency=0.5)
    r = collective_time("all-reduce", m, 2, "trn3-gen2", algo="ring", overheads=ov)
    expect = 10e-6 + 2 * (lvl.latency_s + (m / 2) / (lvl.bw_per_chip * 0.5))
    assert r.time_s == pytest.approx(expect, rel=1e-12)


def test_ring_all_reduce_approaches_link_bandwidth_on_one_switch():
    lvl = system("gb300-nvl72").levels[0]
    r = collective_time("all-reduce", 64 * GiB, 72, "gb300-nvl72", algo="ring", overheads=IDEAL)
    assert r.busbw == pytest.approx(lvl.bw_per_direction, rel=0.01)


def test_auto_follows_the_neuron_switch_points_inside_an_instance():
    pick = [
        collective_time("all-reduce", s, 16, "trn2.48xlarge").algo
        for s in (MESH_MAX_BYTES / 2, MESH_MAX_BYTES * 2, RDH_MAX_BYTES * 2)
    ]
    assert pick == ["direct", "rdh", "ring"]
    assert collective_time("all-reduce", GiB, 144, "trn3-gen2").algo == "hierarchical"
    assert collective_time("all-to-all", GiB, 144, "trn3-gen2").algo == "direct"


@pytest.mark.parametrize("name,ranks", SYSTEMS)
@pytest.mark.parametrize("size", [4 * KiB, 4 * MiB, GiB])
def test_best_is_no_slower_than_any_algorithm(name, ranks, size):
    best = collective_time("all-reduce", size, ranks, name, algo="best")
    for algo in algorithms(name):
        assert best.time_s <= collective_time("all-reduce", size, ranks, name, algo=algo).time_s


def test_hierarchical_beats_flat_ring_across_efa():
    flat = collective_time("all-reduce", GiB, 1440, "trn3-gen2", algo="ring")
    hier = collective_time("all-reduce", GiB, 1440, "trn3-gen2", algo="hierarchical")
    assert hier.time_s < flat.time_s / 5


def test_spread_placement_is_never_faster_for_all_reduce():
    for ranks in (8, 16, 36):
        packed = collective_time("all-reduce", 256 * MiB, ranks, "trn3-gen2", algo="best")
        spread = collective_time("all-reduce", 256 * MiB, ranks, "trn3-gen2", "best", "spread")
        assert spread.time_s >= packed.time_s * (1 - 1e-9)


def test_deterministic_and_fast_at_a_million_chips():
    t0 = time.perf_counter()
    a = collective_time("all-reduce", GiB, 999_936, "trn3-ultracluster", overheads=Overheads())
    elapsed = time.perf_counter() - t0
    b = collective_time("all-reduce", GiB, 999_936, "trn3-ultracluster", overheads=Overheads())
    assert a == b
    assert elapsed < 0.05
    assert {s.level for s in a.steps} >= {"server", "rack", "efa"}
