"""No import cycles in ``src/trnsim``.

Every import statement counts, wherever it is written: at module level, under ``if
TYPE_CHECKING:`` and inside functions. A function-level import only postpones a cycle to the
first call; it does not remove the two modules' dependence on each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# remove when 12a lands: issue 12's core rework breaks this cycle (indirect -> machine -> rules
# -> indirect, through TYPE_CHECKING imports); until then these three modules are not walked.
EXCLUDED = frozenset({"trnsim.core.indirect", "trnsim.core.machine", "trnsim.core.rules"})


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted((SRC / "trnsim").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The trnsim modules ``name`` imports (a ``from pkg import sub`` of a submodule counts
    as importing the submodule)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in mods else base)
    return {m for m in out if m in mods and m != name}


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items() if m not in EXCLUDED}
    return {m: deps - EXCLUDED for m, deps in graph.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path a -> ... -> a) per strongly connected component of two or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_through(graph, comp) for comp in components]


def _cycle_through(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside it."""
    inside, start = set(comp), comp[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & inside):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # a component of 2+ always has one


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_walk_sees_every_kind_of_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    g = import_graph()
    assert "trnsim.fabric.collectives" in g["trnsim.fabric.calibration"]  # module level
    assert "trnsim.numerics.words" in g["trnsim.numerics.rounding"]
    assert "trnsim.core.timing" in g["trnsim.nki.benchmark"]
    assert "trnsim.errors" in g["trnsim.core.profile"]  # inside a function
