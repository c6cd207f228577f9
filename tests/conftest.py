"""Test tiers: every test under tests/<tier>/ gets the <tier> marker."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# CI runs the property tests with a fixed example sequence, so a submission's
# result does not depend on which random examples that run happened to draw;
# local runs keep exploring new examples.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    hypothesis_settings.load_profile("ci")

# The CLI's Rich consoles are made at import and keep a COLUMNS they find then.
# pytest-xdist's workers start with COLUMNS=80, which would fix every table at 80
# columns there and not in a serial run: the tests that need a width set it.
os.environ.pop("COLUMNS", None)

_TIERS = ("unit", "integration", "e2e", "browser")
_PROBE_VECTORS = "RAGSIFT_CALIBRATION_PROBE_VECTORS_DIR"
_OWN_PROBE_VECTORS = pytest.StashKey[str]()


#: Set for a run on several xdist workers (unless set by hand), so each worker and the
#: processes it starts compute on one thread: with onnxruntime's default (a spinning
#: thread per core) in each of two workers on two cores, the ONNX-heavy tests took 14%
#: longer (139-155 s against 165-180 s for five such files, measured alternately).
_ONE_THREAD_EACH = ("RAGSIFT_EMBEDDER_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def pytest_configure(config: pytest.Config) -> None:
    """One folder of kept probe-bank vectors per run (ragsift/evaluation/probe_vectors.py),
    shared by the xdist workers and every process the tests start: the bank is embedded
    once per embedder in a run, never taken from an earlier run or the home cache.
    Several workers compute on a thread each (:data:`_ONE_THREAD_EACH`)."""
    workers = config.getoption("numprocesses", None)  # pytest-xdist's -n, made a number
    if not hasattr(config, "workerinput") and isinstance(workers, int) and workers > 1:
        for name in _ONE_THREAD_EACH:
            os.environ.setdefault(name, "1")
    if hasattr(config, "workerinput") or _PROBE_VECTORS in os.environ:
        return  # a worker inherits its controller's; a folder set by hand is kept
    folder = tempfile.mkdtemp(prefix="ragsift-probe-vectors-")
    os.environ[_PROBE_VECTORS] = folder
    config.stash[_OWN_PROBE_VECTORS] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_OWN_PROBE_VECTORS, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tier of the folder it lives in."""
    root = Path(__file__).parent
    for item in items:
        try:
            tier = Path(item.fspath).relative_to(root).parts[0]
        except ValueError:
            continue
        if tier in _TIERS:
            item.add_marker(getattr(pytest.mark, tier))
