"""The two lock files against pyproject.toml, the image, and ragsift's own imports.

``requirements.lock`` is what the tests run on; ``requirements-runtime.lock`` is what
the image installs (``scripts/lock`` writes both). The image must run the versions
the tests ran, carry no test tools, and every package ragsift imports must be
declared, not left to arrive with another one.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FULL = REPO / "requirements.lock"
RUNTIME = REPO / "requirements-runtime.lock"
#: The extras the image installs beside ragsift's own dependencies.
IMAGE_EXTRAS = ("reranker",)
#: Modules only the optional extras provide, and the extra that does.
OPTIONAL_MODULES = {
    "langchain_core": "langchain",
    "llama_index": "llamaindex",
    "sentence_transformers": "torch",
}
#: Calls that import a module named by a string (ragsift imports a few lazily).
DYNAMIC_IMPORTERS = {"import_module", "_import", "_module"}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned"
            pins[_name(name)] = version.strip()
    return pins


def _project() -> dict[str, list[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"": list(project["dependencies"])}
    groups.update(project["optional-dependencies"])
    return groups


def _runtime_names() -> set[str]:
    groups = _project()
    return {_name(r) for extra in ("", *IMAGE_EXTRAS) for r in groups[extra]}


def test_the_runtime_lock_pins_what_the_full_lock_pins() -> None:
    full, runtime = _pins(FULL), _pins(RUNTIME)
    assert len(runtime) >= 40, "the runtime lock lost most of its packages"
    assert not set(runtime) - set(full), "the image would install what no test ran"
    differ = {n: (v, full[n]) for n, v in runtime.items() if full[n] != v}
    assert not differ, f"runtime and full lock pin different versions: {differ}"


def test_every_declared_dependency_is_locked() -> None:
    full, runtime = _pins(FULL), _pins(RUNTIME)
    groups = _project()
    assert _runtime_names() <= set(runtime)
    assert {_name(r) for r in groups[""] + groups["dev"]} <= set(full)


def test_the_runtime_lock_leaves_the_test_and_lint_tools_out() -> None:
    dev_only = {_name(r) for r in _project()["dev"]} - _runtime_names()
    assert {"pytest", "ruff", "mypy", "playwright", "hypothesis"} <= dev_only
    assert not dev_only & set(_pins(RUNTIME))
    # ...and what they alone pull in (langchain-core's, llama-index-core's, pytest's).
    assert not {"langsmith", "nltk", "pluggy", "matplotlib"} & set(_pins(RUNTIME))


def test_the_image_installs_the_runtime_lock() -> None:
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    steps = [line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(steps)
    assert "COPY requirements-runtime.lock" in text
    assert re.search(r"uv pip sync [^\n]*requirements-runtime\.lock", text)
    assert "requirements.lock" not in text, "the image must not install the test tools"
    rules = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "!requirements-runtime.lock" in rules


def test_the_lock_script_writes_both_files_as_their_headers_say() -> None:
    script = (REPO / "scripts" / "lock").read_text(encoding="utf-8")
    for lock in (FULL, RUNTIME):
        header = lock.read_text(encoding="utf-8").splitlines()[1]
        command = header.removeprefix("#").split()
        assert command[:3] == ["uv", "pip", "compile"], header
        for word in command[3:]:
            assert word in script, f"{lock.name} was written with {word!r}; scripts/lock lacks it"


def _imports(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in DYNAMIC_IMPORTERS:
                yield node.args[0].value


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the ragsift files that import it (stdlib and ragsift left out)."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "ragsift").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for module in _imports(tree):
            top = module.split(".")[0]
            if top and top not in sys.stdlib_module_names and top != "ragsift":
                found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_ragsift_declares_every_package_it_imports() -> None:
    imported = _third_party_imports()
    # The scan sees the lazy imports too, or it would miss what a command loads late.
    assert {"scipy", "onnxruntime", "sentence_transformers", "yaml", "numpy"} <= set(imported)
    distributions = importlib.metadata.packages_distributions()
    groups = _project()
    declared = _runtime_names()
    undeclared: dict[str, str] = {}
    for module, files in sorted(imported.items()):
        if module in OPTIONAL_MODULES:
            extra = OPTIONAL_MODULES[module]
            assert extra in groups, f"{module} needs the extra {extra}, which pyproject lacks"
            continue
        names = {_name(d) for d in distributions.get(module, [])}
        assert names, f"{module} (imported by {sorted(files)}) is not installed"
        if not names & declared:
            undeclared[module] = f"{sorted(names)} imported by {sorted(files)}"
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


@pytest.mark.parametrize("module", sorted(OPTIONAL_MODULES))
def test_an_optional_module_is_imported_only_where_its_extra_is_expected(module: str) -> None:
    files = _third_party_imports().get(module, set())
    assert files, f"nothing imports {module}: drop it from OPTIONAL_MODULES"
    allowed = ("ragsift/integrations/", "ragsift/retrieval/embedders/sentence_transformer.py")
    assert all(f.startswith(allowed) for f in files), sorted(files)
