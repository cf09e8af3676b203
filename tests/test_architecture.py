"""The package's layering, read from the AST of every module (lazy imports inside functions included):
each package imports only the packages below it, and no module imports one that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rooflow"
# Bottom to top. A package may import its own modules and any package listed before it.
LAYERS = (
    {"rooflow.errors", "rooflow.io", "rooflow.units", "rooflow.logs", "rooflow.conventions", "rooflow.guards",
     "rooflow.config_io", "rooflow.schemas", "rooflow.data", "rooflow.arguments"},
    {"rooflow.hardware"},
    {"rooflow.workload"},
    {"rooflow.profilers"},
    {"rooflow.estimate"},
    {"rooflow.ceilings"},
    {"rooflow.measure"},
    {"rooflow.report"},
    {"rooflow.config"},
    # the package root re-exports the Python API (rooflow.estimate_module), so it sits on top with the CLI
    {"rooflow.cli", "rooflow.__main__", "rooflow"},
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The rooflow modules `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("rooflow")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rooflow") and not node.level:
            # `from rooflow.measure import timing` imports the module rooflow.measure.timing, not the package
            submodules = {f"{node.module}.{a.name}" for a in node.names
                          if (PACKAGE.parent / f"{node.module}.{a.name}".replace(".", "/")).with_suffix(".py").exists()}
            found |= submodules or {node.module}
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}


def layer_of(module: str) -> int:
    best = None
    for index, members in enumerate(LAYERS):
        for member in members:
            if module == member or (member != "rooflow" and module.startswith(member + ".")):
                best = index
    if best is None:
        raise AssertionError(f"{module} is in no layer of tests/test_architecture.py: add its package to LAYERS "
                             "and to docs/architecture.md")
    return best


def test_every_package_imports_only_packages_below_it():
    upward = [f"{importer} (layer {layer_of(importer)}) imports {imported} (layer {layer_of(imported)})"
              for importer, imported_set in graph().items() for imported in sorted(imported_set)
              if layer_of(imported) > layer_of(importer)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [node, nxt]) if nxt in stack
                              else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("bad", ["upward", "cycle"])
def test_the_checks_catch_what_they_look_for(bad, tmp_path):
    """The two checks above fail on a tree that breaks them (so a passing run means something)."""
    root = tmp_path / "rooflow"
    (root / "hardware").mkdir(parents=True)
    (root / "report").mkdir()
    (root / "__init__.py").write_text("")
    (root / "hardware" / "__init__.py").write_text("")
    (root / "report" / "__init__.py").write_text("")
    (root / "report" / "a.py").write_text("from rooflow.hardware import b\n")
    if bad == "upward":
        (root / "hardware" / "b.py").write_text("import rooflow.report.a\n")
        globals()["PACKAGE"] = root
        try:
            with pytest.raises(AssertionError, match="imports rooflow.report.a"):
                test_every_package_imports_only_packages_below_it()
        finally:
            globals()["PACKAGE"] = PACKAGE_REAL
    else:
        (root / "hardware" / "b.py").write_text("from rooflow.hardware import c\n")
        (root / "hardware" / "c.py").write_text("from rooflow.hardware import b\n")
        globals()["PACKAGE"] = root
        try:
            with pytest.raises(AssertionError, match="rooflow.hardware.b"):
                test_no_import_cycle()
        finally:
            globals()["PACKAGE"] = PACKAGE_REAL


PACKAGE_REAL = PACKAGE
