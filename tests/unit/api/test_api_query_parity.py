"""Issue 16 item 6: POST /v1/query accepts what a query event accepts, and the OpenAPI
document shows it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from ragsift.api.openapi import EVENT_FIELDS, QueryRequest, openapi_document
from ragsift.schemas import QueryEvent
from tests.unit.api.conftest import Keys, RecordingApi

Client = TestClient[Any, Any]
# Sent, recorded, never answered: the shortest wait the contract allows.
TIMEOUT = {"timeout_s": 1}


async def _post(client: Client, keys: Keys, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", **keys.header(keys.alpha)}
    response = await client.post("/v1/query", data=json.dumps({**body, **TIMEOUT}), headers=headers)
    return response.status, await response.json()


def test_every_request_field_but_the_apis_own_is_a_query_event_field() -> None:
    api_only = {"tenant_id", "query_id", "timeout_s"}
    assert set(QueryRequest.model_fields) - api_only == EVENT_FIELDS
    assert set(QueryEvent.model_fields) >= EVENT_FIELDS
    # everything a caller may set on an event, except what the API sets itself
    settable = set(QueryEvent.model_fields) - {
        "schema_version",
        "query_id",
        "tenant_id",
        "vector",  # a precomputed embedding is for producers that embed themselves
        "embedder_id",
        "traceparent",  # from the request's header
        "created_at",
    }
    assert settable == EVENT_FIELDS


def test_openapi_shows_the_query_options() -> None:
    props = openapi_document()["components"]["schemas"]["QueryRequest"]["properties"]
    for name in ("collections", "selection", "task_type", "similarity_threshold", "entities", "k"):
        assert name in props
    assert props["collections"]["maxItems"] == 8
    assert "debugging" in props["task_type"]["enum"]


async def test_the_options_reach_the_published_event(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    body = {
        "query": "How are refunds paid?",
        "collections": ["default", "legal"],
        "k": 7,
        "selection": "adaptive",
        "task_type": "debugging",
        "similarity_threshold": 0.4,
        "entities": ["Orbit", "Ωmega"],
    }
    status, _ = await _post(client, keys, body)
    assert status == 504  # accepted and published; nobody answers here
    event = api.sent[0][0]
    assert event.collection == "default"
    assert event.searched == ["default", "legal"]
    assert (event.k, event.selection, event.task_type) == (7, "adaptive", "debugging")
    assert event.similarity_threshold == 0.4
    assert event.entities == ["Orbit", "Ωmega"]


async def test_unset_options_keep_the_event_defaults(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    status, _ = await _post(client, keys, {"query": "q", "collections": ["legal"]})
    assert status == 504
    event = api.sent[0][0]
    assert (event.collection, event.selection, event.task_type) == ("legal", None, None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"task_type": "astrology"}, "task_type"),
        ({"selection": "threshold", "task_type": "debugging"}, ""),
        ({"collections": [f"c{i}" for i in range(9)]}, "collections"),
        ({"collections": ["a", "a"]}, ""),
        ({"collections": ["../etc"]}, "collections"),
        ({"entities": ["x" * 201]}, "entities"),
        ({"entities": [{"deep": ["x"]}]}, "entities"),
        ({"similarity_threshold": 1e308}, "similarity_threshold"),
        ({"selection": "everything"}, "selection"),
    ],
)
async def test_bad_options_are_a_422_naming_the_field(
    client: Client, api: RecordingApi, keys: Keys, body: dict[str, Any], field: str
) -> None:
    status, answer = await _post(client, keys, {"query": "q", **body})
    assert status == 422, answer
    assert answer["error"] == "invalid_query"
    if field:
        assert field in {f["loc"][0] for f in answer["fields"]}
    assert api.sent == []  # nothing was published


@pytest.mark.parametrize(
    "blank", ["\u0085", "\ufeff", " \t\u2028", "\u3000", "\u001e", "\u001c\u001f"]
)
async def test_a_blank_query_is_refused_by_the_schema_and_the_server_alike(
    client: Client, api: RecordingApi, keys: Keys, blank: str
) -> None:
    """ECMAScript's \\S (the OpenAPI reader's) takes U+0085 for a character, Python's
    for a space: schemathesis found a NEL query the schema allowed and the server refused,
    and later a U+001E (record separator) query, which Python's ``strip`` also removes."""
    pattern = openapi_document()["components"]["schemas"]["QueryRequest"]["properties"]["query"]
    assert pattern["pattern"] == r"[^\s\u001c-\u001f\u0085\ufeff]"
    assert re.search(pattern["pattern"], blank) is None  # the schema calls it blank too
    status, answer = await _post(client, keys, {"query": blank})
    assert status == 422, answer
    assert api.sent == []
