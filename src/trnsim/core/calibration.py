"""Calibration of the timing model: the published measurements, the fitted constants, the fit.

Measurements: ``shared/calibration/trainium.md`` section A (the NKI matrix-multiplication
tutorial on one NeuronCore-v2, SDK-2.26 ``general/nki/tutorials/matrix_multiplication.rst``).
The kernels are trnsim's own versions of the four variants the tutorial describes
(``examples/kernels/timing/matmul_tutorial.py``).

Global constants fitted to those rows (never one per row):

- ``DMA_EFFICIENCY``: the fraction of the effective DMA engine bandwidth
  (``DmaSpec.engine_bw`` x engines) that kernel transfers reach. The three DMA-bound rows move
  5.4 / 4.4 / 2.2 GB in 51.80 / 42.96 / 22.07 ms, a flat ~100 GB/s whatever the row length
  (256 B to 2 KiB), against 272 GB/s effective for 16 engines: one multiplicative constant
  explains all three. It is applied unchanged on v3 and v4 (no published v3/v4 rows exist: an
  assumption, stated in every profile).

``error_table(modelled)`` gives each row's error; ``benchmarks/bench_timing.py`` re-times the
four kernels and prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.errors import UnknownNameError
from trnsim.hw import CHIPS, ChipSpec, CoreSpec

CALIBRATION_SOURCE = (
    "shared/calibration/trainium.md section A (SDK-2.26 general/nki/tutorials/"
    "matrix_multiplication.rst, one NeuronCore-v2, M=4096 K=8192 N=8192 bf16)"
)


@dataclass(frozen=True, slots=True)
class Measurement:
    """One published row: kernel variant name (in the examples module) and latency."""

    variant: str
    description: str
    latency_s: float


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("tiled", "tiled, loads inside the innermost loop", 51.80e-3),
    Measurement("hoisted", "optimization 1: hoisted loads", 42.96e-3),
    Measurement("blocked", "optimization 2: blocked free dimension", 22.07e-3),
    Measurement("optimized", "optimization 3: fully optimized blocking", 6.97e-3),
)
SHAPE = (4096, 8192, 8192)  # M, K, N
TARGET = "gen2"
TOLERANCE = 0.25

DMA_EFFICIENCY = 0.43
"""Fitted: minimises the sum of squared log errors of the four rows over a 0.38-0.44 sweep in
steps of 0.01 (0.43: +0.6 / -3.8 / +7.0 / -5.9 %; 0.40: +8.0 / +3.3 / +14.0 / -0.7 %).
Reproduce with ``benchmarks/bench_timing.py``."""


def chip_of(spec: CoreSpec) -> ChipSpec:
    """The Trainium chip whose NeuronCore is ``spec`` (trn1 for v2, trn2 for v3, trn3 for v4)."""
    for _, chip in CHIPS:
        if chip.core is not None and chip.core.name == spec.name:
            return chip
    raise UnknownNameError(f"no chip preset has NeuronCore {spec.name!r}")


@dataclass(frozen=True, slots=True)
class Row:
    """One calibration row: published and modelled latency, relative error."""

    variant: str
    description: str
    published_s: float
    modelled_s: float

    @property
    def error(self) -> float:
        return self.modelled_s / self.published_s - 1


def error_table(modelled: dict[str, float]) -> list[Row]:
    """Every published row with its modelled latency (seconds by variant) and error."""
    return [Row(m.variant, m.description, m.latency_s, modelled[m.variant]) for m in MEASUREMENTS]
