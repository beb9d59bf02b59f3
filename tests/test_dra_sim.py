"""Placement policies (pure functions, tested without the loop), the event loop (tested with a
trivial policy), failures, slowdowns from the fabric, and the ``trnsim dra`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trnsim.cli.main import main
from trnsim.dra import fleet as F
from trnsim.dra import policies, sim, speed
from trnsim.dra.policies import Shape
from trnsim.dra.state import FleetState, Placement
from trnsim.dra.trace import Failure, Job, Trace

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "dra"


def state(fleet: str) -> FleetState:
    return FleetState(F.load(fleet))


# --- policies, without the loop ---------------------------------------------------------------


def test_dra_keeps_a_small_job_in_one_connected_group() -> None:
    st = state("trn2.48xlarge=1")
    st.apply(Placement((0,), ((0, 1, 5),)))  # rows 0 and 1 partly used
    p = policies.dra_topology(st, Shape(3))
    assert p is not None and len({d // 4 for d in p.devices[0]}) == 1
    # best fit inside the node: row 1 (3 free) before the emptier rows 2 and 3
    assert {d // 4 for d in p.devices[0]} == {1}


def test_count_takes_the_first_free_devices_anywhere_in_the_node() -> None:
    st = state("trn2.48xlarge=1")
    st.apply(Placement((0,), ((0, 1, 5),)))
    p = policies.count_only(st, Shape(3))
    assert p == Placement((0,), ((2, 3, 4),))


def test_best_fit_picks_the_tightest_node() -> None:
    st = state("trn2.48xlarge=3")
    st.apply(Placement((1,), (tuple(range(12)),)))
    assert policies.best_fit(st, Shape(4)).nodes == (1,)
    assert policies.count_only(st, Shape(4)).nodes == (0,)


def test_dra_gangs_a_multi_node_job_inside_one_ultraserver() -> None:
    st = state("trn2-ultraserver=2")
    st.apply(Placement((0,), (tuple(range(16)),), whole_nodes=True))  # US 0 has 3 free nodes
    p = policies.dra_topology(st, Shape(32))
    assert p is not None and len({int(st.node_us[n]) for n in p.nodes}) == 1
    assert p.nodes == (2, 3)  # an aligned pair (ultraserverMode 2), best fit: the busier US
    # count-only takes the first free nodes, across the UltraServer boundary
    st.apply(Placement((2,), (tuple(range(16)),)))
    st.apply(Placement((3,), (tuple(range(16)),)))  # US 0 keeps node 1 free
    q = policies.count_only(st, Shape(32))
    assert {int(st.node_us[n]) for n in q.nodes} == {0, 1}
    assert policies.dra_topology(st, Shape(32)).nodes == (4, 5)


def test_dra_rounds_a_three_node_job_up_to_mode_four() -> None:
    st = state("trn2-ultraserver=1")
    p = policies.dra_topology(st, Shape(48))
    assert p.nodes == (0, 1, 2, 3) and p.chips == 64


def test_dra_takes_whole_ultraservers_beyond_one() -> None:
    st = state("trn2-ultraserver=3")
    st.apply(Placement((0,), ((0,),)))
    p = policies.dra_topology(st, Shape(128))
    assert sorted({int(st.node_us[n]) for n in p.nodes}) == [1, 2]


def test_tainted_device_keeps_its_node_from_whole_node_placements() -> None:
    st = state("trn2-ultraserver=1")
    st.taint(1, 7)
    assert policies.dra_topology(st, Shape(0, nodes=4)) is None
    assert policies.dra_topology(st, Shape(0, nodes=2)).nodes == (2, 3)


def test_policies_do_not_change_the_state() -> None:
    st = state("trn2-ultraserver=2")
    before = st.free.copy()
    for pol in policies.POLICIES.values():
        pol(st, Shape(40))
        pol(st, Shape(3))
    assert np.array_equal(before, st.free)


# --- the loop ---------------------------------------------------------------------------------


def first_node_policy(st: FleetState, shape: Shape) -> Placement | None:
    """Trivial: the whole of node 0 or nothing."""
    return Placement((0,), (tuple(range(16)),)) if st.node_whole_free[0] else None


def test_loop_with_a_trivial_policy_runs_jobs_in_turn() -> None:
    fl = F.load("trn2.48xlarge=1")
    jobs = tuple(Job(f"j{i}", arrival=0.0, chips=16, duration=100.0) for i in range(3))
    res = sim.simulate(Trace(jobs), fl, "trivial", place=first_node_policy)
    assert [r.first_start for r in res.records] == [0.0, 100.0, 200.0]
    assert [r.end for r in res.records] == [100.0, 200.0, 300.0]
    assert res.utilisation == pytest.approx(1.0)
    assert res.summary()["queue_delay_s"]["mean"] == pytest.approx(100.0)


def test_fifo_blocks_and_backfill_does_not() -> None:
    fl = F.load("trn2.48xlarge=2")
    jobs = (
        Job("big", 0.0, chips=16, duration=100.0),
        Job("huge", 1.0, chips=32, duration=10.0),
        Job("small", 2.0, chips=4, duration=10.0),
    )
    back = sim.simulate(Trace(jobs), fl, "dra", queue="backfill")
    fifo = sim.simulate(Trace(jobs), fl, "dra", queue="fifo")
    assert back.records[2].first_start == 2.0
    assert fifo.records[2].first_start == 110.0


def test_failed_device_evicts_the_job_and_isolates_the_device() -> None:
    fl = F.load("trn2.48xlarge=2")
    jobs = (Job("a", 0.0, chips=16, duration=100.0),)
    tr = Trace(jobs, (Failure(time=40.0, node=0, device=3, repair=1000.0),))
    res = sim.simulate(tr, fl, "dra")
    (rec,) = res.records
    assert rec.evictions == 1
    assert rec.end == pytest.approx(100.0)  # restarted at 40 on node 1 with 60 s left
    assert rec.history[-1][2].nodes == (1,)


def test_split_job_is_slower_than_a_packed_one() -> None:
    st = state("trn2-ultraserver=2")
    work = speed.DataParallel(step_s=0.05, allreduce_bytes=8e9)
    packed = Placement((0, 1, 2, 3), tuple(tuple(range(16)) for _ in range(4)))
    split = Placement((0, 1, 4, 5), tuple(tuple(range(16)) for _ in range(4)))
    assert speed.slowdown(st, packed, work) == 1.0
    assert speed.slowdown(st, split, work) > 1.01
    assert speed.spans(st, split) == {"nodes": 4, "ultraservers": 2}


def test_training_job_duration_comes_from_perf() -> None:
    st = state("trn2-ultraserver=1")
    work = speed.Training("llama-2-7b", tokens=1e9, tp=8)
    p = Placement((0, 1, 2, 3), tuple(tuple(range(16)) for _ in range(4)))
    d = speed.ideal_duration(st, p, work)
    assert 0 < d < 1e9 and np.isfinite(d)


def test_synthetic_trace_runs_under_every_policy() -> None:
    fl = F.load("trn2-ultraserver=8,trn2.48xlarge=4")
    from trnsim.dra.trace import synthetic

    tr = synthetic(150, fl.devices, 16, seed=3)
    for name in policies.POLICIES:
        s = sim.simulate(tr, fl, name).summary()
        assert s["completed"] == 150
        assert 0 < s["utilisation"] <= 1
        assert s["slowdown"]["mean"] >= 0.99


# --- CLI --------------------------------------------------------------------------------------


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["dra", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_allocate_ok_and_refused(capsys) -> None:
    pytest.importorskip("celpy")
    claim = str(EXAMPLES / "claims" / "connected-8-lnc1.yaml")
    rc, out, _ = cli(capsys, "allocate", claim, "--fleet", str(EXAMPLES / "fleet-mixed.yaml"))
    assert rc == 0 and "neurondevice 8,9,10,11,12,13,14,15" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    rc, out, _ = cli(capsys, "allocate", claim, "--fleet", "trn1.32xlarge=2")
    assert rc == 1 and "no device matches" in out


def test_cli_allocate_json_is_strict(capsys) -> None:
    pytest.importorskip("celpy")
    claim = str(EXAMPLES / "claims" / "trn3-ultraserver-4-node.yaml")
    rc, out, _ = cli(capsys, "allocate", claim, "--fleet", "trn3-gen1-ultraserver=1", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["allocated"] and len(doc["pods"]) == 4


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: [", "not valid YAML"),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: x}\n"
            "spec: {devices: {requests: [{name: r, exactly: {deviceClassName: nope.io}}]}}\n",
            "unknown DeviceClass 'nope.io'",
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: x}\n"
            "spec: {devices: {requests: [{name: r, exactly: {deviceClassName: neuron.aws.com, "
            "count: 64}}]}}\n",
            "exceeds the 32 devices",
        ),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(capsys, tmp_path, text: str, words: str) -> None:
    pytest.importorskip("celpy")
    p = tmp_path / "c.yaml"
    p.write_text(text)
    rc, _out, err = cli(capsys, "allocate", str(p), "--fleet", "trn2.48xlarge=1")
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1


def test_cli_simulate_json_and_png(capsys, tmp_path) -> None:
    pytest.importorskip("yaml")
    png = tmp_path / "t.png"
    rc, out, _ = cli(
        capsys,
        "simulate",
        str(EXAMPLES / "trace.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-mixed.yaml"),
        "--policy",
        "dra,count",
        "--json",
        "--png",
        str(png),
    )
    doc = json.loads(out)
    assert rc == 0 and [r["summary"]["policy"] for r in doc["results"]] == ["dra", "count"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*tmp"))


def test_cli_slices_yaml(capsys) -> None:
    pytest.importorskip("yaml")
    rc, out, _ = cli(capsys, "slices", "--fleet", "trn2.48xlarge=1")
    assert rc == 0 and out.count("kind: ResourceSlice") == 1 and "devicegroup16_id" in out


def test_import_trnsim_dra_needs_no_extra() -> None:
    code = (
        "import sys, trnsim, trnsim.dra, trnsim.dra.sim, trnsim.cli.dra; "
        "print('celpy' in sys.modules or 'yaml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_extra_says_how_to_install(monkeypatch, capsys) -> None:
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "celpy" or name.startswith("celpy."):
            raise ImportError("No module named 'celpy'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    monkeypatch.delitem(sys.modules, "celpy", raising=False)
    rc, _, err = cli(capsys, "slices", "--fleet", "trn2.48xlarge=1")
    assert rc == 2 and "pip install" in err and "[dra]" in err


@pytest.mark.parametrize("seed", range(12))
def test_dra_policy_agrees_with_the_kubernetes_allocator(seed: int) -> None:
    """On one trn2.48xlarge with random devices in use, the dra policy places c connected
    devices exactly when Kubernetes' allocator can allocate a claim of count c with
    matchAttribute devicegroup{g}_id, and its devices satisfy that claim's constraint."""
    pytest.importorskip("celpy")
    from trnsim.dra import driver, manifests
    from trnsim.dra.allocator import Allocator

    rng = np.random.default_rng(seed)
    fl = F.load("trn2.48xlarge=1")
    busy = tuple(int(d) for d in np.flatnonzero(rng.random(16) < 0.45))
    for g, c in ((4, 1 + seed % 4), (8, 1 + seed % 8)):
        st = FleetState(fl)
        if busy:
            st.apply(Placement((0,), (busy,)))
        alloc = Allocator(driver.slices(fl), {driver.DRIVER: driver.DEVICE_CLASS})
        alloc.allocated = {(driver.DRIVER, fl.nodes[0].name, f"neurondevice{d}") for d in busy}
        text = f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: c}}
spec:
  devices:
    requests: [{{name: r, exactly: {{deviceClassName: neuron.aws.com, count: {c}}}}}]
    constraints: [{{matchAttribute: resource.aws.com/devicegroup{g}_id}}]
"""
        claim = manifests.load_text(text).claims[0]
        k8s = alloc.allocate(fl.nodes[0].name, [claim])
        mine = policies.dra_topology(st, Shape(c, group=g))
        assert (k8s is not None) == (mine is not None), (busy, g, c)
        if mine is not None:
            assert len({d // g for d in mine.devices[0]}) == 1
