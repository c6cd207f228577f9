"""The audit sink worker: writes each evidence event once, waiting out a failing disk.

A write that fails (disk full, EIO...) is never turned into a dead letter or a
drop: the handler keeps the batch, backs off (bounded) and tries again until
the disk takes it, so the runtime consumes nothing more meanwhile — that is
the back-pressure. The sink itself (chain, rotation, dedup) is
:class:`ragsift.audit.AuditFileSink`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel

from ragsift.audit import AuditFileSink, AuditMetrics
from ragsift.observability.metrics import Metrics
from ragsift.schemas import EvidenceEvent
from ragsift.settings import AuditSettings
from ragsift.workers.base import Emit, Outcome

__all__ = ["AuditFileSink", "AuditSinkHandler", "Backoff", "build_audit_handler"]

log = logging.getLogger(__name__)

DEFAULT_RETRY_INITIAL_S = 0.1  # a transient EIO clears fast; a full disk needs a person
DEFAULT_RETRY_MAX_S = 5.0  # how stale recovery may be once space is freed


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before retry ``n`` (1-based): ``initial_s`` doubling, capped at ``max_s``."""

    initial_s: float = DEFAULT_RETRY_INITIAL_S
    max_s: float = DEFAULT_RETRY_MAX_S

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError(
                f"backoff needs 0 < initial_s <= max_s, got {self.initial_s} and {self.max_s}"
            )

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th failure in a row."""
        return min(self.max_s, self.initial_s * 2 ** min(attempt - 1, 32))


class AuditSinkHandler:
    """Handler for the ``audit`` topic: writes each evidence event once, emits nothing.

    Args:
        sink: the files the rows go to.
        metrics: where writes, duplicates, failures and the stall are counted.
        backoff: how long to wait between attempts when the disk fails.
        sleep: how to wait (tests pass a recorder instead of sleeping).
    """

    name = "audit"
    source = "audit"
    #: No per-event deadline: the handler waits for its disk on purpose (it is the
    #: back-pressure), and a deadline would turn the wait into dead letters —
    #: the very gap in the trail this handler exists to prevent.
    deadline_s: ClassVar[float | None] = None

    def __init__(
        self,
        sink: AuditFileSink,
        *,
        metrics: AuditMetrics | None = None,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.sink = sink
        self.metrics = metrics or AuditMetrics()
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        #: monotonic time the current stall began; ``None`` while writes succeed
        self.stalled_since: float | None = None
        self._conflicts = sink.conflicts  # counted so far into the metric
        if sink.repaired is not None:
            self.metrics.torn_tails.inc()

    @property
    def model(self) -> type[BaseModel]:
        """Evidence events in."""
        return EvidenceEvent

    @property
    def stalled(self) -> bool:
        """True while the sink is waiting for its disk (readiness can report it)."""
        return self.stalled_since is not None

    async def handle_batch(self, events: Sequence[EvidenceEvent]) -> list[Outcome]:
        """Write the batch, retrying until the disk takes it; one empty outcome per event."""
        attempt = 0
        while True:
            try:
                # In a thread: fsync on a sick disk can take seconds, and the event
                # loop must keep heartbeating to the broker meanwhile.
                written = await asyncio.to_thread(self.sink.write, events)
            except OSError as exc:
                attempt += 1
                await self._wait_after(exc, attempt, len(events))
                continue
            break
        if self.stalled_since is not None:
            log.warning(
                "audit sink writing again after %d failed attempts (%.1f s stalled)",
                attempt,
                time.monotonic() - self.stalled_since,
            )
            self.stalled_since = None
            self.metrics.stalled.set(0)
        self.metrics.rows.inc(written)
        self.metrics.duplicates.inc(len(events) - written)
        if self.sink.conflicts > self._conflicts:
            self.metrics.conflicts.inc(self.sink.conflicts - self._conflicts)
            self._conflicts = self.sink.conflicts
        empty: list[Emit] = []
        return [list(empty) for _ in events]

    async def close(self) -> None:
        """Nothing held open between batches."""

    async def _wait_after(self, exc: OSError, attempt: int, batch: int) -> None:
        delay = self.backoff.delay(attempt)
        self.metrics.failed(exc)
        if self.stalled_since is None:
            self.stalled_since = time.monotonic()
            self.metrics.stalled.set(1)
            log.error(
                "audit write failed (%s): holding the batch of %d and retrying; nothing is dropped",
                exc,
                batch,
            )
        else:
            log.warning(
                "audit write failed again (attempt %d): %s; next in %.1f s", attempt, exc, delay
            )
        await self._sleep(delay)


def build_audit_handler(
    settings: AuditSettings, directory: Path, metrics: Metrics | None = None
) -> AuditSinkHandler:
    """The audit handler both runtimes use, from the audit settings."""
    key = settings.hmac_key.get_secret_value().encode() if settings.hmac_key else None
    sink = AuditFileSink(
        directory,
        max_bytes=settings.max_file_bytes,
        remember=settings.remember_ids,
        hmac_key=key,
        fsync=settings.fsync,
    )
    return AuditSinkHandler(
        sink,
        metrics=AuditMetrics(metrics),
        backoff=Backoff(settings.retry_initial_s, settings.retry_max_s),
    )
