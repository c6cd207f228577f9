"""Shared pieces of every event contract: the base model, limits, ids.

Limits are part of the contract: an event that breaks one is rejected at the
boundary (the codec) with a message naming the field and the value, and is
dead-lettered by the worker that read it.
"""

from __future__ import annotations

import math
import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    field_validator,
)

__all__ = [
    "COLLECTION_PATTERN",
    "ID_NAMESPACE",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_VECTOR_COMPONENT",
    "MAX_VECTOR_DIM",
    "TENANT_PATTERN",
    "CollectionName",
    "Count",
    "CountOrNone",
    "EventId",
    "EventModel",
    "Flag",
    "Number",
    "Reading",
    "TenantId",
    "Timestamp",
    "Vector",
    "derive_id",
    "derive_query_id",
    "is_collection_name",
    "is_tenant_id",
    "tenant_scoped",
    "utcnow",
]

# Hard limits of the wire contract, and the defaults of the deployment limits
# (RAGSIFT_LIMITS_*), which may tighten them, never loosen them: one figure per
# field, so the CLI, the API, the JSON Schemas and the workers refuse the same input.
MAX_QUERY_CHARS = 2_000  # longer "queries" are pasted documents, not questions
MAX_K = 50  # the largest top-k any seed design uses is 8; 50 leaves room for rerankers
MAX_VECTOR_DIM = 4_096  # the widest common embedding models (e.g. 3,072-d) fit
MAX_TEXT_CHARS = 1_000_000  # one document event; larger files are chunked by the producer
#: Largest magnitude of a vector component. The engines hold vectors as float32:
#: past ~3.4e38 a component becomes inf (Qdrant Edge then fails the whole search
#: batch), and a float32 norm of MAX_VECTOR_DIM components overflows past ~2.9e17.
#: 1e15 keeps a margin below both; real embeddings stay within ±1e3.
MAX_VECTOR_COMPONENT = 1e15
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_TENANT_RE = re.compile(TENANT_PATTERN)
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
#: Collection names map to directories (Qdrant Edge) and server collections alike.
COLLECTION_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_COLLECTION_RE = re.compile(COLLECTION_PATTERN)
_ID_RE = re.compile(ID_PATTERN)

# Namespace for every id ragsift derives (uuid5): stable across processes and releases.
ID_NAMESPACE = uuid.UUID("6f1d5c3e-2a57-4b8e-9a51-5d0c4f6b7e21")


def derive_id(parent_id: str, kind: str) -> str:
    """A deterministic id for the ``kind`` event derived from ``parent_id``.

    Re-processing the same input (at-least-once delivery) yields the same id,
    so downstream consumers drop the duplicate.
    """
    return str(uuid.uuid5(ID_NAMESPACE, f"{kind}:{parent_id}"))


#: Joins a tenant id to an id it qualifies. Tenant ids cannot contain it
#: (TENANT_PATTERN), so ``tenant_scoped`` is injective: no two (tenant, id)
#: pairs give the same string.
TENANT_SEPARATOR = "/"


def tenant_scoped(tenant_id: str, parent_id: str) -> str:
    """``parent_id`` qualified by its tenant: ids tenants choose are only unique per tenant.

    Query ids, document ids and chunk ids are picked by each tenant, so two
    tenants can use the same one; anything derived from such an id must derive
    from this instead.
    """
    if not tenant_id or TENANT_SEPARATOR in tenant_id:
        raise ValueError(
            f"tenant_id must be non-empty and free of {TENANT_SEPARATOR!r}, got {tenant_id!r}"
        )
    return f"{tenant_id}{TENANT_SEPARATOR}{parent_id}"


def derive_query_id(tenant_id: str, query_id: str, kind: str) -> str:
    """The id of the ``kind`` event derived from one tenant's query (ADR 004).

    Deterministic, so a replay yields the same id; tenant-qualified, so two
    tenants' queries that share a query id never share a result, evidence,
    report, decision or review id.
    """
    return derive_id(tenant_scoped(tenant_id, query_id), kind)


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the contracts use."""
    return datetime.now(UTC)


def is_tenant_id(value: str) -> bool:
    """Whether ``value`` is a tenant id (:data:`TENANT_PATTERN`, the whole string: with
    ``re.match`` the pattern's ``$`` let a trailing newline through)."""
    return _TENANT_RE.fullmatch(value) is not None


def _check_tenant(value: str) -> str:
    if not is_tenant_id(value):
        raise ValueError(
            f"tenant_id must match {TENANT_PATTERN} (1-64 chars of letters, digits, '_', '.', '-')"
        )
    return value


def _check_id(value: str) -> str:
    if not _ID_RE.fullmatch(value):
        raise ValueError(
            f"id must match {ID_PATTERN} (1-128 chars of letters, digits, '_', '.', ':', '-')"
        )
    return value


def is_collection_name(value: object) -> bool:
    """Whether ``value`` is a string a collection may be named (:data:`COLLECTION_PATTERN`)."""
    return isinstance(value, str) and _COLLECTION_RE.fullmatch(value) is not None


def _check_collection(value: str) -> str:
    if not is_collection_name(value):
        raise ValueError(
            f"collection must match {COLLECTION_PATTERN} (1-64 ASCII letters, digits, '_', '-')"
        )
    return value


def _check_vector(value: list[float]) -> list[float]:
    if not 1 <= len(value) <= MAX_VECTOR_DIM:
        raise ValueError(f"vector dimension must be in 1..{MAX_VECTOR_DIM}, got {len(value)}")
    # Two C-level passes instead of a Python loop over every component: a NaN or an
    # infinity makes the sum non-finite, and the largest magnitude bounds the norm.
    # Only when one fails, look for the culprit (there always is one) for the message.
    if not (math.isfinite(sum(value)) and max(map(abs, value)) <= MAX_VECTOR_COMPONENT):
        for i, x in enumerate(value):
            if not math.isfinite(x):
                raise ValueError(f"vector must be finite, got {x} at index {i}")
            if abs(x) > MAX_VECTOR_COMPONENT:
                raise ValueError(
                    f"vector components must be within ±{MAX_VECTOR_COMPONENT:g}"
                    f" (a larger one overflows the norm), got {x} at index {i}"
                )
    return value


def _no_bool_or_text(value: Any) -> Any:
    if isinstance(value, bool | str | bytes):
        raise ValueError(f"must be a JSON integer, not {type(value).__name__}")
    return value


def _only_true_or_false(value: Any) -> Any:
    if not isinstance(value, bool) and isinstance(value, str | bytes | int | float):
        raise ValueError(f"must be true or false, not {type(value).__name__}")
    return value


def _date_time_text(value: Any) -> Any:
    if isinstance(value, bool | int | float):
        raise ValueError(f"must be a date-time string (RFC 3339), not {type(value).__name__}")
    return value


TenantId = Annotated[str, AfterValidator(_check_tenant)]
EventId = Annotated[str, AfterValidator(_check_id)]
CollectionName = Annotated[str, AfterValidator(_check_collection)]
#: A JSON number where the contract asks for one. Pydantic's lax mode read ``true`` as
#: 1.0 (a threshold that refuses everything) and ``"0.5"`` as 0.5, which the JSON
#: Schemas refuse: every reader of the contract has to agree on what an event says.
#: ``NaN`` and ``Infinity`` are not JSON numbers either (Python's parser reads them):
#: refused as "a finite number", where a threshold of NaN was told it should be at
#: most 1 and a feedback signal of NaN was kept.
Number = Annotated[float, Strict(), AllowInfNan(False)]
#: A JSON number, not a bool or a string, that may read as infinite or NaN (``1e999``,
#: Python's ``NaN``): a result's signals, raw scores and timings. Results come from a
#: topic, so their readers already take a non-finite one as missing
#: (``reported_signal_matrix``) rather than refuse the result.
Reading = Annotated[float, Strict()]
#: A JSON integer (``5``, or ``5.0`` as JSON Schema's "integer" allows) or null, never a
#: bool or a string: lax mode read ``"k": true`` as k = 1. (The validator wraps the
#: union: on ``int`` inside it, pydantic wrote a field's bounds into the JSON Schema as
#: ``ge``/``le`` instead of ``minimum``/``maximum``.)
CountOrNone = Annotated[int | None, BeforeValidator(_no_bool_or_text)]
#: The same, where the contract asks for an integer that is always given.
Count = Annotated[int, BeforeValidator(_no_bool_or_text)]
#: JSON's ``true`` or ``false``, never ``"true"``, ``"no"``, ``1`` or ``0`` (lax mode read
#: them all as flags, which the JSON Schemas refuse).
Flag = Annotated[bool, BeforeValidator(_only_true_or_false)]
#: An RFC 3339 date-time string, as the JSON Schemas say, never a number: lax mode read
#: ``"created_at": 0`` as 1970 (or 1e12 as the year 33658), which the schemas refuse.
Timestamp = Annotated[datetime, BeforeValidator(_date_time_text)]
#: Components are checked in one pass over the list (finite, within bounds), whose
#: message names the first bad index.
Vector = Annotated[list[Annotated[float, Strict()]], AfterValidator(_check_vector)]


class EventModel(BaseModel):
    """Base of every event: strict about unknown fields, versioned, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    #: Bump on a breaking change (which also gets a new topic, ``*.v2``).
    SCHEMA_VERSION: ClassVar[str] = "1"
    #: Top-level names a payload may give only once. JSON parsers disagree on a
    #: repeated name (Python's and pydantic's keep the last, many keep the first), so a
    #: gateway that checked ``"tenant_id":"acme","tenant_id":"evil"`` as acme's would
    #: see ragsift serve evil. Checked by :class:`~ragsift.streams.codec.EventCodec`.
    UNREPEATED_KEYS: ClassVar[tuple[str, ...]] = ()

    # The pattern is for the published schemas (ECMA 262 lookahead: "1" or "1.<anything>",
    # not "1\n", which a "$" lets through in Python's re); the validator below is what
    # ragsift applies. A producer checking against the schema passed "2", refused here.
    schema_version: str = Field(
        default="1",
        description="Contract version of this event: 1 or 1.x.",
        json_schema_extra={"pattern": "^1(?![^.])"},
    )

    @field_validator("schema_version")
    @classmethod
    def _same_major_version(cls, value: str) -> str:
        """Refuse events written for another major version of the contract."""
        if value.split(".")[0] != cls.SCHEMA_VERSION:
            raise ValueError(
                f"schema_version must be {cls.SCHEMA_VERSION}.x for {cls.__name__}, got {value!r}"
            )
        return value
