"""The image's package set runs ragsift: a virtualenv of requirements-runtime.lock alone.

The Dockerfile installs ``requirements-runtime.lock`` and no test tool. No Docker
engine runs here, so this builds the same set into an empty virtualenv with uv (from
uv's cache, which ``make install`` filled with the same wheels) and runs ragsift from
the source tree in it: every module imports, the demo answers, and the packaged
cross-encoder of the ``reranker`` extra is found. A module that imports a package the
runtime lock lacks fails here, where the unit tier's full environment would hide it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import _required

REPO = Path(__file__).resolve().parents[2]

IMPORT_ALL = """
import importlib, pkgutil, ragsift
skipped = ("ragsift.integrations.langchain", "ragsift.integrations.llamaindex")
failed, count = [], 0
for info in pkgutil.walk_packages(ragsift.__path__, "ragsift."):
    if info.name.endswith("__main__") or info.name.startswith(skipped):
        continue
    try:
        importlib.import_module(info.name)
        count += 1
    except Exception as exc:
        failed.append(f"{info.name}: {exc!r}")
print(count)
assert not failed, failed
"""


@pytest.fixture(scope="module")
def runtime_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    if uv is None:
        message = "uv is not on PATH; `make install` (scripts/install) installs it"
        if _required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "sync", "--quiet", "--python", str(python), "requirements-runtime.lock"],
        check=True,
        cwd=REPO,
        timeout=600,
    )
    return python


def _run(python: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAGSIFT_")}
    environ.update(PYTHONPATH=str(REPO), COLUMNS="200", **env)
    return subprocess.run(
        [str(python), *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


def test_the_runtime_set_has_no_test_tools(runtime_python: Path, tmp_path: Path) -> None:
    for module in ("pytest", "hypothesis", "mypy", "playwright", "matplotlib"):
        done = _run(runtime_python, tmp_path, "-c", f"import {module}")
        assert done.returncode != 0, f"{module} is importable in the runtime set"


def test_every_module_imports_with_the_runtime_set(runtime_python: Path, tmp_path: Path) -> None:
    done = _run(runtime_python, tmp_path, "-c", IMPORT_ALL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 150


def test_the_demo_and_the_packaged_reranker_run_with_the_runtime_set(
    runtime_python: Path, tmp_path: Path
) -> None:
    demo = _run(runtime_python, tmp_path, "-m", "ragsift", "demo")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "HIGH" in demo.stdout
    assert "answer" in demo.stdout
    data = tmp_path / ".ragsift" / "demo"
    question = "How long is the warranty on the Orbit thermostat?"
    asked = _run(
        runtime_python,
        tmp_path,
        *("-m", "ragsift", "ask", "--json", "--data-dir", str(data), "--tenant", "demo"),
        question,
        RAGSIFT_RERANKER_KIND="onnx",
    )
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert "warranty.md" in asked.stdout
    # The cross-encoder ran: each kept hit carries its logit, best first, and the
    # confidence stays the calibrated one (ADR 048).
    shown = json.loads(asked.stdout)
    result = shown.get("result", shown)
    logits = [hit["raw_scores"]["rerank"] for hit in result["hits"]]
    assert len(logits) > 1
    assert logits == sorted(logits, reverse=True)
    assert result["breakdown"]["scorer"] == "calibrated"
