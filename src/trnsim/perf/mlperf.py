"""MLPerf Training time-to-train from a training estimate and the samples to converge.

MLPerf Training scores a run by its time to train: from the start of training until the
evaluation that first reaches the benchmark's quality target (MLCommons, "MLPerf Training
Rules", section "Timing"). How many samples that takes depends on the model, the optimizer and
the global batch (each benchmark publishes reference convergence points per batch size); it is
an input here, as MLPerf submitters read it from their logs or the reference convergence
points. Given ``samples`` to converge:

- the run trains whole steps: ``steps = ceil(samples / global_batch)``;
- quality is only checked at evaluations every ``eval_interval`` samples (the benchmark's
  evaluation frequency), so training continues to the first evaluation at or after
  convergence: ``samples`` is rounded up to a multiple of ``eval_interval`` first;
- time to train = steps x the estimate's step time, plus ``eval_seconds`` for each
  evaluation run on the way (0 by default: the evaluation's own time is the submitter's).

The tokens trained (``steps x global_batch x seq_len``) give the estimate's cost and energy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trnsim.errors import ConfigError


@dataclass(frozen=True, slots=True)
class TimeToTrain:
    """An MLPerf-style time to train (seconds) and what it counts."""

    samples_to_converge: float
    eval_interval: float | None
    samples_trained: int
    steps: int
    evaluations: int
    step_time_s: float
    eval_seconds: float
    time_to_train_s: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples_to_converge": self.samples_to_converge,
            "eval_interval_samples": self.eval_interval,
            "samples_trained": self.samples_trained,
            "steps": self.steps,
            "evaluations": self.evaluations,
            "step_time_s": self.step_time_s,
            "eval_seconds": self.eval_seconds,
            "time_to_train_s": self.time_to_train_s,
        }


def _positive(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"time to train: {name} must be a number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ConfigError(f"time to train: {name} must be finite and > 0, got {value!r}")
    return v


def time_to_train(
    step_time_s: float,
    global_batch: int,
    samples: float,
    eval_interval: float | None = None,
    eval_seconds: float = 0.0,
) -> TimeToTrain:
    """Time to train ``samples`` samples at ``global_batch`` samples per step of
    ``step_time_s`` (module docstring)."""
    step = _positive("step_time_s", step_time_s)
    gb = int(_positive("global_batch", global_batch))
    need = _positive("samples", samples)
    evals = 0
    if eval_interval is not None:
        interval = _positive("eval_interval", eval_interval)
        evals = math.ceil(need / interval - 1e-12)
        need = evals * interval
    if not (math.isfinite(eval_seconds) and eval_seconds >= 0):
        raise ConfigError(f"time to train: eval_seconds must be >= 0, got {eval_seconds!r}")
    steps = math.ceil(need / gb - 1e-12)
    return TimeToTrain(
        samples_to_converge=float(samples),
        eval_interval=None if eval_interval is None else float(eval_interval),
        samples_trained=steps * gb,
        steps=steps,
        evaluations=evals,
        step_time_s=step,
        eval_seconds=float(eval_seconds),
        time_to_train_s=steps * step + evals * eval_seconds,
    )


def estimate_time_to_train(est: Any, samples: float, eval_interval: float | None = None,
                           eval_seconds: float = 0.0) -> TimeToTrain:  # fmt: skip
    """``time_to_train`` of a ``TrainEstimate`` (its step time and global batch)."""
    return time_to_train(est.step_time_s, est.global_batch, samples, eval_interval, eval_seconds)
