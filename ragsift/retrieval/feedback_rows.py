"""The rows of the feedback store: a result's record, a label, and how rows are read.

Kept apart from the stores (``feedback_store``) that write and read them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ragsift.confidence.registry import CalibrationScope

__all__ = [
    "Put",
    "ScoredRecord",
    "StoredLabel",
    "Unreadable",
    "put_outcome",
    "readable_rows",
    "scope_key",
]

log = logging.getLogger("ragsift.retrieval.feedback_store")
_Row = TypeVar("_Row", bound=BaseModel)

_SEP: Final = "\x1f"  # never in a tenant id or collection name (both are ASCII word chars)


def scope_key(scope: CalibrationScope) -> str:
    """The scope's name in either store's keys: collection, separator, tenant."""
    return f"{scope.collection}{_SEP}{scope.tenant or ''}"


class ScoredRecord(BaseModel):
    """What a label needs from the result it refers to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Not empty: a row without them read well here and failed later, at its scope
    # (``ragsift feedback`` exit 1), instead of being passed over and counted.
    query_id: str = Field(min_length=1)
    tenant_id: str = Field(min_length=1)
    collection: str = Field(min_length=1)
    calibration_version: str | None = None
    kept: bool
    signals: dict[str, float]
    #: Whether the result was answered (D1); None in records kept before it was.
    answered: bool | None = None
    #: Whether the query was searched dense-only (ADR 028); False in older records.
    dense_only: bool = False
    #: Whether it was scored by the keyword model (ADR 029); False in older records.
    keyword: bool = False


class StoredLabel(BaseModel):
    """A label with the signals of its result, and when it was given (seconds since epoch)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    record: ScoredRecord
    relevant: bool
    at: float
    #: False: a user chose to give it (``FeedbackEvent.sampled``); it never re-fits.
    #: Labels stored before the field existed were all used, and read as sampled.
    sampled: bool = True


#: What became of a label: ``stored`` (new, or replacing another), ``unchanged`` (the
#: same label again), ``kept_sampled`` (a reported label met a sampled one and did not
#: replace it).
Put = Literal["stored", "unchanged", "kept_sampled"]


#: Told ("result" or "label", how many) of rows passed over as unreadable: a metric.
Unreadable = Callable[[str, int], None]


def readable_rows(
    model: type[_Row], bodies: Iterable[str | bytes], what: str, count: Unreadable | None
) -> list[_Row]:
    """The ``bodies`` that read as ``model``; each one that does not is passed over with a
    warning, and ``count``ed. One damaged row (or one written by a newer release: the
    models forbid fields they do not know) stopped every label and re-fit of its scope,
    and the label's sender was told its label was rejected though it had been stored."""
    found, damaged = [], 0
    for body in bodies:
        try:
            found.append(model.model_validate_json(body))
        except ValueError:  # pydantic's ValidationError: not JSON, or not this model
            damaged += 1
    if damaged:
        log.warning("feedback store: passed over %d unreadable %s", damaged, what)
        if count is not None:
            count("result" if model is ScoredRecord else "label", damaged)
    return found


def put_outcome(old: Any, label: StoredLabel, keep_sampled: bool, count: Unreadable | None) -> Put:
    """What storing ``label`` over the row ``old`` (None: no row) comes to."""
    if old is None:
        return "stored"
    readable = readable_rows(StoredLabel, [old], "label row (overwritten)", count)
    if not readable:
        return "stored"
    previous = readable[0]
    if keep_sampled and previous.sampled and not label.sampled:
        return "kept_sampled"
    same = (previous.relevant, previous.sampled, previous.record) == (
        label.relevant,
        label.sampled,
        label.record,
    )
    return "unchanged" if same else "stored"
