"""D3: a query over several collections means the same whatever order it lists them in.

Until 2026-12-03 it did not (ADR 050): every collection's top hit ties under RRF, the
merge kept ties in the order the collections were listed, so a query cut to k kept the
first-listed collection's hit; and an unset ``collection`` was the first listed, whose
calibration scored the merged hits and whose name was in the cache key. Listed
``[alpha, zeta]`` a question read 0.80, listed ``[zeta, alpha]`` 0.92 (``zeta``'s
calibration here sits one logit higher, as a collection's own probes move it).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import MAX_COLLECTIONS, QueryEvent, RetrievalResult
from ragsift.settings import Settings
from ragsift.wiring import build_pipeline

EMBEDDER = HashingEmbedder()
QUESTION = "How are refunds paid?"
#: Listed out of name order on purpose; each holds one refund passage of its own.
COLLECTIONS = ["zeta", "alpha", "Mu-9"]
DOCS = {
    "zeta": "Refunds are paid within five days by bank transfer.",
    "alpha": "Refunds are paid within ten days by cheque.",
    "Mu-9": "Refunds are paid in store credit at the counter.",
}


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    indexer = Indexer(built, EMBEDDER)
    for name, text in DOCS.items():
        await indexer.ingest("acme", name, [SourceDocument(f"{name}.md", text)])
    yield built
    await built.close()


def _shifted(base: CalibrationArtifact, by: float) -> CalibrationArtifact:
    """``base`` with its intercept moved: a collection's own calibration, as probes make."""
    return CalibrationArtifact.model_validate(
        base.model_dump() | {"intercept": base.intercept + by, "version": ""}
    )


def _pipeline(tmp_path: Path, index: EdgeIndex) -> RetrievalPipeline:
    """A fresh pipeline (its own cache) where ``zeta`` and ``Mu-9`` have calibrations of
    their own, each scoring the same hits differently from the default."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    settings = Settings(data_dir=tmp_path)
    built = build_pipeline(
        settings,
        index=index,
        embedder=EMBEDDER,
        metrics=Metrics(),
        cache=InMemoryCache(),
        calibration_store=store,
    )
    base = built.engines.calibration
    assert base is not None
    store.put(CalibrationScope("zeta"), _shifted(base, 1.0))
    store.put(CalibrationScope("Mu-9"), _shifted(base, -1.0))
    return built


def q(collections: list[str], **extra: Any) -> QueryEvent:
    return QueryEvent(
        query_id="q1", tenant_id="acme", query=QUESTION, collections=collections, **extra
    )


async def _one(pipeline: RetrievalPipeline, query: QueryEvent) -> RetrievalResult:
    [out] = await pipeline.process([query])
    assert isinstance(out, PipelineOutput), out
    return out.result


def _what_it_says(result: RetrievalResult) -> dict[str, Any]:
    """Everything a reader of the result acts on (not its timings or timestamp)."""
    return {
        "collection": result.collection,
        "collections": result.collections,
        "confidence": result.confidence,
        "status": result.status,
        "answerable": result.answerable,
        "calibration": result.breakdown.calibration_version,
        "hits": [(h.collection, h.chunk_id, h.rank, h.score) for h in result.hits],
        "dropped": [(d.chunk_id, d.rule) for d in result.dropped],
    }


PERMUTATIONS = [list(p) for p in itertools.permutations(COLLECTIONS)]


@pytest.mark.parametrize("extra", [{}, {"k": 1}, {"k": 2, "selection": "top_k"}])
async def test_every_order_of_the_collections_gives_the_same_result(
    tmp_path: Path, index: EdgeIndex, extra: dict[str, Any]
) -> None:
    """Confidence, calibration and the kept hits in their order, for all six orders;
    k=1 and k=2 cut the merged list inside the tie of the three top hits."""
    said = [
        _what_it_says(await _one(_pipeline(tmp_path, index), q(order, **extra)))
        for order in PERMUTATIONS
    ]
    for other in said[1:]:
        assert other == said[0]
    assert said[0]["collection"] == "Mu-9"  # the first in code-point order labels it
    assert said[0]["collections"] == ["Mu-9", "alpha", "zeta"]


async def test_every_order_of_the_collections_has_one_cache_key(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipeline = _pipeline(tmp_path, index)
    keys = set()
    for order in PERMUTATIONS:
        pending = pipeline._admit(0, q(order))
        keys.add(pipeline.cached.key(pending, *range(len(order))))
    assert len(keys) == 1
    first = await _one(pipeline, q(PERMUTATIONS[0]))
    again = await _one(pipeline, q(PERMUTATIONS[-1]))  # another order: the same entry
    assert first.status != "no_relevant_context"  # cached (its TTL is not 0)
    assert not first.cache.hit
    assert again.cache.hit


async def test_a_named_collection_labels_and_calibrates_the_result(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """``collection`` set is the caller's choice of scope (its calibration, mix and drift
    watch, metrics label): kept whatever the order of the others."""
    results = [
        await _one(_pipeline(tmp_path, index), q(order, collection="zeta"))
        for order in (["alpha", "Mu-9"], ["Mu-9", "alpha"])
    ]
    assert [r.collections for r in results] == [["zeta", "Mu-9", "alpha"]] * 2
    assert _what_it_says(results[0]) == _what_it_says(results[1])
    unnamed = await _one(_pipeline(tmp_path, index), q(["alpha", "Mu-9", "zeta"]))
    assert unnamed.breakdown.calibration_version != results[0].breakdown.calibration_version


_NAMES = st.lists(
    st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
    min_size=1,
    max_size=MAX_COLLECTIONS,
    unique=True,
)


@given(names=_NAMES, data=st.data())
def test_the_label_and_search_order_do_not_depend_on_the_listed_order(
    names: list[str], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(names))
    a, b = q(names), q(list(shuffled))
    assert a.collection == b.collection == min(names)
    assert a.searched == b.searched == sorted(names)


async def test_a_tie_between_collections_goes_to_the_higher_cosine(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """The three top hits tie under RRF; cosine is the one score that compares across
    collections, so the cut to k=1 keeps alpha's (0.571 against Mu-9's 0.562 and zeta's
    0.533), not the first listed nor the first by name (Mu-9)."""
    for order in PERMUTATIONS:
        result = await _one(_pipeline(tmp_path, index), q(order, k=1, selection="top_k"))
        assert [(h.collection, h.chunk_id) for h in result.hits] == [("alpha", "alpha.md:0")]


@pytest.mark.parametrize(
    ("collections", "where"),
    [
        (["zeta", 5], "collections.1"),
        (["zeta", ["alpha"]], "collections.1"),
        ([{"a": {"b": {"c": "d"}}}, "alpha"], "collections.0"),
        (["zeta", "álpha"], "collections.1"),  # non-Latin: not a collection name
        (["zeta", "alpha\n"], "collections.1"),
        ([f"c{i}" for i in range(100_000)], "collections"),  # no label picked from it
    ],
)
def test_a_hostile_collections_list_is_refused_where_it_is_wrong(
    collections: list[Any], where: str
) -> None:
    """The label is picked only from a list of names; anything else is refused by the
    field's own check, naming the item and nothing else (not ``collection`` too)."""
    with pytest.raises(ValidationError) as caught:
        QueryEvent(query_id="q1", tenant_id="acme", query=QUESTION, collections=collections)
    assert [".".join(map(str, e["loc"])) for e in caught.value.errors()] == [where]
