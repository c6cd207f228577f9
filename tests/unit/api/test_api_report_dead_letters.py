"""A query that wants a report whose report is dead-lettered is answered at once.

Before: the wait ignored every dead letter but the retrieval worker's, so a caller
with ``want_report`` whose report the LLM refused waited its whole ``timeout_s``
for a 504 "no result", though the result had come.
"""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from ragsift.api import QueryApi, openapi_document
from ragsift.schemas import DeadLetter, QueryEvent
from tests.unit.api.conftest import Keys, RecordingApi, build_result

Client = TestClient[Any, Any]
TIMEOUT_S = 5


def report_letter(event: QueryEvent, tenant_id: str | None = None) -> DeadLetter:
    """The report worker's letter for ``event``'s result, as the runtime builds it."""
    result = build_result(event.query_id, event.tenant_id, query=event.query)
    return DeadLetter.build(
        original=result.model_dump_json().encode(),
        stage="generate",
        error_type="LlmResponseError",
        error="chat service answered 400: context length exceeded",
        worker="report",
        topic="ragsift.retrievals.v1",
        query_id=event.query_id,
        tenant_id=tenant_id or event.tenant_id,
    )


def result_then_letter(api: QueryApi, event: QueryEvent, _: bytes) -> None:
    api.accept_result(build_result(event.query_id, event.tenant_id, query=event.query))
    api.accept_dead_letter(report_letter(event))


def letter_then_result(api: QueryApi, event: QueryEvent, _: bytes) -> None:
    api.accept_dead_letter(report_letter(event))
    api.accept_result(build_result(event.query_id, event.tenant_id, query=event.query))


async def ask(client: Client, keys: Keys, **body: Any) -> tuple[int, Any]:
    """Status and body; a wait that ran out would answer 504 "no result", not 200."""
    response = await client.post(
        "/v1/query",
        json={"query": "q", "query_id": "q1", "timeout_s": TIMEOUT_S} | body,
        headers=keys.header(keys.alpha),
    )
    return response.status, await response.json()


async def test_a_dead_lettered_report_answers_the_result_and_says_why(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    for query_id, answer in (("q1", result_then_letter), ("q2", letter_then_result)):
        api.answer = answer
        status, body = await ask(client, keys, want_report=True, query_id=query_id)
        assert status == 200, body
        assert body["result"]["query_id"] == query_id
        assert body["report"] is None
        assert body["report_error"]["error"] == "report_failed"
        assert body["report_error"]["query_id"] == query_id
        assert "at generate: chat service answered 400" in body["report_error"]["detail"]


async def test_a_report_letter_alone_does_not_answer(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.answer = lambda a, event, _: a.accept_dead_letter(report_letter(event))
    status, body = await ask(client, keys, want_report=True, timeout_s=1)
    assert (status, body["error"]) == (504, "timeout")


async def test_another_tenants_report_letter_does_not_answer(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    def answer(a: QueryApi, event: QueryEvent, _: bytes) -> None:
        a.accept_result(build_result(event.query_id, event.tenant_id, query=event.query))
        a.accept_dead_letter(report_letter(event, tenant_id="beta"))

    api.answer = answer
    status, body = await ask(client, keys, want_report=True, timeout_s=1)
    assert (status, body["error"]) == (504, "timeout")


async def test_without_want_report_a_report_letter_changes_nothing(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.answer = result_then_letter
    status, body = await ask(client, keys)
    assert status == 200
    assert body["report"] is None
    assert "report_error" not in body


def test_the_openapi_answer_has_the_report_error() -> None:
    schemas = openapi_document()["components"]["schemas"]
    field = schemas["QueryAnswer"]["properties"]["report_error"]
    assert {"$ref": "#/components/schemas/ErrorBody"} in field["anyOf"]
