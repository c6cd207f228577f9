"""Corrective retrieval's rules (B10): the trigger, each strategy, the winner rule, the
result field, the evidence event and the per-tenant switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragsift.confidence import LevelThresholds
from ragsift.retrieval.corrective import (
    MAX_TERM_CHARS,
    Corrector,
    Retry,
    Scored,
    channels_disagree,
    expansion_terms,
)
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.results import evidence_for
from ragsift.retrieval.tenant_thresholds import load_tenant_thresholds
from ragsift.schemas import (
    CacheInfo,
    ConfidenceBreakdown,
    CorrectiveInfo,
    EvidenceType,
    RetrievalResult,
)
from ragsift.settings import CorrectiveSettings

MAX_K = 50
REFUSED = Scored(0.2, answerable=False, scorer="calibrated")
ANSWERED = Scored(0.8, answerable=True, scorer="calibrated")


def hit(
    chunk: str, dense: float | None, sparse: float | None, text: str = "", rank: int = 1
) -> SearchHit:
    return SearchHit(
        chunk_id=chunk,
        doc_id=chunk,
        tenant_id="t1",
        text=text,
        source=f"{chunk}.md",
        source_type="md",
        score=0.0,
        rank=rank,
        dense_score=dense,
        sparse_score=sparse,
    )


def corrector(**settings: Any) -> Corrector:
    return Corrector(CorrectiveSettings(enabled=True, **settings), max_k=MAX_K)


# Dense ranks a > b > c > d; BM25 ranks d > c > b > a: each top-1 is last in the other.
SPLIT = [hit("a", 0.9, 1.0), hit("b", 0.8, 2.0), hit("c", 0.7, 3.0), hit("d", 0.6, 4.0)]
# Both channels put a first.
AGREED = [hit("a", 0.9, 4.0), hit("b", 0.8, 3.0), hit("c", 0.7, 2.0), hit("d", 0.6, 1.0)]


# -- trigger ----------------------------------------------------------------------------------


def test_channels_disagree_when_each_top_hit_is_outside_the_others_top_k() -> None:
    assert channels_disagree(SPLIT, agree_k=3)
    assert not channels_disagree(SPLIT, agree_k=4)  # d is dense's 4th: inside the top 4
    assert not channels_disagree(AGREED, agree_k=1)


def test_one_sided_split_is_not_disagreement() -> None:
    # Dense's top (a) is BM25's last, but BM25's top (b) is dense's second.
    hits = [hit("a", 0.9, 1.0), hit("b", 0.8, 9.0), hit("c", 0.7, 3.0), hit("d", 0.6, 4.0)]
    assert not channels_disagree(hits, agree_k=2)


def test_a_channel_that_scored_nothing_cannot_disagree() -> None:
    assert not channels_disagree([hit("a", 0.9, None), hit("b", 0.8, None)], agree_k=1)
    assert not channels_disagree([], agree_k=1)
    with pytest.raises(ValueError, match="agree_k must be >= 1, got 0"):
        channels_disagree(SPLIT, agree_k=0)


def test_trigger_low_confidence_is_a_refusal_unless_a_bar_is_set() -> None:
    assert corrector().trigger(REFUSED, AGREED, "hybrid") == "low_confidence"
    assert corrector().trigger(ANSWERED, AGREED, "hybrid") is None
    barred = corrector(trigger_confidence=0.9)
    assert barred.trigger(ANSWERED, AGREED, "hybrid") == "low_confidence"
    assert barred.trigger(Scored(0.95, True, "calibrated"), AGREED, "hybrid") is None


def test_trigger_disagreement_only_for_hybrid_and_when_switched_on() -> None:
    split = corrector(on_disagreement=True)
    assert split.trigger(ANSWERED, SPLIT, "hybrid") == "disagreement"
    assert split.trigger(ANSWERED, SPLIT, "dense") is None
    assert corrector().trigger(ANSWERED, SPLIT, "hybrid") is None  # off by default


# -- strategies -------------------------------------------------------------------------------

TOP = [
    hit("a", 0.9, 1.0, "Refunds are paid by bank transfer within fourteen days."),
    hit("b", 0.8, 2.0, "A bank transfer refund needs the original receipt."),
    hit("c", 0.7, 3.0, "Shipping is free for members; refunds exclude shipping."),
    hit("d", 0.6, 4.0, "Opening hours: nine to five, shipping desk closed Sundays."),
]


def test_expansion_terms_weigh_top_hit_terms_by_idf_and_skip_the_query() -> None:
    terms = expansion_terms("how are refunds paid", TOP, n_terms=3, from_top=2)
    # bank and transfer are in both top hits and in no other: the heaviest words.
    assert terms[:2] == ["bank", "transfer"]
    assert "refund" not in terms
    assert "paid" not in terms
    assert len(terms) == 3
    assert "shipping" not in terms  # only in hits past the top two


def test_expansion_terms_are_bounded_and_checked() -> None:
    assert len(expansion_terms("x", TOP, n_terms=2, from_top=4)) == 2
    assert expansion_terms("x", [], n_terms=2, from_top=1) == []
    with pytest.raises(ValueError, match="n_terms and from_top must be >= 1"):
        expansion_terms("x", TOP, n_terms=0, from_top=1)


def test_expand_strategy_adds_terms_to_the_bm25_text() -> None:
    retry = corrector(expand_terms=2, expand_from=2).plan(
        "how are refunds paid", "hybrid", 8, TOP, REFUSED
    )
    assert retry == Retry(
        "low_confidence",
        "expand",
        "how are refunds paid bank transfer",
        "hybrid",
        8,
        ("bank", "transfer"),
    )


def test_expand_strategy_skips_dense_queries_and_queries_with_nothing_to_add() -> None:
    c = corrector()
    assert c.plan("q", "dense", 8, TOP, REFUSED) is None
    assert c.plan("q", "hybrid", 8, [], REFUSED) is None


def test_wider_strategy_searches_max_k_bounded_by_the_deployment() -> None:
    retry = corrector(strategy="wider", max_k=16).plan("q", "hybrid", 8, TOP, REFUSED)
    assert retry is not None
    assert (retry.limit, retry.mode, retry.text) == (16, "hybrid", "q")
    capped = Corrector(CorrectiveSettings(enabled=True, strategy="wider", max_k=40), max_k=12)
    assert capped.max_k == 12
    assert capped.plan("q", "hybrid", 12, TOP, REFUSED) is None  # already at the bound


def test_keyword_strategy_searches_bm25_only() -> None:
    retry = corrector(strategy="keyword").plan("refunds", "hybrid", 8, TOP, REFUSED)
    assert retry is not None
    assert (retry.mode, retry.limit) == ("keyword", 8)
    assert corrector(strategy="keyword").plan("refunds", "keyword", 8, TOP, REFUSED) is None


def test_nothing_is_planned_when_nothing_triggers() -> None:
    assert corrector().plan("q", "hybrid", 8, AGREED, ANSWERED) is None


# -- winner rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry", "won", "reason"),
    [
        (None, False, "retry_failed"),
        (Scored(0.9, True, "weighted"), False, "not_comparable"),
        (Scored(0.35, False, "calibrated"), False, "retry_not_answerable"),
        (Scored(0.2, True, "calibrated"), False, "retry_not_higher"),
        (Scored(0.6, True, "calibrated"), True, "retry_answerable_and_higher"),
    ],
)
def test_retry_wins_only_when_its_own_confidence_answers_and_is_higher(
    retry: Scored | None, won: bool, reason: str
) -> None:
    assert corrector(win_confidence=0.0).choose(REFUSED, retry) == (won, reason)


def test_a_win_confidence_bar_holds_back_retries_below_it() -> None:
    assert CorrectiveSettings().win_confidence == 0.85  # the measured default
    barred = corrector(win_confidence=0.7)
    assert barred.choose(REFUSED, Scored(0.6, True, "calibrated")) == (
        False,
        "retry_below_win_confidence",
    )
    assert barred.choose(REFUSED, Scored(0.7, True, "calibrated"))[0]


# -- the result field and the evidence --------------------------------------------------------


def result(confidence: float, answerable: bool, chunk: str = "a", **extra: Any) -> RetrievalResult:
    return RetrievalResult.model_validate(
        {
            "result_id": "r1",
            "query_id": "q1",
            "tenant_id": "t1",
            "collection": "default",
            "query": "how are refunds paid",
            "status": "high_confidence" if answerable else "no_relevant_context",
            "level": "HIGH" if answerable else "VERY_LOW",
            "confidence": confidence,
            "answerable": answerable,
            "advisory_flag": "HIGH_CONFIDENCE",
            "advisory_only": False,
            "breakdown": ConfidenceBreakdown(scorer="calibrated"),
            "hits": [
                {
                    "chunk_id": chunk,
                    "doc_id": chunk,
                    "text": "t",
                    "rank": 1,
                    "score": confidence,
                    "citation": {"chunk_id": chunk, "doc_id": chunk, "source": "s"},
                }
            ],
            "filtered_count": 0,
            "total_found": 1,
            "match_count": 1,
            "threshold": 0.4,
            "stop_reason": "threshold",
            "chunks_retrieved": 1,
            "embedder_id": "e",
            **extra,
        }
    )


EXPAND = Retry("low_confidence", "expand", "q bank", "hybrid", 8, ("bank",))


def test_resolve_keeps_the_winning_path_and_records_it() -> None:
    first, second = result(0.2, False, "a"), result(0.7, True, "b")
    kept = corrector(win_confidence=0.0).resolve(first, second, EXPAND)
    assert [h.chunk_id for h in kept.hits] == ["b"]
    assert kept.confidence == 0.7
    assert kept.corrective == CorrectiveInfo(
        trigger="low_confidence",
        tried=["expand"],
        won="expand",
        first_confidence=0.2,
        retry_confidence=0.7,
        reason="retry_answerable_and_higher",
        expansion_terms=["bank"],
    )


def test_resolve_keeps_the_first_path_and_its_confidence_when_the_retry_loses() -> None:
    first = result(0.2, False, "a")
    kept = corrector(win_confidence=0.0).resolve(first, result(0.3, False, "b"), EXPAND)
    assert kept.model_dump(exclude={"corrective"}) == first.model_dump(exclude={"corrective"})
    assert kept.corrective is not None
    assert kept.corrective.won == "first"
    failed = corrector(win_confidence=0.0).resolve(first, RuntimeError("search down"), EXPAND)
    assert failed.corrective is not None
    assert (failed.corrective.reason, failed.corrective.retry_confidence) == ("retry_failed", None)
    errored = result(0.0, False, outcome="error")
    assert (
        corrector(win_confidence=0.0).resolve(first, errored, EXPAND).corrective.reason
        == "retry_failed"
    )  # type: ignore[union-attr]  # set by resolve


def test_the_result_field_allows_one_retry_only() -> None:
    with pytest.raises(ValidationError):
        CorrectiveInfo(
            trigger="low_confidence",
            tried=["expand", "wider"],
            won="first",
            first_confidence=0.1,
            reason="x",
        )


def test_a_corrected_result_brings_one_corrective_evidence_event() -> None:
    kept = corrector(win_confidence=0.0).resolve(
        result(0.2, False, "a"), result(0.7, True, "b"), EXPAND
    )
    events = evidence_for(kept, advisory_threshold=0.5, source="/test")
    [event] = [e for e in events if e.type == EvidenceType.CORRECTIVE_RETRY]
    assert event.data.details["won"] == "expand"
    assert event.data.details["trigger"] == "low_confidence"
    assert event.data.details["expansion_terms"] == ["bank"]
    assert "kept expand" in event.data.summary
    # A cache hit replays the result, not the retry: no second event.
    cached = kept.model_copy(update={"cache": CacheInfo(hit=True)})
    replayed = evidence_for(cached, advisory_threshold=0.5, source="/test")
    assert not [e for e in replayed if e.type == EvidenceType.CORRECTIVE_RETRY]
    plain = evidence_for(result(0.7, True), advisory_threshold=0.5, source="/test")
    assert not [e for e in plain if e.type == EvidenceType.CORRECTIVE_RETRY]


# -- per tenant -------------------------------------------------------------------------------


def test_tenant_file_switches_corrective_retrieval_per_tenant(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "tenants:\n"
        "  acme: {corrective: true, corrective_strategy: wider}\n"
        "  bravo: {corrective: false}\n"
        "  plain: {answer_threshold: 0.5}\n"
    )
    tenants = load_tenant_thresholds(path, LevelThresholds(high=0.3, medium=0.2, low=0.1))
    base = CorrectiveSettings()
    on = tenants["acme"].corrective_settings(base)
    assert (on.enabled, on.strategy) == (True, "wider")
    assert not tenants["bravo"].corrective_settings(CorrectiveSettings(enabled=True)).enabled
    assert tenants["plain"].corrective_settings(base) is base


@pytest.mark.parametrize(
    "bad",
    [
        "{corrective_strategy: rerank}",
        "{corrective_trigger_confidence: 1.5}",
        "{corrective: maybe}",
        "{corrective_strategy: [[[[expand]]]]}",
        "{corrective_strategy: 'expand\\u0000'}",
    ],
)
def test_tenant_file_refuses_a_bad_corrective_value(tmp_path: Path, bad: str) -> None:
    from ragsift.errors import ConfigurationError

    path = tmp_path / "t.yaml"
    path.write_text(f"tenants:\n  acme: {bad}\n")
    with pytest.raises(ConfigurationError, match="tenant thresholds"):
        load_tenant_thresholds(path, LevelThresholds(high=0.3, medium=0.2, low=0.1))


def test_settings_refuse_bad_values() -> None:
    with pytest.raises(ValidationError):
        CorrectiveSettings(max_k=0)
    with pytest.raises(ValidationError):
        CorrectiveSettings(strategy="rerank")  # type: ignore[arg-type]  # the point of the test
    assert CorrectiveSettings().enabled is False  # off by default


def test_expansion_terms_of_hostile_hit_texts_are_bounded_words() -> None:
    hostile = [
        hit("a", 0.9, 1.0, "Возврат денег банковским переводом 退款 通过银行转账"),
        hit("b", 0.8, 2.0, "refund\x00\x1b[31m bank\u202etransfer " + "overflow " * 50_000),
        hit("c", 0.7, 3.0, "9" * 5_000 + " возврат"),
    ]
    terms = expansion_terms("refund", hostile, n_terms=5, from_top=3)
    assert len(terms) == 5
    assert all(t.isprintable() and len(t) <= MAX_TERM_CHARS for t in terms)
    assert terms[0] == "возврат"  # in two top hits: non-Latin words count like any other
