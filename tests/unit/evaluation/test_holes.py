"""The estimate of how often a collection answers questions whose answer it lacks."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import MissingAnswerEstimate, Provenance
from ragsift.errors import InvalidEventError
from ragsift.evaluation.holes import (
    MissingAnswers,
    missing_answer_rate,
    with_missing_answers,
)
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from tests.unit.evaluation.test_selfcal_collection import BASE, documents

EMBEDDER = HashingEmbedder()


@pytest.fixture
async def twins(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    """Tenant ``alpha``: 30 documents, each held twice under two ids."""
    built = EdgeIndex(tmp_path / "twins")
    docs = documents(30)
    copies = [dataclasses.replace(d, doc_id=f"{d.doc_id}-copy") for d in docs]
    await Indexer(built, EMBEDDER).ingest("alpha", "docs", [*docs, *copies])
    yield built
    await built.close()


async def test_a_collection_whose_passages_recur_answers_what_it_left_out(
    twins: EdgeIndex, index: EdgeIndex
) -> None:
    """Left out, a passage of the twins is still found whole in its copy; the unrelated
    documents of ``index`` leave nothing near, so the same bar answers none of them."""
    held = await missing_answer_rate(twins, EMBEDDER, BASE, collection="docs", sample=40)
    apart = await missing_answer_rate(
        index, EMBEDDER, BASE, collection="docs", tenant="alpha", sample=40
    )
    assert held.asked >= 30
    assert apart.asked >= 30
    assert held.rate >= 0.9
    assert apart.rate <= 0.1
    assert held.threshold == apart.threshold == BASE.conformal.threshold


async def test_the_left_out_document_is_never_among_the_hits(
    twins: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each query was cut from one of a pair of twins: its hits hold the other twin
    first, never both (the one it came from is left out), and at most ``k``."""
    import ragsift.evaluation.holes as holes

    seen: list[list[str]] = []
    scored = holes.probe_confidence

    def spy(artifact, hits, **kwargs):  # type: ignore[no-untyped-def]
        seen.extend([h.doc_id for h in row] for row in hits)
        return scored(artifact, hits, **kwargs)

    monkeypatch.setattr(holes, "probe_confidence", spy)
    result = await missing_answer_rate(twins, EMBEDDER, BASE, collection="docs", sample=30)
    assert len(seen) == result.asked >= 25
    for row in seen:
        assert 0 < len(row) <= 8
        pair = {row[0].removesuffix("-copy"), row[0].removesuffix("-copy") + "-copy"}
        assert len(pair & set(row)) == 1, row
    again = await missing_answer_rate(twins, EMBEDDER, BASE, collection="docs", sample=30)
    assert again == result  # seeded: the same passages, queries and answers


async def test_sampling_follows_the_tenants_chunks(index: EdgeIndex, tmp_path: Path) -> None:
    both = await missing_answer_rate(index, EMBEDDER, BASE, collection="docs", sample=43)
    assert 35 <= both.asked <= 43  # alpha holds 40 of the 43 chunks, beta 3
    alpha = await missing_answer_rate(
        index, EMBEDDER, BASE, collection="docs", tenant="alpha", sample=100
    )
    assert alpha.asked == 40  # asked for more than the tenant holds: each of its chunks once
    # Many tenants, each far under one passage's share: still about `sample` asked.
    many = EdgeIndex(tmp_path / "many")
    docs = documents(60)
    for i in range(0, 60, 2):
        await Indexer(many, EMBEDDER).ingest(f"t{i}", "docs", docs[i : i + 2])
    few = await missing_answer_rate(many, EMBEDDER, BASE, collection="docs", sample=10)
    assert 8 <= few.asked <= 10
    await many.close()


async def test_too_small_a_collection_and_a_bad_sample_are_errors(index: EdgeIndex) -> None:
    with pytest.raises(InvalidEventError, match="has 0 chunks; calibrating it needs at least 1"):
        await missing_answer_rate(index, EMBEDDER, BASE, collection="docs", tenant="nobody")
    with pytest.raises(ValueError, match="sample"):
        await missing_answer_rate(index, EMBEDDER, BASE, collection="docs", sample=0)


def test_the_line_states_the_share_its_interval_and_how_it_was_measured() -> None:
    line = MissingAnswers(asked=200, answered=60, threshold=0.56).describe()
    assert "about 30% would be answered at the bar 0.56" in line
    assert "(24%-37% over 200 of its passages" in line
    assert "this estimate has run low" in line
    assert MissingAnswers(0, 0, 0.5).rate == 0.0
    assert MissingAnswers(0, 0, 0.5).interval is None


async def test_hostile_collections_get_an_honest_line_not_a_wrong_figure(tmp_path: Path) -> None:
    """No sentence long enough to ask about: nothing asked, and the line says it could
    not be estimated instead of "about 0%". One document only: every query's hits are
    its own, all left out, so none is answered. Non-Latin twins are found as Latin ones."""
    shorts = EdgeIndex(tmp_path / "shorts")
    await Indexer(shorts, EMBEDDER).ingest(
        "a", "c", [SourceDocument(f"d{n}", f"ok {n} go. no up.") for n in range(12)]
    )
    nothing = await missing_answer_rate(shorts, EMBEDDER, BASE, collection="c")
    assert nothing.asked == 0
    assert "could not be estimated" in nothing.describe()
    assert "%" not in nothing.describe()
    await shorts.close()

    alone = EdgeIndex(tmp_path / "alone")
    text = " ".join(d.text for d in documents(40))
    await Indexer(alone, EMBEDDER).ingest("a", "c", [SourceDocument("only", text)])
    none_left = await missing_answer_rate(alone, EMBEDDER, BASE, collection="c")
    assert none_left.asked >= 10
    assert none_left.answered == 0
    await alone.close()

    cjk = EdgeIndex(tmp_path / "cjk")
    base = "東京都の人口は約千四百万人である。大阪府は西にある。"
    docs = [SourceDocument(f"d{n}", base * 3 + f" 番号 {n}。") for n in range(12)]
    await Indexer(cjk, EMBEDDER).ingest("a", "c", docs)
    twins = await missing_answer_rate(cjk, EMBEDDER, BASE, collection="c")
    assert twins.asked == 12
    assert twins.rate >= 0.9  # each left-out passage has near-copies
    await cjk.close()


def _probed() -> CalibrationArtifact:
    data = BASE.model_dump(mode="json", exclude={"version"})
    data["provenance"] = Provenance(
        method="probes (bundled)", base_version=BASE.version, collection="docs"
    ).model_dump(mode="json")
    return CalibrationArtifact.model_validate(data)


def test_an_estimate_is_stored_with_the_calibration_outside_its_version() -> None:
    """Recording what a calibration answers changes nothing it computes, so neither its
    version (cache keys, results) nor, when unset, its JSON."""
    probed = _probed()
    estimate = MissingAnswers(asked=200, answered=83, threshold=probed.conformal.threshold)
    kept = with_missing_answers(probed, estimate)
    assert kept.version == probed.version
    assert "missing_answers" not in probed.to_json()
    again = CalibrationArtifact.from_json(kept.to_json())
    assert again == kept
    assert again.version == probed.version
    assert again.provenance is not None
    assert again.provenance.missing_answers == MissingAnswerEstimate(asked=200, answered=83)
    assert again.provenance.missing_answers.share == 0.415
    # Nothing asked, or no provenance (the shipped calibration): nothing recorded.
    assert (
        with_missing_answers(probed, dataclasses.replace(estimate, asked=0, answered=0)) is probed
    )
    assert with_missing_answers(BASE, estimate) is BASE
    assert probed.provenance is not None
    assert probed.provenance.missing_answers is None


@pytest.mark.parametrize(("asked", "answered"), [(0, 0), (10, 11), (5, -1)])
def test_an_impossible_record_is_refused(asked: int, answered: int) -> None:
    with pytest.raises(ValidationError):
        MissingAnswerEstimate(asked=asked, answered=answered)
