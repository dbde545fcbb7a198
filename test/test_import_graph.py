"""The package's import graph: layers that only import downwards, and no import circle.

The imports are read from the source with ``ast`` (every ``import`` and ``from ... import``
anywhere in a module, functions included), so a lazy import counts like one at the top. Imports
under ``if TYPE_CHECKING:`` are never executed: they count for the layers (a type from a
higher layer is still a dependency upwards) but not for circles.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "mbfg_ros"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "package_share", "termination"}),
    frozenset({"model"}),
    frozenset({"estimation", "sim"}),
    frozenset({"intake"}),
    frozenset({"io", "benchmark"}),
    frozenset({"replay", "ros"}),
    frozenset({"testing"}),
    frozenset({"cli"}),
)
"""Lowest first; a module imports its own part, and parts of lower layers only (README "Layout")."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PART_OF = {"sensors": "model"}
"""Subpackages that are one part with another: the sensor kinds (mbfg_ros/sensors) are the model's
(each kind's config section and its models; model/config.py and model/mechanism.py iterate them,
and they build on the model's kinematics and closures)."""


def _part(module: str) -> str:
    """The layer member a module belongs to: its subpackage (or the part it is one with,
    :data:`PART_OF`), or the top-level module's name."""
    parts = module.split(".")
    return PART_OF.get(parts[1], parts[1]) if len(parts) > 1 else "__init__"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


@functools.cache
def import_graph() -> dict[str, dict[str, bool]]:
    """{module: {imported module of the package: runtime (False: only under TYPE_CHECKING)}};
    read once per session (every test here only reads it)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, bool]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_checking_nodes(tree)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out: dict[str, bool] = {}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:          # a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    out[target] = out.get(target, False) or id(node) not in typing_only
        graph[name] = out
    return graph


def _layer(part: str) -> int:
    for i, members in enumerate(LAYERS):
        if part in members:
            return i
    if part == "__init__":
        return 0
    raise AssertionError(f"mbfg_ros.{part} is in no layer: add it to LAYERS in {__file__}")


def test_every_import_goes_down_the_layers():
    wrong = []
    for module, imports in import_graph().items():
        here = _part(module)
        for target in imports:
            there = _part(target)
            if there != here and _layer(there) >= _layer(here):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports that do not go down the layers:\n" + "\n".join(sorted(wrong))


def test_no_import_circle():
    graph = {m: [t for t, runtime in imports.items() if runtime] for m, imports in import_graph().items()}
    state: dict[str, int] = {}                  # 1: on the current path, 2: done
    circles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in graph.get(m, []):
            if state.get(t) == 1:
                circles.append(" -> ".join(path[path.index(t):] + [m, t]) if t in path else f"{m} -> {t}")
            elif t not in state:
                visit(t, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_graph_sees_lazy_and_relative_imports():
    """The reader finds what the tests above rely on (a function-level import, a submodule)."""
    graph = import_graph()
    assert "mbfg_ros.replay.recording_speed" in graph["mbfg_ros.cli.check"]     # inside a function
    assert graph["mbfg_ros.model.channels"]["mbfg_ros.model.mechanism"] is False  # TYPE_CHECKING only
    assert "mbfg_ros.model.mechanism" in graph["mbfg_ros.estimation.estimator"]
