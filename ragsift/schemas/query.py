"""QueryEvent: a question to retrieve context for (topic ``ragsift.queries.v1``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from ragsift.schemas.base import (
    MAX_K,
    MAX_QUERY_CHARS,
    CollectionName,
    CountOrNone,
    EventId,
    EventModel,
    Number,
    TenantId,
    Timestamp,
    Vector,
    is_collection_name,
    utcnow,
)
from ragsift.schemas.trace import TraceParent

__all__ = ["MAX_COLLECTIONS", "MAX_ENTITY_CHARS", "QueryEvent", "SearchMode", "Selection"]

#: E1 query entities are names and terms, not passages.
MAX_ENTITY_CHARS = 200
Entity = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ENTITY_CHARS)]

#: D3: collections one query may search besides ``collection``. Each is one more
#: search in the batch; eight covers a handful of document sets without letting
#: one query fan out widely.
MAX_COLLECTIONS = 8

SearchMode = Literal["hybrid", "dense", "keyword"]
#: threshold: A1/A2 filter with min-results relaxation; adaptive: E1 adaptive k;
#: top_k: E4 fixed top-k.
Selection = Literal["threshold", "adaptive", "top_k"]


class QueryEvent(EventModel):
    """One retrieval request. Optional fields fall back to the worker's settings."""

    UNREPEATED_KEYS: ClassVar[tuple[str, ...]] = ("tenant_id",)

    query_id: EventId = Field(description="Caller-chosen id; results and evidence derive theirs.")
    tenant_id: TenantId = Field(description="Only this tenant's documents are ever searched.")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The question.")
    collection: CollectionName = Field(
        default="default",
        description=(
            "Collection to search, and the label of the result; with ``collections``"
            " and unset, the first of them in code-point order (not the first listed)."
        ),
    )
    collections: list[CollectionName] = Field(
        default_factory=list,
        max_length=MAX_COLLECTIONS,
        json_schema_extra={"uniqueItems": True},
        description=(
            "D3: further collections searched with ``collection``, hits merged under one"
            " confidence; their order does not matter."
        ),
    )
    k: CountOrNone = Field(
        default=None, ge=1, le=MAX_K, description="Hits to fetch (max_k when adaptive)."
    )
    mode: SearchMode = Field(
        default="hybrid", description="hybrid (BM25 + dense, RRF), dense, keyword."
    )
    selection: Selection | None = Field(
        default=None,
        description=(
            "threshold (A1/A2), adaptive (E1) or top_k (E4); unset: adaptive when task_type"
            " is set, else threshold. RAGSIFT_GUARDRAILS_STRICT_MODE=false (D8 rollback)"
            " makes every query's top_k."
        ),
    )
    task_type: str | None = Field(
        default=None,
        max_length=64,
        description=(
            "Per-task adaptive strategy (E2), e.g. debugging; implies selection=adaptive"
            " when selection is unset, and is refused with threshold or top_k."
        ),
    )
    similarity_threshold: Number | None = Field(
        default=None, ge=0.0, le=1.0, description="Per-query override of the hit filter (A1)."
    )
    entities: list[Entity] = Field(
        default_factory=list, max_length=64, description="Query entities for coverage (E1)."
    )
    vector: Vector | None = Field(default=None, description="Precomputed query embedding.")
    embedder_id: str | None = Field(
        default=None, max_length=200, description="Embedder that produced ``vector``."
    )
    want_report: bool = Field(
        default=False, strict=True, description="Ask report workers for a report."
    )
    traceparent: TraceParent = Field(
        default=None,
        max_length=128,
        description="W3C trace context carried to outputs; an unparsable one is ignored.",
    )
    created_at: Timestamp = Field(default_factory=utcnow)

    @model_validator(mode="before")
    @classmethod
    def _collection_defaults_to_first(cls, data: Any) -> Any:
        # Without an explicit ``collection``, a multi-collection query is labelled by
        # one of its collections (results, decisions and metrics carry one label), and
        # scored with that one's calibration: the first in code-point order, so that
        # listing the same collections in another order is the same query (ADR 050).
        if isinstance(data, dict) and "collection" not in data:
            many = data.get("collections")
            # Only from names: a bad one is refused where it is, not as the label too.
            if isinstance(many, list) and many and all(is_collection_name(c) for c in many):
                return {**data, "collection": min(many)}
        return data

    @property
    def searched(self) -> list[str]:
        """The collections this query searches: ``collection`` first, then the others of
        ``collections`` in code-point order (the order they were listed in means nothing:
        ADR 050)."""
        return [self.collection, *sorted(c for c in self.collections if c != self.collection)]

    @model_validator(mode="after")
    def _collections_and_task_agree(self) -> QueryEvent:
        if len(set(self.collections)) != len(self.collections):
            raise ValueError("collections must not repeat a collection")
        if self.task_type is not None and self.selection not in (None, "adaptive"):
            raise ValueError(
                f"task_type applies to adaptive selection only, got selection={self.selection!r}"
            )
        return self

    @model_validator(mode="after")
    def _vector_names_its_embedder(self) -> QueryEvent:
        if self.vector is not None and not self.embedder_id:
            raise ValueError("embedder_id is required when vector is given")
        return self

    @field_validator("query")
    @classmethod
    def _query_has_text(cls, query: str) -> str:
        # On the field, so that the error names it and shows the query, not the event.
        if not query.strip():
            raise ValueError("must contain non-whitespace text")
        return query
