"""The floor plan holds: the top level shows the layers, only the pytest face imports pytest,
nothing below imports above, and no module imports itself through others (type-only imports
and imports inside functions included: every ``import`` statement counts)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_faultloop"
LAYERS = (
    ("models",),
    ("store",),
    ("analyzers",),
    ("scoring",),
    ("jobs",),
    ("inputs",),
    ("report",),
    ("engine",),
    ("plugin", "__main__", ""),
)
"""The core's packages from the bottom up, the pytest face, the CLI and the package's root (its
public names for training scripts, loaded on first use) on top: a module may import from its own
layer and the ones below, never above."""
FACE = "plugin"
PYTEST_WORLD = ("pytest", "_pytest", "pluggy", "xdist", "pytest_html", "pytest_metadata")
"""pytest and the plugins whose objects only the face handles."""
MAX_TOP_ENTRIES = 12


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str) -> Iterator[tuple[int, str]]:
    """Every module ``name`` imports (line, module), wherever the statement stands."""
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield node.lineno, full if full in MODULES else node.module


def package_of(name: str) -> str:
    return name.split(".")[1] if "." in name else ""


def layer_of(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_the_top_level_shows_the_layers() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_TOP_ENTRIES, entries
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert packages | modules == {name for layer in LAYERS for name in layer if name}


def test_only_the_pytest_face_imports_pytest() -> None:
    outside = [
        f"{name}:{line} imports {module}"
        for name in MODULES
        if package_of(name) != FACE
        for line, module in imported(name)
        if module.split(".")[0] in PYTEST_WORLD
    ]
    assert outside == []


def test_nothing_below_imports_above() -> None:
    upward = [
        f"{name}:{line} imports {module}"
        for name in MODULES
        if package_of(name)
        for line, module in imported(name)
        if module.startswith("pytest_faultloop.")
        and layer_of(package_of(module)) > layer_of(package_of(name))
    ]
    assert upward == []


def test_no_module_imports_itself_through_others() -> None:
    graph = {
        name: {module for _, module in imported(name) if module in MODULES and module != name}
        for name in MODULES
    }
    cycles = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = "open"
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == "open":
                cycles.append(" -> ".join([*path[path.index(dep) :], dep]))
            elif dep not in state:
                visit(dep)
        path.pop()
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert cycles == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import pytest\n", ["pytest"]),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import xdist.dsession\n",
            ["xdist"],
        ),
        ("def f():\n    from pluggy import HookImpl\n", ["pluggy"]),
    ],
)
def test_every_import_statement_counts(
    source: str, found: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks read type-only and function-level imports too (what they would miss)."""
    module = tmp_path / "probe.py"
    module.write_text(source)
    monkeypatch.setitem(MODULES, "probe", module)
    names = [m.split(".")[0] for _, m in imported("probe") if m.split(".")[0] in PYTEST_WORLD]
    assert names == found


MAX_CLASS_LINES = 400
"""The log analyzer's readers each own one tool family's state and handlers: none grows into
the one-room engine it was split from."""


def test_no_class_of_the_log_analyzer_is_over_400_lines() -> None:
    long = []
    for path in sorted((PACKAGE / "analyzers" / "log").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}: {node.name} ({lines} lines)")
    assert long == []
