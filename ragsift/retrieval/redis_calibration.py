"""Scoped calibrations in Redis: one store every replica reads (a shared :class:`CalibrationStore`).

Layout under the key prefix: ``<prefix>:calibration:artifacts`` is a hash from a
scope (``collection`` or ``collection\\x1ftenant``) to the artifact's JSON, and
``<prefix>:calibration:generation`` a counter moved in the same script as every
put or delete, so a registry polling :meth:`generation` sees a change exactly
when an artifact changed.

Redis errors surface as ``OSError``, as every calibration store's failures do (the
registry keeps serving what it has cached and tries again next period), sorted as
:mod:`~ragsift.retrieval.redis_replies` sorts them: Redis down (a connection lost, a
timeout, a reply that passes: ``READONLY`` after a failover...) is a
:class:`CalibrationStoreDownError`, a :class:`~ragsift.errors.ServiceUnavailableError`
the calibration worker waits out holding its batch; a refusal no retry fixes (a key
of the wrong type, a script error) is a :class:`CalibrationStoreRefusedError`, a
:class:`~ragsift.retrieval.redis_replies.RedisRefusedError` it dead-letters. Until
2026-12-03 both were a bare ``OSError``, and an outage while a re-fit was put
dead-lettered its label event.

The counter never hands out a value again: each write sets it to the larger of
its value plus one and Redis's clock in microseconds. Counting up from 0, a
counter that was lost (a restart without the append-only file, a flush) or
rolled back (a failover to a replica that lagged) handed out the values a
registry had seen already, and one that polled after the next write saw its
generation unchanged and served the artifact it had cached, for good.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final

import redis
from redis.exceptions import RedisError

from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.mix_state import ScopeState, fresh, parse_state
from ragsift.confidence.registry import CalibrationScope
from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval.redis_replies import RedisRefusedError, Refused, refusal_text, refused
from ragsift.settings import RedisSettings

__all__ = [
    "CalibrationStoreDownError",
    "CalibrationStoreRefusedError",
    "MixStateRefusedError",
    "RedisCalibrationStore",
    "RedisMixState",
    "sync_client",
]

log = logging.getLogger(__name__)

# Calibrations and labels are read rarely and off the query path, so a slower
# Redis than the cache tolerates (its socket timeout is 0.25 s) is fine here.
_MIN_TIMEOUT_S: Final = 1.0

# Separates collection and tenant in a hash field; names never contain it
# (a unit separator is a control character, refused in tenant ids and collections).
_SEP: Final = "\x1f"


# KEYS: artifacts hash, generation. ARGV: "put" or "delete", field, artifact JSON (put).
# Returns the number of fields removed (delete). The counter is read first, so a key
# of the wrong type fails the script before it wrote anything.
_WRITE_SCRIPT: Final = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local held = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local removed = 0
if ARGV[1] == 'put' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
else
  removed = redis.call('HDEL', KEYS[1], ARGV[2])
end
redis.call('SET', KEYS[2], string.format('%.0f', math.max(held + 1, now)))
return removed
"""


class CalibrationStoreDownError(ServiceUnavailableError, OSError):
    """Redis did not answer the calibration store (down, restarting, failing over): it
    may answer later. An ``OSError`` too, as the registry reads a store's failures."""


class MixStateRefusedError(RedisRefusedError, OSError):
    """Redis refuses the mix states hash for good: no retry fixes it. An ``OSError``
    too, as the callers read a mix store's failures."""


class CalibrationStoreRefusedError(RedisRefusedError, OSError):
    """Redis refuses a calibration store's command for good (a key of the wrong type, a
    script error): no retry fixes it. An ``OSError`` too, as the registry reads a store's
    failures."""


#: The kinds of key a refusal names, and their words.
_KINDS: Final = {
    "artifacts": "calibrations hash",
    "generation": "generation counter",
    "write": "calibrations hash or its generation counter (a put or delete writes both)",
}


def _field(scope: CalibrationScope) -> str:
    return scope.collection if scope.tenant is None else f"{scope.collection}{_SEP}{scope.tenant}"


def _scope(field: str) -> CalibrationScope:
    collection, _, tenant = field.partition(_SEP)
    return CalibrationScope(collection, tenant or None)


def sync_client(settings: RedisSettings) -> redis.Redis:
    """A blocking Redis client for the calibration and feedback stores."""
    password = settings.password.get_secret_value() if settings.password else None
    timeout = max(settings.socket_timeout_s, _MIN_TIMEOUT_S)
    return redis.Redis.from_url(
        settings.url, password=password, socket_timeout=timeout, socket_connect_timeout=timeout
    )


class RedisCalibrationStore:
    """:class:`~ragsift.confidence.registry.CalibrationStore` on Redis (sync client)."""

    def __init__(
        self,
        settings: RedisSettings,
        *,
        client: redis.Redis | None = None,
        on_refused: Refused | None = None,
    ):
        #: Told the kind of key of each refusal (``ragsift_redis_refused_total{key}``).
        self.on_refused = on_refused
        self.client = client or sync_client(settings)
        self.artifacts_key = f"{settings.key_prefix}:calibration:artifacts"
        self.generation_key = f"{settings.key_prefix}:calibration:generation"
        self._write = self.client.register_script(_WRITE_SCRIPT)

    def _call(self, kind: str, op: Any, *args: Any) -> Any:
        """``op(*args)``; Redis down is a :class:`CalibrationStoreDownError` (waited out),
        a command on the ``kind`` of key Redis refuses for good a
        :class:`CalibrationStoreRefusedError` (see the module docstring)."""
        try:
            return op(*args)
        except RedisError as exc:
            if refused(exc):
                code, text = refusal_text("redis calibration store", _KINDS[kind], exc)
                if self.on_refused is not None:
                    self.on_refused(kind)
                raise CalibrationStoreRefusedError(
                    text,
                    store="calibration",
                    key_kind=kind,
                    code=code,
                ) from exc
            raise CalibrationStoreDownError(
                f"redis calibration store: {type(exc).__name__}: {exc}", service="redis"
            ) from exc

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        """The artifact for exactly ``scope``, or None."""
        raw = self._call("artifacts", self.client.hget, self.artifacts_key, _field(scope))
        return None if raw is None else CalibrationArtifact.from_json(raw)

    def put(self, scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        """Store ``artifact`` for ``scope`` and move the generation on, atomically."""
        keys = [self.artifacts_key, self.generation_key]
        self._call(
            "write", lambda: self._write(keys=keys, args=["put", _field(scope), artifact.to_json()])
        )

    def delete(self, scope: CalibrationScope) -> bool:
        """Remove the artifact for ``scope`` (and move the generation on); True if there was one."""
        keys = [self.artifacts_key, self.generation_key]
        return bool(
            self._call("write", lambda: self._write(keys=keys, args=["delete", _field(scope)]))
        )

    def scopes(self) -> list[CalibrationScope]:
        """Every scope with an artifact, sorted."""
        fields = self._call("artifacts", self.client.hkeys, self.artifacts_key)
        found = [_scope(f.decode() if isinstance(f, bytes) else str(f)) for f in fields]
        return sorted(found, key=lambda s: (s.collection, s.tenant or ""))

    def generation(self) -> str:
        """The put/delete counter ("0" before the first write; never the same twice)."""
        raw = self._call("generation", self.client.get, self.generation_key)
        return "0" if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()


class RedisMixState:
    """The mix monitor's saved histograms in a hash every replica shares
    (:class:`~ragsift.confidence.mix_state.MixStateStore`).

    ``<prefix>:calibration:mix`` maps ``tenant<US>collection`` to one state's JSON:
    each replica writes the scopes it has seen, the last write of a scope wins.
    Redis down is an ``OSError`` (the process starts its scopes cold, or keeps its
    histograms for the next save). A hash Redis refuses for good (a key of another
    type, written by another program) loads as missing and a save of it raises a
    :class:`MixStateRefusedError` (an ``OSError`` too); both are counted with the kind
    ``states`` (``ragsift_redis_refused_total{store="mix"}``), and the key is left as
    it is: what it holds is not ragsift's to delete. Until 2026-12-03 a refusal was
    an ``OSError`` like an outage, counted nowhere, and every start was cold.
    """

    def __init__(
        self,
        settings: RedisSettings,
        *,
        client: redis.Redis | None = None,
        on_refused: Refused | None = None,
    ):
        #: Told the kind of key of each refusal (``ragsift_redis_refused_total{key}``).
        self.on_refused = on_refused
        self.client = client or sync_client(settings)
        self.key = f"{settings.key_prefix}:calibration:mix"

    def _sorted(self, exc: RedisError) -> OSError:
        """``exc`` as the error to raise: a counted :class:`MixStateRefusedError` when
        Redis refuses the hash for good, a plain ``OSError`` when it is down."""
        if not refused(exc):
            return OSError(f"redis mix state: {type(exc).__name__}: {exc}")
        code, text = refusal_text("redis mix state", "mix states hash", exc)
        if self.on_refused is not None:
            self.on_refused("states")
        return MixStateRefusedError(
            text,
            store="mix",
            key_kind="states",
            code=code,
        )

    def load(self) -> list[ScopeState]:
        """The fresh states (a malformed or stale field is skipped; a hash Redis refuses
        is read as missing, counted and logged)."""
        try:
            raw = self.client.hgetall(self.key)
        except RedisError as exc:
            error = self._sorted(exc)
            if isinstance(error, MixStateRefusedError):
                log.warning("%s: the scopes start cold", error.message)
                return []
            raise error from exc
        states: list[ScopeState] = []
        gone: list[bytes | str] = []
        for name, value in raw.items():
            try:
                state = parse_state(json.loads(value))
            except (ValueError, RecursionError):  # RecursionError: nesting past the parser
                state = None
            live, _ = fresh([state])
            states.extend(live)
            if not live:
                gone.append(name)
        # Stale and malformed fields are dropped, so the hash holds live scopes only.
        if gone:
            try:
                self.client.hdel(self.key, *gone)
            except RedisError as exc:
                raise self._sorted(exc) from exc
        return states

    def save(self, states: list[ScopeState]) -> None:
        """Write ``states``, one field per scope."""
        if not states:
            return
        fields = {
            f"{s.tenant}{_SEP}{s.collection}": s.model_dump_json(exclude_none=True) for s in states
        }
        try:
            self.client.hset(self.key, mapping=fields)  # type: ignore[arg-type]
        except RedisError as exc:
            raise self._sorted(exc) from exc
