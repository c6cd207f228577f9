"""Re-fitting one scope's calibration from its stored labels, and putting it in force (X2).

:class:`ScopeRefit` reads a scope's labels from the feedback store, re-fits the
collection's calibration on them (:func:`~ragsift.confidence.refit.refit_calibration`)
once there are enough, they changed and the re-fit interval passed, and puts the
result in the registry's store, where every worker picks it up. The feedback loop
(:mod:`ragsift.workers.feedback_loop`) feeds it labels.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final

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
from ragsift.retrieval.feedback_store import FeedbackStore, StoredLabel
from ragsift.retrieval.redis_calibration import CalibrationStoreDownError
from ragsift.settings import FeedbackSettings
from ragsift.workers.refit_state import RefitStates

__all__ = ["REFIT_TRIES", "ScopeRefit"]

# The calibration worker's logger, as before the re-fit had a module of its own: log
# filters and alerts name it.
log = logging.getLogger("ragsift.workers.calibration")

#: Fits of one scope in a row whose labels another process changed while each was
#: put. Two processes meet on a scope only in an overlap (a rebalance, the console
#: and a CLI), so a second fit settles it; the bound keeps a stream of labels from
#: holding one label's re-fit for good (each of those labels re-fits anyway).
REFIT_TRIES: Final = 3


def _digest(labels: Sequence[StoredLabel]) -> str:
    body = ";".join(sorted(f"{s.record.query_id}={int(s.relevant)}" for s in labels))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


class ScopeRefit:
    """Re-fits a scope's calibration from its stored labels when due.

    Args:
        store: labels and re-fit state.
        registry: where re-fit calibrations go (its default and collection artifacts
            are the re-fit's base).
        settings: min labels, re-fit interval, window.
        metrics: re-fits are counted here.
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

        A store that does not answer (Redis's
        :class:`~ragsift.retrieval.redis_calibration.CalibrationStoreDownError`) raises
        here (the worker holds the label and tries again), where the query path reads
        it as unusable: read so, an outage gave the re-fit the shipped calibration as
        its base, and a store back by the put published a re-fit of the wrong
        calibration. Any other failure to read still reads as unusable (the put
        replaces an own artifact that cannot be read).

        Raises:
            ServiceUnavailableError: the calibration store did not answer.
        """
        down = (CalibrationStoreDownError,)
        collection, why, _ = self.registry.examine(CalibrationScope(scope.collection), raises=down)
        base = collection if collection is not None and why is None else self.registry.default
        held, reason, _ = self.registry.examine(scope, raises=down)
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
        """Re-fit ``scope`` if it has enough labels, they changed, and the interval passed;
        the version put last, if any.

        Another process may re-fit the scope at the same time (two calibration workers
        in a rebalance's overlap, the console and ``ragsift feedback``): each fits the
        labels it read, and the re-fit put last is the one in force. So, once put, the
        labels are read again; changed meanwhile, this re-fit may have replaced one of
        more labels, and it is made again on them. The re-fit put last is then checked
        after its put, and a label stored after that check was stored before its own
        process read the labels to fit: no label is left out (docs/feedback.md,
        "Two re-fits at once"). At most :data:`REFIT_TRIES` fits; labels that changed
        at every one leave the scope due, and its next label fits them.
        """
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
        labels = self._window(scope)
        version: str | None = None
        for _ in range(REFIT_TRIES):
            if len(labels) < self.settings.min_labels:
                # Kept due, every replay of the scope read all its labels again, for good.
                self.refits.forget(scope)
                return version
            digest = _digest(labels)
            if (
                version is None and last is not None and last[0] == digest
            ) or self.refits.postponed(scope) == digest:
                self.refits.settle(scope)
                return version
            put = self._fit_and_put(scope, labels, digest, now)
            if put is None:  # postponed or withheld: nothing of these labels was put
                return version
            version = put
            again = self._window(scope)
            if _digest(again) == digest:
                # Recorded once checked: what is in force was fit on every stored label.
                self.store.mark_refit(scope, digest, now)
                self.refits.put(scope)  # nothing of it left to remember
                return version
            log.info(
                "calibration of %s: its labels changed while its re-fit was put (another"
                " process labels it too); re-fitting on them",
                scope,
            )
            labels = again
        self.refits.mark_due(scope)
        log.warning(
            "calibration of %s: its labels changed during each of %d re-fits; its next"
            " label re-fits them",
            scope,
            REFIT_TRIES,
        )
        return version

    def _window(self, scope: CalibrationScope) -> list[StoredLabel]:
        """The labels a re-fit of ``scope`` fits: its last ``window`` usable ones."""
        return self.usable(self.store.labels(scope))[-self.settings.window :]

    def _fit_and_put(
        self, scope: CalibrationScope, labels: list[StoredLabel], digest: str, now: float
    ) -> str | None:
        """Re-fit ``scope`` on ``labels`` and put it in force; its version, or None when
        no re-fit could be made of them (postponed) or it was withheld (ADR 031)."""
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
        # Stored, then marked done (by the caller, once the labels are checked): marked
        # first, a put that failed (or a crash between the two) left the scope on its
        # old calibration for good, every later check finding these labels "already
        # re-fit".
        self.refits.mark_due(scope)
        self.registry.put(scope, artifact)
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
