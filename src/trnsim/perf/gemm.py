"""GEMM efficiency surfaces: how the fraction of peak a matmul reaches depends on its shape.

A surface holds one chip family's published GEMM benchmark points (``GemmPoint``: shape
``[m, k] x [k, n]``, ``groups`` independent products for a grouped MoE GEMM, measured TFLOP/s)
and a closed form fitted to them, each point's time modelled as::

    t = groups x 2 m k n / (P x e(m, n, k)) + t0,
    e(m, n, k) = e_max x m / (m + m0) x n / (n + n0) x k / (k + k0)

P the chip's dense peak for the dtype (``trnsim.hw``), ``e_max`` the efficiency of a large
GEMM, ``m0, n0, k0`` the sizes at which a dimension halves it (small M fills few output
tiles, small N few tiles per row, small K leaves the pipeline's prologue and epilogue
exposed), ``t0`` the fixed time of one kernel. The fit minimises the mean absolute log error
of the times (``fit_surface``; ``tests/test_perf_gemm.py`` refits the stored points and checks
the stored constants).

The performance model reads the *shape factor* ``e(m, n, k) / e_max`` (``shape_factor``): the
software stack's own fitted matmul efficiency sets the level, the surface the shape
dependence. Grouped expert GEMMs pass the tokens of one expert as ``m``, so an expert that
receives few tokens runs at a low efficiency, as DeepGEMM's masked-layout points show.

Surfaces (``SURFACES``, by ``ChipSpec.family``):

- **Hopper**: FP8 points measured on H800 (the H100's compute die and FP8 peak) by DeepGEMM
  (deepseek-ai/DeepGEMM README at commit 55ab91f72f76: dense GEMMs M 64/128/4096 and grouped
  contiguous/masked MoE GEMMs, 1x128 / 128x128 block scaling) and on H100 SXM by cuBLASLt
  (``shared/calibration/peers.md`` G: square 1024..8192, per-tensor FP8).
- **Blackwell**: no public per-shape GEMM table was found for B200/GB200/B300; the Hopper
  shape factor is borrowed (stated in ``SURFACES['Blackwell'].source``). The level (the
  stack's matmul efficiency) is fitted per generation and precision in
  ``trnsim.perf.stacks``.

Other families (Trainium: the kernel tables of ``trnsim.perf.table_model``; TPUs) have no
surface here and keep the roofline's ``half_rows`` term.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trnsim.perf.fitting import nelder_mead

DEEPGEMM = "deepseek-ai/DeepGEMM README.md @ 55ab91f72f76 (H800, FP8 block-scaled)"
CUBLASLT_G = "shared/calibration/peers.md G (cuBLASLt FP8 GEMM, one H100 SXM of ND H100 v5)"
HOPPER_FP8_PEAK = 1979e12  # H100/H800 SXM dense FP8 (trnsim.hw h100-sxm peak_flops.fp8)


@dataclass(frozen=True, slots=True)
class GemmPoint:
    """One published GEMM measurement: ``groups`` products of ``[m, k] x [k, n]``."""

    m: int
    n: int
    k: int
    tflops: float
    groups: int = 1
    source: str = DEEPGEMM

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.groups

    @property
    def seconds(self) -> float:
        return self.flops / (self.tflops * 1e12)


@dataclass(frozen=True, slots=True)
class Surface:
    """A fitted GEMM efficiency surface (module docstring) and the points it was fitted to."""

    family: str
    dtype: str
    peak: float
    e_max: float
    m0: float
    n0: float
    k0: float
    t0: float
    points: tuple[GemmPoint, ...]
    source: str

    def efficiency(self, m: float, n: float, k: float) -> float:
        """Fraction of the peak reached by one ``[m, k] x [k, n]`` product (no fixed time)."""
        return self.e_max * shape_terms(m, n, k, self.m0, self.n0, self.k0)

    def shape_factor(self, m: float, n: float, k: float) -> float:
        """``efficiency / e_max``: 1 for a large GEMM, less for small or thin ones. Each
        dimension is read no lower than the smallest one measured (``floor``): the surface is
        not extrapolated below its points (GEMMs that thin are bound by HBM, which the
        roofline's memory term charges)."""
        fm, fn, fk = self.floor
        return shape_terms(max(m, fm), max(n, fn), max(k, fk), self.m0, self.n0, self.k0)

    @property
    def floor(self) -> tuple[float, float, float]:
        """The smallest m, n and k among the points (or among the surface it borrows)."""
        pts = self.points or HOPPER_FP8_POINTS
        return (
            float(min(p.m for p in pts)),
            float(min(p.n for p in pts)),
            float(min(p.k for p in pts)),
        )

    def seconds(self, p: GemmPoint) -> float:
        """The surface's time for a point (what the fit compares with ``p.seconds``)."""
        return p.flops / (self.peak * self.efficiency(p.m, p.n, p.k)) + self.t0


def shape_terms(m: float, n: float, k: float, m0: float, n0: float, k0: float) -> float:
    m, n, k = max(m, 1e-9), max(n, 1e-9), max(k, 1e-9)
    return m / (m + m0) * n / (n + n0) * k / (k + k0)


HOPPER_FP8_POINTS: tuple[GemmPoint, ...] = (
    # DeepGEMM, normal (dense) GEMMs
    GemmPoint(64, 2112, 7168, 206),
    GemmPoint(64, 24576, 1536, 289),
    GemmPoint(64, 32768, 512, 219),
    GemmPoint(64, 7168, 16384, 336),
    GemmPoint(64, 4096, 7168, 287),
    GemmPoint(64, 7168, 2048, 295),
    GemmPoint(128, 2112, 7168, 352),
    GemmPoint(128, 24576, 1536, 535),
    GemmPoint(128, 32768, 512, 358),
    GemmPoint(128, 7168, 16384, 645),
    GemmPoint(128, 4096, 7168, 533),
    GemmPoint(128, 7168, 2048, 510),
    GemmPoint(4096, 2112, 7168, 1009),
    GemmPoint(4096, 24576, 1536, 1125),
    GemmPoint(4096, 32768, 512, 751),
    GemmPoint(4096, 7168, 16384, 1426),
    GemmPoint(4096, 4096, 7168, 1265),
    GemmPoint(4096, 7168, 2048, 1168),
    # DeepGEMM, grouped GEMMs for MoE (contiguous layout: groups x M tokens per expert)
    GemmPoint(8192, 4096, 7168, 1346, groups=4),
    GemmPoint(8192, 7168, 2048, 1214, groups=4),
    GemmPoint(4096, 4096, 7168, 1346, groups=8),
    GemmPoint(4096, 7168, 2048, 1214, groups=8),
    # DeepGEMM, grouped GEMMs for MoE (masked layout)
    GemmPoint(1024, 4096, 7168, 1233, groups=1),
    GemmPoint(1024, 7168, 2048, 925, groups=1),
    GemmPoint(512, 4096, 7168, 1040, groups=2),
    GemmPoint(512, 7168, 2048, 916, groups=2),
    GemmPoint(256, 4096, 7168, 932, groups=4),
    GemmPoint(256, 7168, 2048, 815, groups=4),
    # cuBLASLt, square FP8 GEMMs on H100 SXM
    GemmPoint(8192, 8192, 8192, 1290, source=CUBLASLT_G),
    GemmPoint(4096, 4096, 4096, 1217, source=CUBLASLT_G),
    GemmPoint(2048, 2048, 2048, 1011, source=CUBLASLT_G),
    GemmPoint(1024, 1024, 1024, 274, source=CUBLASLT_G),
)


def fit_surface(
    points: Sequence[GemmPoint], peak: float, iters: int = 4000
) -> tuple[float, float, float, float, float]:
    """(e_max, m0, n0, k0, t0) minimising the mean |log(model time / measured time)|."""
    pts = list(points)

    def unpack(z: np.ndarray) -> tuple[float, float, float, float, float]:
        return (
            1 / (1 + math.exp(-z[0])),
            math.exp(z[1]),
            math.exp(z[2]),
            math.exp(z[3]),
            math.exp(z[4]),
        )

    def loss(z: np.ndarray) -> float:
        e, m0, n0, k0, t0 = unpack(z)
        errs = []
        for p in pts:
            t = p.flops / (peak * e * shape_terms(p.m, p.n, p.k, m0, n0, k0)) + t0
            errs.append(abs(math.log(t / p.seconds)))
        return float(np.mean(errs))

    z0 = np.array([1.0, math.log(64), math.log(256), math.log(256), math.log(5e-6)])
    return unpack(nelder_mead(loss, z0, iters=iters))


# Stored fit of HOPPER_FP8_POINTS (``fit_surface``; mean |log error| 8.3 %).
_HOPPER = Surface(
    family="Hopper",
    dtype="fp8",
    peak=HOPPER_FP8_PEAK,
    e_max=0.8050,
    m0=110.9,
    n0=592.8,
    k0=357.2,
    t0=3.77e-6,
    points=HOPPER_FP8_POINTS,
    source=f"fitted to {len(HOPPER_FP8_POINTS)} FP8 points: {DEEPGEMM}; {CUBLASLT_G}",
)

SURFACES: dict[str, Surface] = {
    "Hopper": _HOPPER,
    "Blackwell": Surface(
        family="Blackwell",
        dtype="fp8",
        peak=HOPPER_FP8_PEAK,
        e_max=_HOPPER.e_max,
        m0=_HOPPER.m0,
        n0=_HOPPER.n0,
        k0=_HOPPER.k0,
        t0=_HOPPER.t0,
        points=(),
        source="borrowed from Hopper (no public per-shape Blackwell GEMM table found): "
        + _HOPPER.source,
    ),
}


def surface_for(family: str) -> Surface | None:
    """The surface of a chip family (``ChipSpec.family``), or None."""
    return SURFACES.get(family)
