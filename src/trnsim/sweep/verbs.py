"""The sweepable verbs: a registry of ``SweepVerb`` entries, one per verb.

A sweep point is one run of a verb's own code in this process (never a subprocess): its flags
are parsed by the verb's own parser (``trnsim.cli.<module>.add_arguments``), so every value
meets the same argparse types and checks as on the command line, then the verb's ``run`` is
called with ``--json`` and its JSON document is the point's result (``trnsim.sweep.points``).
The table keeps the document's figures named by ``metrics`` (dotted paths into that document;
a spec may name others).

Adding a verb is one ``register(SweepVerb(...))`` line: its name, its CLI module, the figures
worth a column, the flags that are not parameters (they write files or change the shape of the
output) and the parameters that name files (resolved against the spec's directory).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, NoReturn

from trnsim.errors import DuplicateNameError, UnknownNameError, UsageError

Better = Literal["min", "max"]


@dataclass(frozen=True, slots=True)
class Metric:
    """A figure of a verb's ``--json`` document: its dotted ``path`` (``cost.cost_usd``), which
    direction is better (for Pareto fronts; None when neither is), and its unit (SI)."""

    path: str
    better: Better | None = None
    unit: str = ""


@dataclass(frozen=True, slots=True)
class SweepVerb:
    """One sweepable verb. ``module``: its module under ``trnsim.cli``; ``metrics``: the
    default columns; ``excluded``: flags (dest names) a sweep may not set; ``paths``:
    parameters whose value may name a file (relative: to the spec's directory)."""

    name: str
    module: str
    metrics: tuple[Metric, ...]
    excluded: tuple[str, ...] = ("json",)
    paths: tuple[str, ...] = ()

    def metric(self, path: str) -> Metric:
        """The declared metric at ``path``, or an undeclared one (no better direction)."""
        return next((m for m in self.metrics if m.path == path), Metric(path))


VERBS: dict[str, SweepVerb] = {}


def register(verb: SweepVerb) -> SweepVerb:
    if verb.name in VERBS:
        raise DuplicateNameError(f"sweep verb {verb.name!r} is already registered")
    VERBS[verb.name] = verb
    return verb


def lookup(name: Any) -> SweepVerb:
    if not isinstance(name, str) or name not in VERBS:
        raise UnknownNameError(
            f"verb {name!r} cannot be swept; sweepable verbs: {', '.join(VERBS)}"
        )
    return VERBS[name]


_PLAN = (Metric("plan.tp"), Metric("plan.pp"), Metric("plan.dp"), Metric("plan.ep"))

register(
    SweepVerb(
        "train",
        "train",
        (
            Metric("fits"),
            Metric("step_time_s", "min", "s"),
            Metric("tokens_per_s", "max", "tok/s"),
            Metric("mfu", "max"),
            Metric("memory_per_chip_bytes", "min", "B"),
            Metric("time_to_train_s", "min", "s"),
            Metric("cost.cost_usd", "min", "USD"),
            Metric("cost.energy_j", "min", "J"),
            Metric("chips", "min"),
            *_PLAN,
            Metric("plan.micro_batch"),
            Metric("global_batch"),
        ),
        paths=("model",),
    )
)
register(
    SweepVerb(
        "infer",
        "infer",
        (
            Metric("fits"),
            Metric("ttft_s", "min", "s"),
            Metric("tpot_s", "min", "s"),
            Metric("e2e_latency_s", "min", "s"),
            Metric("throughput_tokens_per_s", "max", "tok/s"),
            Metric("usd_per_million_tokens", "min", "USD"),
            Metric("joules_per_token", "min", "J"),
            Metric("memory_per_chip_bytes", "min", "B"),
            Metric("chips", "min"),
            *_PLAN,
            Metric("batch"),
        ),
        paths=("model", "draft_model"),
    )
)
register(
    SweepVerb(
        "serve",
        "serve",
        (
            Metric("summary.throughput.output_tokens_per_s", "max", "tok/s"),
            Metric("summary.throughput.output_tokens_per_s_per_chip", "max", "tok/s"),
            Metric("summary.throughput.requests_per_s", "max", "req/s"),
            Metric("summary.ttft_s.p50", "min", "s"),
            Metric("summary.ttft_s.p99", "min", "s"),
            Metric("summary.tpot_s.p50", "min", "s"),
            Metric("summary.tpot_s.p99", "min", "s"),
            Metric("summary.e2e_s.p99", "min", "s"),
            Metric("summary.goodput.fraction", "max"),
            Metric("summary.usd_per_million_output_tokens", "min", "USD"),
            Metric("summary.kv_utilization.peak"),
            Metric("summary.preemptions", "min"),
            Metric("summary.requests.completed"),
            Metric("summary.chips", "min"),
        ),
        # one simulation per point: serve's own sweeps and searches change its output's
        # shape, and its trace, records and chart are files
        excluded=(
            "json",
            "max_rate",
            "sweep_rates",
            "sweep_concurrency",
            "systems",
            "plot",
            "perfetto",
            "perfetto_max",
            "requests_out",
        ),
        paths=("model", "draft_model", "trace"),
    )
)
register(
    SweepVerb(
        "collective",
        "collective",
        (
            Metric("time_s", "min", "s"),
            Metric("algbw_Bps", "max", "B/s"),
            Metric("busbw_Bps", "max", "B/s"),
            Metric("algo"),
            Metric("ranks"),
            Metric("nbytes", unit="B"),
        ),
        # one size per point: --sweep and its flags make a table of sizes and a PNG
        excluded=("json", "sweep", "min_size", "max_size", "factor", "plot"),
    )
)
register(
    SweepVerb(
        "profile",
        "profile",
        (
            Metric("total_s", "min", "s"),
            Metric("flops_per_s", "max", "FLOP/s"),
            Metric("mfu", "max"),
            Metric("mbu", "max"),
            Metric("flops", unit="FLOP"),
            Metric("kernel"),
        ),
        # the trace and PNG of one kernel are profile's own job, not a sweep's
        excluded=("json", "trace", "png", "out_dir", "no_files"),
        paths=("file",),
    )
)


# ---- parameters: the verb's own parser --------------------------------------------------------


class PointParser(argparse.ArgumentParser):
    """The verb's parser for one point: a bad value raises ``UsageError`` (the point's error)
    instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


Kind = Literal["flag", "bool", "kwargs", "positional", "value"]


@dataclass(frozen=True)
class Param:
    """A parameter of a verb: its name in specs (the long flag with ``_`` for ``-``, or a
    positional's name), its argparse action and how a value becomes argv (``kind``)."""

    name: str
    action: argparse.Action
    kind: Kind

    @property
    def flag(self) -> str:
        return max(self.action.option_strings, key=len) if self.action.option_strings else ""


@cache
def parser(verb: str) -> PointParser:
    """The verb's parser (built once per process), with ``_run`` set to the verb's ``run``."""
    v = lookup(verb)
    module = importlib.import_module(f"trnsim.cli.{v.module}")
    p = PointParser(prog=f"trnsim {verb}", add_help=False)
    module.add_arguments(p)
    p.set_defaults(_run=module.run)
    return p


@cache
def params(verb: str) -> dict[str, Param]:
    """Every parameter a sweep of ``verb`` may set, by name."""
    v = lookup(verb)
    out: dict[str, Param] = {}
    for action in parser(verb)._actions:
        if action.dest in ("help", "_run") or action.dest in v.excluded:
            continue
        if not action.option_strings:
            out[action.dest] = Param(action.dest, action, "positional")
            continue
        longest = max(action.option_strings, key=len)
        name = longest.lstrip("-").replace("-", "_")
        if isinstance(action, argparse.BooleanOptionalAction):
            kind: Kind = "bool"
        elif action.nargs == 0:
            kind = "flag"
        elif isinstance(action, argparse._AppendAction):
            kind = "kwargs"  # --arg KEY=VALUE: parameters "arg.KEY"
        else:
            kind = "value"
        out[name] = Param(name, action, kind)
    return out


def param(verb: str, name: Any) -> Param:
    """The parameter ``name`` of ``verb`` (``global-batch`` and ``global_batch`` alike;
    ``arg.M`` for ``--arg M=...``); a ``UsageError`` naming the close matches otherwise."""
    table = params(verb)
    text = str(name)
    base = text.split(".", 1)[0] if "." in text else text
    key = base.replace("-", "_")
    p = table.get(key)
    if p is not None and (p.kind == "kwargs") == ("." in text):
        return p
    if p is not None and p.kind == "kwargs":
        raise UsageError(f"parameter {text!r}: name a key of --{key}, as {key}.NAME")
    close = difflib.get_close_matches(key, list(table), n=3)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    if key in lookup(verb).excluded:
        raise UsageError(
            f"{verb} parameter {text!r} cannot be swept (it writes files or "
            "changes the output's shape)"
        )
    raise UsageError(
        f"{verb} has no parameter {text!r}{hint}; its parameters: {', '.join(sorted(table))}"
    )


def value_text(value: Any) -> str:
    """A spec value as command-line text (``true``/``false`` for booleans; floats exact)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise UsageError(f"{value!r} is not a number, a string or true/false")


def check_value(verb: str, name: str, value: Any) -> None:
    """The verb's own rule for one value (its argparse type and choices), before any work;
    a ``UsageError`` naming the parameter and the value."""
    p = param(verb, name)
    if p.kind in ("flag", "bool"):
        if not isinstance(value, bool):
            raise UsageError(f"{verb} parameter {name}: {value!r} is not true or false")
        return
    if value is None or isinstance(value, list | dict):
        raise UsageError(f"{verb} parameter {name}: {value!r} is not a single value")
    text = value_text(value)
    if p.kind == "kwargs":
        from trnsim.nki.kernelfile import parse_arg

        parse_arg(f"{name.split('.', 1)[1]}={kwarg_text(value)}")
        return
    a = p.action
    try:
        typed = a.type(text) if callable(a.type) else text
    except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
        raise UsageError(f"{verb} parameter {name}: {exc}") from None
    if a.choices is not None and typed not in a.choices:
        shown = ", ".join(map(str, a.choices))
        raise UsageError(f"{verb} parameter {name}: {value!r} is not one of {shown}")


def kwarg_text(value: Any) -> str:
    """A ``--arg`` value: a Python literal (strings quoted), or true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def argv(verb: str, values: dict[str, Any]) -> list[str]:
    """The command line of one point: ``--flag=value`` forms and positionals after ``--``, so a
    value starting with '-' is never read as a flag; ``--json`` always."""
    positional: list[str] = []
    flags: list[str] = []
    for name, value in values.items():
        p = param(verb, name)
        if p.kind == "positional":
            positional.append(value_text(value))
        elif p.kind == "flag":
            if value:
                flags.append(p.flag)
        elif p.kind == "bool":
            flags.append(p.flag if value else "--no-" + p.flag[2:])
        elif p.kind == "kwargs":
            flags.append(f"{p.flag}={name.split('.', 1)[1]}={kwarg_text(value)}")
        else:
            flags.append(f"{p.flag}={value_text(value)}")
    return [*flags, "--json", *(["--", *positional] if positional else [])]
