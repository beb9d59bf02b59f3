"""Matmul compute tables: per-core matmul times of a real NKI kernel, timed by ``trnsim.core``.

The kernel is ``trnsim/perf/kernels/matmul_table.py`` (the NKI matmul tutorial's fully
optimized blocking, with tile and block sizes adapted to the shape). For every shape
``y[M, N] = x[M, K] @ W[K, N]`` of the grid (``AXES``) it runs in timing-only mode
(``trnsim.nki.run(..., functional=False)``: rules checked, instruction stream recorded, no
data) and ``trnsim.core.timing.schedule`` times the stream on each NeuronCore generation.
Both operand orientations are timed where they matter (tokens stationary, the tutorial's
layout; and weights stationary, for M <= ``WEIGHTS_STATIONARY_MAX_M`` tokens) and the faster
one is kept, as a kernel library would pick it.

Recorded per entry: ``compute_s``, the busiest compute engine's busy time (Tensor engine
matmuls, Vector engine PSUM accumulation; the shape's compute cost, including partly filled
tiles, moving tiles too short to hide the stationary load, and accumulation overheads), and
``total_s``, the kernel's modelled latency including its DMAs. The performance model uses
``compute_s`` and keeps HBM traffic in its roofline term: the timing model's DMA efficiency is
fitted to one compute-bound tutorial kernel (``trnsim.core.calibration``) and under-predicts
the streaming bandwidth that decode reaches on Trn1 (table C TPOT), so ``total_s`` is
informational.

One recording serves several generations: bf16 streams are recorded on NeuronCore-v2 and
scheduled on v2, v3 and v4 (the kernel fits the smallest SBUF, so the stream is the same);
fp8 (``double_row``, v3+) is recorded on v3 and scheduled on v3 and v4. MX formats are not
tabulated (the roofline covers them).

Regenerate the cached tables (about two minutes; the kernel file ships in the package, so an
installed trnsim can)::

    python -m trnsim.perf.tables build

``tests/test_perf_tables.py`` regenerates a slice of the grid and checks it equals the cache.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from trnsim.errors import ConfigError

DATA_FILE = Path(__file__).with_name("data") / "matmul_tables.json"
KERNEL_FILE = Path(__file__).with_name("kernels") / "matmul_table.py"
"""The table kernel: an NKI kernel file (``import nki``), loaded with ``kernel_module()``."""
KERNEL = "blocked_matmul"
FORMAT = 1

# The grid (per NeuronCore): tokens M, contraction K, output columns N. Powers of two up to
# the measured maxima; beyond them the lookup extrapolates linearly in blocks (see ``lookup``).
AXES: dict[str, tuple[int, ...]] = {
    "m": (1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096),
    "k": (128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    "n": (128, 256, 512, 1024, 2048),
}
WEIGHTS_STATIONARY_MAX_M = 512  # moving tiles hold at most 512 tokens (one PSUM bank)
TILE = 128  # K and N are padded to whole 128-wide tiles (partitions / array columns)


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table: ``dtype`` on core ``core``, recorded on ``record_on``."""

    core: str
    dtype: str
    record_on: str
    double_row: bool = False

    @property
    def key(self) -> str:
        return f"{self.core}/{self.dtype}"


SPECS: tuple[TableSpec, ...] = (
    TableSpec("neuroncore-v2", "bf16", "gen2"),
    TableSpec("neuroncore-v3", "bf16", "gen2"),
    TableSpec("neuroncore-v4", "bf16", "gen2"),
    TableSpec("neuroncore-v3", "fp8", "gen3", double_row=True),
    TableSpec("neuroncore-v4", "fp8", "gen3", double_row=True),
)
COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")


# --- generation ------------------------------------------------------------------------------


def kernel_module() -> Any:
    """The table kernel file, loaded as a kernel file (its ``import nki`` resolves to trnsim)."""
    from trnsim.nki.kernelfile import load_module

    if not KERNEL_FILE.is_file():
        raise ConfigError(
            f"perf tables: the table kernel {KERNEL_FILE} is missing from the installed "
            "package; reinstall trnsim"
        )
    return load_module(str(KERNEL_FILE))


def time_shape(
    m: int, k: int, n: int, dtype: str, record_on: str, cores: Sequence[str], double_row: bool
) -> dict[str, tuple[float, float, str]]:
    """Time ``y[m, n] = x[m, k] @ W[k, n]`` on each core of ``cores``: ``{core: (compute_s,
    total_s, orientation)}`` with the faster orientation (``ts``: tokens stationary, ``ws``:
    weights stationary) by compute time."""
    from trnsim.core.timing import schedule
    from trnsim.nki.benchmark import record

    mod = kernel_module()
    orients = [("ts", m, n)]  # (name, stationary free size P, moving free size Q)
    if m <= WEIGHTS_STATIONARY_MAX_M:
        orients.append(("ws", n, m))
    best: dict[str, tuple[float, float, str]] = {}
    for name, p, q in orients:
        a_t, b = mod.make_inputs(P=p, K=k, Q=q, dtype=dtype, empty=True)
        stream = record(getattr(mod, KERNEL), a_t, b, target=record_on, double_row=double_row)
        for core in cores:
            prof = schedule(stream, core, launch_s=0.0)  # the kernel alone, no launch
            busy = {t.name: t.busy_s for t in prof.engines}
            compute = max(busy.get(e, 0.0) for e in COMPUTE_ENGINES)
            if core not in best or compute < best[core][0]:
                best[core] = (compute, prof.total_s, name)
    return best


def build(
    axes: dict[str, Sequence[int]] | None = None,
    specs: Iterable[TableSpec] = SPECS,
    progress: bool = False,
) -> dict[str, Any]:
    """Time the grid and return the tables document (``save`` writes it)."""
    from trnsim import __version__
    from trnsim.hw import core as core_spec

    ax = {k: tuple(v) for k, v in (axes or AXES).items()}
    specs = tuple(specs)
    tables: dict[str, Any] = {}
    groups: dict[tuple[str, str, bool], list[TableSpec]] = {}
    for s in specs:
        groups.setdefault((s.dtype, s.record_on, s.double_row), []).append(s)
    n_shapes = len(ax["m"]) * len(ax["k"]) * len(ax["n"])
    for (dtype, record_on, double_row), group in groups.items():
        cores = [core_spec(s.core).name for s in group]
        data = {c: {"compute_s": [], "total_s": [], "orientation": []} for c in cores}
        done = 0
        for m in ax["m"]:
            planes = {c: ([], [], []) for c in cores}
            for k in ax["k"]:
                rows = {c: ([], [], []) for c in cores}
                for n in ax["n"]:
                    res = time_shape(m, k, n, dtype, record_on, cores, double_row)
                    for c in cores:
                        for i in range(3):
                            rows[c][i].append(res[c][i])
                    done += 1
                    if progress:
                        print(
                            f"\r{dtype} recorded on {record_on}: {done}/{n_shapes} shapes",
                            end="",
                            file=sys.stderr,
                            flush=True,
                        )
                for c in cores:
                    for i in range(3):
                        planes[c][i].append(rows[c][i])
            for c in cores:
                for i, key in enumerate(("compute_s", "total_s", "orientation")):
                    data[c][key].append(planes[c][i])
        if progress:
            print(file=sys.stderr)
        for s, c in zip(group, cores, strict=True):
            tables[s.key] = {"core": c, "dtype": dtype, "recorded_on": record_on, **data[c]}
    return {
        "format": FORMAT,
        "trnsim_version": __version__,
        "generator": "python -m trnsim.perf.tables build",
        "kernel": f"trnsim/perf/kernels/matmul_table.py:{KERNEL}",
        "axes": {k: list(v) for k, v in ax.items()},
        "weights_stationary_max_m": WEIGHTS_STATIONARY_MAX_M,
        "value": "compute_s: busiest compute engine (s); total_s: kernel latency (s); "
        "orientation: ts tokens stationary / ws weights stationary; indexed [m][k][n]",
        "tables": tables,
    }


def save(doc: dict[str, Any], path: Path = DATA_FILE) -> None:
    """Write ``doc`` whole (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.chmod(tmp, 0o644)  # package data: readable by all, like the rest of the package
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# --- lookup ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatmulTable:
    """One core's table for one dtype: ``compute_s[m][k][n]`` on the grid ``m``, ``k``, ``n``."""

    core: str
    dtype: str
    m: tuple[int, ...]
    k: tuple[int, ...]
    n: tuple[int, ...]
    compute_s: tuple[tuple[tuple[float, ...], ...], ...]

    def _grid(self, i: int, j: int, l: int) -> float:
        return self.compute_s[i][j][l]

    def seconds(self, m: float, k: float, n: float) -> float:
        """Compute seconds of ``y[m, n] = x[m, k] @ W[k, n]`` on one core.

        K and N are padded to whole 128-wide tiles. Inside the grid: trilinear interpolation of
        log(seconds per multiply-accumulate) in (log m, log k, log n). Beyond the largest
        measured size of an axis, time grows linearly with the blocks of that axis (the
        kernel's loops over M blocks, N blocks and K blocks repeat the same work): the slope
        is that of the last two grid points. Below the smallest: clamped (M >= 1 token; K
        and N pad to one tile).
        """
        return _seconds(self, max(float(m), 1.0), _pad(k), _pad(n))


def _pad(x: float) -> float:
    return float(max(1, math.ceil(x / TILE - 1e-9)) * TILE)


def _extrap(
    tbl: MatmulTable, m: float, k: float, n: float, axis: str, top: float, prev: float, x: float
) -> float:
    """Linear in ``axis`` beyond ``top``: t(top) + (x - top) * (t(top) - t(prev)) / (top - prev)."""

    def at(v: float) -> float:
        return _seconds(tbl, **{"m": m, "k": k, "n": n, axis: v})

    hi, lo = at(top), at(prev)
    return hi + (x - top) * (hi - lo) / (top - prev)


@lru_cache(maxsize=65536)
def _seconds(tbl: MatmulTable, m: float, k: float, n: float) -> float:
    for axis, x, grid in (("m", m, tbl.m), ("k", k, tbl.k), ("n", n, tbl.n)):
        if x > grid[-1]:
            return _extrap(tbl, m, k, n, axis, grid[-1], grid[-2], x)
    pos = []
    for x, grid in ((m, tbl.m), (k, tbl.k), (n, tbl.n)):
        x = max(x, grid[0])
        i = min(bisect_right(grid, x) - 1, len(grid) - 2)
        lo, hi = grid[i], grid[i + 1]
        pos.append((i, (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))))
    (i, fi), (j, fj), (l, fl) = pos
    acc = 0.0
    for di, wi in ((0, 1 - fi), (1, fi)):
        for dj, wj in ((0, 1 - fj), (1, fj)):
            for dl, wl in ((0, 1 - fl), (1, fl)):
                w = wi * wj * wl
                if w:
                    gm, gk, gn = tbl.m[i + di], tbl.k[j + dj], tbl.n[l + dl]
                    per_mac = tbl._grid(i + di, j + dj, l + dl) / (gm * gk * gn)
                    acc += w * math.log(per_mac)
    return math.exp(acc) * max(m, tbl.m[0]) * k * n


def _freeze(x: Any) -> Any:
    return tuple(_freeze(v) for v in x) if isinstance(x, list) else x


@lru_cache(maxsize=4)
def load(path: Path = DATA_FILE) -> dict[str, MatmulTable]:
    """The cached tables by ``core/dtype`` (read once)."""
    if not path.is_file():
        raise ConfigError(
            f"perf tables: {path} is missing; run `python -m trnsim.perf.tables build`"
        )
    doc = json.loads(path.read_text())
    if doc.get("format") != FORMAT:
        raise ConfigError(f"perf tables: {path} has format {doc.get('format')}, expected {FORMAT}")
    ax = doc["axes"]
    return {
        key: MatmulTable(
            t["core"],
            t["dtype"],
            tuple(ax["m"]),
            tuple(ax["k"]),
            tuple(ax["n"]),
            _freeze(t["compute_s"]),
        )
        for key, t in doc["tables"].items()
    }


def table_for(core: str, dtype: str) -> MatmulTable | None:
    """The table of ``core`` (a NeuronCore preset name) for ``dtype``, or None."""
    return load().get(f"{core}/{dtype}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["build"]:
        print("usage: python -m trnsim.perf.tables build", file=sys.stderr)
        return 2
    doc = build(progress=True)
    save(doc)
    load.cache_clear()
    _seconds.cache_clear()
    print(f"wrote {DATA_FILE} ({len(doc['tables'])} tables)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
