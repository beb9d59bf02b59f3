"""The same workload on several systems, side by side (each with its best plan).

For each system the planner picks the best plan that fits (training: max tokens/s; inference:
max output tokens/s among the plans that meet the latency bound ``slo``, by default MLPerf's:
``trnsim.perf.slo``) on ``chips`` chips, by default the system's own scale-up domain (the
UltraServer or rack) or ``DEFAULT_CHIPS`` for a pod. Every row states what it assumes: the
software stack and its efficiency profile (each system's default stack, ``trnsim.perf.stacks``:
a profile fitted to that vendor's own measurements, never another vendor's, unless ``eff`` is
given), the price and power per chip and their sources, and the dtype whose peak was used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from trnsim import inputs
from trnsim.errors import ConfigError
from trnsim.hw import system as lookup_system
from trnsim.perf.compute import Efficiency
from trnsim.perf.cost import CostInputs, power_line, price_line, run_cost
from trnsim.perf.planner import ProgressFactory, search_inference, search_training
from trnsim.perf.precision import compute_dtype, precision
from trnsim.perf.slo import DEFAULT_SLO, ServingSLO
from trnsim.workloads import ModelArgs, resolve_model

DEFAULT_SYSTEMS = (
    "trn3-gen2-ultraserver",
    "trn3-gen1-ultraserver",
    "trn2-ultraserver",
    "gb300-nvl72",
    "tpu-v7-pod",
)
DEFAULT_CHIPS = 64  # for systems larger than a rack (a TPU v7 4x4x4 cube)


@dataclass(frozen=True, slots=True)
class CompareRow:
    system: str
    chip: str
    chips: int
    plan: str
    fits: bool
    tokens_per_s: float
    tokens_per_s_per_chip: float
    mfu: float | None
    ttft_s: float | None
    tpot_s: float | None
    usd_per_million_tokens: float | None
    joules_per_token: float | None
    memory_per_chip_bytes: float
    assumptions: list[str] = field(default_factory=list)
    plan_summary: str = ""  # the plan for people (``ParallelPlan.summary``)
    slo_met: bool | None = None  # serving: the plan meets the latency bound (None: no bound)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def default_chips(system_name: str) -> int:
    s = lookup_system(system_name)
    return s.chips if s.chips <= 144 else DEFAULT_CHIPS


def _none_fits(
    name: str, chip: str, chips: int, assumptions: list[str], over_slo: int = 0
) -> CompareRow:
    """The row of a system on which no plan of the workload fits in HBM (or, serving, none
    that fits meets the latency bound)."""
    why = "no plan meets the latency bound" if over_slo else "no plan fits in HBM"
    return CompareRow(
        name,
        chip,
        chips,
        "none fits",
        False,
        0.0,
        0.0,
        None,
        None,
        None,
        None,
        None,
        0.0,
        assumptions,
        why,
    )


def compare(
    model: ModelArgs | str,
    mode: Literal["train", "infer"] = "train",
    systems: tuple[str, ...] = DEFAULT_SYSTEMS,
    chips: int | None = None,
    *,
    global_batch: int = 1152,
    seq_len: int = 4096,
    input_tokens: int = 2048,
    output_tokens: int = 512,
    precision_name: str = "bf16",
    eff: Efficiency | None = None,
    cost_inputs: CostInputs | None = None,
    progress: ProgressFactory | None = None,
    slo: ServingSLO | None = DEFAULT_SLO,
) -> list[CompareRow]:
    """One row per system (see module docstring); ``progress`` as in ``planner``."""
    if mode not in ("train", "infer"):
        raise ConfigError(f"compare: mode must be train or infer, got {mode!r}")
    inputs.check_optional("chips", chips)
    m = resolve_model(model)
    if mode == "train":
        inputs.check_training(m, global_batch=global_batch, seq_len=seq_len)
    else:
        inputs.check_inference(
            m, batch=None, input_tokens=input_tokens, output_tokens=output_tokens
        )
    ci = cost_inputs or CostInputs()
    rows = []
    for name in systems:
        sysm = lookup_system(name)
        n = chips or default_chips(name)
        dtype, note = compute_dtype(sysm.chip, precision(precision_name).compute)
        common = [
            f"{sysm.chip.name} {dtype} peak {sysm.chip.peak(dtype) / 1e12:.0f} TFLOP/s"
            + (f" ({note})" if note else ""),
            price_line(ci, sysm.chip),
            power_line(ci, sysm.chip),
        ]
        if mode == "train":
            res = search_training(
                m,
                sysm,
                n,
                global_batch=global_batch,
                seq_len=seq_len,
                precision_name=precision_name,
                top=1,
                eff=eff,
                progress=progress,
            )
            if not res.top:
                rows.append(_none_fits(name, sysm.chip.name, n, res.notes + common))
                continue
            e = res.top[0]
            c = run_cost(sysm.chip, n, 1e6 / e.tokens_per_s, ci)
            rows.append(
                CompareRow(
                    name,
                    sysm.chip.name,
                    n,
                    e.plan.describe(),
                    True,
                    e.tokens_per_s,
                    e.tokens_per_s / n,
                    e.mfu,
                    None,
                    None,
                    c.usd,
                    (c.energy_j / 1e6 if c.energy_j is not None else None),
                    e.memory.total * e.plan.ranks_per_chip,
                    common + e.assumptions[:2],
                    e.plan.summary(),
                )
            )
        else:
            res = search_inference(
                m,
                sysm,
                n,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                precision_name=precision_name,
                top=1,
                eff=eff,
                cost_inputs=ci,
                progress=progress,
                slo=slo,
            )
            if not res.top:
                rows.append(_none_fits(name, sysm.chip.name, n, res.notes + common, res.over_slo))
                continue
            e = res.top[0]
            rows.append(
                CompareRow(
                    name,
                    sysm.chip.name,
                    n,
                    f"{e.plan.describe()} batch{e.batch}",
                    True,
                    e.throughput_tokens_per_s,
                    e.throughput_tokens_per_s / n,
                    None,
                    e.ttft_s,
                    e.tpot_s,
                    e.usd_per_million_tokens,
                    e.joules_per_token,
                    e.memory.total * e.plan.ranks_per_chip,
                    common + e.assumptions[:2],
                    f"{e.plan.summary('serve')}, batch {e.batch:,}",
                    None if slo is None else slo.met(e.ttft_s, e.tpot_s),
                )
            )
    return rows
