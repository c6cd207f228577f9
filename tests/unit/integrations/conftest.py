"""A runtime holding the sample handbook, and a real ``ragsift api`` app answering from it.

The API is the real aiohttp app on a real port (clients reach it with httpx);
only its Kafka hop is replaced: the published query runs through the embedded
runtime's pipeline and its result is handed to the API as its reader would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from ragsift.api import Authenticator, KeyStore, QueryApi, create_web_app
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import ApiSettings, EmbedderSettings, KafkaSettings, Settings
from tests.factories import low_bar_confidence
from tests.unit.api.conftest import RecordingApi

TENANT = "acme"
ANSWERED = "How many days do I have to return the thermostat?"
REFUSED = "Tell me about quantum computing"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[EmbeddedRuntime]:
    """The sample handbook for tenant acme, hashing embedder, low bars (plumbing tests)."""
    settings = Settings(
        data_dir=tmp_path / "data",
        confidence=low_bar_confidence(),
        embedder=EmbedderSettings(kind="hashing"),
    )
    rt = EmbeddedRuntime(settings)
    await rt.ingest(TENANT, sample_documents())
    yield rt
    await rt.close()


@dataclass
class LiveApi:
    """A served API: its address and a key for tenant acme."""

    url: str
    key: str
    api: QueryApi


@pytest.fixture
async def live_api(runtime: EmbeddedRuntime, tmp_path: Path) -> AsyncIterator[LiveApi]:
    """``ragsift api``'s app on a free port, answering from ``runtime``."""
    store = KeyStore(tmp_path / "api-keys.json")
    key, _ = store.create([TENANT], ["query", "read"])
    settings = ApiSettings(keys_file=tmp_path / "api-keys.json")
    api = RecordingApi(
        KafkaSettings(), auth=Authenticator.from_settings(settings), settings=settings
    )
    tasks: set[asyncio.Task[None]] = set()

    async def run(event: QueryEvent) -> None:
        [found] = await runtime.ask([event])
        if isinstance(found, RetrievalResult):
            api.accept_result(found)
        else:
            api.accept_dead_letter(found)

    def answer(_: QueryApi, event: QueryEvent, __: bytes) -> None:
        task = asyncio.ensure_future(run(event))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    api.answer = answer
    server = TestServer(create_web_app(api), host="127.0.0.1")
    await server.start_server()
    try:
        yield LiveApi(url=str(server.make_url("")).rstrip("/"), key=key, api=api)
    finally:
        await server.close()
