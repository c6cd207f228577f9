"""The calibration worker: feedback labels in, per-tenant calibrations out (X2).

Two handlers share one :class:`FeedbackLoop`:

* :class:`ResultJoinHandler` consumes ``ragsift.retrievals.v1`` and remembers each
  scored result's signals by query id for the join window (``RAGSIFT_FEEDBACK_JOIN_TTL_S``);
* :class:`FeedbackHandler` consumes ``ragsift.feedback.v1``, joins each label to
  its result and, once a scope (tenant, collection) has enough labels, re-fits
  its calibration (:func:`~ragsift.confidence.refit.refit_calibration`) and puts
  it in the registry's store, where every worker picks it up.

Labels are keyed by query id, so a duplicated or replayed event rewrites the
same label and a re-fit only happens when the set of labels changed. Labels a
user chose to give (``sampled: false``: a thumbs-down) are kept and counted but
never fit on: chosen by their outcome, they read as more risk than there is
(ADR 023). Feedback
for an unknown (or expired) query id or another tenant's query is refused: the
runtime dead-letters it (stage ``feedback``) and it is counted by reason.
The embedded runtime and ``ragsift feedback`` use the same loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import ClassVar

from pydantic import BaseModel

from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.refit import (
    LabelledResult,
    describe_refit,
    refit_calibration,
    withheld_because,
)
from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.errors import InvalidEventError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import FeedbackStore, ScoredRecord, StoredLabel
from ragsift.retrieval.redis_replies import RedisRefusedError
from ragsift.retrieval.results import searched_dense_only, searched_keyword
from ragsift.schemas import FeedbackEvent, RetrievalResult
from ragsift.settings import FeedbackSettings
from ragsift.workers.base import Outcome
from ragsift.workers.decision import sampled_for_labels
from ragsift.workers.held import Hold, Holds, until_available
from ragsift.workers.refit_state import RefitStates

__all__ = ["FeedbackHandler", "FeedbackLoop", "FeedbackRefused", "ResultJoinHandler"]

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


class FeedbackRefused(InvalidEventError):
    """Feedback that cannot be used; ``reason`` says why.

    Reasons: ``unknown_query`` (no scored result within the join window),
    ``tenant_mismatch`` (the query was another tenant's).
    """

    stage = "feedback"

    def __init__(self, message: str, *, reason: str, query_id: str):
        super().__init__(message, query_id=query_id)
        self.reason = reason


def record_of(result: RetrievalResult) -> ScoredRecord:
    """What a label needs from a result: its scope, calibration version, signals, and
    whether it was answered.

    A non-finite signal (results come from a topic: not trusted) is left out, which
    the re-fit reads as it reads one that is non-finite: missing
    (:func:`~ragsift.confidence.signals.reported_signal_matrix`). Kept, it was stored
    as null, and every label for that query then failed to load its record.
    """
    return ScoredRecord(
        query_id=result.query_id,
        tenant_id=result.tenant_id,
        collection=result.collection,
        calibration_version=result.breakdown.calibration_version,
        kept=result.match_count > 0,
        signals={k: v for k, v in result.breakdown.signals.items() if math.isfinite(v)},
        answered=result.answerable,
        dense_only=searched_dense_only(result),
        keyword=searched_keyword(result),
    )


def _digest(labels: Sequence[StoredLabel]) -> str:
    body = ";".join(sorted(f"{s.record.query_id}={int(s.relevant)}" for s in labels))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


class FeedbackLoop:
    """Joins labels to results and re-fits a scope's calibration when due.

    Args:
        store: results for the join window, labels, re-fit state.
        registry: where re-fit calibrations go (its default and collection artifacts
            are the re-fit's base).
        settings: min labels, re-fit interval, window, join window.
        metrics: feedback results and re-fits are counted here.
        clock: wall-clock seconds (tests pass a fake).
    """

    def __init__(
        self,
        store: FeedbackStore,
        registry: CalibrationRegistry,
        settings: FeedbackSettings,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.time,
    ):
        if registry.store is None:
            raise InvalidEventError("the feedback loop needs a registry with a calibration store")
        self.store = store
        self.registry = registry
        self.settings = settings
        self.metrics = metrics
        self._clock = clock
        #: Per scope: due (its labels changed since its last re-fit, which the interval
        #: held back or which could not be stored: any label of theirs checks again, a
        #: replayed one too, else only a changed label did and one may never come), the
        #: digest of labels no re-fit could be made of, why its last re-fit was withheld
        #: (ADR 031). Bounded: tenant ids come from events.
        self.refits = RefitStates(on_evict=metrics.scope_evictions.labels("refit").inc)
        #: What the last applied label did: ``labelled``, ``reported``, ``unchanged``
        #: (the same label again) or ``kept_sampled`` (a report met a sampled label),
        #: for the CLI to say.
        self.last_result = ""

    def remember(self, results: Sequence[RetrievalResult]) -> None:
        """Keep the scored results' signals for the join window (errors and bypasses: none)."""
        records = [record_of(r) for r in results if r.outcome == "ok"]
        self.store.remember(records, self.settings.join_ttl_s)

    def apply(self, event: FeedbackEvent, *, afresh: bool = False) -> str | None:
        """Store one label; return the new calibration version if it triggered a re-fit.

        ``afresh``: this process starts anew for this label (``ragsift feedback``), so it
        cannot know whether the scope is due: a label that changed nothing checks too.

        Raises:
            FeedbackRefused: the query is unknown (or past the join window) or another tenant's.
        """
        record = self.store.recall(event.query_id, event.tenant_id)
        if record is None and self.store.owners(event.query_id):
            self.metrics.feedback.labels("tenant_mismatch").inc()
            raise FeedbackRefused(
                f"feedback for query {event.query_id!r} names tenant {event.tenant_id!r},"
                " but the query was another tenant's",
                reason="tenant_mismatch",
                query_id=event.query_id,
            )
        if record is None:
            self.metrics.feedback.labels("unknown_query").inc()
            raise FeedbackRefused(
                f"feedback for query {event.query_id!r}: no scored result within the join"
                f" window ({self.settings.join_ttl_s}s)",
                reason="unknown_query",
                query_id=event.query_id,
            )
        scope = self.scope_of(record)
        label = StoredLabel(
            record=record, relevant=event.relevant, at=self._clock(), sampled=event.sampled
        )
        # A result the label sampler chose is in the random sample whatever its labels
        # say: were a user's later complaint to take its reviewer's label out, the
        # sample would lose the results users complained of (the wrong ones) and a
        # re-fit read less risk than the traffic has. Elsewhere a label re-sent as
        # reported moves out of the sample, to correct one sent as sampled (ADR 023).
        chosen = sampled_for_labels(record.tenant_id, record.query_id, self.settings.sample_share)
        put = self.store.put_label(scope, label, keep_sampled=chosen)
        if put != "stored":
            self.last_result = put
            self.metrics.feedback.labels(put).inc()
            return self.maybe_refit(scope) if afresh or self.refits.is_due(scope) else None
        self.last_result = "labelled" if event.sampled else "reported"
        self.metrics.feedback.labels(self.last_result).inc()
        # A reported label can start no re-fit, but a changed sampled one can.
        return self.maybe_refit(scope)

    @staticmethod
    def scope_of(record: ScoredRecord) -> CalibrationScope:
        """The calibration a label of ``record`` re-fits: its tenant in its collection."""
        return CalibrationScope(record.collection, record.tenant_id)

    def in_force(
        self, scope: CalibrationScope, base: CalibrationArtifact | None = None
    ) -> CalibrationArtifact:
        """The calibration ``scope``'s queries are scored with: its own if usable, else
        ``base`` (default: the collection's, else the shipped one). Read afresh, and
        not counted as a query's fallback."""
        held, reason, _ = self.registry.examine(scope)
        if held is not None and reason is None:
            return held
        return base if base is not None else self.registry.resolve(None, scope.collection)

    def refit_base(self, scope: CalibrationScope) -> CalibrationArtifact:
        """What a re-fit of ``scope`` re-maps: the collection's calibration (else the
        default), never the scope's last re-fit, so re-fits do not compound; with the
        score alignment the scope's queries are read with (ADR 024).

        A scope's probe calibration (``ragsift ingest``, the indexer's re-probe) moves
        its scores onto the fit corpus's scale, and the labelled results' signals were
        read so. A re-fit on the collection's unaligned calibration served the scope's
        next queries on another scale than its labels: a question labelled relevant 25
        times at 0.88 was refused at 0.25. The re-fit carries the alignment on, so the
        scope's own artifact holds it whichever kind it is. The registry skips a stored
        artifact it cannot use.
        """
        base = self.registry.resolve(None, scope.collection)
        held, reason, _ = self.registry.examine(scope)
        if held is None or reason is not None or held.alignment == base.alignment:
            return base
        # Its version stays the collection's: the re-fit's notes name what it re-fit.
        return base.model_copy(update={"alignment": held.alignment})

    @staticmethod
    def usable(labels: Sequence[StoredLabel]) -> list[StoredLabel]:
        """The labels a re-fit reads, in order.

        Reported labels are chosen by their outcome: on them a re-fit would read the
        users' reporting habit as the scope's risk (ADR 023). Labels of keyword-only
        results judge the keyword model (ADR 029), which a re-fit of the scope's hybrid
        model does not re-map. Both are kept, not used.
        """
        return [s for s in labels if s.sampled and not s.record.keyword]

    def maybe_refit(self, scope: CalibrationScope) -> str | None:
        """Re-fit ``scope`` if it has enough labels, they changed, and the interval passed."""
        now = self._clock()
        last = self.store.last_refit(scope)
        # A stamp ahead of this clock (a replica whose clock runs ahead, or this one
        # stepped back) is no re-fit "just now": held back until the clock passed it,
        # a skew of a day re-fit no changed label for a day.
        if last is not None and 0 <= now - last[1] < self.settings.refit_interval_s:
            # Inside the interval nothing is fitted, so the labels are not read: each
            # label read them all, O(labels) per label for a busy tenant. Checked when
            # the interval has passed, by the next label (due).
            self.refits.mark_due(scope)
            return None
        labels = self.usable(self.store.labels(scope))[-self.settings.window :]
        if len(labels) < self.settings.min_labels:
            # Kept due, every replay of the scope read all its labels again, for good.
            self.refits.forget(scope)
            return None
        digest = _digest(labels)
        if (last is not None and last[0] == digest) or self.refits.postponed(scope) == digest:
            self.refits.settle(scope)
            return None
        base = self.refit_base(scope)
        fitted = [
            LabelledResult(
                s.record.query_id,
                s.record.signals,
                s.record.kept,
                s.relevant,
                s.record.answered,
                s.record.dense_only,
            )
            for s in labels
        ]
        try:
            artifact = refit_calibration(
                base,
                fitted,
                scope=str(scope),
                fitted_at=datetime.fromtimestamp(now, UTC),
            )
        except ConfidenceError as exc:  # e.g. every label the same: wait for other labels
            # These labels are not tried again (they were at every later label, replays
            # too); the next new one is, at once: nothing was published, so the re-fit
            # interval does not start, as it would were the scope marked re-fit.
            self.refits.postpone(scope, digest, str(exc))
            self.metrics.calibration_refits.labels(outcome="postponed").inc()
            log.info("calibration re-fit of %s postponed: %s", scope, exc)
            return None
        withheld = withheld_because(artifact, fitted)
        if withheld is not None:  # ADR 031: too few labels, not too many wrong answers
            self.store.mark_refit(scope, digest, now)
            self.refits.withhold(scope, withheld)
            self.metrics.calibration_refits.labels(outcome="withheld").inc()
            log.info("calibration re-fit of %s withheld: %s", scope, withheld)
            return None
        previous = self.in_force(scope, base)  # what the new one replaces, for the log
        # Stored, then marked done: marked first, a put that failed (or a crash between
        # the two) left the scope on its old calibration for good, every later check
        # finding these labels "already re-fit".
        self.refits.mark_due(scope)
        self.registry.put(scope, artifact)
        self.store.mark_refit(scope, digest, now)
        self.refits.put(scope)  # nothing of it left to remember (postponed, withheld)
        outcome = "certified" if artifact.conformal.feasible else "uncertified"
        self.metrics.calibration_refits.labels(outcome=outcome).inc()
        log.log(
            logging.INFO if artifact.conformal.feasible else logging.WARNING,
            "calibration of %s re-fit: %s; %s",
            scope,
            artifact.version,
            describe_refit(previous, artifact),
        )
        return artifact.version


class ResultJoinHandler(Holds):
    """Remembers scored results so later feedback can be joined to them."""

    name = "calibration-results"
    source = "retrievals"
    #: No deadline: a store that does not answer is waited out (ragsift.workers.held).
    deadline_s: ClassVar[float | None] = None

    def __init__(self, loop: FeedbackLoop, *, sleep: Sleep = asyncio.sleep):
        self.loop = loop
        self._sleep = sleep
        self.hold = Hold()

    @property
    def model(self) -> type[BaseModel]:
        """Retrieval results in."""
        return RetrievalResult

    async def handle_batch(self, events: Sequence[RetrievalResult]) -> list[Outcome]:
        """Remember the batch in one round trip, waiting out a store that does not answer;
        refused for good (a key of the wrong type), each alone: only that one is dead-lettered."""
        outcome = await self._remember(list(events))
        if isinstance(outcome, RedisRefusedError) and len(events) > 1:
            return [await self._remember([event]) for event in events]
        return [outcome for _ in events]  # the store is unusable: every event fails alike

    async def _remember(self, events: list[RetrievalResult]) -> Outcome:
        try:
            await until_available(
                partial(asyncio.to_thread, self.loop.remember, events),
                what=f"{self.name}: remembering {len(events)} result(s)",
                sleep=self._sleep,
                hold=self.hold,
            )
        except Exception as exc:
            return exc
        return []

    async def close(self) -> None:
        """Nothing held (the store is closed by its owner)."""


class FeedbackHandler(Holds):
    """Labels in; re-fit calibrations go to the registry's store (nothing is emitted)."""

    name = "calibration"
    source = "feedback"
    #: Read after the results it joins to, where the runtime can (the plain loop's
    #: ``follows``): a label read before its result was refused as an unknown query.
    follows = "retrievals"
    #: No deadline: a store that does not answer is waited out (ragsift.workers.held).
    deadline_s: ClassVar[float | None] = None

    def __init__(self, loop: FeedbackLoop, *, sleep: Sleep = asyncio.sleep):
        self.loop = loop
        self._sleep = sleep
        self.hold = Hold()

    @property
    def model(self) -> type[BaseModel]:
        """Feedback events in."""
        return FeedbackEvent

    async def handle_batch(self, events: Sequence[FeedbackEvent]) -> list[Outcome]:
        """Apply each label in order, waiting out a store that does not answer; a
        refused one is returned as its exception."""
        out: list[Outcome] = []
        for event in events:
            try:
                await until_available(
                    partial(asyncio.to_thread, self.loop.apply, event),
                    what=f"{self.name}: label for {event.query_id!r}",
                    sleep=self._sleep,
                    hold=self.hold,
                )
            except Exception as exc:  # refused, or an unusable store: dead-letter this one
                out.append(exc)
                continue
            out.append([])
        return out

    async def close(self) -> None:
        """Nothing held."""
