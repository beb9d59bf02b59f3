"""Speed of the DRA fleet simulator: a synthetic trace of 10,000 jobs on 1,000 UltraServers
(Trn3 Gen2: 36,000 nodes, 144,000 devices; and Trn2: 4,000 nodes, 64,000 devices) under
each policy (target: under 30 s each). Baseline, in the same run: the same event loop over
the same trace with a trivial policy that places nothing but a job's first free node's
devices without searching (the loop, the state updates and the slowdown model, no policy
search), so the ratio is the cost of the placement policy itself.

Also: allocating the seven AWS templates (``deploy/files/specs``) with the Kubernetes
allocator and CEL on a 2-UltraServer + 4-instance fleet, if the checkout is present.

Run: ``.venv/bin/python benchmarks/bench_dra.py [--jobs 10000] [--ultraservers 1000]``
(prints Markdown table rows; needs the ``dra`` extra for the template row).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from trnsim.dra import fleet as F
from trnsim.dra import policies, sim
from trnsim.dra.state import FleetState, Placement
from trnsim.dra.trace import synthetic

SPECS = Path("/work/checkouts/sdk/deploy/files/specs")


def trivial(state: FleetState, shape: policies.Shape) -> Placement | None:
    """The baseline: the first node with enough free devices, or the first whole free nodes;
    no groups, no UltraServers, no best fit."""
    size = state.dmax
    if shape.chips <= size:
        node = int(np.argmax(state.free_count >= shape.chips))
        if state.free_count[node] < shape.chips:
            return None
        devs = np.flatnonzero(state.free[node])[: shape.chips]
        return Placement((node,), (tuple(int(d) for d in devs),))
    k = -(-shape.chips // size)
    nodes = np.flatnonzero(state.node_whole_free)[:k]
    if nodes.size < k:
        return None
    return Placement(tuple(int(n) for n in nodes), tuple(tuple(range(size)) for _ in nodes))


def run(fleet: str, jobs: int) -> None:
    fl = F.load(fleet)
    tr = synthetic(jobs, fl.devices, max(n.devices for n in fl.nodes), seed=0, load=0.95)
    t0, c0 = time.perf_counter(), time.process_time()
    base = sim.simulate(tr, fl, "baseline", place=trivial)
    t_base, c_base = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"| {fleet}, {jobs} jobs | baseline (trivial policy) | {t_base:.1f} s "
        f"(CPU {c_base:.1f} s) | {base.utilisation:.1%} | | |"
    )
    for name in policies.POLICIES:
        t0, c0 = time.perf_counter(), time.process_time()
        res = sim.simulate(tr, fl, name)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        s = res.summary()
        print(
            f"| {fleet}, {jobs} jobs | {name} | {dt:.1f} s, CPU {cpu:.1f} s "
            f"({cpu / c_base:.2f}x baseline) | "
            f"{s['utilisation']:.1%} | {s['queue_delay_s']['mean'] / 60:.1f} min | "
            f"{s['jobs_across_ultraservers']} |"
        )


def templates() -> None:
    try:
        from trnsim.dra import manifests, schedule
    except ImportError:
        return
    if not SPECS.is_dir():
        return
    fl = F.load("trn2.48xlarge=4,trn2-ultraserver=2")
    t0 = time.perf_counter()
    for p in sorted(SPECS.glob("*.yaml")):
        schedule.allocate(manifests.load(p), fl)
    print(f"| 7 AWS templates on {fl.summary()} | allocate | {time.perf_counter() - t0:.2f} s |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--ultraservers", type=int, default=1000)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores")
    print("| fleet, trace | policy | time | utilisation | mean queue delay | jobs across US |")
    print("|---|---|---:|---:|---:|---:|")
    for us in ("trn3-gen2-ultraserver", "trn2-ultraserver"):
        run(f"{us}={a.ultraservers}", a.jobs)
    templates()


if __name__ == "__main__":
    main()
