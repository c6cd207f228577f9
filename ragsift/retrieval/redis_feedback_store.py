"""The streaming workers' feedback store: scored results and labels in Redis, shared by replicas.

Results are keys with a TTL (the join window), each scope's labels a hash keyed by
query id, and each scope's last re-fit a field of one hash (``<prefix>:feedback:*``).
The embedded runtime's SQLite store and the protocol both implement are in
:mod:`ragsift.retrieval.feedback_store`.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final

import redis
from redis.exceptions import RedisError

from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval.feedback_rows import (
    Put,
    ScoredRecord,
    StoredLabel,
    Unreadable,
    put_outcome,
    readable_rows,
    scope_key,
)
from ragsift.retrieval.redis_calibration import sync_client
from ragsift.retrieval.redis_replies import RedisRefusedError, Refused, refusal_text, refused
from ragsift.settings import RedisSettings

__all__ = ["RedisFeedbackStore"]

log = logging.getLogger("ragsift.retrieval.feedback_store")

# KEYS: a scope's labels. ARGV: query id, the row the label was decided on ('': none; a
# stored row is never empty), the new row. Writes only if the row is still that one: 1.
_PUT_IF_UNCHANGED: Final = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""
#: Tries of a Redis put whose row another writer keeps replacing. Two workers meet on a
#: query only in a rebalance's overlap, so a second try settles it; then a service error
#: (the handler holds its batch and tries again) rather than a loop without end.
_PUT_TRIES: Final = 8

#: The kinds of key a refusal names (``ragsift_redis_refused_total{key}``), and their words.
_KINDS: Final = {
    "results": "scored results (a query's result string or its owners set)",
    "labels": "scope's labels hash",
    "refits": "re-fits hash",
}


class RedisFeedbackStore:
    """The streaming workers' store: results as keys with a TTL, labels in a hash per scope."""

    def __init__(
        self,
        settings: RedisSettings,
        *,
        client: redis.Redis | None = None,
        on_unreadable: Unreadable | None = None,
        on_refused: Refused | None = None,
    ):
        self.on_unreadable = on_unreadable
        self.on_refused = on_refused
        self.client = client or sync_client(settings)
        self.prefix = f"{settings.key_prefix}:feedback"
        self._put_if_unchanged = self.client.register_script(_PUT_IF_UNCHANGED)

    def _call(self, kind: str, op: Any, *args: Any) -> Any:
        """``op(*args)``; Redis down is :class:`ServiceUnavailableError` (the batch is held),
        a key of ``kind`` Redis refuses for good is :class:`RedisRefusedError` (a
        deterministic reply: held, it stalled the partition for good; the poison guard
        dead-letters the event that meets it). Such a key is not overwritten here: it holds
        labels or results, and what wrote it is for an operator to find."""
        try:
            return op(*args)
        except RedisError as exc:
            if refused(exc):
                code, text = refusal_text("redis feedback store", _KINDS[kind], exc)
                if self.on_refused is not None:
                    self.on_refused(kind)
                raise RedisRefusedError(
                    text,
                    store="feedback",
                    key_kind=kind,
                    code=code,
                ) from exc
            raise ServiceUnavailableError(
                f"redis feedback store: {type(exc).__name__}: {exc}", service="redis"
            ) from exc

    def remember(self, records: list[ScoredRecord], ttl_s: int) -> None:
        """Keep each record for ``ttl_s`` seconds (see :class:`FeedbackStore`)."""

        def write() -> None:
            with self.client.pipeline(transaction=False) as pipe:
                for r in records:
                    pipe.set(self._scored(r.tenant_id, r.query_id), r.model_dump_json(), ex=ttl_s)
                    owners = f"{self.prefix}:owners:{r.query_id}"
                    pipe.sadd(owners, r.tenant_id)
                    pipe.expire(owners, ttl_s)
                pipe.execute()

        if records:
            self._call("results", write)

    def _scored(self, tenant_id: str, query_id: str) -> str:
        # A tenant id holds no ':' (TENANT_PATTERN), so no two (tenant, query id) meet.
        return f"{self.prefix}:scored:{tenant_id}:{query_id}"

    def _legacy(self, query_id: str) -> ScoredRecord | None:
        raw = self._call("results", lambda: self.client.get(f"{self.prefix}:result:{query_id}"))
        return (
            next(iter(readable_rows(ScoredRecord, [raw], "result", self.on_unreadable)), None)
            if raw
            else None
        )

    def recall(self, query_id: str, tenant_id: str) -> ScoredRecord | None:
        """The tenant's record of ``query_id`` within its window (see :class:`FeedbackStore`)."""
        raw = self._call("results", lambda: self.client.get(self._scored(tenant_id, query_id)))
        if raw is not None:
            return next(
                iter(readable_rows(ScoredRecord, [raw], "result", self.on_unreadable)), None
            )
        legacy = self._legacy(query_id)
        return legacy if legacy is not None and legacy.tenant_id == tenant_id else None

    def owners(self, query_id: str) -> list[str]:
        """The tenants holding ``query_id`` within its window (see :class:`FeedbackStore`)."""
        owners = f"{self.prefix}:owners:{query_id}"
        members = self._call("results", lambda: self.client.smembers(owners))
        held = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

        def present() -> list[int]:  # one round trip for all of them
            with self.client.pipeline(transaction=False) as pipe:
                for tenant in held:
                    pipe.exists(self._scored(tenant, query_id))
                return list(pipe.execute())

        # The set outlives a record that expired first: keep the tenants whose is there.
        found = {
            t
            for t, n in zip(held, self._call("results", present) if held else [], strict=True)
            if n
        }
        legacy = self._legacy(query_id)
        return sorted(found | ({legacy.tenant_id} if legacy is not None else set()))

    def put_label(
        self, scope: CalibrationScope, label: StoredLabel, *, keep_sampled: bool = False
    ) -> Put:
        """Store a label, keyed by query id (see :class:`FeedbackStore`).

        Written only over the row it was decided on, as SQLite's transaction does:
        read, then written, a label of two workers in a rebalance's overlap was decided
        on a row the other had just replaced (a report took a sampled label's place).
        """
        key = f"{self.prefix}:labels:{scope_key(scope)}"
        field, row = label.record.query_id, label.model_dump_json()
        for _ in range(_PUT_TRIES):
            old = self._call("labels", lambda: self.client.hget(key, field))
            put = put_outcome(old, label, keep_sampled, self.on_unreadable)
            if put != "stored" or self._call(
                "labels", self._put_if_unchanged, [key], [field, old or b"", row]
            ):
                return put
        raise ServiceUnavailableError(
            f"redis feedback store: the label of query {field!r} was changed by another"
            f" writer {_PUT_TRIES} times while this one was stored",
            service="redis",
            query_id=field,
        )

    def labels(self, scope: CalibrationScope) -> list[StoredLabel]:
        """The scope's labels, oldest first (see :class:`FeedbackStore`)."""
        key = f"{self.prefix}:labels:{scope_key(scope)}"
        raw = self._call("labels", lambda: self.client.hvals(key))
        found = readable_rows(StoredLabel, raw, "labels", self.on_unreadable)
        return sorted(found, key=lambda s: (s.at, s.record.query_id))

    def last_refit(self, scope: CalibrationScope) -> tuple[str, float] | None:
        """The scope's last re-fit (see :class:`FeedbackStore`)."""
        try:
            raw = self._call("refits", self.client.hget, f"{self.prefix}:refits", scope_key(scope))
        except RedisRefusedError as exc:
            # One hash holds every scope's record: refused, every label of every tenant
            # was dead-lettered. Like a damaged record, it means the next labels re-fit.
            log.warning("feedback store: no re-fit record of %s: %s", scope, exc)
            return None
        if raw is None:
            return None
        try:
            state = json.loads(raw)
            return str(state["digest"]), float(state["at"])
        except (ValueError, RecursionError, KeyError, TypeError) as exc:
            # Written by ragsift; damaged, it only means the next labels re-fit again.
            log.warning("feedback store: unreadable re-fit record of %s: %r", scope, exc)
            if self.on_unreadable is not None:
                self.on_unreadable("refit", 1)
            return None

    def mark_refit(self, scope: CalibrationScope, digest: str, at: float) -> None:
        """Record a re-fit (see :class:`FeedbackStore`)."""
        value = json.dumps({"digest": digest, "at": at})
        try:
            self._call("refits", self.client.hset, f"{self.prefix}:refits", scope_key(scope), value)
        except RedisRefusedError as exc:  # as in last_refit: the scope re-fits again, counted
            log.warning("feedback store: re-fit of %s not recorded: %s", scope, exc)

    def forget(self, scope: CalibrationScope) -> int:
        """Drop the scope's labels and re-fit record, at once (see :class:`FeedbackStore`)."""
        key = f"{self.prefix}:labels:{scope_key(scope)}"

        def drop() -> int:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.hlen(key)
                pipe.delete(key)
                pipe.hdel(f"{self.prefix}:refits", scope_key(scope))
                return int(pipe.execute()[0])

        return int(self._call("labels", drop))

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()
