"""Issue 12: two tenants' results with one query id get distinct decision and evidence ids."""

from __future__ import annotations

from ragsift.observability.metrics import Metrics
from ragsift.retrieval.results import error_result
from ragsift.schemas import Decision, EvidenceEvent, QueryEvent, RetrievalResult, derive_query_id
from ragsift.settings import GuardrailSettings
from ragsift.workers.decision import DecisionHandler


def failed(tenant: str) -> RetrievalResult:
    query = QueryEvent(query_id="q1", tenant_id=tenant, query="How are refunds paid?")
    return error_result(
        query,
        stage="search",
        error=TimeoutError("qdrant timed out"),
        attempts=3,
        embedder_id="e",
        disclaimer="no context",
    )


async def test_same_query_id_from_two_tenants_gets_two_decisions() -> None:
    handler = DecisionHandler(GuardrailSettings(), Metrics())
    alpha, bravo = await handler.handle_batch([failed("alpha"), failed("bravo")])
    assert isinstance(alpha, list)
    assert isinstance(bravo, list)
    decisions = [e.event for e in alpha + bravo if isinstance(e.event, Decision)]
    assert [d.decision_id for d in decisions] == [
        derive_query_id("alpha", "q1", "decision"),
        derive_query_id("bravo", "q1", "decision"),
    ]
    ids = [e.event.id for e in alpha + bravo if isinstance(e.event, EvidenceEvent)]
    assert len(ids) == len(set(ids))
    again = await handler.handle_batch([failed("alpha")])
    assert isinstance(again, list)
    replayed = again[0]
    assert isinstance(replayed, list)
    assert next(e.event for e in replayed if isinstance(e.event, Decision)).decision_id == (
        decisions[0].decision_id
    )
