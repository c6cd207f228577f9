"""The whole pipeline embedded (X5): reports, decisions, stored answers, bounded memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.embedded import MAX_ASSESS_CHUNKS, EmbeddedRuntime
from ragsift.errors import InvalidEventError
from ragsift.ingest.sample import sample_documents
from ragsift.runtime_store import StoredAnswer
from ragsift.schemas import DeadLetter, QueryEvent, RetrievalResult
from ragsift.settings import LlmSettings, RuntimeSettings, Settings
from tests.factories import embedded_settings

IN_SCOPE = "How many days do I have to return the thermostat?"
OUT_OF_SCOPE = "Who won the football world cup in 2014?"


def bounded(tmp_path: Path, **runtime: int) -> Settings:
    return embedded_settings(tmp_path).model_copy(update={"runtime": RuntimeSettings(**runtime)})


def q(query_id: str, text: str, tenant: str = "acme") -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id=tenant, query=text)


async def test_an_answer_carries_its_report_and_decision(runtime: EmbeddedRuntime) -> None:
    [answer] = await runtime.answer([q("in", IN_SCOPE)])
    assert isinstance(answer, StoredAnswer)
    assert answer.report is not None
    assert answer.report.query_id == "in"
    assert not answer.report.is_refusal
    assert answer.report.generated_by == "extractive"  # no LLM configured
    assert answer.decision is not None
    assert answer.decision.query_id == "in"


async def test_out_of_scope_is_refused_and_routed_to_review(runtime: EmbeddedRuntime) -> None:
    [answer] = await runtime.answer([q("out", OUT_OF_SCOPE)])
    assert isinstance(answer, StoredAnswer)
    assert answer.report is not None
    assert answer.report.is_refusal
    assert answer.report.answer == REFUSAL_SENTENCE
    assert answer.report.badge == "red"
    assert answer.report.disclaimer
    assert answer.decision is not None
    assert not answer.decision.use_context
    reviews = [r for r in runtime.bus.published["review"] if getattr(r, "query_id", "") == "out"]
    assert [r.queue for r in reviews] == [answer.decision.review_queue]  # type: ignore[attr-defined]


async def test_find_result_returns_what_ask_answered(tmp_path: Path) -> None:
    # issue 15: `ragsift assess` died with "'EmbeddedRuntime' object has no attribute
    # 'find_result'"; the answer must also outlive the process that asked.
    async with EmbeddedRuntime(embedded_settings(tmp_path)) as rt:
        await rt.ingest("acme", sample_documents())
        [asked] = await rt.ask([q("kept", IN_SCOPE)])
        assert isinstance(asked, RetrievalResult)
        assert rt.find_result("kept") == asked
    async with EmbeddedRuntime(embedded_settings(tmp_path)) as later:
        found = later.find_answer("kept")
        assert found is not None
        assert found.result == asked
        assert found.report is not None
        assert later.find_result("kept", tenant_id="other") is None
        assert later.find_result("never-asked") is None


async def test_a_rejected_query_is_a_dead_letter_and_is_not_stored(
    runtime: EmbeddedRuntime,
) -> None:
    [out] = await runtime.answer([q("long", "x " * 300)])
    assert isinstance(out, DeadLetter)
    assert runtime.find_result("long") is None


async def test_duplicate_ids_in_one_call_are_refused(runtime: EmbeddedRuntime) -> None:
    with pytest.raises(InvalidEventError, match="distinct"):
        await runtime.answer([q("same", IN_SCOPE), q("same", OUT_OF_SCOPE)])


async def test_an_id_being_asked_waits_and_each_tenant_gets_its_own_outcome(
    runtime: EmbeddedRuntime,
) -> None:
    # Ids are the clients' own: another tenant's query (or a retry) of an id in flight
    # was refused ("already being asked", a 422 at the console) and named the id.
    asked = [
        q("same", IN_SCOPE, "acme"),
        q("same", IN_SCOPE, "other"),
        q("same", "x " * 300, "third"),  # dead-lettered: a letter names no tenant
        q("same", IN_SCOPE, "acme"),
    ]
    outcomes = await asyncio.gather(*(runtime.answer([event]) for event in asked))
    acme, other, third, retry = (outcome for [outcome] in outcomes)
    assert isinstance(acme, StoredAnswer)
    assert isinstance(other, StoredAnswer)
    assert isinstance(retry, StoredAnswer)
    assert isinstance(third, DeadLetter)
    assert acme.result.tenant_id == retry.result.tenant_id == "acme"
    assert acme.result.match_count > 0
    assert other.result.tenant_id == "other"
    assert other.result.match_count == 0  # nothing indexed for "other"
    assert runtime.find_result("same", "third") is None
    assert not runtime._asking


async def test_memory_stays_bounded_after_many_queries(tmp_path: Path) -> None:
    window, kept = 16, 5
    async with EmbeddedRuntime(
        bounded(tmp_path, bus_recent_events=window, store_max_results=kept)
    ) as rt:
        await rt.ingest("acme", sample_documents())
        texts = [IN_SCOPE, OUT_OF_SCOPE, "What is the warranty period?", "Hello!"]
        for round_ in range(30):
            batch = [q(f"q-{round_}-{i}", text) for i, text in enumerate(texts)]
            out = await rt.answer(batch)
            assert len(out) == len(batch)
        assert rt.bus.queued() == 0
        assert rt.bus.published  # every topic the pipeline wrote to is remembered...
        assert all(len(events) <= window for events in rt.bus.published.values())  # ...boundedly
        assert rt.bus.published["retrievals"][-1].query_id == "q-29-3"  # type: ignore[attr-defined]
        assert len(rt.store) == kept
        assert rt.find_result("q-29-3") is not None
        assert rt.find_result("q-0-0") is None  # pruned
        assert rt._asking == {}


async def test_assess_chunks_scores_only_the_given_chunks(runtime: EmbeddedRuntime) -> None:
    [found] = await runtime.ask([q("src", IN_SCOPE)])
    assert isinstance(found, RetrievalResult)
    chosen = [h.chunk_id for h in found.hits[:2]]
    assessed = await runtime.assess_chunks(q("judge", IN_SCOPE), chosen)
    assert isinstance(assessed, StoredAnswer)
    seen = {h.chunk_id for h in assessed.result.hits} | {
        d.chunk_id for d in assessed.result.dropped
    }
    assert seen == set(chosen)
    assert runtime.find_result("judge") is None  # assessing is not asking


async def test_assess_chunks_never_sees_another_tenants_chunks(runtime: EmbeddedRuntime) -> None:
    [found] = await runtime.ask([q("src", IN_SCOPE)])
    assert isinstance(found, RetrievalResult)
    assessed = await runtime.assess_chunks(
        q("intruder", IN_SCOPE, tenant="other"), [h.chunk_id for h in found.hits]
    )
    assert isinstance(assessed, StoredAnswer)
    assert assessed.result.hits == []
    assert assessed.result.total_found == 0


@pytest.mark.parametrize("count", [0, MAX_ASSESS_CHUNKS + 1])
async def test_assess_chunks_bounds_the_id_list(runtime: EmbeddedRuntime, count: int) -> None:
    with pytest.raises(InvalidEventError, match=f"between 1 and {MAX_ASSESS_CHUNKS}"):
        await runtime.assess_chunks(q("n", IN_SCOPE), [f"c{i}" for i in range(count)])


async def test_a_configured_chat_endpoint_writes_the_reports(tmp_path: Path) -> None:
    llm = LlmSettings(base_url="http://127.0.0.1:9/v1", model="local-model")
    settings = embedded_settings(tmp_path).model_copy(update={"llm": llm})
    async with EmbeddedRuntime(settings) as rt:
        assert rt.reports.builder.llm is not None
    async with EmbeddedRuntime(embedded_settings(tmp_path)) as rt:
        assert rt.reports.builder.llm is None  # extractive by default


async def test_closing_leaves_every_sqlite_file_whole(tmp_path: Path) -> None:
    """A closed runtime's data dir copies cleanly: no -wal/-shm file left to vanish mid-copy.

    The fault suite copies one indexed data dir per worker; the feedback store's
    WAL, left open by close(), disappeared during such a copy when the garbage
    collector closed the connection.
    """
    data = tmp_path / "data"
    rt = EmbeddedRuntime(embedded_settings(data, scorer="calibrated"))
    assert rt.feedback is not None  # the calibrated scorer keeps results for feedback
    await rt.ingest("acme", sample_documents())
    await rt.ask([QueryEvent(query_id="q-1", tenant_id="acme", query="How do refunds work?")])
    await rt.close()
    leftovers = sorted(p.name for p in data.rglob("*") if p.name.endswith(("-wal", "-shm")))
    assert leftovers == []


async def test_an_answer_the_results_store_cannot_keep_is_still_given(
    runtime: EmbeddedRuntime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Another process holding results.sqlite3 (or a read-only one) made `ask` end in a
    # traceback after the whole query had run: the answer was never shown.
    import sqlite3

    def locked(answer: StoredAnswer) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(runtime.store, "put", locked)
    [answer] = await runtime.answer([q("kept-not", IN_SCOPE)])
    assert isinstance(answer, StoredAnswer)
    assert answer.result.query_id == "kept-not"
    assert "the answer to kept-not is not kept in" in caplog.text


@pytest.mark.parametrize(
    ("cause", "advice"),
    [
        ("database is locked", "another ragsift process holds it"),
        ("attempt to write a readonly database", "check the permissions"),
        ("file is not a database", "move it aside, and a new one is started (x)"),
    ],
)
def test_a_store_that_cannot_be_opened_gets_the_way_out_its_cause_calls_for(
    cause: str, advice: str
) -> None:
    # A held lock was answered "move it aside", which loses what the store keeps.
    import sqlite3

    from ragsift.errors import unusable_store

    error = unusable_store("results store", "/d/results.sqlite3", sqlite3.DatabaseError(cause), "x")
    assert str(error).startswith(f"the results store /d/results.sqlite3 is not usable ({cause})")
    assert advice in str(error)
