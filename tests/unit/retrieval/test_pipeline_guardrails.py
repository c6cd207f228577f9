"""Issue 16 items 1 and 2 in the pipeline: guardrail switches that do what they say
(strict mode off, minimum documents, the query's k, task types) and multi-collection
queries (D3) with per-collection thresholds (D9)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragsift.errors import InvalidEventError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import MAX_COLLECTIONS, QueryEvent, RetrievalResult
from ragsift.settings import ConfidenceSettings, GuardrailSettings, Settings
from ragsift.wiring import build_pipeline
from tests.factories import low_bar_confidence

EMBEDDER = HashingEmbedder()
QUESTION = "How are refunds paid?"
# Twelve one-chunk documents about refunds: more hits than any default k keeps.
POLICIES = [
    SourceDocument(f"policy-{i}.md", f"Refund policy {i}: refunds are paid within {i + 2} days.")
    for i in range(12)
]
LEGAL = [SourceDocument("legal.md", "Legal notice: refunds are paid by bank transfer only.")]
OTHER_TENANT = [SourceDocument("secret.md", "Bravo secret: refunds are paid in gold coins.")]


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    """Tenant alpha: twelve policies in ``default``, a legal notice in ``legal``;
    tenant bravo: one document in ``legal``."""
    built = EdgeIndex(tmp_path / "edge")
    indexer = Indexer(built, EMBEDDER)
    await indexer.ingest("alpha", "default", POLICIES)
    await indexer.ingest("alpha", "legal", LEGAL)
    await indexer.ingest("bravo", "legal", OTHER_TENANT)
    yield built
    await built.close()


def make_pipeline(
    tmp_path: Path,
    index: EdgeIndex,
    *,
    confidence: ConfidenceSettings | None = None,
    **guardrails: Any,
) -> tuple[RetrievalPipeline, Metrics]:
    metrics = Metrics()
    settings = Settings(
        data_dir=tmp_path,
        confidence=confidence or low_bar_confidence(),
        guardrails=GuardrailSettings(**guardrails),
    )
    built = build_pipeline(
        settings, index=index, embedder=EMBEDDER, metrics=metrics, cache=InMemoryCache()
    )
    return built, metrics


def q(query_id: str = "q1", tenant: str = "alpha", **extra: Any) -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id=tenant, query=QUESTION, **extra)


async def one(pipeline: RetrievalPipeline, query: QueryEvent) -> RetrievalResult:
    [out] = await pipeline.process([query])
    assert isinstance(out, PipelineOutput), out
    return out.result


def strict_bar() -> ConfidenceSettings:
    """A hit bar no hashing cosine reaches, and no relaxation: strict mode keeps nothing."""
    return ConfidenceSettings(
        scorer="weighted",
        similarity_threshold=0.99,
        min_results=0,
        high_threshold=0.30,
        medium_threshold=0.20,
        low_threshold=0.10,
    )


# -- D8: strict mode off keeps every hit ---------------------------------------------------------


async def test_strict_mode_off_keeps_every_hit_the_search_returned(
    tmp_path: Path, index: EdgeIndex
) -> None:
    strict, _ = make_pipeline(tmp_path, index, confidence=strict_bar())
    rollback, _ = make_pipeline(tmp_path, index, confidence=strict_bar(), strict_mode=False)
    kept = await one(strict, q(k=6))
    everything = await one(rollback, q(k=6))
    assert kept.match_count == 0
    assert kept.dropped
    assert everything.match_count == everything.total_found == 6
    assert everything.dropped == []
    assert everything.selection == "top_k"


# -- D1: RAGSIFT_GUARDRAILS_MIN_DOCUMENTS is used -----------------------------------------------


async def test_min_documents_makes_a_result_with_fewer_unanswerable(
    tmp_path: Path, index: EdgeIndex
) -> None:
    one_doc, _ = make_pipeline(tmp_path, index)
    many_docs, _ = make_pipeline(tmp_path, index, min_documents=20)
    base = await one(one_doc, q(k=4))
    assert base.answerable
    needs_more = await one(many_docs, q(k=4))
    assert base.confidence == needs_more.confidence  # the same hits, scored the same
    assert not needs_more.answerable
    assert needs_more.answerability_reason == "too_few_documents"


async def test_min_documents_is_not_a_guardrail_in_strict_mode_off(
    tmp_path: Path, index: EdgeIndex
) -> None:
    rollback, _ = make_pipeline(tmp_path, index, min_documents=20, strict_mode=False)
    assert (await one(rollback, q(k=4))).answerable


def test_seed_d_min_documents_alias_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MIN_DOCUMENTS", "2")
    assert GuardrailSettings().min_documents == 2
    monkeypatch.setenv("RAGSIFT_GUARDRAILS_MIN_DOCUMENTS", "3")
    assert GuardrailSettings().min_documents == 3


# -- E4: top_k keeps the query's k ---------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 7, 10])
async def test_top_k_selection_keeps_the_querys_k(tmp_path: Path, index: EdgeIndex, k: int) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    result = await one(pipeline, q(selection="top_k", k=k))
    assert result.match_count == k  # was min(k, 5): the engine's fixed k
    assert result.total_found == k


# -- E2: task types are never silently ignored ----------------------------------------------------


@pytest.mark.parametrize("selection", ["threshold", "top_k"])
def test_a_task_with_another_selection_is_refused(selection: str) -> None:
    with pytest.raises(ValidationError, match="task_type applies to adaptive selection only"):
        q(selection=selection, task_type="debugging")


async def test_a_task_without_a_selection_selects_adaptively(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    result = await one(pipeline, q(task_type="debugging"))
    assert result.selection == "adaptive"


async def test_an_unset_selection_is_what_the_contract_says(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """No setting picks a query's selection: unset, it is adaptive with a task type, else
    threshold, and strict mode off makes every query's top_k; the event's published
    description (the JSON Schema other languages read) says so."""
    description = str(QueryEvent.model_fields["selection"].description)
    pipeline, _ = make_pipeline(tmp_path, index)
    rollback, _ = make_pipeline(tmp_path, index, strict_mode=False)
    assert (await one(pipeline, q())).selection == "threshold"
    assert (await one(pipeline, q(task_type="debugging"))).selection == "adaptive"
    assert (await one(rollback, q(selection="adaptive"))).selection == "top_k"
    assert "unset: adaptive when task_type is set, else threshold" in description
    assert "RAGSIFT_GUARDRAILS_STRICT_MODE=false" in description


async def test_an_unknown_task_is_bad_input_naming_the_known_ones(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    [out] = await pipeline.process([q(selection="adaptive", task_type="astrology")])
    assert isinstance(out, InvalidEventError)
    assert "unknown task_type 'astrology'" in str(out)
    assert "debugging" in str(out)


# -- D3: several collections in one query ----------------------------------------------------------


async def test_a_query_searches_several_collections_with_hits_labelled(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    result = await one(pipeline, q(collections=["default", "legal"], selection="top_k", k=13))
    assert result.collection == "default"  # the first named labels the result
    assert result.collections == ["default", "legal"]
    by_collection = {h.collection for h in result.hits}
    assert by_collection == {"default", "legal"}
    assert [h.rank for h in result.hits] == list(range(1, 14))
    texts = " ".join(h.text for h in result.hits)
    assert "gold coins" not in texts  # bravo's legal document stays bravo's
    assert 0.0 <= result.confidence <= 1.0


async def test_a_multi_collection_query_is_one_search_per_collection(
    tmp_path: Path, index: EdgeIndex
) -> None:
    calls: list[tuple[str, int]] = []
    real = index.search_batch

    async def counting(collection: str, requests: Any) -> Any:
        calls.append((collection, len(requests)))
        return await real(collection, requests)

    index.search_batch = counting  # type: ignore[method-assign]  # count the engine calls
    pipeline, _ = make_pipeline(tmp_path, index)
    # Three different questions: single flight would merge identical ones.
    many = [
        QueryEvent(
            query_id=f"q{i}",
            tenant_id="alpha",
            query=f"refund {i}",
            collections=["default", "legal"],
        )
        for i in range(3)
    ]
    outs = await pipeline.process(many)
    assert all(isinstance(o, PipelineOutput) for o in outs)
    assert sorted(calls) == [("default", 3), ("legal", 3)]


async def test_an_unknown_collection_among_several_fails_the_query(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    [bad, good] = await pipeline.process(
        [q("q1", collections=["default", "nope"]), q("q2", collections=["default", "legal"])]
    )
    assert isinstance(bad, InvalidEventError)
    assert "unknown collection 'nope'" in str(bad)
    assert isinstance(good, PipelineOutput)


def test_collections_input_is_bounded_and_consistent() -> None:
    with pytest.raises(ValidationError, match="at most 8"):
        q(collections=[f"c{i}" for i in range(MAX_COLLECTIONS + 1)])
    with pytest.raises(ValidationError, match="must not repeat"):
        q(collections=["legal", "legal"])
    with pytest.raises(ValidationError, match="at most 200 characters"):
        q(entities=["x" * 201])
    assert q(collection="other", collections=["legal"]).searched == ["other", "legal"]
    assert q(collection="legal", collections=["default", "legal"]).searched == [
        "legal",
        "default",
    ]
    with pytest.raises(ValidationError):
        q(collections=["../etc"])
    # Unset, the first in code-point order labels it, not the first listed (ADR 050).
    assert q(collections=["legal", "default"]).collection == "default"
    assert q(collections=["legal", "default"]).searched == ["default", "legal"]
    assert q().searched == ["default"]


async def test_multi_collection_results_are_cached_under_their_own_key(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index)
    single = await one(pipeline, q("q1"))
    multi = await one(pipeline, q("q2", collections=["default", "legal"]))
    assert not multi.cache.hit  # not served the single-collection entry
    again = await one(pipeline, q("q3", collections=["default", "legal"]))
    assert again.cache.hit
    assert again.collections == ["default", "legal"]
    assert single.collections == []


# -- D9: per-collection thresholds in retrieval ---------------------------------------------------


async def test_the_strictest_collection_threshold_decides_answerability(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline, _ = make_pipeline(tmp_path, index, collection_thresholds={"legal": 0.99})
    plain = await one(pipeline, q("q1", collections=["default"]))
    assert plain.answerable
    with_legal = await one(pipeline, q("q2", collections=["default", "legal"]))
    assert not with_legal.answerable
    assert with_legal.answerability_reason == "low_confidence"
