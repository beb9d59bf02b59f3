"""The grouped flow engine (flow classes) against the per-flow specification engine."""

from __future__ import annotations

import numpy as np
import pytest

from trnsim.fabric import FatTree, Overheads
from trnsim.fabric.flowsim import (
    Phase,
    exchange_classes,
    group_flows,
    plan,
    run_grouped,
    run_phase,
    simulate,
)
from trnsim.fabric.topology import build_fabric
from trnsim.hw import system

MiB = 2**20
OV = Overheads(software_s=20e-6, link_efficiency=0.8)

OPS = [
    ("all-to-all", "direct"),
    ("all-to-all", "rdh"),
    ("all-reduce", "ring"),
    ("all-reduce", "rdh"),
    ("all-reduce", "direct"),
    ("all-gather", "direct"),
    ("reduce-scatter", "rdh"),
    ("broadcast", "direct"),
    ("broadcast", "rdh"),
    ("permute", "direct"),
]
# full domains, partial domains (ranks not filling a server, rack or UltraServer), tori, EFA
SYSTEMS = [
    ("trn3-gen2", 4),
    ("trn3-gen2", 37),
    ("trn3-gen2", 100),
    ("trn3-gen2", 144),
    ("trn3-gen2", 300),
    ("trn3-gen1", 48),
    ("gb300-nvl72", 150),
    ("trn2.48xlarge", 16),
    ("trn2-ultraserver", 64),
    ("trn3-ultracluster", 600),
]


def _same(a, b) -> None:
    assert b.time_s == pytest.approx(a.time_s, rel=1e-12, abs=0)
    assert len(a.steps) == len(b.steps)
    for x, y in zip(a.steps, b.steps, strict=True):
        assert (x.phase, x.bytes_per_rank) == (y.phase, y.bytes_per_rank)
        assert y.bandwidth_s == pytest.approx(x.bandwidth_s, rel=1e-12, abs=1e-18)


@pytest.mark.parametrize("name,ranks", SYSTEMS)
@pytest.mark.parametrize("op,algo", OPS)
def test_grouped_matches_per_flow(name, ranks, op, algo):
    size = 3 * MiB if ranks < 200 else 512 * 1024
    spec = simulate(op, size, ranks, name, algo, overheads=OV, grouped=False)
    _same(spec, simulate(op, size, ranks, name, algo, overheads=OV))


@pytest.mark.parametrize("ranks", [144, 288, 576])
@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "all-to-all"])
def test_grouped_matches_per_flow_hierarchical(op, ranks):
    spec = simulate(op, 64 * MiB, ranks, "trn3-gen2", "hierarchical", overheads=OV, grouped=False)
    _same(spec, simulate(op, 64 * MiB, ranks, "trn3-gen2", "hierarchical", overheads=OV))


FAT_TREES = [
    FatTree(tiers=1),
    FatTree(tiers=3, fanout=2, oversubscription=2.0),
    FatTree(tiers=2, leaf_chips=72, fanout=2, oversubscription=3.0),
    FatTree(tiers=2, leaf_chips=100),  # leaves that do not nest with racks: no orbit reduction
]


@pytest.mark.parametrize("ft", FAT_TREES, ids=lambda f: f"t{f.tiers}-l{f.leaf_chips}")
@pytest.mark.parametrize("ranks", [300, 576, 650])
@pytest.mark.parametrize("op,algo", [("all-to-all", "direct"), ("all-reduce", "rdh"),
                                     ("permute", "direct")])  # fmt: skip
def test_grouped_matches_per_flow_on_fat_trees(ft, ranks, op, algo):
    spec = simulate(op, 16 * MiB, ranks, "trn3-gen2", algo, overheads=OV, fat_tree=ft,
                    grouped=False)  # fmt: skip
    _same(spec, simulate(op, 16 * MiB, ranks, "trn3-gen2", algo, overheads=OV, fat_tree=ft))


@pytest.mark.parametrize("seed", range(6))
def test_identical_constraint_classes_on_random_phases(seed):
    """Random flows (repeated pairs, uneven bytes, a torus or a switch fabric): same end time."""
    rng = np.random.default_rng(seed)
    name, chips = [("trn3-gen2", 144), ("trn2-ultraserver", 64), ("trn3-gen2", 300)][seed % 3]
    fab = build_fabric(system(name), chips, 0.8)
    n = int(rng.integers(1, 400))
    src = rng.integers(0, chips, n)
    dst = rng.integers(0, chips, n)
    nbytes = rng.choice([1e6, 2e6, 3.5e6], n)
    ph = Phase(src, dst, nbytes)
    assert run_grouped(group_flows(fab, ph)) == pytest.approx(run_phase(fab, ph), rel=1e-12)


@pytest.mark.parametrize("ranks", [2, 5, 72, 100, 144, 145, 300, 650])
def test_exchange_orbits_count_every_pair_once(ranks):
    fab = build_fabric(system("trn3-gen2"), ranks, 0.8, FatTree(tiers=3, fanout=2))
    g = exchange_classes(fab, ranks, 1e6)
    assert g is not None and g.count.sum() == ranks * (ranks - 1)
    # the orbit classes give the same phase time as every flow listed
    (lifted,) = plan("all-to-all", ranks * 1e6, ranks, system("trn3-gen2"), "direct")
    assert run_grouped(g) == pytest.approx(run_phase(fab, lifted.phase()), rel=1e-12)


def test_exchange_orbits_refuse_a_torus():
    fab = build_fabric(system("trn2-ultraserver"), 64, 0.8)
    assert exchange_classes(fab, 64, 1e6) is None


def test_large_exchange_is_never_enumerated():
    """4,096 ranks: 16.7M flows, a few dozen classes."""
    fab = build_fabric(system("trn3-ultracluster"), 4096, 0.8)
    g = exchange_classes(fab, 4096, 2**30 / 4096)
    assert g.count.sum() == 4096 * 4095 and len(g.count) < 100


def test_a_phase_too_large_to_list_is_refused_with_the_rule():
    from trnsim.errors import ConfigError

    with pytest.raises(ConfigError, match=r"would list 84,925,440 flows one by one"):
        simulate("all-to-all", 2**30, 9216, "tpu-v7-pod", "direct")


@pytest.mark.parametrize("size", [1000, 64 * 1024 + 7, 3 * MiB + 1, 300 * MiB])
@pytest.mark.parametrize("name,ranks", [("trn3-gen2", 100), ("gb300-nvl72", 150),
                                        ("trn2-ultraserver", 64)])  # fmt: skip
def test_grouped_matches_per_flow_across_sizes(name, ranks, size):
    for op, algo in (("all-to-all", "direct"), ("all-reduce", "rdh"), ("all-gather", "ring")):
        spec = simulate(op, size, ranks, name, algo, overheads=OV, grouped=False)
        _same(spec, simulate(op, size, ranks, name, algo, overheads=OV))


def test_leaves_that_do_not_nest_fall_back_to_listing_flows():
    fab = build_fabric(system("trn3-gen2"), 300, 0.8, FatTree(tiers=2, leaf_chips=100))
    assert exchange_classes(fab, 300, 1e6) is None
