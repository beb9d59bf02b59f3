"""``trnsim dra``: Kubernetes Dynamic Resource Allocation of Trainium devices on a fleet.

- ``trnsim dra allocate CLAIM.yaml --fleet FLEET``: allocate the file's claims (and the pods of
  its workloads) as Kubernetes would; the devices per claim, or why not (exit 1).
- ``trnsim dra simulate TRACE --fleet FLEET --policy dra,count,best-fit``: run a job trace.
- ``trnsim dra slices --fleet FLEET``: the ResourceSlices the Neuron DRA driver publishes.

Needs the ``dra`` extra (cel-python, PyYAML); without it every sub-command says how to install
it. This module imports neither (``trnsim.dra._optional`` does, when a command runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from trnsim.cli.argtypes import positive_int
from trnsim.errors import UsageError
from trnsim.report.output import output_path, print_json
from trnsim.report.tables import fit

POLICY_NAMES = ("dra", "count", "best-fit")


def human_time(seconds: float) -> str:
    """Durations for people: 42 s, 12.5 min, 3.2 h, 2.1 d."""
    for unit, div in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * div:
            return f"{seconds / div:.1f} {unit}"
    return f"{seconds:.0f} s"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dra_command", metavar="COMMAND")
    sub.required = True
    a = sub.add_parser(
        "allocate",
        help="allocate a claim file's ResourceClaims on a fleet (devices per claim, or why not)",
        description="Allocate the ResourceClaims / ResourceClaimTemplates of CLAIM (and the pods "
        "of its Pod, Deployment, LeaderWorkerSet) on FLEET as Kubernetes' allocator does. "
        "Exit 1 when a claim cannot be satisfied.",
    )
    a.add_argument("claim", metavar="CLAIM.yaml", help="Kubernetes manifest (multi-document)")
    _fleet_arg(a)
    a.add_argument("--status", action="store_true", help="print each claim's status as YAML")
    a.add_argument("--json", action="store_true", help="machine-readable result")

    s = sub.add_parser(
        "simulate",
        help="run a job trace on a fleet under placement policies",
        description="Simulate TRACE (a YAML/JSON trace file or synthetic:N[:SEED]) on FLEET: "
        "utilisation, queueing delay, fragmentation and each job's slowdown where it landed.",
    )
    s.add_argument("trace", metavar="TRACE", help="trace file, or synthetic:N[:SEED]")
    _fleet_arg(s)
    s.add_argument(
        "--policy",
        default="dra",
        help="placement policy, or a comma list to compare: dra (topology-aware DRA, "
        "whole-UltraServer gangs), count (device-plugin counts), best-fit (packing)",
    )
    s.add_argument("--queue", choices=("backfill", "fifo"), default="backfill")
    s.add_argument("--png", metavar="PATH", help="write the fleet timeline as a PNG")
    s.add_argument("--json", action="store_true", help="machine-readable result")
    s.add_argument("--jobs", action="store_true", help="with --json: every job's record")
    s.add_argument(
        "--load", type=float, default=0.9, help="synthetic traces: offered load (default 0.9)"
    )

    sl = sub.add_parser(
        "slices",
        help="print the ResourceSlices the Neuron DRA driver publishes for a fleet",
        description="The ResourceSlices (resource.k8s.io/v1) of every node of FLEET, as YAML.",
    )
    _fleet_arg(sl)
    sl.add_argument("--labels", action="store_true", help="print the nodes' labels instead")
    sl.add_argument("--node", type=positive_int, help="only node N (1-based, fleet order)")
    sl.add_argument("--json", action="store_true", help="JSON instead of YAML")


def _fleet_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fleet",
        required=True,
        help="fleet file (YAML/JSON) or shorthand, e.g. trn2.48xlarge=4,trn2-ultraserver=2",
    )


def run(args: argparse.Namespace) -> int:
    from trnsim.dra import _optional

    _optional.celpy()  # the one door: a missing extra is one line, exit 2
    _optional.yaml()
    return {"allocate": _allocate, "simulate": _simulate, "slices": _slices}[args.dra_command](args)


# ---------------------------------------------------------------------------------------------


def _allocate(args: argparse.Namespace) -> int:
    from trnsim.dra import fleet as fleet_mod
    from trnsim.dra import manifests, schedule

    fl = fleet_mod.load(args.fleet)
    m = manifests.load(args.claim)
    out = schedule.allocate(m, fl)
    if args.json:
        print_json(out.as_dict())
        return 0 if out.ok else 1
    console = Console(width=80)
    console.print(f"fleet: {fl.summary()}", highlight=False)
    multi = any(len(p.allocations) > 1 for p in out.pods)
    t = Table(title=f"{Path(args.claim).name}: {len(out.pods)} pod(s)")
    t.add_column("pod")
    t.add_column("node", no_wrap=True)
    if multi:
        t.add_column("claim")
    t.add_column("devices")
    for p in out.pods:
        if not p.allocations:
            t.add_row(p.pod, "", *([""] if multi else []), "not allocated")
            continue
        for a in p.allocations:
            claim = [a.claim] if multi else []
            devs = _devices(a) + ("" if p.ok else " (refused)")
            t.add_row(p.pod, _short(p.node or "-"), *claim, devs)
    console.print(fit(t))
    for p in out.pods:
        if p.reason:
            console.print(f"{p.pod}: {p.reason}", highlight=False, markup=False)
        for note in p.notes:
            console.print(f"{p.pod}: note: {note}", highlight=False, markup=False)
    if m.ignored:
        console.print(f"ignored: {', '.join(m.ignored)}", highlight=False, markup=False)
    if args.status:
        from trnsim.dra import _optional

        yaml = _optional.yaml()
        for p in out.pods:
            for a in p.allocations:
                doc = {"metadata": {"name": a.claim}, "status": a.status()}
                sys.stdout.write("---\n" + yaml.safe_dump(doc, sort_keys=False))
    return 0 if out.ok else 1


def _short(node: str) -> str:
    return node.split(".")[0]


def _devices(a: Any) -> str:
    names = [r.device.replace("neurondevice", "") for r in a.results]
    if all(n.isdigit() for n in names):
        return "neurondevice " + ",".join(names)
    return ",".join(r.device for r in a.results)


# ---------------------------------------------------------------------------------------------


def _simulate(args: argparse.Namespace) -> int:
    from trnsim.dra import fleet as fleet_mod
    from trnsim.dra import sim, trace
    from trnsim.dra.state import FleetState
    from trnsim.report.progress import progress

    names = [n.strip() for n in args.policy.split(",") if n.strip()]
    bad = [n for n in names if n not in POLICY_NAMES]
    if bad or not names:
        raise UsageError(
            f"--policy: unknown policy {bad[0] if bad else args.policy!r}; "
            f"valid: {', '.join(POLICY_NAMES)} (or a comma list)"
        )
    if not 0 < args.load <= 10:
        raise UsageError(f"--load must be in (0, 10], got {args.load}")
    png = output_path(args.png, "--png") if args.png else None
    fl = fleet_mod.load(args.fleet)
    synth = trace.synthetic_spec(args.trace)
    if synth:
        tr = trace.synthetic(
            synth[0], fl.devices, max(n.devices for n in fl.nodes), synth[1], args.load
        )
    else:
        tr = trace.load(args.trace)
    results = []
    for name in names:
        with progress(f"simulating {name}", total=len(tr.jobs)) as bar:
            done = [0]

            def tick(n: int, bar=bar, done=done) -> None:
                bar.advance(n - done[0])
                done[0] = n

            results.append(sim.simulate(tr, fl, name, args.queue, on_progress=tick))
    if png is not None:
        from trnsim.dra import timeline
        from trnsim.report.plots import save

        save(timeline.figure(results[0], FleetState(fl)), png, "--png")
    if args.json:
        doc: dict[str, Any] = {
            "trace": tr.source,
            "fleet": fl.summary(),
            "results": [r.as_dict(jobs=args.jobs) for r in results],
        }
        if png is not None:
            doc["png"] = str(png)
        print_json(doc)
        return 0
    console = Console(width=80)
    console.print(f"fleet: {fl.summary()}", highlight=False)
    console.print(f"trace: {tr.source}, {len(tr.jobs)} jobs", highlight=False)
    t = Table(title=f"policies ({args.queue} queue)")
    t.add_column("metric")
    for r in results:
        t.add_column(r.policy, justify="right")
    sums = [r.summary() for r in results]
    rows = [
        ("completed", lambda s: str(s["completed"])),
        ("utilisation", lambda s: f"{s['utilisation']:.1%}"),
        ("makespan", lambda s: human_time(s["makespan_s"])),
        ("queue delay mean", lambda s: human_time(s["queue_delay_s"]["mean"])),
        ("queue delay p95", lambda s: human_time(s["queue_delay_s"]["p95"])),
        ("slowdown mean", lambda s: f"{s['slowdown']['mean']:.4f}"),
        ("slowdown p95", lambda s: f"{s['slowdown']['p95']:.4f}"),
        ("slowdown max", lambda s: f"{s['slowdown']['max']:.4f}"),
        ("jobs across US", lambda s: str(s["jobs_across_ultraservers"])),
        ("frag. nodes", lambda s: f"{s['fragmentation']['node']:.1%}"),
        ("frag. UltraServers", lambda s: f"{s['fragmentation']['ultraserver']:.1%}"),
        ("evictions", lambda s: str(s["evictions"])),
    ]
    for label, fmt in rows:
        t.add_row(label, *(fmt(s) for s in sums))
    console.print(fit(t))
    for line in results[0].assumptions[1:]:
        console.print(f"- {line}", highlight=False, markup=False)
    if results[0].unplaceable:
        console.print(
            f"{len(results[0].unplaceable)} job(s) larger than the fleet were dropped, e.g. "
            f"{results[0].unplaceable[0]}",
            highlight=False,
            markup=False,
        )
    if png is not None:
        console.print(f"timeline: {png}", highlight=False)
    return 0


# ---------------------------------------------------------------------------------------------


def _slices(args: argparse.Namespace) -> int:
    from trnsim.dra import _optional, driver
    from trnsim.dra import fleet as fleet_mod

    fl = fleet_mod.load(args.fleet)
    nodes = list(fl.nodes)
    if args.node is not None:
        if args.node > len(nodes):
            raise UsageError(f"--node {args.node}: the fleet has {len(nodes)} nodes")
        nodes = [nodes[args.node - 1]]
    if args.labels:
        docs: list[Any] = [{"name": n.name, "labels": driver.node_labels(fl, n)} for n in nodes]
    else:
        docs = [driver.node_slice(fl, n).to_dict() for n in nodes]
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    yaml = _optional.yaml()
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False, width=100))
    return 0
