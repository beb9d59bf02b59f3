"""trnsim.perf: LLM training and inference estimates, parallel plans, memory, cost and energy,
the planner and the calibration against published Trainium measurements.

Entry points: :func:`estimate_training`, :func:`estimate_inference`, :class:`ParallelPlan`,
:func:`trnsim.perf.planner.search`, :func:`trnsim.perf.compare.compare`.
"""

from trnsim.perf.compute import (
    FITTED,
    ComputeModel,
    Efficiency,
    Profiles,
    RankWork,
    RooflineComputeModel,
)
from trnsim.perf.cost import DEFAULT_PRICES, CostEstimate, CostInputs, run_cost
from trnsim.perf.infer import InferEstimate, Speculative, estimate_inference, max_batch
from trnsim.perf.memory import MemoryBreakdown, MemoryParams, infer_memory, train_memory
from trnsim.perf.mlperf import TimeToTrain, estimate_time_to_train, time_to_train
from trnsim.perf.plan import ParallelPlan
from trnsim.perf.precision import PRECISIONS, Precision, precision
from trnsim.perf.train import TrainEstimate, estimate_training, plan_for_chips

__all__ = [
    "DEFAULT_PRICES",
    "FITTED",
    "PRECISIONS",
    "ComputeModel",
    "CostEstimate",
    "CostInputs",
    "Efficiency",
    "InferEstimate",
    "MemoryBreakdown",
    "MemoryParams",
    "ParallelPlan",
    "Precision",
    "Profiles",
    "RankWork",
    "RooflineComputeModel",
    "Speculative",
    "TimeToTrain",
    "TrainEstimate",
    "estimate_inference",
    "estimate_time_to_train",
    "estimate_training",
    "infer_memory",
    "max_batch",
    "plan_for_chips",
    "precision",
    "run_cost",
    "time_to_train",
    "train_memory",
]
