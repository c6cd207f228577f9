"""Finding 1 and 3: the credential decides the tenant; ids never cross tenants."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from ragsift.api import QueryApi, create_web_app
from ragsift.schemas import DeadLetter, QueryEvent
from tests.unit.api.conftest import Keys, RecordingApi, build_result

Client = TestClient[Any, Any]


def answer_ok(api: QueryApi, event: QueryEvent, payload: bytes) -> None:
    """The pipeline's answer: a result for the event's own tenant."""
    api.accept_result(build_result(event.query_id, event.tenant_id))


async def test_no_credential_is_401_with_www_authenticate(client: Client) -> None:
    response = await client.post("/v1/query", json={"tenant_id": "alpha", "query": "q"})
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await response.json())["error"] == "unauthorized"


async def test_garbage_and_unknown_credentials_are_401(client: Client, keys: Keys) -> None:
    body = {"tenant_id": "alpha", "query": "q"}
    for headers in (
        {"Authorization": "garbage"},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"},
        {"Authorization": "Bearer rsk_000000000000_nope"},
        {"Authorization": "Bearer " + keys.alpha[:-1] + "x"},  # right id, wrong secret
        {"Authorization": "Bearer eyJhbGciOiJub25lIn0.e30."},  # a JWT, not enabled here
        {"X-API-Key": "\u202eключ"},
    ):
        response = await client.post("/v1/query", json=body, headers=headers)
        assert response.status == 401, headers
    response = await client.get("/v1/queries/q1", headers={"Authorization": "garbage"})
    assert response.status == 401


async def test_two_different_credentials_are_401_and_nothing_is_sent(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    # X-API-Key used to win silently: a proxy that checked the bearer token authorized
    # one caller, and ragsift served another (here beta's key reading as alpha's tenant).
    api.answer = answer_ok
    both = {"Authorization": "Bearer " + keys.alpha, "X-API-Key": keys.beta}
    response = await client.post("/v1/query", json={"query": "q", "timeout_s": 1}, headers=both)
    assert response.status == 401
    assert "send one credential" in (await response.json())["detail"]
    assert api.sent == []
    same = {"Authorization": "Bearer " + keys.alpha, "X-API-Key": keys.alpha}
    response = await client.post("/v1/query", json={"query": "q", "timeout_s": 1}, headers=same)
    assert response.status == 200, await response.text()
    assert api.sent[0][0].tenant_id == "alpha"


@pytest.mark.parametrize(
    ("name", "prefix"), [("Authorization", "Bearer "), ("X-API-Key", ""), ("x-api-key", "")]
)
async def test_a_credential_header_given_twice_with_two_values_is_401_and_nothing_is_sent(
    client: Client, api: RecordingApi, keys: Keys, name: str, prefix: str
) -> None:
    # The first of two Authorization (or X-API-Key) lines won silently: a proxy that
    # checks the last authorized one caller, and ragsift served another, as for the
    # two headers side by side above.
    api.answer = answer_ok
    body = {"query": "q", "timeout_s": 1}
    twice = CIMultiDict([(name, prefix + keys.alpha), (name, prefix + keys.beta)])
    for method, path in (("POST", "/v1/query"), ("GET", "/v1/queries/q1")):
        response = await client.request(method, path, json=body, headers=twice)
        assert response.status == 401, await response.text()
        assert "send one credential" in (await response.json())["detail"]
    assert api.sent == []
    same = CIMultiDict([(name, prefix + keys.alpha), (name, prefix + keys.alpha)])
    response = await client.post("/v1/query", json=body, headers=same)
    assert response.status == 200, await response.text()


async def test_an_empty_header_next_to_a_credential_counts_as_absent(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    # A blank X-API-Key (a client template left empty) made a valid bearer token a 401,
    # "two different credentials"; two different non-empty ones still are.
    api.answer = answer_ok
    body = {"query": "q", "timeout_s": 1}
    for headers in (
        {"Authorization": "Bearer " + keys.alpha, "X-API-Key": ""},
        {"Authorization": "Bearer " + keys.alpha, "X-API-Key": "  "},
        {"Authorization": "", "X-API-Key": keys.alpha},
    ):
        response = await client.post("/v1/query", json=body, headers=headers)
        assert response.status == 200, (headers, await response.text())
    for headers in ({"X-API-Key": ""}, {"Authorization": "", "X-API-Key": ""}):
        response = await client.post("/v1/query", json=body, headers=headers)
        assert response.status == 401, headers
        assert "no credential" in (await response.json())["detail"]


async def test_body_tenant_must_match_the_credential(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    response = await client.post(
        "/v1/query", json={"tenant_id": "alpha", "query": "q"}, headers=keys.header(keys.beta)
    )
    assert response.status == 403
    assert (await response.json())["error"] == "forbidden"
    assert api.sent == []


async def test_body_without_tenant_takes_the_credentials_one(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.answer = answer_ok
    response = await client.post(
        "/v1/query", json={"query": "q", "timeout_s": 1}, headers=keys.header(keys.beta)
    )
    assert response.status == 200, await response.text()
    assert api.sent[0][0].tenant_id == "beta"
    assert (await response.json())["result"]["tenant_id"] == "beta"


async def test_multi_tenant_key_must_say_which(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.answer = answer_ok
    missing = await client.post("/v1/query", json={"query": "q"}, headers=keys.header(keys.multi))
    assert missing.status == 403
    chosen = await client.post(
        "/v1/query",
        json={"tenant_id": "gamma", "query": "q", "timeout_s": 1},
        headers={"X-API-Key": keys.multi},
    )
    assert chosen.status == 200
    assert api.sent[-1][0].tenant_id == "gamma"


async def test_scope_is_enforced(client: Client, keys: Keys) -> None:
    response = await client.post(
        "/v1/query", json={"query": "q"}, headers=keys.header(keys.read_only)
    )
    assert response.status == 403
    assert "query" in (await response.json())["detail"]


async def test_get_is_scoped_to_the_callers_tenant(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.accept_result(build_result("secret-1", "alpha"))
    mine = await client.get("/v1/queries/secret-1", headers=keys.header(keys.alpha))
    assert mine.status == 200
    assert (await mine.json())["tenant_id"] == "alpha"
    theirs = await client.get("/v1/queries/secret-1", headers=keys.header(keys.beta))
    assert theirs.status == 404  # not 403: the id's existence is not revealed
    asked = await client.get(
        "/v1/queries/secret-1", params={"tenant_id": "alpha"}, headers=keys.header(keys.beta)
    )
    assert asked.status == 403


async def test_revoked_key_stops_working_without_restart(client: Client, keys: Keys) -> None:
    headers = keys.header(keys.alpha)
    assert (await client.get("/v1/queries/x", headers=headers)).status == 404
    unknown = await client.get("/v1/queries/" + "a" * 8_000, headers=headers)
    assert unknown.status == 404
    assert len((await unknown.json())["detail"]) < 200  # the id was echoed whole
    keys.store.revoke(keys.alpha.split("_")[1])
    assert (await client.get("/v1/queries/x", headers=headers)).status == 401


async def test_another_tenants_cached_result_never_answers(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    """Tenant B reusing A's query id gets its own result, not A's cached one."""
    api.accept_result(build_result("shared-id", "alpha", query="alpha's secret question"))
    api.answer = answer_ok
    response = await client.post(
        "/v1/query",
        json={"query": "q", "query_id": "shared-id", "timeout_s": 1},
        headers=keys.header(keys.beta),
    )
    assert response.status == 200
    body = await response.json()
    assert body["result"]["tenant_id"] == "beta"
    assert "alpha" not in body["result"]["query"]


async def test_a_result_for_another_tenant_does_not_satisfy_a_waiter(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.answer = lambda a, event, _: a.accept_result(build_result(event.query_id, "alpha"))
    response = await client.post(
        "/v1/query",
        json={"query": "q", "query_id": "same", "timeout_s": 1},
        headers=keys.header(keys.beta),
    )
    assert response.status == 504
    assert (await response.json())["query_id"] == "same"


def _reject(api: QueryApi, event: QueryEvent, payload: bytes) -> None:
    api.accept_dead_letter(
        DeadLetter.build(
            original=payload,
            stage="validate",
            error_type="InvalidEventError",
            error="query is unusable",
            worker="retrieval",
            topic="queries",
            query_id=event.query_id,
        )
    )


async def test_a_dead_letter_only_answers_its_own_request(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    api.answer = _reject
    first = await client.post(
        "/v1/query",
        json={"query": "bad", "query_id": "retry-me", "timeout_s": 1},
        headers=keys.header(keys.alpha),
    )
    assert first.status == 422
    assert (await first.json())["error"] == "rejected"
    # a later, valid query with the same id is not rejected by the old letter
    api.answer = answer_ok
    second = await client.post(
        "/v1/query",
        json={"query": "good", "query_id": "retry-me", "timeout_s": 1},
        headers=keys.header(keys.alpha),
    )
    assert second.status == 200


async def test_another_requests_dead_letter_is_ignored(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    """A letter whose original bytes are another request's (same id) does not answer this one."""

    def reject_someone_else(a: QueryApi, event: QueryEvent, payload: bytes) -> None:
        other = event.model_copy(update={"query": "someone else's"})
        _reject(a, other, other.model_dump_json().encode())

    api.answer = reject_someone_else
    response = await client.post(
        "/v1/query",
        json={"query": "mine", "query_id": "dup", "timeout_s": 1},
        headers=keys.header(keys.alpha),
    )
    assert response.status == 504


async def test_a_query_id_with_a_result_for_another_question_is_a_409(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    # It was a 200 at once with the other question's result: ids derive from tenant and
    # query id, so the stream answered (and audited) both questions as one.
    def answer(a: QueryApi, event: QueryEvent, _: bytes) -> None:
        a.accept_result(build_result(event.query_id, event.tenant_id, query=event.query))

    api.answer = answer
    headers = keys.header(keys.alpha)
    first = {"query_id": "q1", "query": "How long is the warranty?", "timeout_s": 1}
    assert (await client.post("/v1/query", json=first, headers=headers)).status == 200
    again = await client.post("/v1/query", json=first, headers=headers)  # a retry
    assert again.status == 200
    assert (await again.json())["result"]["query"] == first["query"]
    other = {**first, "query": "What are the API rate limits per key?"}
    reused = await client.post("/v1/query", json=other, headers=headers)
    assert reused.status == 409
    assert (await reused.json())["error"] == "query_id_reused"
    assert [event.query for event, _ in api.sent] == [first["query"]] * 2  # not sent


async def test_a_query_id_another_question_is_waiting_on_is_a_409(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    # The 409 above looked at stored results only: two questions sent at once under one
    # id both waited on it, and the first result answered both, 200 with the other
    # question's result for the second.
    answered, waiting = asyncio.Event(), asyncio.Event()

    def answer_later(a: QueryApi, event: QueryEvent, _: bytes) -> None:
        waiting.set()

        async def later() -> None:
            await answered.wait()
            a.accept_result(build_result(event.query_id, event.tenant_id, query=event.query))

        asyncio.get_running_loop().create_task(later())
        if len(a.sent) > 1:  # both sent: the pipeline answers the first
            answered.set()

    api.answer = answer_later
    headers = keys.header(keys.alpha)
    first = {"query_id": "q1", "query": "How long is the warranty?", "timeout_s": 5}
    asked = asyncio.ensure_future(client.post("/v1/query", json=first, headers=headers))
    await asyncio.wait_for(waiting.wait(), 30)  # the first is sent and waiting
    other = {**first, "query": "What are the API rate limits per key?"}
    reused = await client.post("/v1/query", json=other, headers=headers)
    answered.set()
    assert reused.status == 409, (await reused.json())["result"]["query"]
    assert (await reused.json())["error"] == "query_id_reused"
    assert [event.query for event, _ in api.sent] == [first["query"]]  # not sent
    response = await asyncio.wait_for(asked, 30)
    assert (await response.json())["result"]["query"] == first["query"]


async def test_another_tenants_flood_cannot_evict_a_result_before_its_request_is_answered(
    make_api: Any, keys: Keys
) -> None:
    # The reader takes up to 1,000 records at once. A waiting request was answered from
    # the store, bounded by bytes and shared by every tenant: another tenant's big
    # results read in the same batch evicted this one's before it ran, and it got a
    # 504 "the result was evicted; retry" with its result in hand.
    api = make_api(store_bytes=1024 * 1024)

    def answer_then_flood(a: QueryApi, event: QueryEvent, _: bytes) -> None:
        a.accept_result(build_result(event.query_id, event.tenant_id, query=event.query))
        for i in range(10):  # 2 MB of mallory's results: the store holds 1 MiB
            a.accept_result(build_result(f"m{i}", "mallory", disclaimer="x" * 200_000))

    api.answer = answer_then_flood
    async with TestClient(TestServer(create_web_app(api))) as client:
        response = await client.post(
            "/v1/query", json={"query": "mine", "timeout_s": 5}, headers=keys.header(keys.alpha)
        )
        assert response.status == 200, await response.text()
        answer = await response.json()
    assert answer["result"]["tenant_id"] == "alpha"
    assert answer["result"]["query"] == "mine"
    assert api.evictions._value.get() > 0  # the flood did evict it from the store
