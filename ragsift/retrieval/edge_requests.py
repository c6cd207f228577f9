"""How ragsift's requests are written in Qdrant Edge's terms, and its answers read back.

Filters from (field, value) conditions, one per batch for a tenant's queries; a
channel query (dense, sparse, or both fused by RRF) as a ``QueryRequest``; scored
points as ``RawPoint``s keyed by their UUID's integer; a point key as the UUID text
the binding takes. :mod:`ragsift.retrieval.edge` is the index that uses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import qdrant_edge as qe

from ragsift.retrieval.records import DENSE_VECTOR, SPARSE_VECTOR, PayloadValue
from ragsift.retrieval.search_plan import RRF_K, ChannelQuery, PointKey, RawPoint

__all__ = [
    "Conditions",
    "edge_filter",
    "edge_sparse",
    "raw_points",
    "shared_filter",
    "to_request",
    "uuid_text",
]

Conditions: TypeAlias = tuple[tuple[str, PayloadValue], ...]


def _match(value: PayloadValue) -> qe.MatchValue | qe.MatchAny:
    if isinstance(value, str | int | bool):
        return qe.MatchValue(value)
    strings = [item for item in value if isinstance(item, str)]
    if strings:
        return qe.MatchAny(strings)
    return qe.MatchAny([item for item in value if isinstance(item, int)])


def edge_filter(conditions: Sequence[tuple[str, PayloadValue]]) -> qe.Filter:
    return qe.Filter(
        must=[qe.FieldCondition(key=key, match=_match(value)) for key, value in conditions]
    )


def shared_filter(cache: dict[Conditions, qe.Filter], conditions: Conditions) -> qe.Filter:
    """The filter of ``conditions``, built once per batch (a tenant's queries share one)."""
    try:
        return cache[conditions]
    except KeyError:
        flt = cache[conditions] = edge_filter(conditions)
        return flt
    except TypeError:  # a list-valued condition is not hashable: build it each time
        return edge_filter(conditions)


def edge_sparse(encoding: Any) -> qe.SparseVector:
    return qe.SparseVector(list(encoding.indices), list(encoding.values))


def to_request(query: ChannelQuery, flt: qe.Filter) -> qe.QueryRequest:
    if query.kind == "dense":
        assert query.dense is not None  # plan_search sets it for dense channels
        return qe.QueryRequest(
            limit=query.limit,
            query=qe.Query.Nearest(query.dense, using=DENSE_VECTOR),
            filter=flt,
            with_payload=query.with_payload,
        )
    if query.kind == "sparse":
        return qe.QueryRequest(
            limit=query.limit,
            query=qe.Query.Nearest(edge_sparse(query.sparse), using=SPARSE_VECTOR),
            filter=flt,
            with_payload=query.with_payload,
        )
    prefetches = []
    if query.dense is not None:
        prefetches.append(
            qe.Prefetch(
                limit=query.prefetch_limit,
                query=qe.Query.Nearest(query.dense, using=DENSE_VECTOR),
                filter=flt,
            )
        )
    if query.sparse is not None:
        prefetches.append(
            qe.Prefetch(
                limit=query.prefetch_limit,
                query=qe.Query.Nearest(edge_sparse(query.sparse), using=SPARSE_VECTOR),
                filter=flt,
            )
        )
    return qe.QueryRequest(
        limit=query.limit,
        prefetches=prefetches,
        # The stub types `query` as Fusion; Fusion.Rrf is the variant the engine expects.
        query=qe.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]
        filter=flt,
        with_payload=query.with_payload,
    )


def raw_points(points: Sequence[qe.ScoredPoint], with_payload: bool) -> list[RawPoint]:
    # Point ids are UUIDs (point_id); their 128-bit integers hash and compare in C
    # where UUID objects call Python methods, and are not tracked by the collector.
    if with_payload:
        return [RawPoint(p.id.int, p.score, p.payload) for p in points]  # type: ignore[union-attr]
    # A channel query without payload: reading the absent payload still costs a call per point.
    return [RawPoint(p.id.int, p.score) for p in points]  # type: ignore[union-attr]


def uuid_text(key: PointKey) -> str:
    """A point key as the binding accepts a UUID: 32 hex digits (a third of ``uuid.UUID(int=)``)."""
    return f"{int(key):032x}"
