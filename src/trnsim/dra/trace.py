"""Job traces: what arrives when, what it asks for, how long it runs.

A trace file (YAML with the ``dra`` extra, or JSON)::

    jobs:
      - {name: pretrain, arrival: 0, chips: 128, duration: 7200}
      - {arrival: 60, chips: 4, duration: 600, step_s: 0.5, allreduce_bytes: 4.0e9}
      - {arrival: 90, nodes: 4, duration: 1800}               # 4 whole nodes
      - {arrival: 120, claim: claims/connected-4.yaml, duration: 900}
      - arrival: 300
        chips: 64
        train: {model: llama-2-7b, tokens: 2.0e9, seq_len: 4096, global_batch: 256, tp: 8}
    failures:
      - {time: 1000, node: 3, device: 5, repair: 3600}

Times are seconds. ``duration`` is the run time on the most compact placement; the simulator
multiplies it by the job's slowdown where it lands. A ``train`` job's duration is
``tokens / tokens_per_s`` from :func:`trnsim.perf.estimate_training`. A ``claim`` (a
ResourceClaim or ResourceClaimTemplate file, relative to the trace) gives the devices its
requests count, the connected group its ``matchAttribute`` names, whole nodes for
``neuron_node`` requests, and the nodes whose devices its CEL selectors match.

``synthetic(n, fleet, ...)`` makes a reproducible trace (``synthetic:N[:SEED]`` on the CLI).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trnsim import inputs
from trnsim.dra.speed import DEFAULT_ALLREDUCE_BYTES, DEFAULT_STEP_S, DataParallel, Training
from trnsim.errors import UsageError

MAX_JOBS = 1_000_000


class TraceError(UsageError):
    """A trace breaks a rule: names the job, the field and the value."""


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    arrival: float
    chips: int = 0
    nodes: int = 0
    duration: float | None = None
    work: DataParallel | Training = field(default_factory=DataParallel)
    claim: str | None = None  # path of a claim file

    def describe(self) -> str:
        what = f"{self.nodes} nodes" if self.nodes else f"{self.chips} chips"
        return f"{self.name} ({what})"


@dataclass(frozen=True, slots=True)
class Failure:
    time: float
    node: int | str
    device: int
    repair: float | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[Job, ...]
    failures: tuple[Failure, ...] = ()
    source: str = ""
    base: Path = Path(".")


def _num(job: str, key: str, v: Any, lo: float = 0.0, integer: bool = False) -> float:
    if isinstance(v, str):  # YAML 1.1 reads 2.0e10 (no exponent sign) as a string
        try:
            v = float(v)
        except ValueError:
            raise TraceError(f"{job}: {key} must be a number, got {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < lo:
        raise TraceError(f"{job}: {key} must be a finite number >= {lo:g}, got {v!r}")
    if integer and int(v) != v:
        raise TraceError(f"{job}: {key} must be an integer, got {v!r}")
    return float(v)


_JOB_KEYS = (
    "name",
    "arrival",
    "chips",
    "nodes",
    "duration",
    "claim",
    "train",
    "step_s",
    "allreduce_bytes",
)
_TRAIN_KEYS = ("model", "tokens", "seq_len", "global_batch", "tp", "pp")


def parse_job(raw: Any, index: int, where: str) -> Job:
    label = f"{where}: jobs[{index}]"
    if not isinstance(raw, dict):
        raise TraceError(f"{label} must be a mapping, got {raw!r}")
    unknown = [k for k in raw if k not in _JOB_KEYS]
    if unknown:
        raise TraceError(f"{label}: unknown field {unknown[0]!r} (known: {', '.join(_JOB_KEYS)})")
    name = str(raw.get("name", f"job{index}"))
    label = f"{where}: job {name}"
    arrival = _num(label, "arrival", raw.get("arrival", 0.0))
    chips = int(_num(label, "chips", raw.get("chips", 0), 0, True))
    nodes = int(_num(label, "nodes", raw.get("nodes", 0), 0, True))
    claim = raw.get("claim")
    given = [k for k in ("chips", "nodes", "claim") if raw.get(k)]
    if len(given) != 1:
        raise TraceError(
            f"{label}: give exactly one of chips, nodes, claim (got {', '.join(given) or 'none'})"
        )
    train = raw.get("train")
    duration = raw.get("duration")
    if (train is None) == (duration is None):
        raise TraceError(f"{label}: give exactly one of duration (s) and train (a config)")
    work: DataParallel | Training
    if train is not None:
        if not isinstance(train, dict):
            raise TraceError(f"{label}: train must be a mapping, got {train!r}")
        bad = [k for k in train if k not in _TRAIN_KEYS]
        if bad or "model" not in train or "tokens" not in train:
            raise TraceError(
                f"{label}: train needs model and tokens (known: {', '.join(_TRAIN_KEYS)})"
                + (f"; unknown {bad[0]!r}" if bad else "")
            )
        work = Training(
            model=str(train["model"]),
            tokens=_num(label, "train.tokens", train["tokens"], 1.0),
            seq_len=int(_num(label, "train.seq_len", train.get("seq_len", 4096), 1, True)),
            global_batch=int(
                _num(label, "train.global_batch", train.get("global_batch", 256), 1, True)
            ),
            tp=int(_num(label, "train.tp", train.get("tp", 1), 1, True)),
            pp=int(_num(label, "train.pp", train.get("pp", 1), 1, True)),
        )
        if claim or nodes:
            raise TraceError(f"{label}: a train job gives chips (its plan's chip count)")
        dur = None
    else:
        dur = _num(label, "duration", duration)
        if dur <= 0:
            raise TraceError(f"{label}: duration must be > 0, got {duration!r}")
        work = DataParallel(
            step_s=_num(label, "step_s", raw.get("step_s", DEFAULT_STEP_S), 1e-9),
            allreduce_bytes=_num(
                label, "allreduce_bytes", raw.get("allreduce_bytes", DEFAULT_ALLREDUCE_BYTES)
            ),
        )
    if claim is not None and not isinstance(claim, str):
        raise TraceError(f"{label}: claim must be a path, got {claim!r}")
    return Job(name, arrival, chips, nodes, dur, work, claim)


def build(data: Any, where: str, base: Path) -> Trace:
    if not isinstance(data, dict):
        raise TraceError(
            f"{where}: a trace must be a mapping with 'jobs', got {type(data).__name__}"
        )
    unknown = [k for k in data if k not in ("jobs", "failures", "name")]
    if unknown:
        raise TraceError(f"{where}: unknown field {unknown[0]!r} (known: jobs, failures, name)")
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list) or not raw_jobs:
        raise TraceError(f"{where}: jobs must be a non-empty list")
    if len(raw_jobs) > MAX_JOBS:
        raise TraceError(f"{where}: more than {MAX_JOBS} jobs")
    jobs = tuple(parse_job(j, i, where) for i, j in enumerate(raw_jobs))
    names = [j.name for j in jobs]
    dup = next((n for n in names if names.count(n) > 1), None) if len(names) < 20_000 else None
    if dup:
        raise TraceError(f"{where}: job name {dup!r} is used twice")
    failures = []
    for i, f in enumerate(data.get("failures") or []):
        lab = f"{where}: failures[{i}]"
        if not isinstance(f, dict) or "node" not in f or "time" not in f:
            raise TraceError(f"{lab} must be {{time, node, device[, repair]}}, got {f!r}")
        extra = set(f) - {"time", "node", "device", "repair"}
        if extra:
            raise TraceError(f"{lab}: unknown field {sorted(extra)[0]!r}")
        rep = f.get("repair")
        failures.append(
            Failure(
                _num(lab, "time", f["time"]),
                f["node"],
                int(_num(lab, "device", f.get("device", 0), 0, True)),
                None if rep is None else _num(lab, "repair", rep, 1e-9),
            )
        )
    return Trace(jobs, tuple(failures), where, base)


_SYNTH = re.compile(r"^synthetic:(\d+)(?::(\d+))?$")


def load(path: str) -> Trace:
    """A trace file, or ``synthetic:N[:SEED]`` (see :func:`synthetic`; needs the fleet, so the
    caller passes it through :func:`synthetic` instead: this returns None for it)."""
    p = Path(path)
    try:
        text = inputs.read_text(p, "trace file")  # a regular file, within limits
    except FileNotFoundError:
        raise TraceError(f"no such trace file: {path!r} (or give synthetic:N[:SEED])") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path!r}: {exc}") from None
    if p.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(
                f"{p}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
    else:
        from trnsim.dra.manifests import load_yaml_documents

        docs = load_yaml_documents(text, str(p))
        if len(docs) != 1:
            raise TraceError(f"{p}: a trace holds one YAML document, got {len(docs)}")
        data = docs[0]
    return build(data, str(p), p.parent)


def synthetic_spec(text: str) -> tuple[int, int] | None:
    m = _SYNTH.match(text)
    if not m:
        return None
    n = int(m.group(1))
    if not 1 <= n <= MAX_JOBS:
        raise TraceError(f"synthetic trace size must be in [1, {MAX_JOBS}], got {n}")
    return n, int(m.group(2) or 0)


def synthetic(
    n: int,
    fleet_devices: int,
    node_devices: int,
    seed: int = 0,
    load: float = 0.9,
    mean_duration: float = 3600.0,
) -> Trace:
    """``n`` jobs, Poisson arrivals at ``load`` x the fleet's capacity; sizes from 1 device to
    many nodes (mostly small, a tail of large gangs: half the jobs inside one node, a
    third of one to four nodes, the rest 8 to 256 nodes up to 1/8 of the fleet), log-normal
    durations (median 0.88 x mean_duration, sigma 0.5)."""
    rng = np.random.default_rng(seed)
    D = node_devices
    kind = rng.random(n)
    small = rng.choice([1, 2, 4, 8, 16], size=n, p=[0.3, 0.2, 0.25, 0.15, 0.1])
    small = np.minimum(small, D)
    mid = D * rng.choice([1, 2, 4], size=n, p=[0.5, 0.3, 0.2])
    big_cap = max(D * 4, fleet_devices // 8)
    big = np.minimum(D * 2 ** rng.integers(3, 9, size=n), big_cap)
    chips = np.where(kind < 0.5, small, np.where(kind < 0.8, mid, big)).astype(np.int64)
    dur = rng.lognormal(mean=math.log(mean_duration) - 0.125, sigma=0.5, size=n)
    work = float((chips * dur).sum())
    span = work / (load * fleet_devices)
    arrivals = np.sort(rng.uniform(0.0, span, size=n))
    jobs = tuple(
        Job(f"job{i}", float(arrivals[i]), int(chips[i]), 0, float(dur[i])) for i in range(n)
    )
    return Trace(jobs, (), f"synthetic:{n}:{seed}")
