"""Argument types for the CLI: each checks one domain and fails with one line naming the value.

argparse turns the ``argparse.ArgumentTypeError`` raised here into ``trnsim VERB: error:
argument --flag: <message>`` and exit status 2, so every flag is validated before any work.
Use them as ``parser.add_argument("--tp", type=positive_int)``; every numeric flag of every
verb should take one of these, never a bare ``int`` or ``float``.
"""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind} (must be finite)")
    return value


def _integer(text: str, kind: str) -> int:
    try:
        return int(text, 0) if isinstance(text, str) else int(text)
    except (TypeError, ValueError):
        pass
    value = _number(text, kind)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind} (must be a whole number)")
    return int(value)


def positive_int(text: str) -> int:
    """A whole number >= 1 (``1e3`` is accepted as 1000)."""
    value = _integer(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer (must be >= 1)")
    return value


def nonneg_int(text: str) -> int:
    """A whole number >= 0."""
    value = _integer(text, "a non-negative integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer (must be >= 0)")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text, "a positive number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number (must be > 0)")
    return value


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text, "a non-negative number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative number (must be >= 0)")
    return value


def fraction(text: str) -> float:
    """A finite number in [0, 1] (a rate, a hit ratio, an acceptance probability)."""
    value = _number(text, "a fraction")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (must be in [0, 1])")
    return value


def bounded_int(low: int, high: int):
    """A type accepting whole numbers in [low, high]."""

    def check(text: str) -> int:
        value = _integer(text, "an integer")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (must be {low}..{high})")
        return value

    check.__name__ = f"int_{low}_{high}"
    return check


def rule_type(name: str, base=None):
    """An argparse type checking the value against rule ``name`` of ``trnsim.inputs`` (the
    same rule the library functions check): ``'1e20': sequences per step must be a whole
    number >= 1 and <= 16,777,216 (...) (rule global-batch)``. ``base`` (a type of this
    module, such as ``positive_int``) parses first, with its own message."""
    from trnsim import inputs

    rule = inputs.RULES[name]

    def check(text: str) -> int | float:
        value: int | float
        if base is not None:
            value = base(text)
        else:
            try:
                value = int(text, 0)
            except (TypeError, ValueError):
                value = _number(text, "a number")  # refuses NaN and inf too
                if rule.integral and value == int(value):
                    value = int(value)
        why = inputs.problem(name, value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{text!r}: {why}")
        return value

    check.__name__ = f"rule_{rule.param}"
    return check


def fraction_list(text: str) -> tuple[float, ...]:
    """Comma-separated fractions in [0, 1] (per-position rates: ``0.865,0.725,0.635``)."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of fractions")
    return tuple(fraction(p) for p in parts)


def batch_size(text: str) -> int | str:
    """A whole number of sequences (rule ``batch`` of ``trnsim.inputs``), or ``max`` (the
    largest batch that fits)."""
    if str(text).strip().lower() == "max":
        return "max"
    try:
        return rule_type("batch")(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (a batch size: a whole number, or max)") from None
