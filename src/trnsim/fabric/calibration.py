"""Calibration of the fabric model: the measurements, the fit, the fitted constants, the errors.

The measurements are ``calibration/trainium.md`` sections D and E (copied here as data):

- **D**: ``nccom-test -r 2 ... --datatype fp32 allr``, a 2-rank all-reduce from 1 KiB to 1 GiB on an
  unstated Trainium instance. **Assumption**: a trn1.32xlarge with the two ranks on two
  torus-adjacent Trainium1 chips, so the data crosses one NeuronLink-v2 link
  (384 GB/s per chip / 4 links = 96 GB/s per direction, from ``hw``). On any 2-rank layout
  every algorithm (ring, mesh, RDH) moves the same bytes, so the rows fit
  ``T = t_sw + 2 * hop_latency + nbytes / (eta * link_bw)``.
- **E**: the Neuron runtime's stated constants: per-hop latency "about 1-2 us" (taken from ``hw``
  as 1.5 us, not fitted: with 2 ranks the hop latency and the software overhead are collinear),
  the 15 us EFA latency (in ``hw``), and the algorithm switch points (Mesh < 1 MB, RDH 1-56 MB,
  KangaRing > 56 MB), which :mod:`trnsim.fabric.collectives` uses as its selection rule.

Fitted parameters (two, linear): ``t_sw`` (fixed software overhead per collective: launch,
synchronisation, semaphores) and ``eta`` (link efficiency: achieved / nominal link bandwidth).
Method: least squares on the *relative* error (each row weighted by 1 / measured time), so the
1 KiB and the 1 GiB rows count alike; solved in closed form with ``numpy.linalg.lstsq``.
The model is additive (latency + bytes / bandwidth) and so cannot follow the measured curve's
smooth knee between 256 KiB and 16 MiB: those rows carry the largest errors, reported below and
by :func:`report`. ``FITTED`` holds the constants (defined in :mod:`trnsim.fabric.overheads`,
which the collective model imports, so that this module can import the model);
``tests/test_fabric_calibration.py`` checks that re-running :func:`fit` reproduces them.

Both constants are applied to every system (Trainium and peers alike): the comparison is then
between fabrics under one software-efficiency assumption, not between software stacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trnsim.fabric.collectives import collective_time
from trnsim.fabric.fiterror import FitError, RowError
from trnsim.fabric.overheads import (  # re-exported: the constants this module fits
    E_SOURCE,
    FITTED,
    IDEAL,
    MESH_MAX_BYTES,
    RDH_MAX_BYTES,
    Overheads,
)

# --- Section D: 2-rank all-reduce (bytes, microseconds, busbw as published) ---
D_ROWS: tuple[tuple[int, float, float], ...] = (  # busbw column: nccom-test "GB/s" = GiB/s
    (1_024, 58, 0.02),
    (4_096, 58, 0.07),
    (16_384, 58, 0.26),
    (65_536, 58, 1.05),
    (262_144, 60, 4.07),
    (1_048_576, 68, 14.36),
    (4_194_304, 107, 36.51),
    (16_777_216, 332, 47.06),
    (67_108_864, 1_214, 51.48),
    (268_435_456, 4_750, 52.63),
    (1_073_741_824, 18_930, 52.83),
)
D_SOURCE = (
    "calibration/trainium.md section D (nccom-test -r 2 --minbytes 1kb --maxbytes 1gb "
    "--stepfactor 4 --datatype fp32 allr)"
)
D_SYSTEM = "trn1.32xlarge"  # assumption, see the module docstring
D_RANKS = 2

__all__ = [
    "D_RANKS",
    "D_ROWS",
    "D_SOURCE",
    "D_SYSTEM",
    "E_SOURCE",
    "FITTED",
    "IDEAL",
    "MESH_MAX_BYTES",
    "RDH_MAX_BYTES",
    "Fit",
    "Overheads",
    "Row",
    "fit",
    "report",
]


@dataclass(frozen=True, slots=True)
class Row(RowError):
    """One calibration row: measured vs modelled time and the relative error."""

    nbytes: int
    measured_s: float
    model_s: float


@dataclass(frozen=True, slots=True)
class Fit(FitError):
    overheads: Overheads
    rows: tuple[Row, ...]


def _parts(nbytes: int) -> tuple[float, float]:
    """(latency part, bandwidth part) of the raw model for one D row (eta = 1, t_sw = 0)."""
    res = collective_time("all-reduce", nbytes, D_RANKS, D_SYSTEM, overheads=IDEAL)
    return res.latency_s, res.bandwidth_s


def fit() -> Fit:
    """Least squares on relative error: T_i ~ t_sw + lat_i + bw_i / eta, unknowns (t_sw, 1/eta)."""
    sizes = np.array([r[0] for r in D_ROWS], dtype=float)
    measured = np.array([r[1] for r in D_ROWS], dtype=float) * 1e-6
    parts = np.array([_parts(int(b)) for b in sizes])
    lat, bw = parts[:, 0], parts[:, 1]
    w = 1.0 / measured
    a = np.stack([np.ones_like(bw), bw], axis=1) * w[:, None]
    rhs = (measured - lat) * w
    (t_sw, inv_eta), *_ = np.linalg.lstsq(a, rhs, rcond=None)
    ov = Overheads(software_s=float(t_sw), link_efficiency=float(1.0 / inv_eta))
    return Fit(ov, _rows(ov, sizes, measured, lat, bw))


def _rows(ov: Overheads, sizes, measured, lat, bw) -> tuple[Row, ...]:
    model = ov.software_s + lat + bw / ov.link_efficiency
    rows = zip(sizes, measured, model, strict=True)
    return tuple(Row(int(b), float(m), float(t)) for b, m, t in rows)


def report(ov: Overheads = FITTED) -> Fit:
    """Every D row's measured time, the model's time under ``ov`` and the relative error."""
    sizes = np.array([r[0] for r in D_ROWS], dtype=float)
    measured = np.array([r[1] for r in D_ROWS], dtype=float) * 1e-6
    parts = np.array([_parts(int(b)) for b in sizes])
    return Fit(ov, _rows(ov, sizes, measured, parts[:, 0], parts[:, 1]))
