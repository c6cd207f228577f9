"""Arrows point down: a lower layer of ragsift never imports a higher one (STYLE 16, issue 18).

Read from the source with ``ast`` (nothing is imported), so a function-level
import counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragsift

#: The layers, lowest first; a module may import its own layer and those before it.
LAYERS = (
    "ragsift.schemas",
    "ragsift.confidence",
    "ragsift.retrieval",
    "ragsift.workers",
    "ragsift.streams",
)
PACKAGE_ROOT = Path(ragsift.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _layer_of(module: str) -> int | None:
    for position, layer in enumerate(LAYERS):
        if module == layer or module.startswith(f"{layer}."):
            return position
    return None


@pytest.mark.parametrize("layer", LAYERS)
def test_no_module_imports_a_higher_layer(layer: str) -> None:
    own = LAYERS.index(layer)
    folder = PACKAGE_ROOT / layer.removeprefix("ragsift.")
    upward = sorted(
        f"{path.relative_to(PACKAGE_ROOT.parent)} imports {module}"
        for path in folder.rglob("*.py")
        for module in _imported_modules(path)
        if (other := _layer_of(module)) is not None and other > own
    )
    assert upward == []


def test_handlers_never_import_the_assembly_above_them() -> None:
    """The workers (handlers) see neither the runtime wiring nor the entry points."""
    above = ("ragsift.wiring", "ragsift.embedded", "ragsift.cli", "ragsift.api")
    upward = sorted(
        f"{path.name} imports {module}"
        for path in (PACKAGE_ROOT / "workers").rglob("*.py")
        for module in _imported_modules(path)
        if module.startswith(above)
    )
    assert upward == []
