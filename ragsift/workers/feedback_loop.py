"""The feedback loop: labels joined to the results they judge, each stored, and the
scope's calibration re-fit when due (X2).

Labels are keyed by query id, so a duplicated or replayed event rewrites the
same label and a re-fit only happens when the set of labels changed. Labels a
user chose to give (``sampled: false``: a thumbs-down) are kept and counted but
never fit on: chosen by their outcome, they read as more risk than there is
(ADR 023). Feedback for an unknown (or expired) query id or another tenant's
query is refused: the runtime dead-letters it (stage ``feedback``) and it is
counted by reason. The calibration worker (:mod:`ragsift.workers.calibration`), the
embedded runtime and ``ragsift feedback`` use the same loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.errors import InvalidEventError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import FeedbackStore, ScoredRecord, StoredLabel
from ragsift.retrieval.results import searched_dense_only, searched_keyword
from ragsift.schemas import FeedbackEvent, RetrievalResult
from ragsift.settings import FeedbackSettings
from ragsift.workers.decision import sampled_for_labels
from ragsift.workers.scope_refit import ScopeRefit

__all__ = ["FeedbackLoop", "FeedbackRefused", "record_of"]


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


class FeedbackLoop(ScopeRefit):
    """Joins labels to results, stores them, and re-fits a scope's calibration when due.

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
        super().__init__(store, registry, settings, metrics, clock=clock)
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
            return self._refit(scope) if afresh or self.refits.is_due(scope) else None
        self.last_result = "labelled" if event.sampled else "reported"
        self.metrics.feedback.labels(self.last_result).inc()
        # A reported label can start no re-fit, but a changed sampled one can.
        return self._refit(scope)

    def _refit(self, scope: CalibrationScope) -> str | None:
        """:meth:`maybe_refit`, the scope left due if it fails: the label is stored, so
        the label tried again (the worker holds it while a store is down) is "unchanged",
        and a scope not due was not re-fit until the next changed label came."""
        try:
            return self.maybe_refit(scope)
        except Exception:  # whatever it is, the caller handles it: only the state is ours
            self.refits.mark_due(scope)
            raise

    @staticmethod
    def scope_of(record: ScoredRecord) -> CalibrationScope:
        """The calibration a label of ``record`` re-fits: its tenant in its collection."""
        return CalibrationScope(record.collection, record.tenant_id)
