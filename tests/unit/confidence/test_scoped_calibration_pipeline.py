"""Each query is scored with its scope's calibration: tenant+collection, collection, default.

Before, the pipeline scored every query with one artifact and keyed the cache with
one global calibration version; a tenant's own calibration could not take effect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.confidence import CalibrationArtifact, save_calibration
from ragsift.confidence.artifact import (
    UNCERTIFIED_ADVICE_CODE,
    ConformalSpec,
    DataSummary,
    Provenance,
)
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.confidence.selfcal import mark_uncertified
from ragsift.embedded import CALIBRATIONS_DIR, EmbeddedRuntime
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import (
    CacheSettings,
    CalibrationSettings,
    ConfidenceSettings,
    EmbedderSettings,
    Settings,
)
from ragsift.wiring import build_pipeline

EMBEDDER = HashingEmbedder()
DOCS = {
    "refunds.md": "Refunds are paid within fourteen days. They go back by bank transfer.",
    "shipping.md": "Shipping takes three days. Returns are free for damaged goods.",
}


def artifact(intercept: float) -> CalibrationArtifact:
    return CalibrationArtifact(
        embedder_id=EMBEDDER.embedder_id,
        metric="cosine",
        features=("top_score",),
        coefficients=(1.0,),
        intercept=intercept,
        similarity_threshold=0.01,  # hashing cosines are small: keep every hit
        conformal=ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.3, feasible=True, method="test", n_calibration=0
        ),
        data=DataSummary(source="test", n_examples=0),
    )


DEFAULT = artifact(-1.0)


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    docs = [SourceDocument(name, text) for name, text in DOCS.items()]
    for tenant in ("alpha", "beta"):
        await Indexer(built, EMBEDDER).ingest(tenant, "default", docs)
    yield built
    await built.close()


def pipeline(
    tmp_path: Path, index: EdgeIndex, store: DirectoryCalibrationStore
) -> RetrievalPipeline:
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(DEFAULT, tmp_path / "default.json")
        ),
        calibration=CalibrationSettings(refresh_s=0),
        cache=CacheSettings(ttl_none_s=60),  # cache refusals too: the test needs entries
    )
    return build_pipeline(
        settings, index=index, embedder=EMBEDDER, metrics=Metrics(), calibration_store=store
    )


async def ask(pipe: RetrievalPipeline, tenant: str, query_id: str) -> RetrievalResult:
    event = QueryEvent(query_id=query_id, tenant_id=tenant, query="How are refunds paid")
    (out,) = await pipe.process([event])
    assert isinstance(out, PipelineOutput), out
    return out.result


async def test_a_tenants_own_calibration_scores_its_queries_only(
    tmp_path: Path, index: EdgeIndex
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    own = artifact(2.0)
    store.put(CalibrationScope("default", "beta"), own)
    pipe = pipeline(tmp_path, index, store)

    # Both tenants in one batch: same hits, different calibrations.
    events = [
        QueryEvent(query_id=f"q-{t}", tenant_id=t, query="How are refunds paid")
        for t in ("alpha", "beta")
    ]
    alpha, beta = [o.result for o in await pipe.process(events)]  # type: ignore[union-attr]

    assert [h.doc_id for h in alpha.hits] == [h.doc_id for h in beta.hits]
    assert alpha.breakdown is not None
    assert beta.breakdown is not None
    assert alpha.breakdown.calibration_version == DEFAULT.version
    assert beta.breakdown.calibration_version == own.version
    assert beta.confidence > alpha.confidence  # intercept +2 vs -1 on the same signals


async def test_a_collection_calibration_applies_to_every_tenant_without_its_own(
    tmp_path: Path, index: EdgeIndex
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    shared, own = artifact(0.5), artifact(2.0)
    store.put(CalibrationScope("default"), shared)
    store.put(CalibrationScope("default", "beta"), own)
    pipe = pipeline(tmp_path, index, store)

    alpha, beta = await ask(pipe, "alpha", "qa"), await ask(pipe, "beta", "qb")

    assert alpha.breakdown is not None
    assert alpha.breakdown.calibration_version == shared.version
    assert beta.breakdown is not None
    assert beta.breakdown.calibration_version == own.version


async def test_a_new_calibration_is_used_without_a_restart_and_misses_the_cache(
    tmp_path: Path, index: EdgeIndex
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    pipe = pipeline(tmp_path, index, store)
    first = await ask(pipe, "alpha", "q1")
    again = await ask(pipe, "alpha", "q2")
    assert again.cache is not None
    assert again.cache.hit

    refit = artifact(3.0)
    store.put(CalibrationScope("default", "alpha"), refit)  # as another process would
    after = await ask(pipe, "alpha", "q3")

    assert first.breakdown is not None
    assert first.breakdown.calibration_version == DEFAULT.version
    assert after.breakdown is not None
    assert after.breakdown.calibration_version == refit.version
    assert after.cache is not None
    assert not after.cache.hit
    assert after.confidence > first.confidence


async def test_the_embedded_runtime_reads_scoped_calibrations_under_its_data_dir(
    tmp_path: Path,
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        embedder=EmbedderSettings(kind="hashing"),
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(DEFAULT, tmp_path / "default.json")
        ),
    )
    runtime = EmbeddedRuntime(settings)
    try:
        store = runtime.calibration_store
        assert isinstance(store, DirectoryCalibrationStore)
        assert store.root == tmp_path / CALIBRATIONS_DIR
        assert runtime.pipeline.engines.registry is not None
    finally:
        await runtime.close()


def test_a_store_dir_setting_overrides_the_data_dir_default(tmp_path: Path) -> None:
    from ragsift.wiring import build_calibration_store

    chosen = tmp_path / "shared-calibrations"
    settings = Settings(calibration=CalibrationSettings(store_dir=chosen))
    store = build_calibration_store(settings, tmp_path / "ignored")
    assert isinstance(store, DirectoryCalibrationStore)
    assert store.root == chosen
    assert build_calibration_store(Settings()) is None  # streaming without a dir: default only


async def test_a_scope_whose_bar_is_not_certified_says_so_on_every_result(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """Re-probing found no certifiable bar for beta (ADR 015): beta keeps its answers,
    and each of its results carries the advice; alpha's carry none."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    provenance = Provenance(
        method="probes (bundled)", base_version=DEFAULT.version, collection="default"
    )
    marked = mark_uncertified(DEFAULT, provenance, "off-topic questions score high here")
    store.put(CalibrationScope("default", "beta"), marked)
    pipe = pipeline(tmp_path, index, store)

    alpha, beta = await ask(pipe, "alpha", "qa"), await ask(pipe, "beta", "qb")

    assert beta.breakdown is not None
    assert beta.breakdown.calibration_version == marked.version
    codes = [a.code for a in beta.recommendations]
    assert codes.count(UNCERTIFIED_ADVICE_CODE) == 1
    (advice,) = [a for a in beta.recommendations if a.code == UNCERTIFIED_ADVICE_CODE]
    assert "off-topic questions score high here" in advice.message
    assert UNCERTIFIED_ADVICE_CODE not in [a.code for a in alpha.recommendations]
    # The same bar and model: the same decision and confidence as the unmarked scope.
    assert (beta.answerable, beta.confidence) == (alpha.answerable, alpha.confidence)
    # A duplicate is served from the cache with the advice it was scored with.
    again = await ask(pipe, "beta", "qb")
    assert again.cache.hit
    assert again.recommendations == beta.recommendations


async def test_a_scope_calibration_made_on_another_default_is_counted_when_skipped(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """After an upgrade, a scope's calibration re-certified on the old default is not
    served: the scope gets the default, and the operator sees it in a metric (alerted on
    as RagsiftCalibrationFallback), not only in a log line."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    provenance = Provenance(
        method="probes (questions.jsonl)", base_version="cal-000000000000", collection="default"
    )
    data = artifact(2.0).model_dump(mode="json", exclude={"version"})
    data["provenance"] = provenance.model_dump(mode="json")
    store.put(CalibrationScope("default", "beta"), CalibrationArtifact.model_validate(data))
    pipe = pipeline(tmp_path, index, store)

    beta = await ask(pipe, "beta", "qb")
    alpha = await ask(pipe, "alpha", "qa")
    again = await ask(pipe, "beta", "qb2")

    assert beta.breakdown is not None
    assert beta.breakdown.calibration_version == DEFAULT.version
    assert again.breakdown is not None
    assert again.breakdown.calibration_version == DEFAULT.version
    assert alpha.breakdown is not None  # alpha has no calibration of its own: no fallback
    fallbacks = pipe.metrics.registry.get_sample_value(
        "ragsift_calibration_fallbacks_total", {"reason": "base"}
    )
    assert fallbacks == 2.0


async def test_a_scope_calibration_reading_signals_the_pipeline_does_not_is_counted(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """Skipped for the default with a log line on every query, and never counted: the
    RagsiftCalibrationFallback alert could not see it."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    data = artifact(2.0).model_dump(mode="json", exclude={"version"})
    data |= {"features": ["top_score", "token_match"], "coefficients": [1.0, 1.0]}
    store.put(CalibrationScope("default", "beta"), CalibrationArtifact.model_validate(data))
    pipe = pipeline(tmp_path, index, store)

    beta = await ask(pipe, "beta", "qb")

    assert beta.breakdown is not None
    assert beta.breakdown.calibration_version == DEFAULT.version
    fallbacks = pipe.metrics.registry.get_sample_value(
        "ragsift_calibration_fallbacks_total", {"reason": "reader_signals"}
    )
    assert fallbacks == 1.0
