"""``TableComputeModel``: matmuls of Trainium chips timed from the core timing model's tables.

Per op on one rank::

    matmul on a Trainium chip with a table for its NeuronCore and compute dtype:
        t = max(count x T_core(m, k, n) / e_kernel,  memory_time) + t_op
    anything else (attention, elementwise, gathers, other vendors' chips, MX dtypes):
        the roofline (``RooflineComputeModel``)

``T_core`` is the compute time of the table kernel for the rank's matmul shape on one
NeuronCore (``trnsim.perf.tables``: timed by ``trnsim.core``, interpolated between grid points,
K and N padded to 128-wide tiles). A rank of ``c = cores / ranks_per_chip`` NeuronCores splits
the matmul over its cores by tokens or by output columns, whichever is faster:
``min(T_core(m / c, k, n), T_core(m, k, n / c))``. ``e_kernel`` (``Efficiency.kernel_matmul``)
is the fraction of the table kernel's speed that the software stack's matmuls reach, fitted
globally per stack; ``memory_time`` is the roofline's HBM term and ``t_op`` its fixed cost per
op. Tile padding is the table's (the roofline's ``tile_padding`` inflation is not applied).

``default_model`` picks the table model for Trainium chips whose tables exist and the roofline
otherwise; ``profiles_for`` gives each model its fitted profiles (``FITTED_TABLE`` here,
``compute.FITTED`` for the roofline).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from trnsim.hw import ChipSpec
from trnsim.perf.compute import (
    FITTED,
    ComputeModel,
    Efficiency,
    Profiles,
    RankWork,
    RooflineComputeModel,
    memory_time,
)
from trnsim.perf.precision import Precision, compute_dtype
from trnsim.perf.tables import MatmulTable, load, table_for


@dataclass(frozen=True, slots=True)
class TableComputeModel:
    """Matmuls from the kernel tables, everything else from the roofline (module docstring)."""

    ranks_per_chip: int = 1
    name: str = "table"

    def op_time(self, work: RankWork, chip: ChipSpec, prec: Precision, eff: Efficiency) -> float:
        tbl = _table(chip, prec.compute) if work.count else None
        if tbl is None:
            return RooflineComputeModel(self.ranks_per_chip).op_time(work, chip, prec, eff)
        cores = max(1, chip.cores // self.ranks_per_chip)
        t_c = work.count * split_seconds(tbl, work.m, work.k, work.n, cores) / eff.kernel_matmul
        return max(t_c, memory_time(work, chip, eff, self.ranks_per_chip)) + eff.op_overhead_s


def split_seconds(tbl: MatmulTable, m: float, k: float, n: float, cores: int) -> float:
    """Seconds of ``[m, k] x [k, n]`` on ``cores`` NeuronCores: split by tokens or by output
    columns, whichever the table says is faster."""
    if cores == 1:
        return tbl.seconds(m, k, n)
    return min(tbl.seconds(m / cores, k, n), tbl.seconds(m, k, n / cores))


@lru_cache(maxsize=256)
def _table(chip: ChipSpec, dtype: str) -> MatmulTable | None:
    if chip.core is None:
        return None
    return table_for(chip.core.name, compute_dtype(chip, dtype)[0])


def covers(chip: ChipSpec) -> bool:
    """True if the tables hold the chip's NeuronCore (for bf16, the default precision)."""
    if chip.core is None:
        return False
    return f"{chip.core.name}/bf16" in load()


def default_model(chip: ChipSpec, ranks_per_chip: int) -> ComputeModel:
    """The table model for Trainium chips the tables cover, else the roofline."""
    if covers(chip):
        return TableComputeModel(ranks_per_chip)
    return RooflineComputeModel(ranks_per_chip)


# Fitted by `trnsim validate --fit` with the table model to calibration/trainium.md sections
# B + B2 (train) and C (serve); benchmarks/RESULTS.md lists the per-row errors. Matmuls the
# tables do not cover (MX dtypes, fp8 on NeuronCore-v2) fall back to the roofline: they use the
# roofline's fitted matmul efficiency and small-matmul term of the same stack (``FITTED``),
# not the dataclass defaults.
FITTED_TABLE = Profiles(
    train=Efficiency(
        kernel_matmul=0.449,
        matmul=FITTED.train.matmul,
        half_rows=FITTED.train.half_rows,
        attention=0.282,
        hbm=1.0,
        comm_overlap=0.0,
    ),
    serve=Efficiency(
        kernel_matmul=0.2197,
        matmul=FITTED.serve.matmul,
        half_rows=FITTED.serve.half_rows,
        attention=0.0504,
        hbm=0.7455,
        kv_hbm=0.4462,
        op_overhead_s=1.78e-6,
        comm_overlap=0.0226,
        score_bytes=64.0,
    ),
    source="fitted to shared/calibration/trainium.md B + B2 (train: 20 rows, seq/s) and C "
    "(serve: 36 rows, TTFT and TPOT p50) by trnsim.perf.calibrate.fit with the table model "
    "(mean |log error|)",
)


def profiles_for(model: ComputeModel) -> Profiles:
    """The fitted profiles of a compute model (table or roofline)."""
    return FITTED_TABLE if getattr(model, "name", "") == "table" else FITTED


COMPUTE_MODELS = ("auto", "table", "roofline")


def compute_model(name: str, chip: ChipSpec, ranks_per_chip: int) -> ComputeModel:
    """A compute model by name: ``auto`` (``default_model``), ``table`` or ``roofline``."""
    if name == "auto":
        return default_model(chip, ranks_per_chip)
    if name == "table":
        return TableComputeModel(ranks_per_chip)
    if name == "roofline":
        return RooflineComputeModel(ranks_per_chip)
    from trnsim.errors import UnknownNameError

    raise UnknownNameError(f"no compute model {name!r}; valid: {', '.join(COMPUTE_MODELS)}")
