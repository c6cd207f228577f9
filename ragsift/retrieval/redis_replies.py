"""Which Redis errors say Redis is down for now, and which are a refusal it repeats for good.

redis-py raises :class:`~redis.exceptions.ResponseError` for every error reply. Most
replies are deterministic for the key or the command: ``WRONGTYPE`` (a key another
program, or an older ragsift, wrote with another type), ``ERR value is not an
integer``, a script's error. Asked again, Redis answers the same: retried as an
outage, one such key stalled its partition for every tenant on it. Some replies are
conditions that pass: a replica promoted after a failover (``READONLY``), memory that
is full for now (``OOM``), a dataset still loading, a cluster resharding or down, a
script running too long (``BUSY``), a disk that cannot persist (``MISCONF``). Those,
and every error that is not a reply (a connection lost, a timeout), stay outages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from redis.exceptions import (
    AskError,
    ClusterDownError,
    DataError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)

from ragsift.errors import RagsiftError

if TYPE_CHECKING:
    from ragsift.observability.metrics import Metrics

__all__ = [
    "TRANSIENT_REPLY_CODES",
    "RedisRefusedError",
    "Refused",
    "refusal_counter",
    "refusal_text",
    "refused",
    "reply_code",
]

#: The reply classes redis-py maps a passing condition to. ``NOPERM`` is an ACL that
#: refuses a command to this user: the same for every event, fixed by the operator,
#: so it is waited out as an outage rather than dead-lettering every event in turn.
#: ``ASK``/``MOVED`` (a slot moving) and ``NOSCRIPT`` (a script cache flushed) pass
#: at the next try. ``LOADING`` and ``max number of clients`` are redis-py
#: ``ConnectionError``\ s, outages already.
_TRANSIENT_REPLIES: Final = (
    ReadOnlyError,
    OutOfMemoryError,
    TryAgainError,
    ClusterDownError,  # MasterDownError too
    AskError,  # MovedError too
    NoScriptError,
    NoPermissionError,
)

#: Reply codes of passing conditions, for the replies redis-py leaves as a plain
#: ``ResponseError`` (``BUSY``, ``MISCONF``, ``NOREPLICAS``, ``UNBLOCKED`` by a failover)
#: and for the mapped ones again, whatever class a script or a pipeline gives them.
TRANSIENT_REPLY_CODES: Final = frozenset(
    {
        "ASK",
        "BUSY",
        "CLUSTERDOWN",
        "LOADING",
        "MASTERDOWN",
        "MISCONF",
        "MOVED",
        "NOAUTH",
        "NOPERM",
        "NOREPLICAS",
        "NOSCRIPT",
        "OOM",
        "READONLY",
        "TRYAGAIN",
        "UNBLOCKED",
        "WRONGPASS",
    }
)

# redis-py prefixes a pipeline's error with the command and its arguments (which hold
# a tenant's data): "Command # 2 (SADD key member) of pipeline caused error: WRONGTYPE …".
_PIPELINE_PREFIX: Final = re.compile(r"^Command # \d+ \(.*\) of pipeline caused error: ", re.S)
_CODE: Final = re.compile(r"[A-Z]{2,20}")

#: Called once per refusal with the kind of key Redis refused.
Refused = Callable[[str], None]


def reply_code(exc: ResponseError) -> str:
    """The reply's code (``WRONGTYPE``, ``ERR``...), ``ERR`` when it starts with none
    (a script that did not compile, an error a script raised itself)."""
    text = _PIPELINE_PREFIX.sub("", str(exc.args[0]) if exc.args else "", count=1)
    first = text.split(" ", 1)[0]
    return first if _CODE.fullmatch(first) else "ERR"


def refusal_text(source: str, what: str, exc: Exception) -> tuple[str, str]:
    """The code of a refusal ``exc`` (the reply's, or the error class's name for one
    refused before it was sent) and the message that names only ``what`` kind of key
    ``source`` asked about and that code: a script's error, or redis-py's quote of a
    pipeline, may carry a tenant's data."""
    code = reply_code(exc) if isinstance(exc, ResponseError) else type(exc).__name__
    return code, (
        f"{source}: Redis refuses a command on the {what} ({code}; a key of the wrong"
        " type was written by another program or release): no retry fixes it"
    )


def refused(exc: BaseException) -> bool:
    """True when ``exc`` is Redis refusing a key or command for good: no retry fixes it.

    A ``DataError`` is redis-py refusing a value before it is sent (a type it cannot
    encode): a bug, the same at every try. A :class:`RedisRefusedError` is a store's
    word for such a refusal (the calibration store's is an ``OSError`` too, which
    would otherwise read as a network failure).
    """
    if isinstance(exc, (DataError, RedisRefusedError)):
        return True
    if not isinstance(exc, ResponseError) or isinstance(exc, _TRANSIENT_REPLIES):
        return False
    return reply_code(exc) not in TRANSIENT_REPLY_CODES


class RedisRefusedError(RagsiftError):
    """Redis refused a command on one key for good (not an outage, never waited out).

    The message names the kind of key and the reply's code, never the key's tenant
    data or the command's arguments.

    Args:
        store: which ragsift store asked (``feedback``, ``cache``).
        key_kind: the kind of key refused (``labels``, ``owners``...).
        code: the reply's code (``WRONGTYPE``, ``ERR``...).
    """

    stage = "redis"

    def __init__(
        self,
        message: str,
        *,
        store: str,
        key_kind: str,
        code: str,
        query_id: str | None = None,
    ):
        super().__init__(message, query_id=query_id)
        self.store = store
        self.key_kind = key_kind
        self.code = code


def refusal_counter(metrics: Metrics, store: str) -> Refused:
    """What counts a store's refusals in ``ragsift_redis_refused_total{store, key}``."""
    return lambda key_kind: metrics.redis_refused.labels(store, key_kind).inc()
