"""The ``POST /v1/query`` requests waiting for their answers, and the dead letters that end them.

A waiter is woken by every event for its (tenant, query id); the API decides
whether it is answered (:meth:`Waiters.wait`). A dead letter ends a wait in two
cases: the retrieval worker's, when it holds the exact bytes the request sent
(query ids are the callers' own, so another request's letter must not answer
this one), and the report worker's, by tenant and query id, for a request that
asked for a report: the result still comes, the report never will, and the
caller waited out its whole timeout for a 504.

Each tenant has at most ``per_tenant`` requests waiting (:class:`TenantBusyError`
past it): one API key held all 4,096 connections with requests waiting out their
timeouts, and every other tenant was refused at the connection cap. A wait also
ends when its client has left (:meth:`Waiters.wait`), freeing its slot.

The refusal's ``retry_after`` says when a slot is likely free (:meth:`Waiters.waiting`):
at the pace the tenant's slots have been freeing, and never later than the first of
its waiting requests times out, when one is free whatever the pipeline does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from ragsift.api.retry_later import RETRY_AFTER_MAX_S, retry_after_s
from ragsift.errors import RagsiftError
from ragsift.schemas import DeadLetter

__all__ = [
    "GONE_CHECK_S",
    "Outcome",
    "Pending",
    "TenantBusyError",
    "Waiters",
]

#: (tenant, query id)
Key = tuple[str, str]
#: How a wait ended: answered (or rejected), out of time, or its client left first.
Outcome = Literal["answered", "timeout", "gone"]
#: How often a wait checks that its client is still there (as a console stream does:
#: ``ragsift.api.console.GONE_CHECK_S``): a second of a slot held for nobody at most.
GONE_CHECK_S = 1.0


class TenantBusyError(RagsiftError):
    """A tenant already has ``limit`` requests waiting: this one is not sent (a 429,
    never a dead letter, so it names no letter stage)."""

    def __init__(
        self, tenant_id: str, limit: int, *, retry_after: int, query_id: str | None = None
    ) -> None:
        super().__init__(
            f"tenant {tenant_id!r} already has {limit} requests waiting for results, the"
            f" most it may; retry after {retry_after} s",
            query_id=query_id,
        )
        self.tenant_id = tenant_id
        self.limit = limit
        #: whole seconds until a slot is likely free (the 429's Retry-After)
        self.retry_after = retry_after


@dataclass
class Pending:
    """A request waiting: the bytes it sent, whether it wants a report, what failed it."""

    sent: bytes
    want_report: bool
    #: the question asked (a query id names one: another's result must not answer it)
    query: str = ""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: The result and report as read, held for this request: the store they are kept in
    #: is bounded and shared by every tenant, and another's results read in the same
    #: batch evicted them before the request ran (it waited out its timeout for a 504).
    result: bytes | None = None
    report: bytes | None = None
    #: the retrieval worker rejected the query: the request's answer
    letter: DeadLetter | None = None
    #: the report worker could not build the report: the result is answered without it
    report_letter: DeadLetter | None = None
    #: when the wait times out at the latest (the waiters' clock), None: not said
    deadline: float | None = None


@dataclass
class _Tenant:
    """A tenant's waiting requests (by ``id``), and the pace its slots free at."""

    waiting: dict[int, Pending] = field(default_factory=dict)
    #: when its last slot was freed, and the time between its last two
    freed_at: float | None = None
    freed_gap: float | None = None

    def next_free(self, now: float) -> float:
        """Seconds until a slot is likely free: the longer of the last gap between
        freed slots and the time since the last one (none freed for longer than the
        pace says: not sooner than that again), never past the first deadline."""
        deadlines = [p.deadline for p in self.waiting.values() if p.deadline is not None]
        soon = min(deadlines) - now if deadlines else float(RETRY_AFTER_MAX_S)
        if self.freed_at is not None and self.freed_gap is not None:
            soon = min(soon, max(self.freed_gap, now - self.freed_at))
        return soon


class Waiters:
    """The waiting requests, by (tenant, query id); at most ``per_tenant`` a tenant (0: no bound).

    Args:
        per_tenant: requests one tenant may have waiting at once
            (``ApiSettings.max_waiting_per_tenant``).
        gone_check_s: how often a wait checks that its client is still there.
        clock: what deadlines and freed slots are timed by (``time.monotonic``, the
            event loop's own clock; tests pass one they move by hand).
    """

    def __init__(
        self,
        per_tenant: int = 0,
        *,
        gone_check_s: float = GONE_CHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_tenant < 0:
            raise ValueError(f"per_tenant must be >= 0, got {per_tenant}")
        if gone_check_s <= 0:
            raise ValueError(f"gone_check_s must be > 0, got {gone_check_s}")
        self.per_tenant = per_tenant
        self.gone_check_s = gone_check_s
        self.clock = clock
        #: requests waiting, by tenant (only tenants with one)
        self._by_tenant: dict[str, _Tenant] = {}
        self._pending: dict[Key, list[Pending]] = {}
        #: the tenants with a request waiting on each query id: a retrieval worker's
        #: letter names no tenant, and scanning every waiter for its id cost 0.5 ms a
        #: letter at 4,096 waiters (5.7 ms at 40,000), on the reader every request waits on
        self._by_query: dict[str, set[str]] = {}

    def asked_otherwise(self, key: Key, query: str) -> bool:
        """Whether a request waiting on ``key`` asked another question than ``query``:
        the first result would answer both."""
        return any(pending.query != query for pending in self._pending.get(key, []))

    @contextmanager
    def waiting(
        self,
        key: Key,
        sent: bytes,
        want_report: bool,
        query: str = "",
        timeout_s: float | None = None,
    ) -> Iterator[Pending]:
        """A request registered for ``key`` while the block runs (register before
        sending: a fast dead letter must find its request); ``timeout_s``: how long it
        will wait (:meth:`wait` sets it again when the wait starts).

        Raises:
            TenantBusyError: the tenant already has ``per_tenant`` requests waiting.
        """
        tenant, query_id = key
        held = self._by_tenant.get(tenant)
        if self.per_tenant and held is not None and len(held.waiting) >= self.per_tenant:
            retry_after = retry_after_s(held.next_free(self.clock()))
            raise TenantBusyError(
                tenant, self.per_tenant, retry_after=retry_after, query_id=query_id
            )
        pending = Pending(sent=sent, want_report=want_report, query=query)
        if timeout_s is not None:
            pending.deadline = self.clock() + timeout_s
        if held is None:
            held = self._by_tenant[tenant] = _Tenant()
        held.waiting[id(pending)] = pending
        self._pending.setdefault(key, []).append(pending)
        self._by_query.setdefault(query_id, set()).add(tenant)
        try:
            yield pending
        finally:
            del held.waiting[id(pending)]
            if held.waiting:
                now = self.clock()
                if held.freed_at is not None:
                    held.freed_gap = now - held.freed_at
                held.freed_at = now
            else:  # nothing kept for a tenant with none waiting
                del self._by_tenant[tenant]
            waiters = self._pending[key]
            waiters.remove(pending)
            if not waiters:
                del self._pending[key]
                tenants = self._by_query[query_id]
                tenants.discard(tenant)
                if not tenants:
                    del self._by_query[query_id]

    def wake(self, key: Key, *, result: bytes | None = None, report: bytes | None = None) -> None:
        """A result or report arrived for ``key``: its waiters hold it, and look again."""
        for pending in self._pending.get(key, []):
            if result is not None:
                pending.result = result
            if report is not None:
                pending.report = report
            pending.wake.set()

    def dead_letter(self, letter: DeadLetter) -> None:
        """End the waits ``letter`` answers (module docstring); other letters are ignored."""
        if not letter.query_id:
            return
        if letter.worker == "report" and letter.tenant_id:
            for pending in self._pending.get((letter.tenant_id, letter.query_id), []):
                if pending.want_report:
                    pending.report_letter = letter
                    pending.wake.set()
            return
        if letter.worker != "retrieval":
            return
        original = letter.original
        for tenant in self._by_query.get(letter.query_id, ()):
            for pending in self._pending[(tenant, letter.query_id)]:
                if pending.sent == original:
                    pending.letter = letter
                    pending.wake.set()

    async def wait(
        self,
        pending: Pending,
        answered: Callable[[], bool],
        timeout_s: float,
        gone: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Whether ``answered()`` (or a retrieval letter) came within ``timeout_s``, or
        ``gone()`` came true first (checked every ``gone_check_s``): ``ragsift api``'s
        AppRunner does not cancel the handler of a client that left, and it held its
        tenant's slot until its timeout (up to 60 s) for an answer nobody would read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        pending.deadline = self.clock() + timeout_s
        while pending.letter is None and not answered():
            if gone is not None and gone():
                return "gone"
            left = deadline - loop.time()
            if left <= 0:
                return "timeout"
            pending.wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, self.gone_check_s)):
                    await pending.wake.wait()
        return "answered"
