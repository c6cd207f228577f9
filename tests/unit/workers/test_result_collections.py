"""A retrieval result names its collections as a query does, or is dead-lettered.

The decision worker takes its threshold from the result's collections (the strictest,
D3 + D9) and counts each decision under the result's collection as a metric label.
Until 2026-12-03 a result's ``collection`` was any string: 900 KB of it became a label
on /metrics (one of the first 50 kept for good), ``(other)`` merged with the overflow
bucket no collection can be named, and a result of collection ``regulated`` that listed
only ``default`` as searched was decided at ``default``'s lower threshold. The retrieval
worker only writes collections as its queries name them, ``collection`` first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragsift.observability.metrics import BoundedLabeler
from tests.unit.workers.hostile_rig import Driver, driving, feed


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with driving(Path(tmp_path_factory.mktemp("collections"))) as built:
        yield built


def _result(driver: Driver, **fields: Any) -> bytes:
    data = json.loads(driver.rig.result.model_dump_json())
    return json.dumps({**data, **fields}).encode()


@pytest.mark.parametrize(
    "fields",
    [
        {"collection": BoundedLabeler.OTHER},
        {"collection": "c" * 100_000},
        {"collection": "default\n"},
        {"collection": ""},
        {"collections": ["default", "bad name"]},
        {"collection": "regulated", "collections": ["default", "other"]},
        {"collections": ["other", "default"]},
        {"collections": [f"c{i}" for i in range(10_000)]},
    ],
)
@pytest.mark.parametrize("worker", ["decision", "report"])
def test_a_result_whose_collections_no_query_names_is_dead_lettered(
    driver: Driver, worker: str, fields: dict[str, Any]
) -> None:
    feed(driver, worker, _result(driver, **fields), refused=True)


def test_a_result_of_several_collections_is_decided(driver: Driver) -> None:
    feed(driver, "decision", _result(driver, collections=["default", "other"]), refused=False)
