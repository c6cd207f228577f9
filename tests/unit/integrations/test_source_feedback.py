"""Labels through a framework source: embedded (the runtime's feedback loop) and over
HTTP (``POST /v1/feedback``), with the same event id for the same label."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.integrations import EmbeddedSource, HttpSource, IntegrationError
from ragsift.schemas import FeedbackEvent, feedback_event_id
from ragsift.settings import EmbedderSettings, Settings
from tests.unit.integrations.conftest import ANSWERED, TENANT, LiveApi


@pytest.fixture
async def calibrated(tmp_path: Path) -> AsyncIterator[EmbeddedRuntime]:
    """The handbook under the shipped calibrated scorer, whose labels re-fit."""
    settings = Settings(data_dir=tmp_path / "cal", embedder=EmbedderSettings(kind="hashing"))
    rt = EmbeddedRuntime(settings)
    await rt.ingest(TENANT, sample_documents())
    yield rt
    await rt.close()


async def test_an_embedded_label_reaches_the_feedback_loop(calibrated: EmbeddedRuntime) -> None:
    source = EmbeddedSource(calibrated, TENANT)
    result = await source.aretrieve(ANSWERED)
    event_id = await source.afeedback(result.query_id, True)
    assert event_id == feedback_event_id(TENANT, result.query_id, relevant=True, sampled=True)
    loop = calibrated.feedback
    assert loop is not None
    record = loop.store.recall(result.query_id, TENANT)
    assert record is not None
    [held] = loop.store.labels(loop.scope_of(record))
    assert held.relevant
    assert held.sampled
    with pytest.raises(IntegrationError, match="label refused"):
        await source.afeedback("never-asked", True)
    with pytest.raises(IntegrationError, match="label refused"):
        await source.afeedback("bad id", True)


async def test_without_the_calibrated_scorer_an_embedded_label_says_why(
    runtime: EmbeddedRuntime,
) -> None:
    with pytest.raises(IntegrationError, match="RAGSIFT_CONFIDENCE_SCORER=calibrated"):
        await EmbeddedSource(runtime, TENANT).afeedback("q", True)


async def test_an_http_label_is_published_with_the_same_id(live_api: LiveApi) -> None:
    source = HttpSource(live_api.url, live_api.key)
    event_id = await source.afeedback("q-7", False, sampled=False, comment="wrong product")
    assert event_id == feedback_event_id(TENANT, "q-7", relevant=False, sampled=False)
    [(topic, key, payload)] = live_api.api.published  # type: ignore[attr-defined]
    assert (topic, key) == ("feedback", TENANT)
    event = FeedbackEvent.model_validate_json(payload)
    assert (event.relevant, event.sampled, event.comment) == (False, False, "wrong product")


async def test_an_http_label_the_api_refuses_raises_with_its_error(live_api: LiveApi) -> None:
    with pytest.raises(IntegrationError, match="401"):
        await HttpSource(live_api.url, "rsk_not-a-key").afeedback("q", True)
    with pytest.raises(IntegrationError, match="422: invalid_feedback"):
        await HttpSource(live_api.url, live_api.key).afeedback("bad id", True)
    with pytest.raises(IntegrationError, match="unreachable"):
        await HttpSource("http://127.0.0.1:9", live_api.key).afeedback("q", True)


def test_the_sync_call_works_outside_an_event_loop(tmp_path: Path) -> None:
    async def ask() -> tuple[EmbeddedRuntime, str]:
        settings = Settings(data_dir=tmp_path / "s", embedder=EmbedderSettings(kind="hashing"))
        rt = EmbeddedRuntime(settings)
        await rt.ingest(TENANT, sample_documents())
        return rt, (await EmbeddedSource(rt, TENANT).aretrieve(ANSWERED)).query_id

    runtime, query_id = asyncio.run(ask())
    try:
        assert EmbeddedSource(runtime, TENANT).feedback(query_id, True)
    finally:
        asyncio.run(runtime.close())
