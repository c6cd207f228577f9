"""The query path's mix check: re-certify a scope's answer threshold at its traffic's mix.

Each scored query's calibrated confidence joins its (tenant, collection)
histogram in a :class:`~ragsift.confidence.mix_monitor.MixMonitor`; the scope's
estimated share of unanswerable queries is exported as
``ragsift_unanswerable_share`` (and the share the raise reads, over the queries at
0.05 and over, as ``ragsift_unanswerable_share_raise``: ADR 045). When the share
(estimated, or declared with
``RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE``) moves the certified bar, the
query's :class:`~ragsift.confidence.policy.AnswerPolicy` carries the new bar
and that share, at which its confidence and bar are then reported (ADR 016),
and a query refused only because of it is told why (``unanswerable_mix``
advice): a refusal is never silent. Where the scope's calibration has a
near-miss table, the bar also rises where near misses show (ADR 021,
``near_miss_mix`` advice, ``ragsift_near_miss_share``); that does not change
the share the confidence is reported at. Where the traffic is clearly more
answerable than the sample and shows no near misses, the bar falls by what
the mix table certifies the share's upper bound moves it, and the confidence is
reported at that share (ADR 030, ``RAGSIFT_CONFIDENCE_MIX_LOWER``); a tenant's
own bar and a collection's floor stay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ragsift.confidence import Assessment, CalibrationArtifact
from ragsift.confidence.mix import MixReading, UnanswerableShare, reported_share
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.near_miss import NearMissTable
from ragsift.confidence.policy import AnswerPolicy, PriorShift
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.confidence.served import ServedBars, served_bar
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.results import searched_keyword
from ragsift.schemas import Advice, QueryEvent, RetrievalResult

__all__ = [
    "EVIDENCE_ADVICE_CODE",
    "LOWERED_ADVICE_CODE",
    "MIX_ADVICE_CODE",
    "NEAR_MISS_ADVICE_CODE",
    "OWN_BAR_ADVICE_CODE",
    "MixBar",
    "mix_policy",
    "mix_refusal",
    "monitored_confidence",
    "near_miss_table",
    "observe_reused",
    "own_bar_refusal",
    "reported_prior",
]

#: The advice code of a query refused because its scope's mix raised the bar.
MIX_ADVICE_CODE = "unanswerable_mix"
#: ... because near misses in its scope's traffic raised it (ADR 021).
NEAR_MISS_ADVICE_CODE = "near_miss_mix"
#: ... refused by its own bar (a collection's or tenant's), its confidence reported at a mix.
OWN_BAR_ADVICE_CODE = "own_bar"
#: The advice of a query answered only because its scope's mix lowered the bar (ADR 030).
LOWERED_ADVICE_CODE = "lowered_mix"
#: ... refused only because a lowered bar stops where a query's evidence is even (ADR 046).
EVIDENCE_ADVICE_CODE = "evidence_against"


@dataclass(frozen=True, slots=True)
class MixBar:
    """Why a query's bar moved: the share it was set at (declared or estimated), and
    the calibration's alpha. ``near_miss``: the estimated share of near misses, where
    they raised the bar past the out-of-scope mix's (ADR 021)."""

    share: float
    declared: bool
    alpha: float
    near_miss: float | None = None
    #: The lowered bar even evidence stopped, in the calibration's terms (ADR 046).
    stopped_from: float | None = None


def mix_policy(
    policy: AnswerPolicy,
    assessment: Assessment,
    query: QueryEvent,
    calibration: CalibrationArtifact | None,
    *,
    mode: UnanswerableShare,
    monitor: MixMonitor | None,
    metrics: Metrics,
    counted: bool = False,
    near_miss: bool = True,
    lower: bool = True,
    memo: ServedBars | None = None,
) -> tuple[AnswerPolicy, MixBar | None]:
    """``policy`` with the scope's mix bar, and why it moved (None: it did not).

    Only a calibrated assessment whose bar is the artifact's certified one moves:
    a configured answer threshold is the operator's, and other scorers certify nothing.
    ``counted``: the query is in its scope's histogram already (a corrective retry
    of it), so the scope's reading is used without counting it again.
    ``near_miss``: read the scope's near misses too, where the calibration has a
    near-miss table (``RAGSIFT_CONFIDENCE_NEAR_MISS``, ADR 021).
    ``lower``: lower the bar where the traffic is clearly more answerable than the
    sample (``RAGSIFT_CONFIDENCE_MIX_LOWER``, ADR 030).
    ``memo``: served bars remembered per scope while their inputs stay (a mature
    reading changes every 16 queries); None computes each query's.
    """
    table = calibration.conformal.mix if calibration is not None else None
    near = near_miss_table(calibration, near_miss)
    if (
        calibration is None
        or table is None
        or mode == "off"
        or assessment.scorer != "calibrated"
        or assessment.calibration_version != calibration.version
    ):
        return policy, None
    certified = calibration.conformal
    base = certified.threshold if certified.feasible else 1.0
    if assessment.answerability.answer_threshold != base:
        return policy, None  # a configured threshold (RAGSIFT_CONFIDENCE_ANSWER_THRESHOLD)
    estimate = None
    if mode == "auto" and monitor is not None:
        tenant, collection = query.tenant_id, query.collection
        if counted:
            estimate = monitor.reading(tenant, collection, calibration.version)
        else:
            seen = monitored_confidence(calibration, assessment, query.mode == "dense")
            estimate = monitor.observe(tenant, collection, calibration.version, table, seen, near)
            _export(metrics, tenant, collection, estimate)
    if memo is None:
        served = served_bar(base, table, near, mode, estimate, lower=lower)
    else:
        scope = (query.tenant_id, query.collection)
        served = memo.get(scope, base, table, near, mode, estimate, lower=lower)
    if not counted:  # a keyword query's bar is its own model's; a retry's was set
        metrics.answer_threshold.set((query.tenant_id, query.collection), served.bar)
    if served.bar == base and served.reported_at is None:
        return policy, None
    share = served.reported_at
    if share is None:  # only near misses moved it, and only on a reading ("auto")
        assert estimate is not None
        share = estimate.share
    raised_by = None
    if served.bar != served.mixed and estimate is not None and estimate.near_miss is not None:
        raised_by = estimate.near_miss.share
    why = MixBar(share, not isinstance(mode, str), certified.alpha, raised_by, served.stopped_from)
    prior = None
    if served.reported_at is not None:
        prior = reported_prior(table.unanswerable_share, served.reported_at)
    if served.bar < base and not why.declared:
        # ADR 030: lowered where the traffic is clearly more answerable; a tenant's
        # own bar, and a collection's floor, stay.
        if policy.answer_threshold is None:  # one copy with both, not one after the other
            return dataclasses.replace(policy, answer_threshold=served.bar, prior=prior), why
        return dataclasses.replace(policy, prior=prior), why
    if why.declared and policy.answer_threshold is None:
        # A declared share replaces the certified bar, up or down; a tenant's own stays.
        return dataclasses.replace(policy, answer_threshold=served.bar, prior=prior), why
    floor = max(policy.answer_floor, served.bar)
    return dataclasses.replace(policy, answer_floor=floor, prior=prior), why


def monitored_confidence(
    calibration: CalibrationArtifact, assessment: Assessment, dense_only: bool
) -> float:
    """The confidence a scope's mix reads for a query: the one it was given, but for a
    dense-only query (ADR 028) the one the hybrid model gives its signals.

    The mix and near-miss tables are histograms of hybrid searches' confidences. A
    dense-only query's own confidence imputes less agreement than those had, so its
    answerable questions fall where near misses lie and the scope read as near
    misses that it was not (0.14 for 0.085 on SQuAD's half 2 with a quarter of the
    paragraphs left out: the bar rose to 0.92). With the top score as the agreement,
    as the hybrid model reads a missing one, the scope read 0.08.
    """
    if not dense_only or calibration.dense_only is None:
        return assessment.confidence
    signals = {k: v for k, v in assessment.signals.to_dict().items() if v is not None}
    plain = CalibratedScorer(calibration).score_reported([signals], [assessment.match_count])
    return float(plain[0])


def near_miss_table(calibration: CalibrationArtifact | None, enabled: bool) -> NearMissTable | None:
    """The calibration's near-miss table, if it has one and near misses are read."""
    return calibration.conformal.near_miss if calibration is not None and enabled else None


def observe_reused(
    monitor: MixMonitor,
    reused: Sequence[tuple[QueryEvent, RetrievalResult, CalibrationArtifact]],
    metrics: Metrics,
    *,
    near_miss: bool = True,
) -> None:
    """Count results served again (cache hits, queries sharing another's search) in
    their scopes' mix, with the calibrated confidence each was scored at.

    They are traffic like any other. Left out, the mix was read from cache misses
    only, and those lean unanswerable: a confident result is cached for a day and a
    result without relevant context not at all, so repeated answerable questions
    went uncounted and the scope's bar rose for nothing. Each ``(query, result,
    calibration)`` is scored again from the result's signals with the calibration
    it names (the cache key includes its version), before any mapping to the
    traffic's mix (ADR 016): one model pass per calibration.
    """
    groups: dict[str, tuple[CalibrationArtifact, list[tuple[QueryEvent, RetrievalResult]]]] = {}
    for query, result, calibration in reused:
        breakdown = result.breakdown
        if (
            calibration.conformal.mix is None
            or result.outcome != "ok"
            or breakdown.scorer != "calibrated"
            or breakdown.calibration_version != calibration.version
            or searched_keyword(result)  # the keyword model's, not the hybrid one's (ADR 029)
        ):
            continue
        groups.setdefault(calibration.version, (calibration, []))[1].append((query, result))
    for calibration, items in groups.values():
        table = calibration.conformal.mix
        assert table is not None  # grouped above only with one
        confidences = CalibratedScorer(calibration).score_reported(
            # not told which were dense-only: the mix reads them as the hybrid model
            # scores them, as when they were first served (monitored_confidence)
            [r.breakdown.signals for _, r in items],
            [len(r.hits) for _, r in items],
        )
        for (query, _), confidence in zip(items, confidences.tolist(), strict=True):
            tenant, collection = query.tenant_id, query.collection
            estimate = monitor.observe(
                tenant,
                collection,
                calibration.version,
                table,
                confidence,
                near_miss_table(calibration, near_miss),
            )
            _export(metrics, tenant, collection, estimate)


def _export(metrics: Metrics, tenant: str, collection: str, estimate: MixReading | None) -> None:
    """A scope's estimated shares as gauges (nothing while too few queries were seen)."""
    if estimate is None:
        return
    scope = (tenant, collection)
    labels = (metrics.tenant(tenant), metrics.collection(collection))
    if estimate.mixed:  # not the calibration's share standing in for one (ADR 040)
        metrics.unanswerable_share.set_labelled(labels, scope, estimate.share)
        metrics.raise_share.set_labelled(labels, scope, estimate.raising()[0])
    if estimate.near_miss is not None:
        metrics.near_miss_share.set_labelled(labels, scope, estimate.near_miss.share)


def reported_prior(calibration_share: float, share: float) -> PriorShift | None:
    """The mix a confidence is reported at once ``share`` moved its scope's bar
    (None: the calibration's own)."""
    reported = reported_share(calibration_share, share)
    return None if reported is None else PriorShift(calibration_share, reported)


def mix_refusal(before: Assessment, after: Assessment, why: MixBar) -> Advice | None:
    """The advice for a query the mix bar refused (answerable under the certified bar),
    or answered only because it lowered the bar (:func:`mix_lowered`)."""
    if after.answerability.is_answerable and not before.answerability.is_answerable:
        return mix_lowered(before, after, why)
    if (
        after.answerability.reason == "low_confidence"  # not too few documents
        and why.stopped_from is not None
        and before.confidence >= why.stopped_from
    ):
        return evidence_against(before, after, why)
    if after.answerability.is_answerable or not before.answerability.is_answerable:
        return None
    bar = after.answerability.answer_threshold
    which = "no confidence is" if bar >= 1.0 else f"only a confidence of {bar:.2f} or more is"
    if why.near_miss is not None:
        return Advice(
            code=NEAR_MISS_ADVICE_CODE,
            message=(
                f"Refused at confidence {after.confidence:.2f}: about {why.near_miss:.0%} of"
                " this collection's recent queries look on its subjects but unanswered by"
                f" its documents (estimated from their confidences), and at that mix {which}"
                f" certified to keep answers without relevant context under {why.alpha:.0%}."
            ),
        )
    how = "declared" if why.declared else "estimated from recent queries"
    return Advice(
        code=MIX_ADVICE_CODE,
        message=(
            f"Refused at confidence {after.confidence:.2f} ({before.confidence:.2f} at the"
            f" calibration's mix): {'' if why.declared else 'about '}"
            f"{why.share:.0%} of this collection's queries are unanswerable from it ({how}),"
            f" and at that mix {which}"
            f" certified to keep answers without relevant context under {why.alpha:.0%}."
        ),
    )


def own_bar_refusal(engine: Assessment, certified: Assessment, after: Assessment) -> Advice | None:
    """The advice for a query the certified bar answers but its own bar (a collection's
    threshold, its tenant's) refuses, once its scope's mix moved what is reported.

    That bar holds in the calibration's terms, so a confidence reported at a more
    answerable mix can read above it and still be refused: with no word why, or the
    mix's advice, it read as a refusal at 0.99 under a bar of 0.62.
    """
    if (
        after.answerability.is_answerable
        or certified.answerability.is_answerable
        or certified.answerability.reason != "low_confidence"  # not too few documents
        or not engine.answerability.is_answerable
    ):
        return None
    bar = certified.answerability.answer_threshold
    return Advice(
        code=OWN_BAR_ADVICE_CODE,
        message=(
            f"Refused at confidence {after.confidence:.2f} ({certified.confidence:.2f} at the"
            f" calibration's mix): under this query's own bar of {bar:.2f} (a collection's or"
            " its tenant's answer threshold), which holds at the calibration's mix whatever"
            " mix the confidence is reported at."
        ),
    )


def evidence_against(before: Assessment, after: Assessment, why: MixBar) -> Advice:
    """The advice for a query refused only because a lowered bar stops at even evidence
    (ADR 046): the mix alone would have answered it."""
    return Advice(
        code=EVIDENCE_ADVICE_CODE,
        message=(
            f"Refused at confidence {after.confidence:.2f} ({before.confidence:.2f} at the"
            f" calibration's mix): only about {why.share:.0%} of this collection's queries"
            " are unanswerable from it (estimated from recent queries), which lifts the"
            " confidence, but this query's own evidence is against an answer, and a lowered"
            " bar never answers on the mix alone."
        ),
    )


def mix_lowered(before: Assessment, after: Assessment, why: MixBar) -> Advice:
    """The advice for a query answered only because its scope's mix lowered the bar:
    an audit reader sees that the certified bar alone would have refused it."""
    bar = after.answerability.answer_threshold
    how = "declared" if why.declared else "estimated from recent queries"
    return Advice(
        code=LOWERED_ADVICE_CODE,
        message=(
            f"Answered at confidence {after.confidence:.2f} ({before.confidence:.2f} at the"
            " calibration's mix, under its certified bar): only"
            f" {'' if why.declared else 'about '}{why.share:.0%} of this collection's"
            f" queries are unanswerable from it ({how}), and at that mix a confidence of"
            f" {bar:.2f} or more is certified to keep answers without relevant context"
            f" under {why.alpha:.0%}"
            + (
                "."
                if why.stopped_from is None
                else "; the mix would lower the bar further,"
                " but it stops where a query's own evidence is even."
            )
        ),
    )
