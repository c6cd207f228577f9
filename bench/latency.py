"""Latency recording for the open-loop benches: a log-bucketed histogram and a schedule.

:class:`LogHistogram` is HdrHistogram-class recording without the dependency:
buckets grow geometrically, so any recorded value is reported within
``relative_error`` (1% by default) of its true value from 1 µs to 10 minutes
in ~1,000 counters, whatever the number of samples; min, max and count are exact.

:class:`OpenLoop` offers work on a fixed schedule that never waits for
answers, and :class:`LatencyBook` counts each answer's latency from the
*scheduled* send time, not from when the sender got round to it: if the
sender or the system stalls, the queries that should have been sent meanwhile
are charged the stall (no coordinated omission, Gil Tene's term).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field

__all__ = ["LatencyBook", "LogHistogram", "OpenLoop", "fixed_rate"]

#: The range a produce→result latency can take on this bench: a microsecond to
#: ten minutes (the benches' own deadline); values outside are clamped.
LOWEST_S = 1e-6
HIGHEST_S = 600.0
#: 1% relative error: p99 of 20 ms is reported within 0.2 ms.
RELATIVE_ERROR = 0.01


class LogHistogram:
    """Counts of values in geometric buckets: percentiles within ``relative_error``.

    Bucket ``i`` holds ``[lowest * g**i, lowest * g**(i+1))`` with
    ``g = 1 + 2 * relative_error``; a percentile is reported as its bucket's
    midpoint, which is within ``relative_error`` of any value in the bucket.
    """

    def __init__(
        self,
        lowest: float = LOWEST_S,
        highest: float = HIGHEST_S,
        relative_error: float = RELATIVE_ERROR,
    ):
        if not 0 < lowest < highest:
            raise ValueError(f"need 0 < lowest < highest, got {lowest} and {highest}")
        if not 0 < relative_error < 0.5:
            raise ValueError(f"relative_error must be in (0, 0.5), got {relative_error}")
        self.lowest = lowest
        self.highest = highest
        self.relative_error = relative_error
        self._log_growth = math.log1p(2 * relative_error)
        self._counts = [0] * (self._bucket(highest) + 1)
        self.count = 0
        self.min = math.inf
        self.max = -math.inf

    def _bucket(self, value: float) -> int:
        return int(math.log(value / self.lowest) / self._log_growth)

    def record(self, value: float) -> None:
        """Add one value (clamped into ``[lowest, highest]`` for its bucket; min/max exact)."""
        if math.isnan(value):
            raise ValueError("cannot record NaN")
        self.count += 1
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        self._counts[self._bucket(min(max(value, self.lowest), self.highest))] += 1

    def percentile(self, q: float) -> float:
        """The value at or below which ``q`` percent of the recorded values lie."""
        if not 0 <= q <= 100:
            raise ValueError(f"q must be in [0, 100], got {q}")
        if self.count == 0:
            raise ValueError("no values recorded")
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for i, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                low = self.lowest * math.exp(i * self._log_growth)
                mid = low * (1 + self.relative_error)
                # The exact extremes are known: never report beyond them.
                return min(max(mid, self.min), self.max)
        return self.max  # unreachable: the counts sum to count

    def summary_ms(self) -> dict[str, float]:
        """p50/p95/p99/max and count, in milliseconds (count as is)."""
        return {
            "count": self.count,
            "p50_ms": round(self.percentile(50) * 1000, 2),
            "p95_ms": round(self.percentile(95) * 1000, 2),
            "p99_ms": round(self.percentile(99) * 1000, 2),
            "max_ms": round(self.max * 1000, 2),
        }


@dataclass
class LatencyBook:
    """Scheduled send times by key; each arrival's latency goes to the histogram.

    Arrivals for keys never scheduled (another run's results) are ignored; a
    second arrival of a key (an at-least-once replay) is counted as a duplicate,
    not as a second latency.
    """

    histogram: LogHistogram = field(default_factory=LogHistogram)
    scheduled: dict[Hashable, float] = field(default_factory=dict)
    done: set[Hashable] = field(default_factory=set)
    duplicates: int = 0

    def schedule(self, key: Hashable, at: float) -> None:
        """Record when ``key`` was due to be sent."""
        self.scheduled[key] = at

    def arrived(self, key: Hashable, now: float) -> None:
        """``key``'s answer arrived at ``now``: latency from its scheduled time."""
        if key not in self.scheduled:
            return
        if key in self.done:
            self.duplicates += 1
            return
        self.done.add(key)
        self.histogram.record(now - self.scheduled[key])

    @property
    def outstanding(self) -> int:
        """Scheduled keys with no answer yet."""
        return len(self.scheduled) - len(self.done)


def fixed_rate(rate: float, count: int) -> list[float]:
    """Send offsets in seconds for ``count`` sends at ``rate`` per second."""
    if rate <= 0 or count < 0:
        raise ValueError(f"need rate > 0 and count >= 0, got {rate} and {count}")
    return [i / rate for i in range(count)]


@dataclass
class OpenLoop:
    """Calls ``send(i)`` at ``start + offsets[i]`` without waiting for any answer.

    ``send`` should only hand the query over (enqueue it in the producer); if it
    blocks, the following sends go late, and the book still charges their
    latency from the schedule. ``max_send_lag_s`` says how far behind the
    sender fell: a large lag means the load generator, not the system under
    test, limited the offered rate.
    """

    book: LatencyBook
    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    max_send_lag_s: float = 0.0

    async def offer(
        self,
        keys: Sequence[Hashable],
        offsets: Sequence[float],
        send: Callable[[int], Awaitable[None]],
    ) -> None:
        """Schedule every key, then send each at its time (or at once if already late)."""
        if len(keys) != len(offsets):
            raise ValueError(f"{len(keys)} keys for {len(offsets)} offsets")
        start = self.clock()
        for key, offset in zip(keys, offsets, strict=True):
            self.book.schedule(key, start + offset)
        for i, offset in enumerate(offsets):
            wait = start + offset - self.clock()
            if wait > 0:
                await self.sleep(wait)
            else:
                self.max_send_lag_s = max(self.max_send_lag_s, -wait)
            await send(i)
