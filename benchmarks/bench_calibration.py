"""Timing calibration on public measurements (issue 27): the fits behind the constants.

Run: ``.venv/bin/python benchmarks/bench_calibration.py [ROOT]`` (ROOT holds the checkouts;
default /work/checkouts). Prints:

- ``--launch``: the launch-overhead fit (``trnsim.core.calibration.LAUNCH_OVERHEAD_S``): per
  single-tile MLP row of trainium-kernel-fusion, measured latency minus the modelled stream
  (``launch_s=0``), per launch, and their median;
- ``--toolchain``: the SDK 2.20 tutorial toolchain's DMA efficiency sweep (the four matmul
  tutorial rows, trnsim's versions of the kernels);
- ``--before REV``: every calibration row timed by the code of git revision REV (its ``src/``
  exported to a scratch directory, this tree's harness files copied in; each row scheduled
  with that code's defaults, timing only), with the MAPE: the "before" column of RESULTS.md
  (REV 5927374, the branch point of issue 27);
- with none: ``--launch`` and ``--toolchain``.

The rows' table itself: ``trnsim calibrate ROOT --markdown`` (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from trnsim.core import calibration
from trnsim.core.timing import schedule


def launch_fit(root: str) -> None:
    from trnsim.conformance.timing import _imports, find_checkouts, load
    from trnsim.conformance.timing_rows import ROWS
    from trnsim.nki.benchmark import record

    checkouts = find_checkouts(root, {})
    if "trainium-kernel-fusion" not in checkouts:
        print(f"no trainium-kernel-fusion checkout under {root}")
        return
    print("| row | measured | modelled stream | implied launch overhead |")
    print("|---|---:|---:|---:|")
    implied = []
    for row in ROWS:
        if not (row.name.startswith("tkf/mlp/") and row.name.endswith("/128x128x512")):
            continue
        base = checkouts[row.repo]
        body = 0.0
        with _imports(base):
            for launch in row.launches:
                k = load(launch.kernel, base)
                stream = record(k, *launch.args(), target=row.target, **launch.kwargs)
                body += schedule(stream, row.target, launch_s=0.0).total_s
        per = (row.measured_s - body) / len(row.launches)
        implied.append(per)
        print(
            f"| {row.name} | {row.measured_s * 1e6:.1f} us | {body * 1e6:.1f} us | "
            f"{per * 1e6:.1f} us |"
        )
    print(
        f"\nmedian {statistics.median(implied) * 1e6:.1f} us (LAUNCH_OVERHEAD_S = "
        f"{calibration.LAUNCH_OVERHEAD_S * 1e6:.1f} us)\n"
    )


def toolchain_fit() -> None:
    from trnsim.nki.benchmark import record
    from trnsim.nki.kernelfile import load_module

    examples = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing"
    mt = load_module(str(examples / "matmul_tutorial.py"))
    m, k, n = calibration.SHAPE
    lhs_t, rhs = mt.make_inputs(M=m, K=k, N=n, empty=True)
    streams = {
        r.variant: record(mt.VARIANTS[r.variant], lhs_t, rhs, target="gen2")
        for r in calibration.MEASUREMENTS
    }
    variants = " | ".join(r.variant for r in calibration.MEASUREMENTS)
    print(f"| DMA efficiency | {variants} | sum of squared log errors |")
    print("|---:|" + "---:|" * (len(calibration.MEASUREMENTS) + 1))
    best = None
    for step in range(36, 47):
        eff = step / 100
        errs = [
            schedule(streams[r.variant], "gen2", dma_efficiency=eff).total_s / r.latency_s
            for r in calibration.MEASUREMENTS
        ]
        sse = sum(math.log(e) ** 2 for e in errs)
        best = min(best or (sse, eff), (sse, eff))
        cells = " | ".join(f"{e - 1:+.1%}" for e in errs)
        print(f"| {eff:.2f} | {cells} | {sse:.5f} |")
    print(
        f"\nbest {best[1]:.2f} (TUTORIAL_TOOLCHAIN: "
        f"{calibration.TUTORIAL_TOOLCHAIN.dma_efficiency:.2f})\n"
    )


BEFORE_RUNNER = """
import json, sys
import trnsim
assert trnsim.__file__.startswith(sys.argv[1]), trnsim.__file__
from trnsim.conformance import timing as T
from trnsim.conformance.timing_rows import ROWS

def _time(row, root):
    from trnsim.core.timing import schedule
    from trnsim.nki.benchmark import record
    total = 0.0
    for launch in row.launches:
        k = T.load(launch.kernel, root)
        instrs = record(k, *launch.args(), target=row.target, **launch.kwargs)
        total += schedule(instrs, row.target).total_s
    return total, {}

T._time = _time
res = T.run_rows(ROWS, T.find_checkouts(sys.argv[2], {}), check=False)
json.dump([r.to_dict() for r in res], sys.stdout)
"""


def before(rev: str, root: str) -> None:
    """The rows on revision ``rev``'s code (see the module docstring)."""
    import json
    import subprocess
    import tempfile

    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="trnsim-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(here), "archive", rev, "src"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        conf = Path(tmp) / "src" / "trnsim" / "conformance"
        for name in ("timing.py", "timing_rows.py"):
            (conf / name).write_text((here / "src/trnsim/conformance" / name).read_text())
        out = subprocess.run(
            [sys.executable, "-c", BEFORE_RUNNER, tmp, root],
            env={**__import__("os").environ, "PYTHONPATH": str(Path(tmp) / "src")},
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp,
        ).stdout
    rows = json.loads(out)
    print(f"| row | measured | modelled at {rev} | error |")
    print("|---|---:|---:|---:|")
    for r in rows:
        err = r["rel_error"]
        mod = "-" if r["modelled_s"] is None else f"{r['modelled_s'] * 1e3:.4g} ms"
        cell = (r["error"] or "-").replace("|", "/")[:90] if err is None else f"{err:+.1%}"
        print(f"| {r['name']} | {r['measured_s'] * 1e3:.4g} ms | {mod} | {cell} |")
    errs = [abs(r["rel_error"]) for r in rows if r["rel_error"] is not None]
    for s in ("autocomp", "tkf", "sdk"):
        e = [
            abs(r["rel_error"])
            for r in rows
            if r["rel_error"] is not None and r["name"].startswith(s + "/")
        ]
        n = sum(1 for r in rows if r["name"].startswith(s + "/"))
        print(f"- {s}: MAPE {sum(e) / len(e):.1%} over {len(e)} of {n} rows timed")
    print(f"- overall: MAPE {sum(errs) / len(errs):.1%} over {len(errs)} of {len(rows)} rows timed")


def main() -> None:
    argv = sys.argv[1:]
    rev = None
    if "--before" in argv:
        i = argv.index("--before")
        rev = argv[i + 1]
        del argv[i : i + 2]
    args = [a for a in argv if not a.startswith("--")]
    root = args[0] if args else "/work/checkouts"
    flags = {a for a in argv if a.startswith("--")}
    if rev is not None:
        before(rev, root)
    if (not flags and rev is None) or "--launch" in flags:
        launch_fit(root)
    if (not flags and rev is None) or "--toolchain" in flags:
        toolchain_fit()


if __name__ == "__main__":
    main()
