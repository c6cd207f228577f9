"""What ``ragsift calibrations remove --tenant T`` forgets with the calibration: the scope's
feedback labels and its re-fit record.

A feedback re-fit is made of its scope's labels, and they stayed when it was removed, so
the next label re-fit it from them (a calibration worker holding the scope due re-fit it
on a replayed label): a re-fit that refused every query was back before its labels were
fixed. Forgotten, the scope's next re-fit waits for ``RAGSIFT_FEEDBACK_MIN_LABELS`` new
sampled labels, in either runtime. The labels are forgotten where the runtimes keep
them: the calibration workers' Redis when the calibrations are in Redis
(``RAGSIFT_CALIBRATION_STORE=redis``), and the embedded runtime's
``<data dir>/feedback.sqlite`` when there is one. They are forgotten when the scope has
no calibration stored too (too few labels yet, a re-fit withheld, one removed before):
until 2026-12-03 ``remove`` then exited 2, and they could not be forgotten at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragsift.confidence.registry import CalibrationScope, CalibrationStore
from ragsift.settings import Settings

__all__ = ["Removed", "forget_labels", "remove_scope", "removed_words"]


@dataclass(frozen=True)
class Removed:
    """What :func:`remove_scope` removed: the scope's calibration (if one was stored),
    and how many feedback labels it forgot."""

    calibration: bool
    labels: int

    @property
    def anything(self) -> bool:
        """True when a calibration or a label was removed."""
        return self.calibration or self.labels > 0


def remove_scope(store: CalibrationStore, settings: Settings, scope: CalibrationScope) -> Removed:
    """Remove ``scope``'s calibration from ``store``, if one is stored, and forget its
    labels and re-fit record either way.

    The labels go first: a store that fails leaves the calibration, and ``remove`` can
    run again.

    Raises:
        OSError: the calibration store could not be written.
        RagsiftError: a feedback store could not be (see :func:`forget_labels`).
    """
    forgotten = forget_labels(settings, scope)
    return Removed(calibration=store.delete(scope), labels=forgotten)


def forget_labels(settings: Settings, scope: CalibrationScope) -> int:
    """Forget ``scope``'s labels and re-fit record where the runtimes keep them; how many
    labels were forgotten. A collection's calibration (no tenant) has none: re-fits are
    per tenant.

    Raises:
        RagsiftError: a store could not be read or written (nothing was forgotten there).
    """
    if scope.tenant is None:
        return 0
    from ragsift.embedded import FEEDBACK_DB
    from ragsift.retrieval.feedback_store import FeedbackStore, SqliteFeedbackStore
    from ragsift.retrieval.redis_feedback_store import RedisFeedbackStore

    stores: list[FeedbackStore] = []
    db = Path(settings.data_dir) / FEEDBACK_DB
    if db.is_file():  # made by the first `ragsift ask`: never created here
        stores.append(SqliteFeedbackStore(db))
    if settings.calibration.store == "redis":
        stores.append(RedisFeedbackStore(settings.redis))
    forgotten = 0
    try:
        for store in stores:
            forgotten += store.forget(scope)
    finally:
        for store in stores:
            store.close()
    return forgotten


def removed_words(scope: CalibrationScope, now: str, removed: Removed, min_labels: int) -> str:
    """What ``remove`` says: the scope's calibration removed (or none stored), the
    calibration (version ``now``) its queries use, and the labels forgotten, if any."""
    if removed.calibration:
        said = f"removed the calibration of {scope}; its queries now use {now}"
    else:
        said = f"no calibration is stored for {scope} (its queries use {now})"
    forgotten = removed.labels
    if not forgotten:
        return said
    labels = f"{forgotten} feedback label{'' if forgotten == 1 else 's'}"
    return (
        f"{said}; forgot its {labels} and its last re-fit: its next re-fit waits for"
        f" {min_labels} new sampled labels"
    )
