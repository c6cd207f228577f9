"""The API without Kafka: a QueryApi whose publish is recorded, keys in a temp file, clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiokafka.errors import KafkaError

from ragsift.api import Authenticator, KeyStore, QueryApi, create_admin_app, create_web_app
from ragsift.schemas import ConfidenceBreakdown, QueryEvent, RetrievalResult
from ragsift.settings import ApiSettings, KafkaSettings


def build_result(query_id: str, tenant_id: str, **overrides: Any) -> RetrievalResult:
    """A minimal valid high-confidence result with no hits."""
    fields: dict[str, Any] = {
        "result_id": f"r-{tenant_id}-{query_id}",
        "query_id": query_id,
        "tenant_id": tenant_id,
        "collection": "default",
        "query": "what?",
        "status": "high_confidence",
        "level": "HIGH",
        "confidence": 0.9,
        "answerable": True,
        "advisory_flag": "HIGH_CONFIDENCE",
        "advisory_only": False,
        "breakdown": ConfidenceBreakdown(scorer="calibrated"),
        "filtered_count": 0,
        "total_found": 0,
        "match_count": 0,
        "threshold": 0.7,
        "stop_reason": "no_results",
        "chunks_retrieved": 0,
        "embedder_id": "offline",
    }
    fields.update(overrides)
    return RetrievalResult(**fields)


class RecordingApi(QueryApi):
    """A QueryApi 'connected' to a broker that records each query and, if told, answers it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[QueryEvent, bytes]] = []
        self.answer: Callable[[QueryApi, QueryEvent, bytes], None] | None = None
        #: other events sent (feedback): (logical topic, key, payload)
        self.published: list[tuple[str, str, bytes]] = []
        self.broker_down = False

    async def start(self) -> None:
        """Ready at once; the runner only keeps ``ready`` true."""
        self._runner = asyncio.create_task(asyncio.Event().wait())
        self._connected = self._broker_ok = True

    async def send(self, logical: str, key: str, payload: bytes, timeout_s: float) -> None:
        if self.broker_down:
            raise KafkaError("not connected to Kafka")
        self.published.append((logical, key, payload))

    async def _publish(self, event: QueryEvent, payload: bytes, timeout_s: float) -> None:
        if self.broker_down:
            raise KafkaError("not connected to Kafka")
        self.sent.append((event, payload))
        if self.answer is not None:
            # answer from the event loop, as the reader task would
            answer = self.answer
            asyncio.get_running_loop().call_soon(answer, self, event, payload)


@dataclass
class Keys:
    """Keys for the tests: alpha and beta each one tenant; multi covers alpha and gamma."""

    store: KeyStore
    alpha: str
    beta: str
    multi: str
    read_only: str

    def header(self, key: str) -> dict[str, str]:
        """An Authorization header for ``key``."""
        return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    """A keys file with four keys."""
    store = KeyStore(tmp_path / "api-keys.json")
    return Keys(
        store=store,
        alpha=store.create(["alpha"], ["query", "read"])[0],
        beta=store.create(["beta"], ["query", "read"])[0],
        multi=store.create(["alpha", "gamma"], ["query", "read"])[0],
        read_only=store.create(["alpha"], ["read"])[0],
    )


@pytest.fixture
def api_settings(tmp_path: Path) -> ApiSettings:
    """API settings pointing at the temp keys file."""
    return ApiSettings(keys_file=tmp_path / "api-keys.json")


@pytest.fixture
def make_api(keys: Keys, api_settings: ApiSettings) -> Callable[..., RecordingApi]:
    """Build a RecordingApi; keyword overrides go to ApiSettings."""

    def make(**overrides: Any) -> RecordingApi:
        settings = api_settings.model_copy(update=overrides)
        return RecordingApi(
            KafkaSettings(), auth=Authenticator.from_settings(settings), settings=settings
        )

    return make


@pytest.fixture
async def api(make_api: Callable[..., RecordingApi]) -> RecordingApi:
    """A RecordingApi with the default settings."""
    return make_api()


@pytest.fixture
async def client(api: RecordingApi) -> AsyncIterator[TestClient[Any, Any]]:
    """A client of the query API."""
    async with TestClient(TestServer(create_web_app(api))) as c:
        yield c


@pytest.fixture
async def admin(api: RecordingApi) -> AsyncIterator[TestClient[Any, Any]]:
    """A client of the admin app (metrics, health)."""
    async with TestClient(TestServer(create_admin_app(api))) as c:
        yield c
