"""Imports only point down: every ``trnsim`` import in the package (lazy ones inside functions
included) goes to the importing module's own layer or one below it (``trnsim/__init__.py``)."""

import ast
from pathlib import Path

import trnsim

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
    "__init__": 11,
}
ROOT = Path(trnsim.__file__).parent


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return out


def test_every_package_has_a_layer():
    tops = {
        p.name.removesuffix(".py")
        for p in ROOT.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert tops <= set(RANK), sorted(tops - set(RANK))


def test_imports_only_point_down():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        me = path.relative_to(ROOT).parts[0].removesuffix(".py")
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] != "trnsim" or len(parts) < 2 or parts[1] == me:
                continue
            if RANK[parts[1]] > RANK[me]:
                bad.append(f"{path.relative_to(ROOT)}:{line} {me} imports {module}")
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_lazy_upward_import(tmp_path):
    """The checker itself can fail: an import inside a function is found."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from trnsim.perf import train\n")
    assert _imports(f) == [(2, "trnsim.perf")]
