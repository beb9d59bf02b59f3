"""Study (issue 23, session 8): can one ``nxd-inference`` profile price both set H's 70B prefill
and the serving.md K3 Trn2 run read with the graphs optimum-neuron compiles (4,096 tokens)?

Prints, for three table-model profiles of ``nxd-inference``, every H, S and X row's error and
the K3 Trn2 step times of the 4,096-token graphs (``StepCost`` of Llama-3.1-8B, TP4 on one
trn2 chip, as ``trnsim.serve`` prices them), next to the measured one-user TTFT and ITL (both
include the runner's host time, so the step alone must be below them):

- ``stored``: the profile in ``trnsim.perf.stacks``;
- ``refit H+S``: refitted (``calsets.fit_stacks``) to H and S, as stored profiles are;
- ``refit H+S+X``: the same with the held-out set X in the fit too.

``--h-graphs`` prices the H 70B row with the graphs its tutorial compiles (aws-neuron-sdk
@ 81ce03ae libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst:
``--context-encoding-buckets 2048 4096 8192 12288 --token-generation-buckets 2048 4096 8192
12800``): TTFT = the 12,288-token prefill graph, TPOT = a decode step at 12,800. Without it the
row is priced as stored (a 10,000-token prefill, decodes at their own contexts). Nothing here
changes the stored model: a what-if with its numbers.

    .venv/bin/python benchmarks/study_nxdi_graphs.py [--h-graphs]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import trnsim.perf.calsets as cs
from trnsim.hw import system
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.step import StepCost
from trnsim.workloads import SeqGroup

H70 = "llama-3.3-70b TP64 b1 in10000 out1500"
H70_GRAPHS = (12288, 12800)
K3_TTFT_MS, K3_ITL_MS = 197.2, 22.14  # serving.md K3 Trn2 TP4, synchronous, means


def _h70_graph_rows(compute: str) -> dict[str, object]:
    sysm = system(cs.H_SYSTEM)
    cm = cs.compute_model(compute, sysm.chip, cs.H_RANKS_PER_CHIP)
    plan = ParallelPlan(tp=64, zero=0, recompute="none", ranks_per_chip=cs.H_RANKS_PER_CHIP)
    cte, tkg = H70_GRAPHS

    def cost(e):
        return StepCost("llama-3.3-70b", sysm, plan, eff=e, compute_model=cm, stack="nxd-inference")

    return {
        "TTFT ms": lambda e: (
            cost(e).step((SeqGroup(1, cte, cte, False),), compiled=True).total * 1e3
        ),
        "TPOT ms": lambda e: cost(e).decode(1, tkg).total * 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h-graphs", action="store_true", help="H 70B row at its compiled graphs")
    args = ap.parse_args()
    compute = "table"
    if args.h_graphs:
        orig = cs.rows
        graph = _h70_graph_rows(compute)

        def rows(c: str = "auto", sets=None):
            out = orig(c, sets)
            return [
                replace(r, predict=graph[r.metric]) if r.set == "H" and r.label == H70 else r
                for r in out
            ]

        cs.rows = rows  # fit_stacks and the table below read the module's rows()
    stored = cs._profile("nxd-inference", compute)
    fit_hs = cs.fit_stacks("nxd-inference", compute)["nxd-inference"].base
    checks = cs.CHECK_SETS
    cs.CHECK_SETS = frozenset(checks - {"X"})
    try:
        fit_hsx = cs.fit_stacks("nxd-inference", compute)["nxd-inference"].base
    finally:
        cs.CHECK_SETS = checks
    profs = {"stored": stored, "refit H+S": fit_hs, "refit H+S+X": fit_hsx}
    print(f"H 70B row at its compiled graphs {H70_GRAPHS}: {args.h_graphs}")
    for n, e in profs.items():
        print(
            f"{n}: kernel_matmul {e.kernel_matmul:.4f}, attention {e.attention:.4f}, "
            f"hbm {e.hbm:.4f}, draft step {e.draft_step_overhead_s * 1e3:.3f} ms"
        )
    print("\n| row | measured | " + " | ".join(profs) + " |")
    print("|---|---|" + "---|" * len(profs))
    for r in cs.rows(compute, ["H", "S", "X"]):
        if r.stack != "nxd-inference":
            continue
        cells = [f"{100 * (r.predict(e) / r.measured - 1):+.1f}%" for e in profs.values()]
        print(f"| {r.set} {r.label} {r.metric} | {r.measured:g} | " + " | ".join(cells) + " |")
    plan = ParallelPlan(tp=4, zero=0, recompute="none", ranks_per_chip=4)
    k3 = (
        ("K3 Trn2 prefill graph 4,096, ms", K3_TTFT_MS,
         lambda sc: sc.step((SeqGroup(1, 4096, 4096, False),), compiled=True).total),
        ("K3 Trn2 decode graph 32 x 4,096, ms", K3_ITL_MS, lambda sc: sc.decode(32, 4096).total),
    )  # fmt: skip
    for label, measured, f in k3:
        cells = []
        for e in profs.values():
            sc = StepCost("llama-3.1-8b", system("trn2.48xlarge"), plan, eff=e)
            cells.append(f"{f(sc) * 1e3:.1f}")
        print(f"| {label} (measured <= {measured}) | {measured} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
