"""Calibration of the ``nccl`` stack: calibration G (NCCL all-reduce on one 8x H100 SXM node).

Source: ``calibration/peers.md`` section G (Azure/AI-benchmarking-guide, ND H100 v5, NCCL 2.18.5,
in-place all-reduce busbw, 1 KiB - 8 GiB). **Assumption**: the node is modelled as the
``p5.48xlarge`` preset (8 H100 SXM on NVSwitch, 450 GB/s per direction per GPU): ND H100 v5 is
the same HGX H100 8-GPU baseboard. Measured time = size / algbw, algbw = busbw / (2 (n-1) / n).

The model (:mod:`trnsim.fabric.nccl`) takes the fastest of ring/LL, ring/LL128, ring/Simple and
NVLS/Simple. Six constants are fitted on fourteen rows: each protocol's latency ``L_p`` and the
bandwidth efficiency of LL, LL128 and of the NVLS algorithm (Simple's efficiency is 1 by
definition; the ring efficiency 0.82 is stated in nccl-tests issue #212, not fitted; the 1 us
NVSwitch hop is ``hw``'s). Method, deterministic: assign each row to a candidate (start: ring/LL
below 64 KiB, ring/LL128 below 64 MiB, NVLS/Simple above), solve each candidate's (latency,
1/efficiency) by least squares on the relative error (weights 1 / measured time; the model is
linear in them once the candidate is fixed; an efficiency above 1 is held at 1 and only the
latency refitted), reassign every row to the candidate that is fastest under the new constants,
and repeat until the assignment is stable. The fitted constants are stored in
:data:`trnsim.fabric.stacks.NCCL`; the tests re-run the fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from trnsim.fabric import nccl
from trnsim.fabric.fiterror import FitError, RowError
from trnsim.fabric.stacks import NCCL, NcclParams, Protocol
from trnsim.fabric.topology import group
from trnsim.hw import system

#: (bytes, busbw GB/s as published)
G_ROWS: tuple[tuple[int, float], ...] = (
    (2**10, 0.07),
    (2**12, 0.27),
    (2**14, 0.95),
    (2**16, 2.72),
    (2**18, 10.86),
    (2**20, 43.70),
    (2**22, 128.73),
    (2**24, 234.45),
    (2**26, 361.78),
    (2**28, 423.38),
    (2**30, 466.35),
    (2**31, 472.36),
    (2**32, 475.54),
    (2**33, 478.87),
)
G_SOURCE = (
    "calibration/peers.md section G (Azure/AI-benchmarking-guide ND_H100_v5_results.md, "
    "NCCL 2.18.5, in-place all-reduce busbw, 8x H100 SXM)"
)
G_SYSTEM = "p5.48xlarge"  # assumption, see the module docstring
G_RANKS = 8

#: The candidates fitted, as (algorithm, protocol); the start assignment's upper size bounds.
CANDIDATES = (("ring", "LL"), ("ring", "LL128"), ("nvls", "Simple"))
START_BOUNDS = (64 * 2**10, 64 * 2**20)


def measured_s(nbytes: int, busbw_gbs: float) -> float:
    return nbytes / (busbw_gbs * 1e9 / (2 * (G_RANKS - 1) / G_RANKS))


@dataclass(frozen=True, slots=True)
class Row(RowError):
    nbytes: int
    measured_s: float
    model_s: float
    algo: str
    protocol: str


@dataclass(frozen=True, slots=True)
class Fit(FitError):
    params: NcclParams
    rows: tuple[Row, ...]
    iterations: int = 0


def _stage():
    g = group(system(G_SYSTEM), G_RANKS, "packed", 1.0)
    (lv,) = g.levels
    return lv


def _parts(lv, nbytes: float, algo: str, params: NcclParams) -> tuple[float, float]:
    """(latency part without L_p, bandwidth part at protocol efficiency 1) of one candidate."""
    unit = Protocol("unit", 0.0, 1.0)
    cands = nccl.candidates("all-reduce", lv, nbytes, unit, params)
    if algo == "nvls":  # NVLS is offered for Simple only; time it with unit efficiency
        unit = Protocol("Simple", 0.0, 1.0)
        cands = nccl.candidates("all-reduce", lv, nbytes, unit, replace(params, nvls_efficiency=1))
    (c,) = [c for c in cands if c[2] == algo]
    return c[6], c[7]


def _evaluate(params: NcclParams) -> tuple[Row, ...]:
    lv = _stage()
    out = []
    for nbytes, bus in G_ROWS:
        proto, steps = nccl.run([("all-reduce", 0, float(nbytes))], [lv], params)
        t = proto.latency_s + sum(s[6] + s[7] for s in steps)
        out.append(Row(nbytes, measured_s(nbytes, bus), t, steps[0][2], proto.name))
    return tuple(out)


def _assign_start() -> list[int]:
    return [sum(nbytes >= b for b in START_BOUNDS) for nbytes, _ in G_ROWS]


def fit(max_iterations: int = 50) -> Fit:
    """The deterministic assign-and-solve fit described in the module docstring."""
    lv = _stage()
    sizes = [float(b) for b, _ in G_ROWS]
    meas = np.array([measured_s(b, bus) for b, bus in G_ROWS])
    assign = _assign_start()
    params = NCCL
    for it in range(1, max_iterations + 1):
        solved: dict[int, tuple[float, float]] = {}
        for k, (algo, _) in enumerate(CANDIDATES):
            idx = [i for i, a in enumerate(assign) if a == k]
            if len(idx) < 2:
                raise RuntimeError(f"NCCL fit: candidate {CANDIDATES[k]} has < 2 rows")
            parts = np.array([_parts(lv, sizes[i], algo, params) for i in idx])
            w = 1.0 / meas[idx]
            a = np.stack([np.ones(len(idx)), parts[:, 1]], axis=1) * w[:, None]
            rhs = (meas[idx] - parts[:, 0]) * w
            (lat, inv_eff), *_ = np.linalg.lstsq(a, rhs, rcond=None)
            if inv_eff < 1.0:  # efficiency above 1 is unphysical: hold it at 1, refit the latency
                inv_eff = 1.0
                lat = float(np.sum(w * w * (meas[idx] - parts[:, 0] - parts[:, 1])) / np.sum(w * w))
            solved[k] = (max(float(lat), 0.0), float(inv_eff))
        (l_ll, x_ll), (l_128, x_128), (l_s, x_nvls) = solved[0], solved[1], solved[2]
        params = NcclParams(
            protocols=(
                Protocol("LL", round(l_ll, 11), round(1 / x_ll, 4)),
                Protocol("LL128", round(l_128, 11), round(1 / x_128, 4)),
                Protocol("Simple", round(l_s, 11), 1.0),
            ),
            ring_efficiency=NCCL.ring_efficiency,
            nvls_efficiency=round(1 / x_nvls, 4),
        )
        rows = _evaluate(params)
        new = [CANDIDATES.index((r.algo, r.protocol)) for r in rows]
        if new == assign:
            return Fit(params, rows, it)
        assign = new
    raise RuntimeError(f"NCCL fit did not settle in {max_iterations} iterations")


def report(params: NcclParams = NCCL) -> Fit:
    """Every G row: measured time, model time under ``params``, the chosen pair, the error."""
    return Fit(params, _evaluate(params))
