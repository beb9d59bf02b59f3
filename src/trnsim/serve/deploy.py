"""Defaults for a deployment when the user gives none: the policy by vendor and the smallest
tensor-parallel degree whose weights leave room for a KV cache.

``default_plan``: the smallest power-of-two TP (within one server's chips, dividing the model's
heads as ``ParallelPlan.check_model`` requires) whose weights take at most
``WEIGHT_SHARE`` of a rank's HBM, so at least half is left for the KV cache and activations
(a serving rule of thumb, not a measurement: the sweep's systems are compared at the same
rule). ``default_policy``: vllm-neuron on AWS chips, vLLM V1 on every other.
"""

from __future__ import annotations

from trnsim.errors import ConfigError
from trnsim.hw import ChipSpec, SystemSpec
from trnsim.perf.memory import infer_memory
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import precision
from trnsim.workloads import ModelArgs

WEIGHT_SHARE = 0.5


def default_policy(chip: ChipSpec) -> str:
    return "neuron" if chip.vendor == "AWS" else "vllm-v1"


def default_plan(
    m: ModelArgs,
    sysm: SystemSpec,
    precision_name: str = "bf16",
    ranks_per_chip: int = 1,
    pp: int = 1,
) -> ParallelPlan:
    prec = precision(precision_name)
    server = (sysm.chips_per_server or sysm.chips) * ranks_per_chip
    tp = 1
    tried = []
    while tp * pp <= server:
        plan = ParallelPlan(tp=tp, pp=pp, zero=0, recompute="none", ranks_per_chip=ranks_per_chip)
        try:
            plan.check_model(m)
        except ConfigError:
            tp *= 2
            continue
        mem = infer_memory(m, plan, sysm.chip, 1, 1, 1, prec)
        tried.append(tp)
        if mem.weights <= WEIGHT_SHARE * mem.capacity:
            return plan
        tp *= 2
    raise ConfigError(
        f"no plan of {m.name} ({prec.name}) within one server of {sysm.name} ({server} ranks) "
        f"keeps its weights under {WEIGHT_SHARE:.0%} of a rank's HBM (tried tp {tried}); give "
        "--tp/--pp or a larger system"
    )
