"""Imports only point down: every ``trnsim`` import in the package (lazy, relative and
``TYPE_CHECKING`` ones included: the graph of ``tests/test_imports.py``) goes to the importing
module's own layer or one below it (``trnsim/__init__.py``)."""

from pathlib import Path

import trnsim
from test_imports import _graph

#: The layers, bottom up; modules of one rank may not import each other's layer unless equal.
RANK = {
    "errors": 0,
    "extras": 0,
    "inputs": 0,  # a leaf: imports trnsim.errors only
    "hw": 1,
    "numerics": 2,
    "core": 3,
    "report": 4,
    "nki": 5,
    "conformance": 6,
    "fabric": 6,
    "workloads": 7,
    "perf": 8,
    "serve": 9,
    "torch": 9,
    "dra": 9,
    "cli": 10,
    "sweep": 10,
    "__main__": 11,
    "__init__": 0,  # the package itself: a docstring and __version__, it imports nothing
}
ROOT = Path(trnsim.__file__).parent


def _layer(module: str) -> str:
    """``trnsim.perf.train`` -> ``perf``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every edge of the import graph from a module to a module of a higher layer."""
    return sorted(
        f"{m} imports {d}"
        for m, deps in graph.items()
        for d in deps
        if m.startswith("trnsim") and RANK[_layer(d)] > RANK[_layer(m)]
    )


def test_every_package_has_a_layer():
    tops = {
        p.name.removesuffix(".py")
        for p in ROOT.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert tops <= set(RANK), sorted(tops - set(RANK))


def test_imports_only_point_down():
    # the import graph of tests/test_imports.py: every import, lazy and relative ones included
    bad = _upward(_graph())
    assert not bad, "\n".join(bad)


def test_the_check_sees_an_upward_edge():
    """The checker itself can fail: an edge from core up to perf is found, one down is not."""
    graph = {"trnsim.core.costs": {"trnsim.perf.train", "trnsim.hw"}, "trnsim.hw": set()}
    assert _upward(graph) == ["trnsim.core.costs imports trnsim.perf.train"]
