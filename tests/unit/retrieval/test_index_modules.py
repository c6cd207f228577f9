"""``retrieval/index.py`` split by concept, its old import path intact (issue 18, part 3).

The records and the search plan moved to modules of their own; other code
still writes ``from ragsift.retrieval.index import X``, so every name they
publish must come back from there as the very same object.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from ragsift.retrieval import index, records, search_plan

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("module", [records, search_plan], ids=lambda m: m.__name__)
def test_index_re_exports_every_public_name_of_the_split_modules(module: object) -> None:
    names: list[str] = module.__all__  # type: ignore[attr-defined]
    missing = sorted(set(names) - set(index.__all__))
    assert missing == []
    moved = [name for name in names if getattr(index, name) is not getattr(module, name)]
    assert moved == []


def test_index_defines_only_the_protocol() -> None:
    tree = ast.parse(inspect.getsource(index))
    defined = [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    assert defined == ["VectorIndex"]


def test_the_records_do_not_depend_on_the_search_plan() -> None:
    # Arrows point down inside retrieval too: the plan is built from records, not the reverse.
    tree = ast.parse(inspect.getsource(records))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "ragsift.retrieval.search_plan" not in imported
    assert "ragsift.retrieval.index" not in imported
