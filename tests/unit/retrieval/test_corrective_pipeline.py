"""Corrective retrieval (B10) in the embedded pipeline (Qdrant Edge): one retry at most,
the winner and the retry recorded in the result, the audit trail and the metrics, per
tenant, and across several collections."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import SearchHit, SearchRequest
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import EvidenceType, QueryEvent, RetrievalResult
from ragsift.settings import CorrectiveSettings, GuardrailSettings, Settings
from ragsift.wiring import build_pipeline
from tests.factories import low_bar_confidence

EMBEDDER = HashingEmbedder()
QUESTION = "how are refunds paid"
DOCS = [
    SourceDocument(f"p{i}.md", text)
    for i, text in enumerate(
        [
            "Refunds are paid by bank transfer within 14 days of the return.",
            "Shipping takes three days inside the country.",
            "Bank transfer fees are covered by the shop for every refund.",
            "Warranty claims need the original receipt.",
            "Returns are accepted within 30 days in original packaging.",
        ]
    )
]
LEGAL = [SourceDocument("legal.md", "Legal notice: refunds are paid by bank transfer only.")]
# A bar no result reaches: every query is retried.
ALWAYS = 0.99


class CountingIndex(EdgeIndex):
    """Qdrant Edge that remembers every search request (the retry's included)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.requests: list[SearchRequest] = []

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        self.requests.extend(requests)
        return await super().search_batch(collection, requests)


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[CountingIndex]:
    built = CountingIndex(tmp_path / "edge")
    indexer = Indexer(built, EMBEDDER)
    await indexer.ingest("alpha", "default", DOCS)
    await indexer.ingest("alpha", "legal", LEGAL)
    await indexer.ingest("bravo", "default", DOCS)
    built.requests.clear()
    yield built
    await built.close()


def make_pipeline(
    tmp_path: Path, index: EdgeIndex, guardrails: GuardrailSettings | None = None, **corrective: Any
) -> tuple[RetrievalPipeline, Metrics]:
    metrics = Metrics()
    settings = Settings(
        data_dir=tmp_path,
        confidence=low_bar_confidence(),
        corrective=CorrectiveSettings(**corrective),
        guardrails=guardrails or GuardrailSettings(),
    )
    return build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=metrics), metrics


async def one(pipeline: RetrievalPipeline, **fields: Any) -> PipelineOutput:
    query = QueryEvent(**{"query_id": "q1", "tenant_id": "alpha", "query": QUESTION, **fields})
    [out] = await pipeline.process([query])
    assert isinstance(out, PipelineOutput), out
    return out


def retries(metrics: Metrics, won: str, strategy: str = "expand") -> float | None:
    labels = {"trigger": "low_confidence", "strategy": strategy, "won": won}
    return metrics.registry.get_sample_value("ragsift_corrective_retries_total", labels)


async def test_off_by_default_searches_once_and_records_nothing(
    tmp_path: Path, index: CountingIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    out = await one(pipeline, k=3)
    assert out.result.corrective is None
    assert len(index.requests) == 1
    assert not [e for e in out.evidence if e.type == EvidenceType.CORRECTIVE_RETRY]


async def test_a_triggered_query_is_retried_exactly_once_and_recorded(
    tmp_path: Path, index: CountingIndex
) -> None:
    pipeline, metrics = make_pipeline(tmp_path, index, enabled=True, trigger_confidence=ALWAYS)
    out = await one(pipeline, k=3)
    fix = out.result.corrective
    assert fix is not None
    assert (fix.trigger, fix.tried) == ("low_confidence", ["expand"])
    # The retry is scored below the trigger bar too, and still not retried again.
    assert len(index.requests) == 2
    first, retry = index.requests
    assert retry.query == f"{QUESTION} {' '.join(fix.expansion_terms)}"
    assert retry.dense_vector == first.dense_vector  # the query's own vector
    assert out.result.query == QUESTION  # the result names the question, not the expansion
    [event] = [e for e in out.evidence if e.type == EvidenceType.CORRECTIVE_RETRY]
    assert event.data.details["won"] == fix.won
    assert retries(metrics, "first" if fix.won == "first" else "retry") == 1.0


async def answer_everything(
    tmp_path: Path, index: CountingIndex
) -> tuple[GuardrailSettings, RetrievalResult]:
    """Guardrails with answer threshold 0 for alpha (A13: every result answers, so the
    higher confidence wins), and alpha's result without corrective retrieval."""
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  alpha: {answer_threshold: 0.0}\n")
    guard = GuardrailSettings(tenant_thresholds_path=path)
    off, _ = make_pipeline(tmp_path, index, guard)
    return guard, (await one(off, k=3)).result


async def test_the_retry_wins_when_its_own_confidence_answers_higher(
    tmp_path: Path, index: CountingIndex
) -> None:
    guard, plain = await answer_everything(tmp_path, index)
    on, metrics = make_pipeline(
        tmp_path, index, guard, enabled=True, trigger_confidence=ALWAYS, win_confidence=0.0
    )
    fixed = (await one(on, k=3)).result
    assert fixed.corrective is not None
    assert fixed.corrective.first_confidence == plain.confidence
    # The expanded BM25 query ("bank", "transfer" ...) lifts the refund chunks.
    assert fixed.corrective.won == "expand"
    assert fixed.corrective.reason == "retry_answerable_and_higher"
    assert fixed.confidence == fixed.corrective.retry_confidence > plain.confidence
    assert retries(metrics, "retry") == 1.0


async def test_a_retry_that_is_not_higher_leaves_the_first_result_unchanged(
    tmp_path: Path, index: CountingIndex
) -> None:
    guard, plain = await answer_everything(tmp_path, index)
    wider, metrics = make_pipeline(
        tmp_path,
        index,
        guard,
        enabled=True,
        trigger_confidence=ALWAYS,
        strategy="wider",
        max_k=5,
        win_confidence=0.0,
    )
    fixed = (await one(wider, k=3)).result
    assert fixed.corrective is not None
    assert (fixed.corrective.won, fixed.corrective.reason) == ("first", "retry_not_higher")
    assert index.requests[-1].limit == 5  # the wider retry searched max_k
    assert fixed.confidence == plain.confidence
    assert [h.chunk_id for h in fixed.hits] == [h.chunk_id for h in plain.hits]
    assert retries(metrics, "first", "wider") == 1.0


async def test_corrective_retrieval_is_switched_per_tenant(
    tmp_path: Path, index: CountingIndex
) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  alpha: {corrective: true, corrective_trigger_confidence: 0.99}\n")
    pipeline, _ = make_pipeline(tmp_path, index, GuardrailSettings(tenant_thresholds_path=path))
    assert (await one(pipeline, k=3)).result.corrective is not None
    assert (await one(pipeline, k=3, tenant_id="bravo")).result.corrective is None


async def test_a_multi_collection_query_is_retried_across_its_collections(
    tmp_path: Path, index: CountingIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index, enabled=True, trigger_confidence=ALWAYS)
    out = await one(pipeline, k=4, collections=["default", "legal"])
    assert out.result.corrective is not None
    # One search per collection per try: two tries, two collections.
    assert len(index.requests) == 4
    assert out.result.collections == ["default", "legal"]
    assert {h.collection for h in out.result.hits} <= {"default", "legal"}


async def test_another_tenants_documents_never_reach_the_expansion(
    tmp_path: Path, index: CountingIndex
) -> None:
    secret = [SourceDocument("s.md", "Bravo secret: refunds are paid in zyxwv coins.")]
    await Indexer(index, EMBEDDER).ingest("bravo", "default", secret)
    pipeline, _ = make_pipeline(tmp_path, index, enabled=True, trigger_confidence=ALWAYS)
    out = await one(pipeline, k=5)
    assert out.result.corrective is not None
    assert "zyxwv" not in out.result.corrective.expansion_terms
    assert all(r.tenant_id == "alpha" for r in index.requests)


async def test_switching_corrective_retrieval_on_does_not_serve_results_cached_without_it(
    tmp_path: Path, index: CountingIndex
) -> None:
    cache = InMemoryCache()

    def build(**corrective: Any) -> RetrievalPipeline:
        settings = Settings(
            data_dir=tmp_path,
            confidence=low_bar_confidence(),
            corrective=CorrectiveSettings(**corrective),
        )
        return build_pipeline(
            settings, index=index, embedder=EMBEDDER, metrics=Metrics(), cache=cache
        )

    assert (await one(build(), k=3)).result.corrective is None
    fresh = (await one(build(enabled=True, trigger_confidence=ALWAYS), k=3)).result
    assert not fresh.cache.hit
    assert fresh.corrective is not None
