"""Workloads: who sends what, when. Requests are produced lazily (an iterator), so a run of a
million requests never holds them all.

- **Lengths** (``Lengths``): fixed, uniform, normal or lognormal prompt and output lengths
  (rounded, clipped to [1, max]); seeded.
- **Open loop** (``OpenLoop``): arrivals at a mean rate, independent of the server: ``poisson``
  (exponential gaps; MLPerf Server and ``vllm bench serve --request-rate`` send this way),
  ``gamma`` (gaps with shape ``1 / burstiness``, the same mean: ``vllm bench serve
  --burstiness``; burstiness 1 is Poisson, above 1 burstier) and ``constant`` (evenly spaced:
  guidellm's "constant" rate).
- **Closed loop** (``ClosedLoop``): ``concurrency`` users, each sending its next request when
  the previous one finishes (``vllm bench serve --max-concurrency`` with all requests queued,
  guidellm's concurrent mode, NVIDIA NIM's concurrency sweeps).
- **Traces** (``Trace``): arrival time, prompt and output lengths and optional prefix-block
  hashes from a file. Formats, recognised by their columns:

  - the Azure LLM inference traces (Azure/AzurePublicDataset ``AzureLLMInferenceTrace_*.csv``,
    2023 and 2024): CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``, ``TIMESTAMP`` a wall-clock
    time (``2023-11-16 18:15:46.6805900``) or seconds;
  - Mooncake's JSONL (kvcache-ai/Mooncake ``mooncake_trace.jsonl``, FAST'25 release):
    ``{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}``, each hash
    id naming one 512-token block of the prompt (``hash_block`` to change it);
  - a generic CSV or JSONL with ``arrival_s`` (or ``timestamp_s``), ``input_tokens`` and
    ``output_tokens`` columns and optional ``hash_ids`` (space- or JSON-separated).

  Times are made relative to the first request. A missing column, a negative or non-integer
  length, an unparsable time or times that go backwards is a ``ConfigError`` naming the file,
  the line and the rule.

Prefix sharing: a request carries ``hash_ids`` (ids of fixed-size prompt blocks; two requests
share a prefix exactly as far as their ids agree) and ``hash_block`` (tokens per id). Synthetic
workloads can give every request a shared system prompt (``shared_prefix`` tokens, in
``prefix_groups`` distinct variants).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from trnsim.errors import ConfigError

LENGTH_KINDS = ("fixed", "uniform", "normal", "lognormal")
ARRIVALS = ("poisson", "gamma", "constant")
MOONCAKE_BLOCK = 512  # tokens per hash id in Mooncake's trace (its README; dynamo's datagen)


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the client sends it."""

    rid: int
    arrival: float
    prompt: int
    output: int
    hash_ids: tuple[int, ...] = ()
    hash_block: int = MOONCAKE_BLOCK


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length distribution: ``fixed`` (``mean``), ``uniform`` (mean +- spread), ``normal``
    (standard deviation ``spread``) or ``lognormal`` (mean ``mean``, standard deviation
    ``spread`` of the lengths themselves); rounded and clipped to [1, ``max``]."""

    mean: int
    spread: float = 0.0
    kind: str = "fixed"
    max: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ConfigError(f"lengths: kind must be one of {', '.join(LENGTH_KINDS)}")
        if self.mean < 1:
            raise ConfigError(f"lengths: mean must be >= 1 token, got {self.mean}")
        if self.spread < 0:
            raise ConfigError(f"lengths: spread must be >= 0, got {self.spread}")
        if self.kind == "uniform" and self.spread >= self.mean:
            raise ConfigError(
                f"lengths: uniform {self.mean} +- {self.spread:g} reaches 0 tokens (spread must "
                "be < mean)"
            )
        if self.max is not None and self.max < 1:
            raise ConfigError(f"lengths: max must be >= 1, got {self.max}")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        m, s = float(self.mean), float(self.spread)
        if self.kind == "fixed" or s == 0:
            x = np.full(n, m)
        elif self.kind == "uniform":
            x = rng.uniform(m - s, m + s, n)
        elif self.kind == "normal":
            x = rng.normal(m, s, n)
        else:  # lognormal with the given mean and standard deviation of the lengths
            sigma2 = math.log1p((s / m) ** 2)
            x = rng.lognormal(math.log(m) - sigma2 / 2, math.sqrt(sigma2), n)
        x = np.maximum(np.rint(x), 1)
        if self.max is not None:
            x = np.minimum(x, self.max)
        return x.astype(np.int64)

    def describe(self) -> str:
        if self.kind == "fixed" or self.spread == 0:
            return f"{self.mean}"
        sign = "+-" if self.kind == "uniform" else "sd"
        return f"{self.kind} {self.mean} {sign} {self.spread:g}"


@dataclass(frozen=True, slots=True)
class Synthetic:
    """Prompt/output lengths and prefix sharing of synthetic requests."""

    input: Lengths = field(default_factory=lambda: Lengths(1024))
    output: Lengths = field(default_factory=lambda: Lengths(256))
    shared_prefix: int = 0
    prefix_groups: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.shared_prefix < 0 or self.prefix_groups < 1:
            raise ConfigError("workload: shared_prefix must be >= 0 and prefix_groups >= 1")

    def batches(self, chunk: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Endless (prompt, output, group) arrays, ``chunk`` requests at a time."""
        rng = np.random.default_rng(self.seed)
        while True:
            p = self.input.sample(rng, chunk) + self.shared_prefix
            o = self.output.sample(rng, chunk)
            g = rng.integers(0, self.prefix_groups, chunk)
            yield p, o, g

    def hash_ids(self, group: int, block: int) -> tuple[int, ...]:
        if not self.shared_prefix:
            return ()
        return tuple(group * 1_000_003 + k for k in range(self.shared_prefix // block))

    def describe(self) -> str:
        text = f"prompts {self.input.describe()} tokens, outputs {self.output.describe()}"
        if self.shared_prefix:
            text += (
                f", a shared {self.shared_prefix}-token prefix ({self.prefix_groups} variant"
                f"{'s' if self.prefix_groups > 1 else ''})"
            )
        return text


@dataclass(frozen=True, slots=True)
class OpenLoop:
    """``requests`` requests arriving at ``rate`` per second (see module docstring)."""

    rate: float
    requests: int
    arrival: str = "poisson"
    burstiness: float = 1.0
    lengths: Synthetic = field(default_factory=Synthetic)

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ConfigError(f"workload: rate must be > 0 requests/s, got {self.rate}")
        if self.requests < 1:
            raise ConfigError(f"workload: requests must be >= 1, got {self.requests}")
        if self.arrival not in ARRIVALS:
            raise ConfigError(f"workload: arrival must be one of {', '.join(ARRIVALS)}")
        if not self.burstiness > 0:
            raise ConfigError(f"workload: burstiness must be > 0, got {self.burstiness}")

    @property
    def closed(self) -> bool:
        return False

    def requests_iter(self, block: int = MOONCAKE_BLOCK) -> Iterator[Request]:
        rng = np.random.default_rng(self.lengths.seed + 7919)
        t = 0.0
        rid = 0
        for p, o, g in self.lengths.batches():
            n = len(p)
            if self.arrival == "poisson":
                gaps = rng.exponential(1.0 / self.rate, n)
            elif self.arrival == "gamma":
                shape = 1.0 / self.burstiness
                gaps = rng.gamma(shape, 1.0 / (self.rate * shape), n)
            else:
                gaps = np.full(n, 1.0 / self.rate)
            for i in range(n):
                if rid >= self.requests:
                    return
                if rid:
                    t += float(gaps[i])
                yield Request(
                    rid,
                    t,
                    int(p[i]),
                    int(o[i]),
                    self.lengths.hash_ids(int(g[i]), block),
                    block,
                )
                rid += 1

    def describe(self) -> str:
        how = self.arrival + (
            f" (burstiness {self.burstiness:g})" if self.arrival == "gamma" else ""
        )
        rate = f"{self.rate:g}/s"
        return f"{self.requests} requests, {how} arrivals at {rate}; {self.lengths.describe()}"


@dataclass(frozen=True, slots=True)
class ClosedLoop:
    """``concurrency`` users sending ``requests`` requests in all, each user its next request
    as soon as its previous one finishes (no think time)."""

    concurrency: int
    requests: int
    lengths: Synthetic = field(default_factory=Synthetic)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"workload: concurrency must be >= 1, got {self.concurrency}")
        if self.requests < 1:
            raise ConfigError(f"workload: requests must be >= 1, got {self.requests}")

    @property
    def closed(self) -> bool:
        return True

    def requests_iter(self, block: int = MOONCAKE_BLOCK) -> Iterator[Request]:
        """Requests with arrival 0; the simulator sets each one's time when a user sends it."""
        rid = 0
        for p, o, g in self.lengths.batches():
            for i in range(len(p)):
                if rid >= self.requests:
                    return
                yield Request(
                    rid, 0.0, int(p[i]), int(o[i]), self.lengths.hash_ids(int(g[i]), block), block
                )
                rid += 1

    def describe(self) -> str:
        return (
            f"{self.requests} requests from {self.concurrency} concurrent users (closed loop); "
            f"{self.lengths.describe()}"
        )


# --- trace files ----------------------------------------------------------------------------

_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_MOONCAKE = ("timestamp", "input_length", "output_length")
_GENERIC_TIME = ("arrival_s", "timestamp_s")
_GENERIC = ("input_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests from a trace file (module docstring), optionally time-scaled (``speedup`` > 1
    replays faster) and cut to the first ``limit`` requests."""

    path: str
    speedup: float = 1.0
    limit: int | None = None
    hash_block: int = MOONCAKE_BLOCK

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise ConfigError(f"trace: speedup must be > 0, got {self.speedup}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"trace: limit must be >= 1, got {self.limit}")
        p = Path(self.path)
        if not p.is_file():  # a device or FIFO is never opened (/dev/zero reads forever)
            what = "not a regular file" if p.exists() else "no such file"
            raise ConfigError(f"trace {self.path!r}: {what}")
        if not os.access(p, os.R_OK):
            raise ConfigError(f"trace {self.path!r}: not readable")
        # Read the header (or first record) now so a wrong file fails before any work.
        self._format()

    @property
    def closed(self) -> bool:
        return False

    @property
    def requests(self) -> int | None:
        return self.limit

    def _is_jsonl(self) -> bool:
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    return line.lstrip().startswith("{")
        raise ConfigError(f"trace {self.path!r}: the file is empty")

    def _format(self) -> str:
        if self._is_jsonl():
            with open(self.path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        rec = _json_line(self.path, n, line)
                        return _jsonl_kind(self.path, n, rec)
        with open(self.path, encoding="utf-8", newline="") as f:
            header = next(csv.reader(f), None)
        return _csv_kind(self.path, header or [])

    def requests_iter(self, block: int = MOONCAKE_BLOCK) -> Iterator[Request]:
        rows = self._jsonl_rows() if self._is_jsonl() else self._csv_rows()
        t0 = None
        last = -math.inf
        for rid, (line, t, p, o, hashes) in enumerate(rows):
            if self.limit is not None and rid >= self.limit:
                return
            if t0 is None:
                t0 = t
            rel = (t - t0) / self.speedup
            if rel < last:
                raise ConfigError(
                    f"trace {self.path!r} line {line}: time goes backwards ({t} after a later "
                    "one): sort the trace by arrival time"
                )
            last = rel
            yield Request(rid, rel, p, o, hashes, self.hash_block)

    def _csv_rows(self) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
        with open(self.path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None) or []
            kind = _csv_kind(self.path, header)
            cols = [h.strip() for h in header]
            if kind == "azure":
                it, ip, io_ = (cols.index(c) for c in _AZURE)
                ih = None
            else:
                it = next(cols.index(c) for c in _GENERIC_TIME if c in cols)
                ip, io_ = cols.index("input_tokens"), cols.index("output_tokens")
                ih = cols.index("hash_ids") if "hash_ids" in cols else None
            for n, row in enumerate(reader, 2):
                if not row or not any(c.strip() for c in row):
                    continue
                if len(row) < len(cols):
                    raise ConfigError(
                        f"trace {self.path!r} line {n}: {len(row)} fields, the header has "
                        f"{len(cols)}"
                    )
                t = _time(self.path, n, row[it], kind == "azure")
                p = _length(self.path, n, cols[ip], row[ip], 1)
                o = _length(self.path, n, cols[io_], row[io_], 1)
                hashes = _hashes(self.path, n, row[ih]) if ih is not None else ()
                yield n, t, p, o, hashes

    def _jsonl_rows(self) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
        with open(self.path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                rec = _json_line(self.path, n, line)
                kind = _jsonl_kind(self.path, n, rec)
                if kind == "mooncake":
                    t = _time(self.path, n, rec["timestamp"], False) / 1e3  # milliseconds
                    p = _length(self.path, n, "input_length", rec["input_length"], 1)
                    o = _length(self.path, n, "output_length", rec["output_length"], 1)
                else:
                    key = next(c for c in _GENERIC_TIME if c in rec)
                    t = _time(self.path, n, rec[key], False)
                    p = _length(self.path, n, "input_tokens", rec["input_tokens"], 1)
                    o = _length(self.path, n, "output_tokens", rec["output_tokens"], 1)
                hashes = _hashes(self.path, n, rec.get("hash_ids", ()))
                yield n, t, p, o, hashes

    def describe(self) -> str:
        extra = f", {self.speedup:g}x speed" if self.speedup != 1 else ""
        cut = f", first {self.limit} requests" if self.limit else ""
        return f"trace {self.path} ({self._format()}{extra}{cut})"


def _csv_kind(path: str, header: list[str]) -> str:
    cols = {h.strip() for h in header}
    if set(_AZURE) <= cols:
        return "azure"
    if any(c in cols for c in _GENERIC_TIME) and set(_GENERIC) <= cols:
        return "csv"
    if {"TIMESTAMP"} & cols or {"ContextTokens", "GeneratedTokens"} & cols:
        missing = [c for c in _AZURE if c not in cols]
        raise ConfigError(
            f"trace {path!r}: an Azure LLM trace needs columns {', '.join(_AZURE)} "
            f"(missing {', '.join(missing)})"
        )
    missing = [c for c in ("arrival_s", *_GENERIC) if c not in cols]
    raise ConfigError(
        f"trace {path!r}: missing column(s) {', '.join(missing)} (header: "
        f"{','.join(h.strip() for h in header) or 'none'}); expected the Azure LLM trace "
        f"columns {','.join(_AZURE)} or arrival_s,input_tokens,output_tokens[,hash_ids]"
    )


def _jsonl_kind(path: str, n: int, rec: dict) -> str:
    if set(_MOONCAKE) <= rec.keys():
        return "mooncake"
    if any(c in rec for c in _GENERIC_TIME) and set(_GENERIC) <= rec.keys():
        return "jsonl"
    if "timestamp" in rec or "input_length" in rec or "output_length" in rec:
        missing = [c for c in _MOONCAKE if c not in rec]
        raise ConfigError(
            f"trace {path!r} line {n}: a Mooncake record needs {', '.join(_MOONCAKE)} "
            f"(missing {', '.join(missing)})"
        )
    missing = [c for c in ("arrival_s", *_GENERIC) if c not in rec]
    raise ConfigError(
        f"trace {path!r} line {n}: missing key(s) {', '.join(missing)}; expected Mooncake's "
        f"{', '.join(_MOONCAKE)}[, hash_ids] or arrival_s, input_tokens, output_tokens"
    )


def _json_line(path: str, n: int, line: str) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"trace {path!r} line {n}: not JSON ({exc.msg})") from None
    if not isinstance(rec, dict):
        raise ConfigError(f"trace {path!r} line {n}: a record must be a JSON object")
    return rec


def _time(path: str, n: int, value: object, wallclock: bool) -> float:
    text = str(value).strip()
    try:
        t = float(text)
    except ValueError:
        t = math.nan
        if wallclock:
            t = _wallclock(text)
    if not math.isfinite(t):
        raise ConfigError(f"trace {path!r} line {n}: arrival time {text!r} is not a time")
    return t


def _wallclock(text: str) -> float:
    """Seconds since the epoch of an Azure trace time (fractions of up to 7 digits)."""
    main, _, frac = text.partition(".")
    try:
        base = datetime.fromisoformat(main.strip())
    except ValueError:
        return math.nan
    if frac and not frac.isdigit():
        return math.nan
    return base.timestamp() + (float("0." + frac) if frac else 0.0)


def _length(path: str, n: int, name: str, value: object, low: int) -> int:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or x != int(x):
        raise ConfigError(f"trace {path!r} line {n}: {name} {value!r} is not a whole number")
    if x < 0:
        raise ConfigError(f"trace {path!r} line {n}: {name} is negative ({int(x)})")
    if x < low:
        raise ConfigError(f"trace {path!r} line {n}: {name} is {int(x)}, must be >= {low}")
    return int(x)


def _hashes(path: str, n: int, value: object) -> tuple[int, ...]:
    if value in (None, "", ()):
        return ()
    if isinstance(value, str):
        text = value.strip()
        try:
            items = json.loads(text) if text.startswith("[") else text.split()
        except json.JSONDecodeError:
            items = None
    else:
        items = value
    try:
        return tuple(int(h) for h in items)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ConfigError(
            f"trace {path!r} line {n}: hash_ids must be a list of integers, got {value!r}"
        ) from None


Workload = OpenLoop | ClosedLoop | Trace
