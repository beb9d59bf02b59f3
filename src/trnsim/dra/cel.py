"""CEL selectors, evaluated as Kubernetes evaluates them, by cel-python (``celpy``).

The environment mirrors kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go`` (commit 6f9d959): one variable
``device`` with ``driver`` (string), ``attributes`` and ``capacity`` (maps of domain -> map of
identifier -> value). A bare attribute name belongs to the driver's domain; looking up a domain
the device does not have gives an empty map (``newStringInterfaceMapWithDefault``), looking up
a missing identifier inside a domain is an error. Version attributes are semantic versions with
the Kubernetes semver library (``semver()``, ``isSemver()``, ``isGreaterThan``, ``isLessThan``,
``compareTo``, ``major``, ``minor``, ``patch``: ``staging/src/k8s.io/dynamic-resource-allocation/
cel/semverlib.go``). The expression must evaluate to a bool.

Not modelled: ``cel.bind`` (cel-go's Bindings extension) and quantity capacities (the Neuron
driver publishes none).

Errors (syntax, a missing attribute, a type mismatch, a non-bool result) raise
:class:`CelError` naming the expression and the line and column.

Speed: evaluating a selector is deterministic in the values it reads, so each
:class:`Selector` memoises its result by the (path, value) pairs the evaluation read, traced
through the maps it was given; a device whose values at those paths are the same gets the
cached result without evaluating (an evaluation that iterates a map is not memoised).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from trnsim.dra import _optional
from trnsim.dra.k8s import SEMVER, Attribute, Device
from trnsim.errors import UsageError

_MISSING = object()


class CelError(UsageError):
    """A CEL selector failed to compile or evaluate: the expression, where, and why."""

    def __init__(self, expression: str, message: str, line: int | None, column: int | None):
        self.expression = expression
        self.line = line
        self.column = column
        self.message = message
        where = f" at line {line}, column {column}" if line and column else ""
        one_line = " ".join(expression.split())
        super().__init__(f"CEL selector {one_line!r}{where}: {message}")


# ---------------------------------------------------------------------------------------------
# Tracing maps
# ---------------------------------------------------------------------------------------------


class _Recorder:
    __slots__ = ("iterated", "reads")

    def __init__(self) -> None:
        self.reads: list[tuple[Any, ...]] = []
        self.iterated = False


_ACTIVE: list[_Recorder] = []


@functools.cache
def _traced_map_type():
    ct = _optional.celpy().celtypes

    class TracedMap(ct.MapType):
        """A celpy map that records the keys read through it (for memoisation)."""

        _path: tuple[Any, ...] = ()
        _default_empty = False

        def __getitem__(self, key):
            if _ACTIVE:
                _ACTIVE[-1].reads.append((*self._path, str(key)))
            if self._default_empty and not dict.__contains__(self, key):
                return _traced(ct, {}, (*self._path, str(key)), False)
            return super().__getitem__(key)

        def __contains__(self, key) -> bool:
            if _ACTIVE:
                _ACTIVE[-1].reads.append((*self._path, str(key)))
            return dict.__contains__(self, key)

        def _iterated(self) -> None:
            if _ACTIVE:
                _ACTIVE[-1].iterated = True

        def __iter__(self):
            self._iterated()
            return super().__iter__()

        def __len__(self) -> int:
            self._iterated()
            return super().__len__()

        def keys(self):
            self._iterated()
            return super().keys()

        def items(self):
            self._iterated()
            return super().items()

        def values(self):
            self._iterated()
            return super().values()

    return TracedMap


def _traced(ct, mapping: dict, path: tuple[Any, ...], default_empty: bool):
    cls = _traced_map_type()
    m = cls({ct.StringType(k): v for k, v in mapping.items()})
    m._path = path
    m._default_empty = default_empty
    return m


# ---------------------------------------------------------------------------------------------
# Semantic versions (Kubernetes' semver library)
# ---------------------------------------------------------------------------------------------


@functools.total_ordering
class Semver:
    """A semantic version value (semver 2.0.0 precedence: pre-releases sort before releases,
    numeric identifiers numerically, build metadata ignored)."""

    __slots__ = ("build", "major", "minor", "patch", "pre", "text")

    def __init__(self, text: str):
        m = SEMVER.match(text)
        if not m:
            raise ValueError(f"{text!r} is not a semantic version")
        self.text = text
        self.major, self.minor, self.patch = (int(m.group(i)) for i in (1, 2, 3))
        self.pre = tuple(m.group(4).split(".")) if m.group(4) else ()
        self.build = m.group(5) or ""

    def _key(self):
        def ident(x: str):
            return (0, int(x), "") if x.isdigit() else (1, 0, x)

        pre = (1,) if not self.pre else (0, *map(ident, self.pre))
        return (self.major, self.minor, self.patch, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __lt__(self, other: Semver) -> bool:
        if not isinstance(other, Semver):
            raise TypeError(f"no such overload: semver < {type(other).__name__}")
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


def _semver_functions(ct) -> dict[str, Any]:
    def semver(s):
        if not isinstance(s, str):
            raise TypeError(f"no such overload: semver({type(s).__name__})")
        try:
            return Semver(str(s))
        except ValueError as exc:
            raise ValueError(f"semver(): {exc}") from None

    def is_semver(s):
        return ct.BoolType(isinstance(s, str) and bool(SEMVER.match(str(s))))

    def need(v, what):
        if not isinstance(v, Semver):
            raise TypeError(f"no such overload: {type(v).__name__}.{what}()")
        return v

    return {
        "semver": semver,
        "isSemver": is_semver,
        "isGreaterThan": lambda a, b: ct.BoolType(need(a, "isGreaterThan") > need(b, "semver")),
        "isLessThan": lambda a, b: ct.BoolType(need(a, "isLessThan") < need(b, "semver")),
        "compareTo": lambda a, b: ct.IntType((need(a, "compareTo") > need(b, "semver")) - (a < b)),
        "major": lambda a: ct.IntType(need(a, "major").major),
        "minor": lambda a: ct.IntType(need(a, "minor").minor),
        "patch": lambda a: ct.IntType(need(a, "patch").patch),
    }


# ---------------------------------------------------------------------------------------------
# Devices as CEL input
# ---------------------------------------------------------------------------------------------


def _cel_value(ct, attr: Attribute):
    if attr.kind == "int":
        return ct.IntType(attr.value)
    if attr.kind == "bool":
        return ct.BoolType(attr.value)
    if attr.kind == "version":
        return Semver(str(attr.value))
    return ct.StringType(attr.value)


class CelDevice:
    """A device's CEL input (``device.driver``, ``device.attributes``, ``device.capacity``):
    the plain values the memo keys read, built at once, and the celpy maps, built only when a
    selector has to be evaluated."""

    __slots__ = ("_activation", "device", "driver", "flat")

    def __init__(self, device: Device, driver: str):
        self.device = device
        self.driver = driver
        self._activation: dict[str, Any] | None = None
        flat: dict[tuple[str, ...], Any] = {("device", "driver"): driver}
        for name, attr in device.attributes:
            domain, sep, ident = name.partition("/")
            if not sep:
                domain, ident = driver, name
            flat[("device", "attributes", domain, ident)] = (attr.kind, attr.value)
        self.flat = flat

    @property
    def activation(self) -> dict[str, Any]:
        if self._activation is None:
            ct = _optional.celpy().celtypes
            domains: dict[str, dict[str, Any]] = {}
            for name, attr in self.device.attributes:
                domain, sep, ident = name.partition("/")
                if not sep:
                    domain, ident = self.driver, name
                domains.setdefault(domain, {})[ident] = _cel_value(ct, attr)
            attributes = _traced(
                ct,
                {
                    d: _traced(ct, ids, ("device", "attributes", d), False)
                    for d, ids in domains.items()
                },
                ("device", "attributes"),
                True,
            )
            capacity = _traced(ct, {}, ("device", "capacity"), True)
            top = _traced(
                ct,
                {
                    "driver": ct.StringType(self.driver),
                    "attributes": attributes,
                    "capacity": capacity,
                },
                ("device",),
                False,
            )
            self._activation = {"device": top}
        return self._activation

    def lookup(self, path: tuple[Any, ...]) -> Any:
        """The value a traced read saw at ``path`` (a domain present, a value, or missing)."""
        if path in self.flat:
            return self.flat[path]
        if len(path) == 3 and path[1] == "attributes":  # a domain lookup
            return any(k[:3] == path for k in self.flat)
        if len(path) == 2:  # device.attributes / device.capacity / device.driver
            return path[1]
        return _MISSING


# ---------------------------------------------------------------------------------------------
# Selectors
# ---------------------------------------------------------------------------------------------

_CEL_TYPE_NAMES = {
    "IntType": "int",
    "UintType": "uint",
    "DoubleType": "double",
    "StringType": "string",
    "BoolType": "bool",
    "BytesType": "bytes",
    "ListType": "list",
    "MapType": "map",
    "TracedMap": "map",
}
_NO_MEMBER = re.compile(r"no such member in mapping: '([^']*)'")


def _position(expression: str, offset: int) -> tuple[int, int]:
    line = expression.count("\n", 0, offset) + 1
    col = offset - (expression.rfind("\n", 0, offset) + 1) + 1
    return line, col


def _explain(expression: str, exc: BaseException) -> CelError:
    args = getattr(exc, "args", ())
    text = str(args[0]) if args else str(exc)
    line = getattr(exc, "line", None)
    col = getattr(exc, "column", None)
    m = _NO_MEMBER.search(text)
    if m:  # point at the missing key itself
        key = re.escape(m.group(1))
        hit = re.search(rf"\.{key}\b|\[\s*['\"]{key}['\"]\s*\]", expression)
        if hit:
            line, col = _position(expression, hit.start() + (hit.group(0)[0] == "."))
        return CelError(expression, f"no such key: {m.group(1)!r} (no such attribute)", line, col)
    if type(exc).__name__ == "CELParseError":
        lark = exc.__context__
        token = getattr(lark, "token", None)
        char = getattr(lark, "char", None)
        if token is not None:
            what = "end of expression" if token.type == "$END" else f"token {str(token)!r}"
            text = f"syntax error: unexpected {what}"
        elif char is not None:
            text = f"syntax error: unexpected character {char!r}"
        else:
            text = "syntax error"
        return CelError(expression, text, line, col)
    cause = args[2] if len(args) > 2 and isinstance(args[2], tuple) and args[2] else None
    if cause:
        text = str(cause[0])
    if "NotImplemented" in text:  # celpy's arithmetic on operands of different types
        text = "type mismatch: no operator for operands of different types"
    if "overload" in text:
        kinds = [_CEL_TYPE_NAMES.get(t, t) for t in re.findall(r"\b(\w+Type)\(", text)]
        if kinds:
            text = "type mismatch: no operator for " + " and ".join(kinds) + " operands"
        else:
            text = f"type mismatch: {text}"
    return CelError(expression, text, line, col)


class Selector:
    """A compiled CEL selector with its memo (see the module docstring)."""

    def __init__(self, expression: str):
        celpy = _optional.celpy()
        self.expression = expression
        env = celpy.Environment()
        try:
            ast = env.compile(expression)
        except Exception as exc:  # celpy's CELParseError
            raise _explain(expression, exc) from None
        self._program = env.program(ast, functions=_semver_functions(celpy.celtypes))
        self._bool = celpy.celtypes.BoolType
        self._readsets: list[tuple[tuple[Any, ...], ...]] = []
        self._memo: dict[tuple[Any, ...], bool] = {}
        self._memoise = True
        self.evaluations = 0

    def matches(self, dev: CelDevice) -> bool:
        if self._memoise:
            for readset in self._readsets:
                hit = self._memo.get((readset, tuple(dev.lookup(p) for p in readset)))
                if hit is not None:
                    return hit
        rec = _Recorder()
        _ACTIVE.append(rec)
        try:
            self.evaluations += 1
            result = self._program.evaluate(dev.activation)
        except Exception as exc:
            raise _explain(self.expression, exc) from None
        finally:
            _ACTIVE.pop()
        if type(result).__name__ == "CELEvalError":
            raise _explain(self.expression, result)
        if not isinstance(result, self._bool):
            raise CelError(
                self.expression,
                f"must evaluate to bool, got {type(result).__name__} {result!r}",
                1,
                1,
            )
        value = bool(result)
        if rec.iterated:
            self._memoise = False
        elif self._memoise:
            readset = tuple(dict.fromkeys(rec.reads))
            if readset not in self._readsets:
                self._readsets.append(readset)
            self._memo[(readset, tuple(dev.lookup(p) for p in readset))] = value
        return value


_SELECTORS: dict[str, Selector] = {}


def selector(expression: str) -> Selector:
    """The compiled selector for ``expression`` (compiled once per process, like k8s'
    ``celcache``); raises :class:`CelError` on a syntax error."""
    sel = _SELECTORS.get(expression)
    if sel is None:
        sel = _SELECTORS[expression] = Selector(expression)
    return sel
