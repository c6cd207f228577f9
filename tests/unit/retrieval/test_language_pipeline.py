"""A result whose query looks non-English carries the query_language advice, first,
and nothing else about it changes (confidence, answer or refusal, hits)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval import language_hint
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.language_hint import QUERY_LANGUAGE_ADVICE_CODE, with_language_advice
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.results import error_result
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import ConfidenceSettings, Settings
from ragsift.wiring import build_pipeline
from tests.factories import low_bar_confidence

pytestmark = pytest.mark.unit

EMBEDDER = HashingEmbedder()
DOCS = [
    SourceDocument("warranty.md", "The Orbit thermostat warranty lasts two years from purchase."),
    SourceDocument("refunds.md", "Refunds are paid within 14 days to the original card."),
    SourceDocument("garantie.md", "La garantie du thermostat Orbit dure deux ans."),
]
FOREIGN = [
    ("French", "Combien de temps dure la garantie du thermostat Orbit ?"),
    ("Spanish", "¿Cuánto dura la garantía del termostato Orbit?"),
    ("German", "Wie lange gilt die Garantie für den Orbit-Thermostat?"),
    ("non-Latin script", "Сколько длится гарантия на термостат Orbit?\x00\u200b"),
]
CODES = {"French": "fr", "Spanish": "es", "German": "de", "non-Latin script": "other"}
ENGLISH = [
    "How long does the Orbit thermostat warranty last?",  # SQuAD-like
    "Orbit warranty",  # keyword
    "refund policy API",
    "Hi there, how are refunds paid?",  # greeting-ish, still a search
    "thermostat.warranty_years == 2",  # code-ish
    "Tour de France winner",
]
# What the advice may not move.
UNMOVED = (
    "status",
    "level",
    "confidence",
    "answerable",
    "answerability_reason",
    "advisory_flag",
    "advisory_only",
    "should_flag_for_review",
    "disclaimer",
    "hits",
    "dropped",
    "match_count",
    "threshold",
)


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    await Indexer(built, EMBEDDER).ingest("alpha", "default", DOCS)
    yield built
    await built.close()


def make_pipeline(
    tmp_path: Path, index: EdgeIndex, checks: str = "on", **bars: float
) -> RetrievalPipeline:
    """Weighted scorer, low bars (the hashing embedder's cosines are small); ``bars``
    overrides the level thresholds; ``checks`` is ``language_checks``."""
    confidence = low_bar_confidence().model_copy(update={"language_checks": checks})
    if bars:
        confidence = ConfidenceSettings(
            scorer="weighted", similarity_threshold=0.05, language_checks=checks, **bars
        )
    settings = Settings(data_dir=tmp_path, confidence=confidence)
    return build_pipeline(
        settings, index=index, embedder=EMBEDDER, metrics=Metrics(), cache=InMemoryCache()
    )


async def ask(
    pipeline: RetrievalPipeline, text: str, query_id: str = "q1", tenant: str = "alpha"
) -> RetrievalResult:
    [out] = await pipeline.process([QueryEvent(query_id=query_id, tenant_id=tenant, query=text)])
    assert isinstance(out, PipelineOutput), out
    return out.result


def advised(pipeline: RetrievalPipeline, language: str, tenant: str = "alpha") -> float:
    value = pipeline.metrics.registry.get_sample_value(
        "ragsift_query_language_advice_total", {"tenant": tenant, "language": language}
    )
    return value or 0.0


@pytest.mark.parametrize(("name", "question"), FOREIGN)
async def test_a_non_english_question_is_told_so_first(
    tmp_path: Path, index: EdgeIndex, name: str, question: str
) -> None:
    pipeline = make_pipeline(tmp_path, index)
    result = await ask(pipeline, question)
    assert result.outcome == "ok"
    first = result.recommendations[0]
    assert first.code == QUERY_LANGUAGE_ADVICE_CODE
    assert name in first.message
    assert "read English" in first.message
    codes = [a.code for a in result.recommendations]
    assert codes.count(QUERY_LANGUAGE_ADVICE_CODE) == 1
    assert advised(pipeline, CODES[name]) == 1


@pytest.mark.parametrize(("name", "question"), FOREIGN)
async def test_language_checks_off_gives_no_advice(
    tmp_path: Path, index: EdgeIndex, name: str, question: str
) -> None:
    """RAGSIFT_CONFIDENCE_LANGUAGE_CHECKS=off: for an embedder and calibration made
    for the users' language, the advice would be wrong; it is neither given nor counted."""
    pipeline = make_pipeline(tmp_path, index, checks="off")
    result = await ask(pipeline, question)
    assert result.outcome == "ok"
    assert QUERY_LANGUAGE_ADVICE_CODE not in [a.code for a in result.recommendations]
    assert advised(pipeline, CODES[name]) == 0


@pytest.mark.parametrize("question", ENGLISH)
async def test_an_english_question_never_is(
    tmp_path: Path, index: EdgeIndex, question: str
) -> None:
    pipeline = make_pipeline(tmp_path, index)
    result = await ask(pipeline, question)
    assert QUERY_LANGUAGE_ADVICE_CODE not in [a.code for a in result.recommendations]
    samples = pipeline.metrics.query_language_advice.counter.collect()[0].samples
    assert [s for s in samples if s.name.endswith("_total")] == []


@pytest.mark.parametrize(("high", "answered"), [(0.95, False), (0.01, True)])
@pytest.mark.parametrize(("name", "question"), FOREIGN)
async def test_the_advice_changes_nothing_else(
    tmp_path: Path,
    index: EdgeIndex,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    question: str,
    high: float,
    answered: bool,
) -> None:
    bars = {"high_threshold": high, "medium_threshold": high - 0.005, "low_threshold": high - 0.01}
    told = await ask(make_pipeline(tmp_path, index, **bars), question)
    monkeypatch.setattr(language_hint, "guess_language", lambda text: None)
    untold = await ask(make_pipeline(tmp_path, index, **bars), question)
    assert told.recommendations[0].code == QUERY_LANGUAGE_ADVICE_CODE
    assert told.recommendations[1:] == untold.recommendations
    assert told.answerable is answered
    for field in UNMOVED:
        assert getattr(told, field) == getattr(untold, field), field


async def test_a_cached_result_carries_it_once(tmp_path: Path, index: EdgeIndex) -> None:
    pipeline = make_pipeline(tmp_path, index)
    _, question = FOREIGN[0]
    first = await ask(pipeline, question, "q1")
    again = await ask(pipeline, question, "q2")
    assert again.cache.hit
    assert again.recommendations == first.recommendations
    assert advised(pipeline, "fr") == 2  # counted per result served


def test_a_failed_result_gets_no_advice() -> None:
    query = QueryEvent(query_id="q1", tenant_id="alpha", query=FOREIGN[0][1])
    failed = error_result(
        query,
        stage="search",
        error=OSError("down"),
        attempts=3,
        embedder_id=EMBEDDER.embedder_id,
        disclaimer="Retrieval failed.",
    )
    metrics = Metrics()
    assert with_language_advice(failed, metrics) is failed


async def test_it_is_counted_per_tenant_past_the_bound_as_other(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """The share of a tenant's answers told the question was not English is what an
    operator acts on (that tenant's users ask in French): the advice is counted by
    tenant, and tenant ids come from events, so past the label bound they share
    ``(other)`` and cannot grow /metrics."""
    pipeline = make_pipeline(tmp_path, index)
    pipeline.metrics = Metrics(max_tenants=1)
    _, french = FOREIGN[0]
    await ask(pipeline, french, "q1", tenant="alpha")
    await ask(pipeline, french, "q2", tenant="beta")
    await ask(pipeline, french, "q3", tenant="x" * 64)  # the longest id a tenant may have
    assert advised(pipeline, "fr", "alpha") == 1
    assert advised(pipeline, "fr", "(other)") == 2
    assert advised(pipeline, "fr", "beta") == 0
