"""The LangChain retriever over the embedded runtime and over the HTTP API."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler

from ragsift.embedded import EmbeddedRuntime
from ragsift.integrations import EmbeddedSource, HttpSource, IntegrationError
from ragsift.integrations.langchain import REFUSAL_EVENT, RagsiftRetriever
from tests.unit.integrations.conftest import ANSWERED, REFUSED, TENANT, LiveApi


class Refusals(AsyncCallbackHandler):
    """Collects ragsift's refusal events, as a chain's handler would."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == REFUSAL_EVENT:
            self.events.append(data)


class SyncRefusals(BaseCallbackHandler):
    """The same, for the synchronous ``invoke``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == REFUSAL_EVENT:
            self.events.append(data)


async def test_embedded_answer_carries_confidence_level_and_citation(
    runtime: EmbeddedRuntime,
) -> None:
    retriever = RagsiftRetriever(source=EmbeddedSource(runtime, TENANT))
    refusals = Refusals()
    docs = await retriever.ainvoke(ANSWERED, config={"callbacks": [refusals]})
    assert docs, "an answerable question returns documents"
    top = docs[0]
    assert "return" in top.page_content.lower()
    meta = top.metadata
    assert meta["citation"]["doc_id"] == "returns-and-refunds"
    assert meta["citation"]["collection"] == "default"
    assert meta["citation"]["chunk_id"] == top.id
    assert meta["source"] == "handbook/returns-and-refunds.md"
    assert meta["level"] in {"HIGH", "MEDIUM", "LOW"}
    assert 0.0 < meta["confidence"] <= 1.0
    assert [d.metadata["rank"] for d in docs] == list(range(1, len(docs) + 1))
    assert refusals.events == []


async def test_embedded_refusal_is_empty_and_flagged(runtime: EmbeddedRuntime) -> None:
    retriever = RagsiftRetriever(source=EmbeddedSource(runtime, TENANT))
    refusals = Refusals()
    docs = await retriever.ainvoke(REFUSED, config={"callbacks": [refusals]})
    assert docs == []
    [event] = refusals.events
    assert event["status"] == "no_relevant_context"
    assert event["reason"].startswith("not answerable")
    assert event["query_id"].startswith("integ-")


def test_sync_invoke_over_the_embedded_runtime(tmp_path: Any) -> None:
    """``invoke`` from plain synchronous code (the way most notebooks call it)."""
    import asyncio

    from ragsift.ingest.sample import sample_documents
    from ragsift.settings import EmbedderSettings, Settings
    from tests.factories import low_bar_confidence

    settings = Settings(
        data_dir=tmp_path,
        confidence=low_bar_confidence(),
        embedder=EmbedderSettings(kind="hashing"),
    )
    runtime = EmbeddedRuntime(settings)
    asyncio.run(runtime.ingest(TENANT, sample_documents()))
    retriever = RagsiftRetriever(source=EmbeddedSource(runtime, TENANT))
    refusals = SyncRefusals()
    answered = retriever.invoke(ANSWERED, config={"callbacks": [refusals]})
    refused = retriever.invoke(REFUSED, config={"callbacks": [refusals]})
    asyncio.run(runtime.close())
    assert answered[0].metadata["citation"]["doc_id"] == "returns-and-refunds"
    assert refused == []
    assert [e["status"] for e in refusals.events] == ["no_relevant_context"]


async def test_sync_invoke_inside_an_event_loop_says_to_use_ainvoke(
    runtime: EmbeddedRuntime,
) -> None:
    retriever = RagsiftRetriever(source=EmbeddedSource(runtime, TENANT))
    with pytest.raises(IntegrationError, match="ainvoke"):
        retriever.invoke(ANSWERED)


async def test_http_answer_and_refusal(live_api: LiveApi) -> None:
    retriever = RagsiftRetriever(source=HttpSource(live_api.url, live_api.key))
    refusals = Refusals()
    docs = await retriever.ainvoke(ANSWERED, config={"callbacks": [refusals]})
    assert docs[0].metadata["citation"]["doc_id"] == "returns-and-refunds"
    assert docs[0].metadata["query_id"].startswith("api-")
    assert refusals.events == []
    assert await retriever.ainvoke(REFUSED, config={"callbacks": [refusals]}) == []
    [event] = refusals.events
    assert event["status"] == "no_relevant_context"


async def test_http_bad_key_is_a_clear_error(live_api: LiveApi) -> None:
    retriever = RagsiftRetriever(source=HttpSource(live_api.url, "rsk_not-a-key"))
    with pytest.raises(IntegrationError, match="401"):
        await retriever.ainvoke(ANSWERED)


async def test_http_unknown_collection_is_a_clear_error(live_api: LiveApi) -> None:
    source = HttpSource(live_api.url, live_api.key, collection="nowhere")
    with pytest.raises(IntegrationError, match="404: collection_not_found"):
        await RagsiftRetriever(source=source).ainvoke(ANSWERED)
