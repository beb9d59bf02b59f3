"""Flow-level simulator: max-min fairness invariants, agreement with the closed form, a2a-v."""

from __future__ import annotations

import time

import numpy as np
import pytest

from trnsim.errors import ConfigError
from trnsim.fabric import FatTree, Overheads, collective_time
from trnsim.fabric.flowsim import Phase, alltoallv, maxmin_rates, run_phase, simulate
from trnsim.fabric.topology import build_fabric
from trnsim.hw import system

MiB = 2**20
OV = Overheads(software_s=20e-6, link_efficiency=0.8)


def test_maxmin_textbook_example():
    """Links A (cap 1) and B (cap 2); f0 on A, f1 on A and B, f2 on B: rates 0.5, 0.5, 1.5."""
    cap = np.array([1.0, 2.0])
    fi = np.array([0, 1, 1, 2])
    li = np.array([0, 0, 1, 1])
    assert maxmin_rates(cap, fi, li, 3) == pytest.approx([0.5, 0.5, 1.5])


def test_maxmin_random_invariants():
    """Feasible (no link over capacity) and every flow has a saturated link where it is largest."""
    rng = np.random.default_rng(1)
    cap = rng.uniform(1, 10, 40)
    nflows = 300
    fi = np.repeat(np.arange(nflows), 3)
    li = rng.integers(0, 40, nflows * 3)
    rates = maxmin_rates(cap, fi, li, nflows)
    load = np.bincount(li, weights=rates[fi], minlength=40)
    assert (load <= cap * (1 + 1e-9)).all()
    saturated = load >= cap * (1 - 1e-9)
    for f in range(nflows):
        links = li[fi == f]
        assert any(saturated[lk] and rates[f] >= rates[fi[li == lk]].max() * (1 - 1e-9)
                   for lk in links)  # fmt: skip


AGREE = [  # (system, ranks, op, algo, bytes): configurations where both evaluators apply exactly
    ("trn3-gen2", 4, "all-reduce", "ring", 64 * MiB),
    ("trn3-gen2", 144, "all-reduce", "ring", 64 * MiB),
    ("trn3-gen2", 144, "all-to-all", "direct", 64 * MiB),
    ("trn3-gen2", 144, "all-reduce", "hierarchical", 256 * MiB),
    ("trn3-gen2", 144, "all-gather", "hierarchical", 4 * MiB),
    ("trn3-gen2", 144, "permute", "direct", 64 * MiB),
    ("trn3-gen2", 128, "reduce-scatter", "rdh", 16 * MiB),
    ("trn3-gen1", 64, "all-to-all", "direct", 16 * MiB),
    ("gb300-nvl72", 72, "all-gather", "direct", 64 * MiB),
    ("trn3-gen2", 288, "all-reduce", "hierarchical", 256 * MiB),
]


@pytest.mark.parametrize("name,ranks,op,algo,size", AGREE)
def test_flow_simulation_agrees_with_closed_form_on_switches(name, ranks, op, algo, size):
    closed = collective_time(op, size, ranks, name, algo, overheads=OV)
    flow = simulate(op, size, ranks, name, algo, overheads=OV)
    assert flow.evaluator == "flow" and flow.algo == closed.algo
    assert flow.time_s == pytest.approx(closed.time_s, rel=0.02)


@pytest.mark.parametrize("name,ranks", [("trn2.48xlarge", 16), ("trn2-ultraserver", 64)])
def test_torus_all_to_all_is_within_the_stated_band(name, ranks):
    """On a torus the closed form is the uniform-load bound; routed flows can only be slower,
    and dimension-ordered routing stays within 1.5x of it here."""
    closed = collective_time("all-to-all", 64 * MiB, ranks, name, "direct", overheads=OV)
    flow = simulate("all-to-all", 64 * MiB, ranks, name, "direct", overheads=OV)
    assert closed.time_s * (1 - 1e-9) <= flow.time_s <= 1.5 * closed.time_s


def test_two_flows_on_one_link_share_it():
    fab = build_fabric(system("trn3-gen2"), 4, 1.0)
    cap = system("trn3-gen2").level("server").bw_per_chip
    lat = system("trn3-gen2").level("server").latency_s
    one = run_phase(fab, Phase(np.array([0]), np.array([1]), np.array([1e9])))
    two = run_phase(fab, Phase(np.array([0, 0]), np.array([1, 2]), np.array([1e9, 1e9])))
    assert one == pytest.approx(lat + 1e9 / cap)
    assert two == pytest.approx(lat + 2e9 / cap)


def test_alltoallv_uniform_matches_all_to_all_and_skew_is_slower():
    n, m = 144, 64 * MiB
    uniform = np.full((n, n), m / n)
    np.fill_diagonal(uniform, 0)
    a2a = simulate("all-to-all", m, n, "trn3-gen2", "direct", overheads=OV).time_s
    assert alltoallv(uniform, "trn3-gen2", overheads=OV) == pytest.approx(a2a, rel=1e-6)
    skew = uniform.copy()
    skew[:, 0] *= 8  # a hot expert on rank 0: everyone sends it 8x more
    t_skew = alltoallv(skew, "trn3-gen2", overheads=OV)
    eff = OV.link_efficiency
    levels = system("trn3-gen2").levels
    # lower bound: rank 0's ingress at the inter-rack level (72 senders in the other rack)
    bound = skew[72:, 0].sum() / (levels[2].bw_per_chip * eff)
    assert t_skew >= bound and t_skew > a2a
    with pytest.raises(ConfigError, match="square"):
        alltoallv(np.zeros((3, 4)), "trn3-gen2")


def test_oversubscribed_fat_tree_slows_cross_leaf_traffic():
    n, m = 576, 16 * MiB  # four Gen2 UltraServers: every leaf is one UltraServer
    flat = simulate("permute", m, n, "trn3-gen2", "direct", overheads=OV).time_s
    over = simulate("permute", m, n, "trn3-gen2", "direct", overheads=OV,
                    fat_tree=FatTree(tiers=2, oversubscription=4.0)).time_s  # fmt: skip
    assert over >= flat


def test_144_chip_all_to_all_is_fast():
    t0 = time.perf_counter()
    simulate("all-to-all", 64 * MiB, 144, "trn3-gen2", "direct")
    assert time.perf_counter() - t0 < 2.0


def test_unsupported_pattern_is_explained():
    with pytest.raises(ConfigError, match="no phase model for all-reduce with 'tree'"):
        simulate("all-reduce", MiB, 16, "trn3-gen2", "tree")
