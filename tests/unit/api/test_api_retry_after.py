"""``Retry-After`` on the API's 503 says when asking again can succeed.

Before: a 503 ``kafka_unavailable`` carried none, and the 429 ``tenant_busy`` a fixed
1 s (its own value is :mod:`tests.unit.api.test_waiters`'s and
:mod:`tests.unit.api.test_api_tenant_waits`'s).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from ragsift.api.kafka_link import BROKER_PROBE_INTERVAL_S, RECONNECT_BACKOFF_S
from tests.unit.api.conftest import Keys, RecordingApi

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/query", {"query": "q", "query_id": "q-1"}),
        ("/v1/feedback", {"query_id": "q-1", "relevant": True}),
    ],
)
async def test_kafka_unavailable_says_when_the_api_can_be_ready_again(
    client: TestClient[Any, Any], api: RecordingApi, keys: Keys, path: str, body: dict[str, Any]
) -> None:
    api.broker_down = True
    response = await client.post(path, json=body, headers=keys.header(keys.alpha))
    assert response.status == 503
    assert (await response.json())["error"] == "kafka_unavailable"
    # the API is ready again at its next connect attempt or broker probe at the latest
    expected = int(max(BROKER_PROBE_INTERVAL_S, RECONNECT_BACKOFF_S))
    assert response.headers["Retry-After"] == str(expected)
