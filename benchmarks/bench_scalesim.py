"""A 1024^3 bf16 GEMM timed by trnsim and by SCALE-Sim on a 128x128 array, side by side (issue 5).

Run: ``.venv/bin/python benchmarks/bench_scalesim.py [--json] [--jobs 2]`` (needs the network
once, to build SCALE-Sim's venv; then 5 to 11 minutes on 2 cores: 9 SCALE-Sim runs of 1-3 minutes
each). Not part of the test suite.

SCALE-Sim (https://github.com/scalesim-project/SCALE-Sim, PyPI ``scalesim``) needs ``numpy<2``
while trnsim needs NumPy 2, so it runs in its own venv (default
``~/.cache/trnsim-scalesim-venv``, ``--venv`` to move it), created here on first use with
``pip install "numpy<2" scalesim==SCALESIM_VERSION``, and is driven in a subprocess through its
Python API (``scalesim.scale_sim.scalesim``, GEMM input mode). If the venv cannot be built or
SCALE-Sim fails, the script says why and exits non-zero: it never prints figures it did not get.

How the GEMM is expressed in SCALE-Sim: its GEMM topology mode (``input_type_gemm=True``) reads
rows ``name, M, N, K,`` and turns them into the equivalent convolution (an ``M x K`` ifmap, one
``1 x K`` filter per output column, ``N`` filters, stride 1: ``topology_utils.load_arrays_gemm``),
so ifmap = A[M, K], filter = B[K, N], ofmap = C[M, N].

How a NeuronCore is mapped onto SCALE-Sim's config (every figure read from ``trnsim.hw``; see
``neuroncore_config``). SCALE-Sim's word is one byte (``single_layer_sim``: ``word_size = 1``),
so its sizes ("kB") and bandwidths ("words/cycle") are given here in *elements*:

- ``ArrayHeight x ArrayWidth`` = ``tensor.rows x tensor.cols`` (128 x 128).
- ``IfmapSramSzkB`` = ``FilterSramSzkB`` = half of ``sbuf_bytes`` each (SBUF holds both operands;
  SCALE-Sim has one SRAM per operand), in Ki bf16 elements.
- ``OfmapSramSzkB`` = ``psum_bytes`` in Ki fp32 accumulators (PSUM is where the NeuronCore
  accumulates the output).
- Bandwidths: trnsim's effective DMA bandwidth of one core, ``DmaModel.for_core(spec).core_bw``
  (``dma.engines x dma.engine_bw x`` the calibrated DMA efficiency), in bf16 elements per Tensor
  engine cycle (``tensor.clock_hz``). The NeuronCore's DMA engines are one pool shared by loads
  and stores, while SCALE-Sim gives each operand its own DRAM port: the two read ports
  (``IfmapSRAMBankBandwidth``, ``FilterSRAMBankBandwidth``, which SCALE-Sim 3.0 uses as the
  ifmap/filter DRAM bandwidths in USER mode) get half the pool each, the write port
  (``Bandwidth``) the whole pool. SCALE-Sim wants integers: the figures are rounded to the
  nearest integer (the exact figures are printed beside them).
- SCALE-Sim's DRAM has a 1-cycle latency; trnsim's DMA pays ``dma.fixed_latency_s`` per transfer.

The trnsim side: ``examples/kernels/timing/gemm_1024.py`` recorded in timing-only mode and
scheduled on neuroncore-v2/v3/v4.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from trnsim.core.costs import DmaModel
from trnsim.hw import CoreSpec, core
from trnsim.nki.benchmark import profile_kernel
from trnsim.nki.kernelfile import load_module

SCALESIM_VERSION = "3.0.0"
"""The SCALE-Sim release this benchmark was written against and run with (PyPI ``scalesim``)."""
VENV_REQUIREMENTS = ("numpy<2", f"scalesim=={SCALESIM_VERSION}")
DEFAULT_VENV = Path.home() / ".cache" / "trnsim-scalesim-venv"

SHAPE = (1024, 1024, 1024)  # M, N, K
DATAFLOWS = ("os", "ws", "is")
GENERATIONS = ("gen2", "gen3", "gen4")
OPERAND_BYTES = np.dtype(ml_dtypes.bfloat16).itemsize  # bf16 operands and output
ACCUMULATOR_BYTES = np.dtype(np.float32).itemsize  # fp32 PSUM accumulation
READ_PORT_SHARE = 0.5
"""Fraction of the core's DMA bandwidth given to each of SCALE-Sim's two read ports (see the
module docstring); the write port gets the whole of it."""

KERNEL_FILE = (
    Path(__file__).resolve().parents[1] / "examples" / "kernels" / "timing" / "gemm_1024.py"
)
COMPUTE_REPORT = "COMPUTE_REPORT.csv"
DETAIL_REPORT = "DETAILED_ACCESS_REPORT.csv"

# The driver run by the venv's Python: SCALE-Sim's own API, no traces written.
DRIVER = """\
import sys
from scalesim.scale_sim import scalesim
config, topology, layout, out = sys.argv[1:5]
sim = scalesim(save_disk_space=True, verbose=False, config=config, topology=topology,
               layout=layout, input_type_gemm=True)
sim.run_scale(top_path=out)
"""


class ScaleSimError(RuntimeError):
    """SCALE-Sim could not be installed or run; the message says why."""


# ---- the NeuronCore -> SCALE-Sim mapping ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScaleSimConfig:
    """The SCALE-Sim config fields this benchmark sets (sizes in Ki elements, bandwidths in
    elements per cycle), with the unrounded bandwidths for the record."""

    run_name: str
    dataflow: str
    rows: int
    cols: int
    ifmap_kwords: int
    filter_kwords: int
    ofmap_kwords: int
    read_bw: int
    write_bw: int
    read_bw_exact: float
    write_bw_exact: float


def neuroncore_config(spec: CoreSpec, dataflow: str) -> ScaleSimConfig:
    """SCALE-Sim's view of one NeuronCore (the mapping in the module docstring)."""
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow {dataflow!r} is not one of SCALE-Sim's {DATAFLOWS}")
    words_per_cycle = DmaModel.for_core(spec).core_bw / spec.tensor.clock_hz / OPERAND_BYTES
    read_exact = words_per_cycle * READ_PORT_SHARE
    return ScaleSimConfig(
        run_name=f"{spec.name}_{dataflow}",
        dataflow=dataflow,
        rows=spec.tensor.rows,
        cols=spec.tensor.cols,
        ifmap_kwords=spec.sbuf_bytes // 2 // OPERAND_BYTES // 1024,
        filter_kwords=spec.sbuf_bytes // 2 // OPERAND_BYTES // 1024,
        ofmap_kwords=spec.psum_bytes // ACCUMULATOR_BYTES // 1024,
        read_bw=max(1, round(read_exact)),
        write_bw=max(1, round(words_per_cycle)),
        read_bw_exact=read_exact,
        write_bw_exact=words_per_cycle,
    )


def config_text(cfg: ScaleSimConfig) -> str:
    """The config file SCALE-Sim 3.0 reads (``scale_config.read_conf_file``: every section and
    key it asks for). USER bandwidth mode, no custom layout, no sparsity, no Ramulator."""
    return f"""\
[general]
run_name = {cfg.run_name}

[architecture_presets]
ArrayHeight: {cfg.rows}
ArrayWidth: {cfg.cols}
IfmapSramSzkB: {cfg.ifmap_kwords}
FilterSramSzkB: {cfg.filter_kwords}
OfmapSramSzkB: {cfg.ofmap_kwords}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Dataflow: {cfg.dataflow}
Bandwidth: {cfg.write_bw}
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {cfg.read_bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {cfg.read_bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""


def topology_text(m: int, n: int, k: int) -> str:
    """A GEMM-mode topology file: a header row, then ``name, M, N, K,`` (trailing comma: SCALE-Sim
    drops the last field of every row)."""
    return f"Layer, M, N, K,\ngemm, {m}, {n}, {k},\n"


LAYOUT_TEXT = "Layer name,\n"
"""A layout file with no rows: SCALE-Sim 3.0 opens one even when no custom layout is used."""


# ---- SCALE-Sim's reports ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScaleSimResult:
    """One layer of SCALE-Sim's COMPUTE_REPORT and DETAILED_ACCESS_REPORT (cycles of the array).

    ``total_cycles`` counts from the first compute cycle to the last ofmap SRAM write, stalls
    included; ``compute_cycles = total_cycles - stall_cycles``; ``total_incl_prefetch`` runs from
    the first DRAM read (the initial SRAM fill, before cycle 0) to the last DRAM write.
    """

    total_incl_prefetch: int
    total_cycles: int
    stall_cycles: int
    overall_util: float
    mapping_efficiency: float
    compute_util: float
    dram_reads: int
    dram_writes: int

    @property
    def compute_cycles(self) -> int:
        return self.total_cycles - self.stall_cycles


def _csv_rows(text: str) -> list[dict[str, str]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise ScaleSimError(f"SCALE-Sim report has no data row:\n{text}")
    header = [h.strip() for h in lines[0].split(",")]
    rows = []
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.split(",")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def parse_reports(compute_csv: str, detail_csv: str) -> ScaleSimResult:
    """The first layer of SCALE-Sim 3.0's COMPUTE_REPORT.csv and DETAILED_ACCESS_REPORT.csv."""
    c, d = _csv_rows(compute_csv)[0], _csv_rows(detail_csv)[0]
    try:
        return ScaleSimResult(
            total_incl_prefetch=int(float(c["Total Cycles (incl. prefetch)"])),
            total_cycles=int(float(c["Total Cycles"])),
            stall_cycles=int(float(c["Stall Cycles"])),
            overall_util=float(c["Overall Util %"]) / 100,
            mapping_efficiency=float(c["Mapping Efficiency %"]) / 100,
            compute_util=float(c["Compute Util %"]) / 100,
            dram_reads=int(float(d["DRAM IFMAP Reads"])) + int(float(d["DRAM Filter Reads"])),
            dram_writes=int(float(d["DRAM OFMAP Writes"])),
        )
    except KeyError as e:
        raise ScaleSimError(
            f"SCALE-Sim report lacks column {e} (written for scalesim {SCALESIM_VERSION}); "
            f"columns: {sorted(c) + sorted(d)}"
        ) from None


# ---- the venv and the runs ---------------------------------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _installed_version(python: Path) -> str | None:
    probe = "import importlib.metadata as m, numpy; print(m.version('scalesim'), numpy.__version__)"
    r = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    scalesim, numpy_v = r.stdout.split()
    return scalesim if int(numpy_v.split(".")[0]) < 2 else None


def ensure_venv(venv: Path) -> Path:
    """The venv's Python with ``scalesim==SCALESIM_VERSION`` and ``numpy<2``, building it if
    needed. Raises ``ScaleSimError`` with pip's own words when that fails."""
    python = _venv_python(venv)
    if python.exists() and _installed_version(python) == SCALESIM_VERSION:
        return python
    steps = []
    if not python.exists():
        steps.append([sys.executable, "-m", "venv", str(venv)])
    steps.append([str(python), "-m", "pip", "install", "-q", *VENV_REQUIREMENTS])
    for cmd in steps:
        print(f"# {' '.join(cmd)}", file=sys.stderr)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
            raise ScaleSimError(
                f"cannot build SCALE-Sim's venv at {venv}: `{' '.join(cmd)}` exited "
                f"{r.returncode}:\n{tail}"
            )
    got = _installed_version(python)
    if got != SCALESIM_VERSION:
        raise ScaleSimError(
            f"venv {venv} has scalesim {got} (or numpy >= 2) after install; need "
            f"{SCALESIM_VERSION} with numpy<2"
        )
    return python


def run_scalesim(
    python: Path,
    cfg: ScaleSimConfig,
    shape: tuple[int, int, int],
    work: Path,
    reuse: bool = False,
) -> ScaleSimResult:
    """Run SCALE-Sim once in its venv and parse its reports. ``reuse``: if ``work`` already holds
    this run's reports from identical input files, parse those instead of running again."""
    run_dir = work / cfg.run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "scale.cfg": config_text(cfg),
        "gemm.csv": topology_text(*shape),
        "layout.csv": LAYOUT_TEXT,
    }
    out = run_dir / "out"
    report_dir = out / cfg.run_name
    same_inputs = all(
        (run_dir / name).exists() and (run_dir / name).read_text() == text
        for name, text in files.items()
    )
    if reuse and same_inputs and (report_dir / DETAIL_REPORT).exists():
        return parse_reports(
            (report_dir / COMPUTE_REPORT).read_text(), (report_dir / DETAIL_REPORT).read_text()
        )
    for name, text in files.items():
        (run_dir / name).write_text(text)
    cmd = [str(python), "-c", DRIVER, *(str(run_dir / f) for f in files), str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=run_dir)
    if r.returncode != 0 or not (report_dir / COMPUTE_REPORT).exists():
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise ScaleSimError(
            f"SCALE-Sim run {cfg.run_name} failed (exit {r.returncode}, "
            f"{COMPUTE_REPORT} {'missing' if not (report_dir / COMPUTE_REPORT).exists() else 'ok'}"
            f"; inputs in {run_dir}):\n{tail}"
        )
    return parse_reports(
        (report_dir / COMPUTE_REPORT).read_text(), (report_dir / DETAIL_REPORT).read_text()
    )


# ---- trnsim ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrnsimResult:
    """trnsim's timing of the GEMM kernel on one core (cycles at the Tensor engine clock)."""

    target: str
    clock_hz: float
    ideal_cycles: int
    tensor_busy_cycles: float
    matmuls: int
    total_s: float
    dma_busy_s: float
    mfu: float

    @property
    def total_cycles(self) -> float:
        return self.total_s * self.clock_hz


def ideal_cycles(spec: CoreSpec, m: int, n: int, k: int) -> int:
    """Pure compute: 2 M N K FLOP over 2 x rows x cols FLOP per cycle (one MAC per PE)."""
    return math.ceil(2 * m * n * k / (2 * spec.tensor.rows * spec.tensor.cols))


def trnsim_gemm(gen: str, shape: tuple[int, int, int]) -> TrnsimResult:
    m, n, k = shape
    mod = load_module(str(KERNEL_FILE))
    lhsT, rhs = mod.make_inputs(M=m, N=n, K=k, empty=True)
    spec = core(gen)
    p = profile_kernel(mod.gemm, lhsT, rhs, target=gen)
    clock = spec.tensor.clock_hz
    tensor = p.engine("tensor")
    return TrnsimResult(
        target=p.target,
        clock_hz=clock,
        ideal_cycles=ideal_cycles(spec, m, n, k),
        tensor_busy_cycles=tensor.busy_s * clock,
        matmuls=tensor.instructions,
        total_s=p.total_s,
        dma_busy_s=p.engine("dma").busy_s,
        mfu=p.mfu,
    )


# ---- report ------------------------------------------------------------------------------------


def _pct(a: float, b: float) -> str:
    return f"{a / b - 1:+.0%}"


def markdown(
    shape: tuple[int, int, int],
    trn: dict[str, TrnsimResult],
    ss: dict[tuple[str, str], ScaleSimResult],
    cfgs: dict[tuple[str, str], ScaleSimConfig],
    dataflows: tuple[str, ...],
) -> str:
    """The two tables of RESULTS.md: compute only (cycles of the array), then end to end."""
    m, n, k = shape
    gens = list(trn)
    t0 = trn[gens[0]]
    out = [
        f"Compute only (cycles of the {cfgs[(gens[0], dataflows[0])].rows}x"
        f"{cfgs[(gens[0], dataflows[0])].cols} array, M={m} N={n} K={k}; the same on every "
        "core):\n",
        "| model | cycles | vs ideal |",
        "|---|---:|---:|",
        f"| ideal 2MNK / (2 x rows x cols) | {t0.ideal_cycles:,} | +0% |",
        f"| trnsim: Tensor engine busy ({t0.matmuls} matmuls) | {t0.tensor_busy_cycles:,.0f} | "
        f"{_pct(t0.tensor_busy_cycles, t0.ideal_cycles)} |",
    ]
    for df in dataflows:
        counts = sorted({ss[(g, df)].compute_cycles for g in gens})
        shown = " / ".join(f"{c:,}" for c in counts)  # one figure unless SRAM size mattered
        out.append(
            f"| SCALE-Sim {df}: total - stall cycles | {shown} | "
            f"{_pct(counts[0], t0.ideal_cycles)} |"
        )
    out += [
        "\nEnd to end (trnsim: first DMA to last store; SCALE-Sim: first DRAM read of the initial",
        "SRAM fill to last DRAM write, its 'Total Cycles (incl. prefetch)'; seconds at the Tensor",
        "engine clock; SCALE-Sim DRAM bandwidth in elements/cycle, rounded from the exact",
        "figure):\n",
        "| core | model | compute | stalls | total cycles | time | DRAM read / write bw |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for g in gens:
        t = trn[g]
        c = cfgs[(g, dataflows[0])]
        out.append(
            f"| {t.target} | trnsim | {t.tensor_busy_cycles:,.0f} | - | {t.total_cycles:,.0f} | "
            f"{t.total_s * 1e6:.1f} us | DMA {c.write_bw_exact:.1f} shared |"
        )
        for df in dataflows:
            r = ss[(g, df)]
            out.append(
                f"| {t.target} | SCALE-Sim {df} | {r.compute_cycles:,} | {r.stall_cycles:,} | "
                f"{r.total_incl_prefetch:,} | {r.total_incl_prefetch / t.clock_hz * 1e6:.1f} us | "
                f"{c.read_bw} + {c.read_bw} / {c.write_bw} |"
            )
    out.append(
        "\nSCALE-Sim DRAM traffic (elements, "
        f"{t0.target}): "
        + "; ".join(
            f"{df} {ss[(gens[0], df)].dram_reads:,} read, {ss[(gens[0], df)].dram_writes:,} written"
            for df in dataflows
        )
        + f" (operands {m * k + k * n:,}, result {m * n:,})."
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="SCALE-Sim's venv")
    ap.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--targets", nargs="+", default=list(GENERATIONS))
    ap.add_argument("--dataflows", nargs="+", default=list(DATAFLOWS), choices=DATAFLOWS)
    ap.add_argument(
        "--shape",
        nargs=3,
        type=int,
        default=list(SHAPE),
        metavar=("M", "N", "K"),
        help="GEMM shape (M, K multiples of 128, N of 512; default 1024^3)",
    )
    ap.add_argument("--workdir", type=Path, help="keep SCALE-Sim's inputs and reports here")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="with --workdir: parse reports already there from identical inputs, not rerun",
    )
    args = ap.parse_args(argv)
    if args.reuse and args.workdir is None:
        ap.error("--reuse needs --workdir")
    shape = tuple(args.shape)
    dataflows = tuple(args.dataflows)
    try:
        python = ensure_venv(args.venv)
    except ScaleSimError as e:
        print(f"bench_scalesim: SCALE-Sim not available, no comparison made.\n{e}", file=sys.stderr)
        return 2
    trn = {g: trnsim_gemm(g, shape) for g in args.targets}
    cfgs = {(g, df): neuroncore_config(core(g), df) for g in args.targets for df in dataflows}
    with tempfile.TemporaryDirectory(prefix="trnsim-scalesim-") as tmp:
        work = args.workdir or Path(tmp)
        try:
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                futures = {
                    key: pool.submit(run_scalesim, python, c, shape, work, args.reuse)
                    for key, c in cfgs.items()
                }
                ss = {key: f.result() for key, f in futures.items()}
        except ScaleSimError as e:
            print(f"bench_scalesim: SCALE-Sim failed, no comparison made.\n{e}", file=sys.stderr)
            return 3
    if args.json:
        doc = {
            "shape": {"M": shape[0], "N": shape[1], "K": shape[2]},
            "scalesim_version": SCALESIM_VERSION,
            "trnsim": {g: {**asdict(t), "total_cycles": t.total_cycles} for g, t in trn.items()},
            "scalesim": [
                {
                    "target": trn[g].target,
                    "dataflow": df,
                    "config": asdict(cfgs[(g, df)]),
                    **asdict(r),
                    "compute_cycles": r.compute_cycles,
                    "total_incl_prefetch_s": r.total_incl_prefetch / trn[g].clock_hz,
                }
                for (g, df), r in ss.items()
            ],
        }
        print(json.dumps(doc, indent=2))
    else:
        print(markdown(shape, trn, ss, cfgs, dataflows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
