"""Sweep specs: a YAML or JSON file naming a verb and the points to run it at.

.. code-block:: yaml

    verb: train                  # train, infer, serve, collective, profile (sweep.verbs)
    output: llama.csv            # optional: .csv, .jsonl or .parquet (--out overrides)
    fixed: {system: trn3-gen2, seq_len: 4096}   # every point
    grid:                        # the cartesian product of these lists
      model: [llama-3.1-8b, llama-3.1-70b]
      chips: [64, 128, 256]
      tp: [1, 2, 4, 8]
    points: [{model: llama-3.1-405b, chips: 512, tp: 8}]   # more points, listed
    sample: {n: 20, seed: 1}     # optional: n distinct random points of the grid
    constraints: ["tp <= chips // 8"]          # points breaking one are pruned
    metrics: [tokens_per_s, mfu]               # optional: columns (default: the verb's)
    pareto: {x: cost.cost_usd, y: tokens_per_s}  # optional: the front and its PNG

Parameters are the verb's flags without ``--`` (``global_batch`` or ``global-batch``), its
positionals (``file`` for profile) and, for ``--arg KEY=VALUE``, ``arg.KEY``. Every value is
checked when the spec loads with the verb's own rule (its argparse type and choices), so a
wrong name, an empty list or a value of the wrong type stops the sweep before any work, in one
line. With ``sample``, a grid entry may also be a range ``{min: 1, max: 64, log: true,
integer: true}``; each draw takes every entry independently (uniform, log-uniform for
``log``), seeded by ``seed``, and repeated or pruned draws are drawn again.

Constraints are expressions over a point's parameters (``+ - * / // % **``, comparisons,
``and or not``, ``in``, ``min max abs``); a parameter a point does not set is None.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trnsim.errors import TrnsimError, UsageError
from trnsim.sweep.points import PointJob
from trnsim.sweep.verbs import Better, SweepVerb, argv, check_value, lookup, param

SPEC_KEYS = (
    "verb",
    "output",
    "fixed",
    "grid",
    "points",
    "sample",
    "constraints",
    "metrics",
    "pareto",
)
MAX_POINTS = 1_000_000
"""The most points a grid may list in full (a larger one can be sampled: ``sample``)."""
MAX_SPEC_BYTES = 10 * 2**20
TABLE_FORMATS = (".csv", ".jsonl", ".parquet")
RESERVED = ("point", "status", "exit", "error")  # columns every table has


class SpecError(UsageError):
    """A sweep spec breaks a rule (exit status 2); the message names the file and the rule."""


@dataclass(frozen=True, slots=True)
class Point:
    """One point: its position in the spec's order and its parameter values (spec order)."""

    index: int
    values: tuple[tuple[str, Any], ...]

    @property
    def id(self) -> str:
        return point_id(dict(self.values))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


def point_id(values: dict[str, Any]) -> str:
    """A point's key in the table: 16 hex digits of the SHA-256 of its sorted parameters
    (so a resumed sweep recognises the points it has, whatever order they come in)."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Pareto:
    """The Pareto front of two metrics: which direction of each is better, and the PNG."""

    x: str
    y: str
    x_better: Better
    y_better: Better
    png: str | None = None


@dataclass(frozen=True)
class Spec:
    source: str
    base_dir: Path
    verb: SweepVerb
    points: tuple[Point, ...]
    params: tuple[str, ...]
    metrics: tuple[str, ...]
    output: str | None = None
    pareto: Pareto | None = None
    pruned: int = 0
    sampled: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns: the point id, the parameters, the outcome, the metrics."""
        return ("point", *self.params, "status", "exit", "error", *self.metric_columns)

    @property
    def metric_columns(self) -> tuple[str, ...]:
        return tuple(metric_column(m, self.params) for m in self.metrics)

    def job(self, point: Point) -> PointJob:
        values = {k: self._resolved(k, v) for k, v in point.values}
        return PointJob(self.verb.name, tuple(argv(self.verb.name, values)), self.metrics)

    def _resolved(self, name: str, value: Any) -> Any:
        """A value naming a file relative to the spec's directory, made absolute (so every
        worker, whatever its working directory, reads the same file)."""
        if name not in self.verb.paths or not isinstance(value, str):
            return value
        p = Path(value).expanduser()
        if p.is_absolute():
            return value
        candidate = self.base_dir / p
        return str(candidate.resolve()) if candidate.exists() else value


def with_axes(metrics: tuple[str, ...], pareto: Pareto, params: tuple[str, ...]) -> tuple[str, ...]:
    """The metrics plus the Pareto axes that are not parameters (an axis may be either)."""
    axes = [a for a in (pareto.x, pareto.y) if a not in params]
    return tuple(dict.fromkeys([*metrics, *axes]))


def axis_column(spec: Spec, axis: str) -> str:
    """The column of a Pareto axis: the parameter's, else the metric's."""
    if axis in spec.params:
        return axis
    return spec.metric_columns[spec.metrics.index(axis)]


def metric_column(path: str, params: tuple[str, ...]) -> str:
    """A metric's column: its path, or ``result.<path>`` when a parameter has that name."""
    return f"result.{path}" if path in params or path in RESERVED else path


# ---- constraints: a small, safe expression language -------------------------------------------

_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_CALLS = {"min": min, "max": max, "abs": abs}
_CONSTANTS = {"None": None, "True": True, "False": False, "true": True, "false": False}
MAX_EXPONENT = 64


class Constraint:
    """One constraint: an expression that must hold for a point to run."""

    def __init__(self, text: Any, names: set[str], where: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise SpecError(f"{where}: {text!r} is not an expression")
        self.text = text.strip()
        self.where = where
        try:
            self.tree = ast.parse(self.text, mode="eval").body
        except SyntaxError as exc:
            raise SpecError(f"{where}: {self.text!r} is not an expression ({exc.msg})") from None
        for node in ast.walk(self.tree):
            self._check(node, names)

    def _check(self, node: ast.AST, names: set[str]) -> None:
        allowed = (
            ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.BinOp,
            ast.Compare, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List, ast.Call,
            *_BIN, *_CMP,
        )  # fmt: skip
        if not isinstance(node, allowed):
            raise SpecError(f"{self.where}: {self.text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords
        ):
            raise SpecError(f"{self.where}: {self.text!r}: only min, max and abs may be called")
        if isinstance(node, ast.Name) and node.id not in names | set(_CALLS) | set(_CONSTANTS):
            raise SpecError(
                f"{self.where}: {self.text!r} names {node.id!r}, not a parameter of this "
                f"sweep ({', '.join(sorted(names)) or 'none'})"
            )

    def holds(self, values: dict[str, Any]) -> bool:
        try:
            return bool(self._eval(self.tree, values))
        except SpecError:
            raise
        except Exception as exc:
            raise SpecError(
                f"{self.where}: {self.text!r} cannot be evaluated at {values}: "
                f"{type(exc).__name__}: {exc}"
            ) from None

    def _eval(self, node: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return (
                _CONSTANTS[node.id]
                if node.id in _CONSTANTS and node.id not in env
                else (env.get(node.id))
            )
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(self._eval(e, env) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            vals = (self._eval(v, env) for v in node.values)
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            return {ast.Not: lambda: not v, ast.USub: lambda: -v, ast.UAdd: lambda: +v}[
                type(node.op)
            ]()
        if isinstance(node, ast.BinOp):
            a, b = self._eval(node.left, env), self._eval(node.right, env)
            if isinstance(node.op, ast.Pow) and abs(b) > MAX_EXPONENT:
                raise SpecError(f"{self.where}: {self.text!r}: exponent {b} is too large")
            return _BIN[type(node.op)](a, b)
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self._eval(right_node, env)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            return _CALLS[node.func.id](*(self._eval(a, env) for a in node.args))
        raise SpecError(f"{self.where}: {self.text!r}: {type(node).__name__} is not allowed")


# ---- loading ----------------------------------------------------------------------------------


def read(path: str | Path) -> dict[str, Any]:
    """The spec file's data (JSON, or YAML with PyYAML from the ``ray`` extra)."""
    p = Path(path)
    if not p.is_file():
        what = (
            "is a directory"
            if p.is_dir()
            else "is not a regular file"
            if p.exists()
            else "does not exist"
        )
        raise SpecError(f"sweep spec {str(p)!r} {what}")
    if p.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError(f"{p.name}: larger than {MAX_SPEC_BYTES // 2**20} MiB; not a sweep spec")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p.name}: cannot read it: {exc}") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        from trnsim import extras

        yaml = extras.yaml()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{p.name}:{mark.line + 1}" if mark is not None else p.name
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise SpecError(f"{where}: not valid YAML: {problem}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{p.name}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise SpecError(
            f"{p.name}: a sweep spec is a mapping (verb:, grid:, ...), not {type(data).__name__}"
        )
    return data


def load(path: str | Path) -> Spec:
    """Read and check the spec at ``path`` (relative files in it: to its directory)."""
    p = Path(path)
    return parse(read(p), p.name, p.resolve().parent)


def parse(data: dict[str, Any], source: str = "<spec>", base_dir: Path | None = None) -> Spec:
    """Check a spec's data and list its points (module docstring); ``SpecError`` otherwise."""
    unknown = [k for k in data if k not in SPEC_KEYS]
    if unknown:
        raise SpecError(f"{source}: unknown key {unknown[0]!r}; a spec has {', '.join(SPEC_KEYS)}")
    if "verb" not in data:
        raise SpecError(f"{source}: no verb (verb: train, infer, serve, collective or profile)")
    try:
        verb = lookup(data["verb"])
    except TrnsimError as exc:
        raise SpecError(f"{source}: {exc}") from None
    where = f"{source} ({verb.name})"
    fixed = _mapping(data.get("fixed", {}), f"{where}: fixed")
    grid = _mapping(data.get("grid", {}), f"{where}: grid")
    listed = data.get("points", [])
    if not isinstance(listed, list) or not all(isinstance(x, dict) for x in listed):
        raise SpecError(f"{where}: points is a list of mappings (parameter: value)")
    sample = _sample(data.get("sample"), where)

    names: dict[str, str] = {}  # canonical name -> as written

    def canon(name: Any, part: str) -> str:
        try:
            p = param(verb.name, name)
        except UsageError as exc:
            raise SpecError(f"{where}: {part}: {exc}") from None
        key = p.name + ("." + str(name).split(".", 1)[1] if p.kind == "kwargs" else "")
        if key in names and names[key] != str(name) and part != "points":
            raise SpecError(f"{where}: {part}: {name!r} and {names[key]!r} are one parameter")
        names.setdefault(key, str(name))
        return key

    def checked(name: str, value: Any, part: str) -> Any:
        try:
            check_value(verb.name, name, value)
        except UsageError as exc:
            raise SpecError(f"{where}: {part}: {exc}") from None
        return value

    fixed_c = {canon(k, "fixed"): checked(k, v, "fixed") for k, v in fixed.items()}
    dims: list[tuple[str, Any]] = []
    for k, v in grid.items():
        key = canon(k, "grid")
        if key in fixed_c:
            raise SpecError(f"{where}: {k} is in both fixed and grid")
        dims.append((key, _dimension(verb.name, key, v, sample is not None, where, checked)))
    points_c = []
    for i, pt in enumerate(listed):
        c = {canon(k, "points"): checked(k, v, f"points[{i}]") for k, v in pt.items()}
        points_c.append({**fixed_c, **c})
    if not dims and not points_c and not fixed_c:
        raise SpecError(f"{where}: no points: give a grid (name: [values]) or points")

    params = tuple(
        dict.fromkeys([*fixed_c, *(k for k, _ in dims), *(k for p in points_c for k in p)])
    )
    constraints = [
        Constraint(c, set(params), f"{where}: constraints[{i}]")
        for i, c in enumerate(_list(data.get("constraints", []), f"{where}: constraints"))
    ]

    def keep(values: dict[str, Any]) -> bool:
        env = {k: values.get(k) for k in params}
        return all(c.holds(env) for c in constraints)

    candidates: list[dict[str, Any]] = []
    pruned = 0
    if sample is not None:
        drawn, pruned = _draw(dims, fixed_c, sample, keep, where)
        candidates += drawn
    elif dims or (fixed_c and not points_c):
        total = math.prod(len(vals) for _, vals in dims)
        if total > MAX_POINTS:
            raise SpecError(
                f"{where}: the grid has {total:,} points, more than {MAX_POINTS:,}; draw from it "
                "with sample: {n: N, seed: S}"
            )
        for combo in itertools.product(*(vals for _, vals in dims)):
            values = {**fixed_c, **dict(zip((k for k, _ in dims), combo, strict=True))}
            if keep(values):
                candidates.append(values)
            else:
                pruned += 1
    for values in points_c:
        if keep(values):
            candidates.append(values)
        else:
            pruned += 1
    seen: set[str] = set()
    points: list[Point] = []
    for values in candidates:
        pid = point_id(values)
        if pid in seen:
            continue
        seen.add(pid)
        points.append(Point(len(points), tuple(values.items())))
    if not points:
        raise SpecError(f"{where}: every one of the {pruned:,} points breaks a constraint")

    metrics = _metrics(data.get("metrics"), verb, where)
    pareto = _pareto(data.get("pareto"), verb, where)
    if pareto is not None:
        metrics = with_axes(metrics, pareto, params)
    output = data.get("output")
    if output is not None:
        if not isinstance(output, str) or not output.strip():
            raise SpecError(f"{where}: output is a file name (.csv, .jsonl or .parquet)")
        if base_dir is not None and not Path(output).is_absolute():
            output = str(base_dir / output)
    return Spec(
        source=source,
        base_dir=base_dir or Path.cwd(),
        verb=verb,
        points=tuple(points),
        params=params,
        metrics=metrics,
        output=output,
        pareto=pareto,
        pruned=pruned,
        sampled=sample is not None,
    )


def _mapping(x: Any, where: str) -> dict[str, Any]:
    if x is None:
        return {}
    if not isinstance(x, dict):
        raise SpecError(f"{where} is a mapping (parameter: value), not {type(x).__name__}")
    return x


def _list(x: Any, where: str) -> list[Any]:
    if isinstance(x, str):
        return [x]
    if not isinstance(x, list):
        raise SpecError(f"{where} is a list, not {type(x).__name__}")
    return x


def _sample(x: Any, where: str) -> tuple[int, int] | None:
    if x is None:
        return None
    if not isinstance(x, dict) or set(x) - {"n", "seed"} or "n" not in x:
        raise SpecError(f"{where}: sample is {{n: N, seed: S}} (N points drawn with seed S)")
    n, seed = x["n"], x.get("seed", 0)
    for key, v, low in (("n", n, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise SpecError(f"{where}: sample {key} {v!r} is not a whole number >= {low}")
    return n, seed


RANGE_KEYS = {"min", "max", "log", "integer"}


def _dimension(verb: str, key: str, v: Any, sampled: bool, where: str, checked: Any) -> Any:
    """A grid entry: a non-empty list of values (a scalar is a list of one), or with
    ``sample`` a range ``{min, max, log, integer}``."""
    if isinstance(v, dict):
        if not sampled:
            raise SpecError(
                f"{where}: grid {key} is a range; ranges need sample: {{n: N, seed: S}}"
            )
        if set(v) - RANGE_KEYS or not {"min", "max"} <= set(v):
            raise SpecError(f"{where}: grid {key}: a range is {{min, max, log, integer}}")
        lo, hi = v["min"], v["max"]
        for b in (lo, hi):
            if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b):
                raise SpecError(f"{where}: grid {key}: range bound {b!r} is not a number")
        if lo > hi:
            raise SpecError(f"{where}: grid {key}: range min {lo} is above max {hi}")
        log, integer = bool(v.get("log", False)), bool(v.get("integer", False))
        if log and lo <= 0:
            raise SpecError(f"{where}: grid {key}: a log range needs min > 0, got {lo}")
        for b in (lo, hi):
            checked(key, round(float(b)) if integer else b, "grid")
        return ("range", float(lo), float(hi), log, integer)
    values = v if isinstance(v, list) else [v]
    if not values:
        raise SpecError(f"{where}: grid {key} has no values (an empty list)")
    for value in values:
        checked(key, value, "grid")
    return list(dict.fromkeys(values))


def _draw(
    dims: list[tuple[str, Any]],
    fixed: dict[str, Any],
    sample: tuple[int, int],
    keep: Any,
    where: str,
) -> tuple[list[dict[str, Any]], int]:
    """``n`` distinct points drawn from the grid with ``numpy.random.default_rng(seed)``,
    each entry independently; pruned and repeated draws are drawn again (up to 100 n + 1000
    draws, after which fewer points are returned: the grid has no more)."""
    n, seed = sample
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    pruned = 0
    for _ in range(100 * n + 1000):
        if len(out) == n:
            break
        values = dict(fixed)
        for key, dim in dims:
            if isinstance(dim, tuple):
                _, lo, hi, log, integer = dim
                u = rng.uniform(math.log(lo), math.log(hi)) if log else rng.uniform(lo, hi)
                x = math.exp(u) if log else float(u)
                values[key] = round(x) if integer else x
            else:
                values[key] = dim[int(rng.integers(len(dim)))]
        pid = point_id(values)
        if pid in seen:
            continue
        seen.add(pid)
        if keep(values):
            out.append(values)
        else:
            pruned += 1
    return out, pruned


def _metrics(x: Any, verb: SweepVerb, where: str) -> tuple[str, ...]:
    if x is None:
        return tuple(m.path for m in verb.metrics)
    paths = _list(x, f"{where}: metrics")
    if not paths:
        raise SpecError(f"{where}: metrics is empty (leave it out for the verb's default)")
    for p in paths:
        if not isinstance(p, str) or not p.strip() or any(not s for s in p.split(".")):
            raise SpecError(f"{where}: metric {p!r} is not a dotted path into the verb's JSON")
    if len(set(paths)) != len(paths):
        raise SpecError(f"{where}: metrics lists a path twice")
    return tuple(paths)


def _pareto(x: Any, verb: SweepVerb, where: str) -> Pareto | None:
    if x is None:
        return None
    keys = {"x", "y", "x_better", "y_better", "png"}
    if not isinstance(x, dict) or set(x) - keys or not {"x", "y"} <= set(x):
        raise SpecError(
            f"{where}: pareto is {{x: METRIC, y: METRIC, x_better: min|max, "
            "y_better: min|max, png: PATH}"
        )
    return pareto_of(
        verb, str(x["x"]), str(x["y"]), x.get("x_better"), x.get("y_better"), x.get("png"), where
    )


def pareto_of(
    verb: SweepVerb,
    x: str,
    y: str,
    x_better: Any = None,
    y_better: Any = None,
    png: Any = None,
    where: str = "--pareto",
) -> Pareto:
    """A ``Pareto`` of two metrics; each direction given or the verb's declared one."""
    dirs = []
    for axis, path, given in (("x", x, x_better), ("y", y, y_better)):
        better = given if given is not None else verb.metric(path).better
        if better not in ("min", "max"):
            raise SpecError(
                f"{where}: say whether a lower or a higher {path} is better "
                f"({axis}_better: min or max)"
            )
        dirs.append(better)
    if x == y:
        raise SpecError(f"{where}: x and y are both {x}; a front needs two metrics")
    if png is not None and (not isinstance(png, str) or not png.strip()):
        raise SpecError(f"{where}: png is a file name")
    return Pareto(x, y, dirs[0], dirs[1], png)


def table_format(path: str) -> str:
    """``.csv``, ``.jsonl`` or ``.parquet`` (the table's format, by its name)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".ndjson",):
        return ".jsonl"
    if suffix not in TABLE_FORMATS:
        raise SpecError(
            f"table {path!r}: unknown format {suffix or '(no suffix)'}; name it .csv, .jsonl "
            "or .parquet"
        )
    return suffix
