"""A batch that keeps failing as a whole: find the one event that makes it fail, for both runtimes.

The router keeps what one event does with that event
(:mod:`~ragsift.streams.routing`), but a batch can still fail as a whole: a bug in
a handler's batch step (its ``settle``), an event that crashes the handler outside
the per-event guard, a flush that raises. Both runtimes run such a batch again,
with a backoff; an event that makes it fail every time stopped its partition for
good. So, after :class:`PoisonGuard` has seen ``after_failures`` *unexpected*
failures in a row, the runtime hands the batch to :func:`isolate`, which runs its
events one at a time: an event that fails alone with an unexpected error is
dead-lettered (stage ``poison``), the others are processed as usual, and the
batch is done.

A failure that says a dependency is down (:func:`is_transient`: a store that does
not answer, the broker, a timeout, outputs the broker did not take; not a key Redis
refuses for good, :mod:`~ragsift.retrieval.redis_replies`) is no
event's fault: it never counts towards isolation, and during an isolation it
fails the batch again, which keeps being retried for as long as it lasts. When
every event of a batch of more than one fails alone, the fault is not one
event's either (a handler's batch step that fails whatever it is given): nothing
is dead-lettered and the batch keeps being retried.

Running events again is harmless: output ids are deterministic (ADR 004), and
whole batches already run again after a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from aiokafka.errors import KafkaError
from redis.exceptions import RedisError

from ragsift.errors import RagsiftError, ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.redis_replies import refused
from ragsift.streams.routing import BatchRouter, Received, agent_name

__all__ = [
    "DEFAULT_POISON_AFTER_FAILURES",
    "PoisonEventError",
    "PoisonGuard",
    "TransientError",
    "is_transient",
    "isolate",
    "isolate_batch",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Unexpected failures of a batch in a row before its events run one at a time
#: (RAGSIFT_WORKER_POISON_AFTER_FAILURES).
DEFAULT_POISON_AFTER_FAILURES = 3

#: What a dependency that does not answer raises: a store (Redis, a service behind
#: :class:`ServiceUnavailableError`), the broker (aiokafka's errors, its producer's
#: ``KafkaTimeoutError`` among them), the network (``OSError``: ``ConnectionError``),
#: and a wait that ran out (``TimeoutError``: a dead letter's or an output's delivery).
#: Not a Redis error that Redis repeats for good (:func:`~ragsift.retrieval.redis_replies.refused`:
#: a key of the wrong type, a script's error): no retry fixes those.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ServiceUnavailableError,
    KafkaError,
    RedisError,
    OSError,
    TimeoutError,
)


class TransientError(RagsiftError):
    """A batch failed because a dependency did not answer (outputs the broker did not take)."""

    stage = "service"


class PoisonEventError(RagsiftError):
    """An event that made its batch fail as a whole, and fails alone too."""

    stage = "poison"


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) says a dependency is down."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (*TRANSIENT_ERRORS, TransientError)) and not refused(current):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


class PoisonGuard:
    """Counts one batch loop's unexpected failures in a row; says when to isolate.

    Args:
        after_failures: unexpected failures in a row before the next run isolates.
    """

    def __init__(self, after_failures: int = DEFAULT_POISON_AFTER_FAILURES):
        if after_failures < 1:
            raise ValueError(f"after_failures must be >= 1, got {after_failures}")
        self.after_failures = after_failures
        self.streak = 0

    @property
    def isolating(self) -> bool:
        """True when the next run of the batch should go event by event."""
        return self.streak >= self.after_failures

    def failed(self, exc: BaseException) -> None:
        """A run of the batch raised ``exc``: counted unless a dependency is down."""
        if not is_transient(exc):
            self.streak += 1

    def succeeded(self) -> None:
        """The batch is done: the next one starts a new count."""
        self.streak = 0


async def isolate(
    items: Sequence[T],
    run_one: Callable[[T], Awaitable[None]],
    dead_letter: Callable[[T, Exception], Awaitable[None]],
    *,
    what: str,
    metrics: Metrics,
) -> None:
    """Run each of ``items`` alone; dead-letter those that fail alone (module docstring).

    Raises the first transient failure at once (the batch runs again later), and
    :class:`RagsiftError` when every one of several items fails alone.
    """
    failures: list[tuple[T, Exception]] = []
    for item in items:
        try:
            await run_one(item)
        except Exception as exc:
            if is_transient(exc):
                raise
            failures.append((item, exc))
    if len(items) > 1 and len(failures) == len(items):
        metrics.poison_isolations.labels("held").inc()
        first = failures[0][1]
        raise RagsiftError(
            f"{what}: every one of {len(items)} events fails alone, so the fault is not"
            f" one event's ({type(first).__name__}: {first}); the batch is kept"
        ) from first
    metrics.poison_isolations.labels("dead_lettered" if failures else "none").inc()
    log.warning(
        "%s: a batch of %d kept failing; run event by event, %d dead-lettered: %.500s",
        what,
        len(items),
        len(failures),
        "; ".join(f"{type(exc).__name__}: {exc}" for _, exc in failures) or "none failed alone",
    )
    for item, error in failures:
        reason = f"{type(error).__name__}: {error}"
        await dead_letter(
            item,
            PoisonEventError(
                f"{what}: made its batch fail again and again, and fails alone: {reason}",
                query_id=error.query_id if isinstance(error, RagsiftError) else None,
            ),
        )


async def isolate_batch(
    router: BatchRouter, batch: Sequence[Received], flush: Callable[[], Awaitable[None]]
) -> None:
    """:func:`isolate` for one router: each message routed alone, then ``flush``ed (which
    raises when the broker did not take an output); one that fails is dead-lettered."""

    async def run_one(message: Received) -> None:
        await router.process([message])
        await flush()

    async def dead_letter(message: Received, exc: Exception) -> None:
        await router.dead_letter(message, exc, router.decoded(message))  # names its query

    await isolate(
        batch, run_one, dead_letter, what=agent_name(router.handler), metrics=router.metrics
    )
