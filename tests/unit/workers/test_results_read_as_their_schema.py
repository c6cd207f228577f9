"""A retrieval result or evidence event read as its published JSON Schema reads it.

The decision, report and calibration workers read ``ragsift.retrievals.v1``, the audit
sink ``ragsift.audit.v1``. Until 2026-12-03 they read these laxly: a result whose
``confidence`` was ``"0.95"`` or ``true`` was used as 0.95 or 1.0 (context used, no
review), ``"advisory_only": "false"`` as false, a signal ``"0.9"`` as 0.9, where the
published schemas refuse them; a NaN threshold or hit score was kept. Each is now a
``decode`` dead letter, counted, and the worker goes on. (A signal, raw score or timing
that reads as infinite or NaN is still taken: their readers treat it as missing,
``tests/unit/workers/test_result_signals_poison.py``.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType
from ragsift.schemas.registry import JSON_DIR
from tests.unit.workers.hostile_rig import TENANT, Driver, driving, feed


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with driving(Path(tmp_path_factory.mktemp("lax"))) as built:
        yield built


def _schema(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        json.loads((JSON_DIR / f"{name}.v1.schema.json").read_text(encoding="utf-8"))
    )


def _set(data: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    *parents, leaf = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[leaf] = value
    return data


RESULT_FIELDS = [
    ("confidence", "0.95"),
    ("confidence", True),
    ("threshold", "0.5"),
    ("answerable", "true"),
    ("answerable", 1),
    ("advisory_only", "false"),
    ("should_flag_for_review", "yes"),
    ("relaxed", 0),
    ("calibration_shift", "false"),
    ("total_found", True),
    ("match_count", "3"),
    ("cache.hit", "no"),
    ("hits.0.score", "0.5"),
    ("hits.0.rank", True),
    ("breakdown.signals.top_score", "0.9"),
    ("timings_ms.search", "1.5"),
]


@pytest.mark.parametrize(("path", "value"), RESULT_FIELDS)
def test_a_result_the_schema_refuses_is_dead_lettered_by_the_decision_worker(
    driver: Driver, path: str, value: object
) -> None:
    data = _set(json.loads(driver.rig.result.model_dump_json()), path, value)
    assert not _schema("retrieval_result").is_valid(data)
    feed(driver, "decision", json.dumps(data).encode(), refused=True)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-1e999"])
@pytest.mark.parametrize("path", ["threshold", "confidence", "hits.0.score"])
def test_a_result_with_a_number_json_lacks_is_refused(
    driver: Driver, path: str, literal: str
) -> None:
    data = _set(json.loads(driver.rig.result.model_dump_json()), path, "__here__")
    feed(driver, "decision", json.dumps(data).replace('"__here__"', literal).encode(), refused=True)
    feed(driver, "report", json.dumps(data).replace('"__here__"', literal).encode(), refused=True)


def test_the_seed_result_itself_passes_the_schema_and_the_worker(driver: Driver) -> None:
    data = json.loads(driver.rig.result.model_dump_json())
    assert _schema("retrieval_result").is_valid(data)
    feed(driver, "decision", json.dumps(data).encode(), refused=False)


@pytest.mark.parametrize(("field", "value"), [("confidence", "0.5"), ("threshold", True)])
def test_evidence_the_schema_refuses_is_dead_lettered_by_the_audit_sink(
    driver: Driver, field: str, value: object
) -> None:
    data = EvidenceData(query_id="q-lax", tenant_id=TENANT, summary="low")
    event = json.loads(
        EvidenceEvent.for_query(EvidenceType.REFUSAL, data, source="/t").model_dump_json()
    )
    event["data"][field] = value
    assert not _schema("evidence_event").is_valid(event)
    feed(driver, "audit", json.dumps(event).encode(), refused=True)
