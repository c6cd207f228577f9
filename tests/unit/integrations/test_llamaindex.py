"""The LlamaIndex retriever over the embedded runtime and over the HTTP API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.schema import MetadataMode
from pydantic import Field

from ragsift.embedded import EmbeddedRuntime
from ragsift.integrations import EmbeddedSource, HttpSource, IntegrationError
from ragsift.integrations.llamaindex import RagsiftRefusalEvent, RagsiftRetriever
from tests.unit.integrations.conftest import ANSWERED, REFUSED, TENANT, LiveApi


class Refusals(BaseEventHandler):
    """Collects ragsift's refusal events from LlamaIndex's instrumentation."""

    events: list[RagsiftRefusalEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Refusals"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, RagsiftRefusalEvent):
            self.events.append(event)


@pytest.fixture
def refusals() -> Iterator[Refusals]:
    """A handler on the root dispatcher for the test's duration."""
    handler = Refusals()
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


async def test_embedded_answer_is_scored_nodes_with_citation(
    runtime: EmbeddedRuntime, refusals: Refusals
) -> None:
    nodes = await RagsiftRetriever(EmbeddedSource(runtime, TENANT)).aretrieve(ANSWERED)
    assert nodes
    top = nodes[0]
    assert top.node.node_id == top.node.metadata["citation"]["chunk_id"]
    assert top.node.metadata["citation"]["doc_id"] == "returns-and-refunds"
    assert top.node.metadata["citation"]["collection"] == "default"
    assert top.node.metadata["level"] in {"HIGH", "MEDIUM", "LOW"}
    assert top.score is not None
    assert [n.score for n in nodes] == sorted((n.score or 0.0 for n in nodes), reverse=True)
    # the LLM sees the text and its source, not ragsift's bookkeeping
    llm_text = top.node.get_content(MetadataMode.LLM)
    assert "handbook/returns-and-refunds.md" in llm_text
    assert "confidence" not in llm_text
    assert refusals.events == []


async def test_embedded_refusal_is_empty_and_dispatched(
    runtime: EmbeddedRuntime, refusals: Refusals
) -> None:
    assert await RagsiftRetriever(EmbeddedSource(runtime, TENANT)).aretrieve(REFUSED) == []
    [event] = refusals.events
    assert event.status == "no_relevant_context"
    assert event.reason is not None
    assert event.reason.startswith("not answerable")


async def test_http_answer_and_refusal(live_api: LiveApi, refusals: Refusals) -> None:
    retriever = RagsiftRetriever(HttpSource(live_api.url, live_api.key))
    nodes = await retriever.aretrieve(ANSWERED)
    assert nodes[0].node.metadata["citation"]["doc_id"] == "returns-and-refunds"
    assert refusals.events == []
    assert await retriever.aretrieve(REFUSED) == []
    assert [e.status for e in refusals.events] == ["no_relevant_context"]


async def test_http_outage_is_a_clear_error() -> None:
    # a port nothing listens on (bound, then closed)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    retriever = RagsiftRetriever(HttpSource(f"http://127.0.0.1:{port}", "rsk_x", timeout_s=1))
    with pytest.raises(IntegrationError, match="unreachable"):
        await retriever.aretrieve(ANSWERED)


async def test_sync_retrieve_over_http_from_a_worker_thread(
    live_api: LiveApi, refusals: Refusals
) -> None:
    """The sync API (no loop in the calling thread) over HTTP: a client per query."""
    retriever = RagsiftRetriever(HttpSource(live_api.url, live_api.key))
    nodes = await asyncio.to_thread(retriever.retrieve, ANSWERED)
    assert nodes[0].node.metadata["citation"]["doc_id"] == "returns-and-refunds"
    assert await asyncio.to_thread(retriever.retrieve, REFUSED) == []
    assert [e.status for e in refusals.events] == ["no_relevant_context"]
