"""POST /v1/feedback: a label on a result, published for the calibration worker (X2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from ragsift.api import Authenticator, create_web_app
from ragsift.api.openapi import openapi_document
from ragsift.schemas import FeedbackEvent
from ragsift.settings import KafkaSettings
from tests.unit.api.conftest import Keys, RecordingApi

Client = TestClient[Any, Any]


async def label(client: Client, key: str | None, keys: Keys, body: Any, **headers: str) -> Any:
    sent = {"Content-Type": "application/json", **headers}
    if key is not None:
        sent.update(keys.header(key))
    data = body if isinstance(body, str) else json.dumps(body)
    response = await client.post("/v1/feedback", data=data, headers=sent)
    return response.status, await response.json()


async def test_a_label_is_published_for_the_credentials_tenant(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    status, body = await label(client, keys.alpha, keys, {"query_id": "q-1", "relevant": True})
    assert status == 202, body
    [(topic, key, payload)] = api.published
    assert (topic, key) == ("feedback", "alpha")  # keyed by tenant, as the topic says
    event = FeedbackEvent.model_validate_json(payload)
    assert (event.query_id, event.tenant_id, event.relevant, event.sampled) == (
        "q-1",
        "alpha",
        True,
        True,
    )
    assert body == {
        "event_id": event.event_id,
        "query_id": "q-1",
        "tenant_id": "alpha",
        "relevant": True,
        "sampled": True,
    }


async def test_a_retry_is_the_same_event_and_a_changed_label_another(
    client: Client, keys: Keys
) -> None:
    first = await label(client, keys.alpha, keys, {"query_id": "q-2", "relevant": False})
    again = await label(client, keys.alpha, keys, {"query_id": "q-2", "relevant": False})
    changed = await label(client, keys.alpha, keys, {"query_id": "q-2", "relevant": True})
    reported = await label(
        client, keys.alpha, keys, {"query_id": "q-2", "relevant": False, "sampled": False}
    )
    assert first[1]["event_id"] == again[1]["event_id"]
    assert len({first[1]["event_id"], changed[1]["event_id"], reported[1]["event_id"]}) == 3
    assert reported[1]["sampled"] is False


async def test_the_credential_decides_who_may_label(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    body = {"query_id": "q-3", "relevant": True}
    assert (await label(client, None, keys, body))[0] == 401
    assert (await label(client, keys.read_only, keys, body))[0] == 403  # no query scope
    status, error = await label(client, keys.alpha, keys, {**body, "tenant_id": "beta"})
    assert status == 403
    assert "beta" in error["detail"]
    status, error = await label(client, keys.multi, keys, body)  # two tenants: say which
    assert status == 403
    assert "tenant_id" in error["detail"]
    status, ok = await label(client, keys.multi, keys, {**body, "tenant_id": "gamma"})
    assert status == 202
    assert ok["tenant_id"] == "gamma"
    assert [key for _, key, _ in api.published] == ["gamma"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"query_id": "q"}, ("relevant",)),
        ({"query_id": "q", "relevant": "yes"}, ("relevant",)),
        ({"query_id": "q", "relevant": 1}, ("relevant",)),
        ({"query_id": "q", "relevant": True, "sampled": "false"}, ("sampled",)),
        ({"query_id": "bad id", "relevant": True}, ("query_id",)),
        ({"query_id": "", "relevant": True}, ("query_id",)),
        ({"query_id": "q", "relevant": True, "comment": "x" * 2_001}, ("comment",)),
        ({"query_id": "q", "relevant": True, "label": "good"}, ("label",)),
        ({"query_id": "q", "relevant": True, "tenant_id": "bad tenant"}, ("tenant_id",)),
        ([], ()),
    ],
)
async def test_a_bad_label_is_a_422_naming_the_field(
    client: Client, api: RecordingApi, keys: Keys, body: Any, where: tuple[str, ...]
) -> None:
    status, error = await label(client, keys.alpha, keys, body)
    assert status == 422, error
    assert error["error"] == "invalid_feedback"
    if where:
        assert where in {tuple(f["loc"]) for f in error["fields"]}
    assert not api.published


async def test_a_body_that_is_not_json_is_refused_as_a_query_is(client: Client, keys: Keys) -> None:
    assert (await label(client, keys.alpha, keys, "{not json"))[0] == 400
    status, _ = await label(
        client, keys.alpha, keys, '{"query_id": "q"}', **{"Content-Type": "text/plain"}
    )
    assert status == 415


async def test_no_broker_is_a_503_naming_the_query(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.broker_down = True
    status, error = await label(client, keys.alpha, keys, {"query_id": "q-5", "relevant": True})
    assert status == 503
    assert error["error"] == "kafka_unavailable"
    assert error["query_id"] == "q-5"


def test_the_openapi_document_describes_the_route() -> None:
    route = openapi_document()["paths"]["/v1/feedback"]["post"]
    assert set(route["responses"]) >= {"202", "401", "403", "422", "503"}
    schemas = openapi_document()["components"]["schemas"]
    assert schemas["FeedbackRequest"]["required"] == ["query_id", "relevant"]


async def test_without_credentials_the_body_names_the_tenant() -> None:
    """``--insecure-no-auth``: no credential names a tenant, so a label must."""
    api = RecordingApi(KafkaSettings(), auth=Authenticator(None, None, insecure=True))
    async with TestClient(TestServer(create_web_app(api))) as client:
        unnamed = await client.post("/v1/feedback", json={"query_id": "q", "relevant": True})
        assert unnamed.status == 422
        assert [f["loc"] for f in (await unnamed.json())["fields"]] == [["tenant_id"]]
        named = await client.post(
            "/v1/feedback", json={"query_id": "q", "relevant": True, "tenant_id": "t1"}
        )
        assert named.status == 202
    assert [key for _, key, _ in api.published] == ["t1"]


@pytest.mark.parametrize(
    ("data", "status", "error"),
    [
        ("[" * 10_000 + "]" * 10_000, 400, "bad_json"),  # nesting past the reader's bound
        ('{"query_id": "q", "relevant": true, "comment": %s}' % ("[" * 990 + "]" * 990), 400, None),
        ('{"query_id": "q", "relevant": true, "comment": "%s"}' % ("x" * 200_000), 413, None),
        ('{"query_id": "q", "relevant": %s}' % ("9" * 5_000), 400, None),  # a huge number
        ('{"query_id": "クエリ", "relevant": true}', 422, "invalid_feedback"),  # non-Latin id
        ('{"query_id": "q\\u0000\\n", "relevant": true}', 422, "invalid_feedback"),
        ('{"query_id": "q", "relevant": true, "tenant_id": "al\\u202epha"}', 422, None),
    ],
)
async def test_hostile_bodies_get_one_clear_error_and_send_nothing(
    client: Client, api: RecordingApi, keys: Keys, data: str, status: int, error: str | None
) -> None:
    got, body = await label(client, keys.alpha, keys, data)
    assert got == status, body
    assert body["detail"]
    if error is not None:
        assert body["error"] == error
    assert not api.published
    # the server is unharmed: the next good label goes through
    assert (await label(client, keys.alpha, keys, {"query_id": "ok", "relevant": True}))[0] == 202


async def test_a_comment_in_any_script_or_with_control_characters_is_kept_as_sent(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    comment = "Ответ неверный — 答えが違う\u200b\ttab"
    status, _ = await label(
        client, keys.alpha, keys, {"query_id": "q-9", "relevant": False, "comment": comment}
    )
    assert status == 202
    [(_, _, payload)] = api.published
    assert FeedbackEvent.model_validate_json(payload).comment == comment
