"""The open-loop bench's recording: histogram precision and latency from the schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from latency import LatencyBook, LogHistogram, OpenLoop, fixed_rate


class FakeClock:
    """Virtual time: sleeping and slow sends advance it, nothing else does."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_percentiles_are_within_the_documented_relative_error() -> None:
    rng = np.random.default_rng(3)
    values = rng.lognormal(mean=-4, sigma=1.5, size=20_000)  # ~0.1 ms … seconds
    histogram = LogHistogram()
    for v in values:
        histogram.record(float(v))
    for q in (50, 90, 95, 99, 99.9):
        exact = float(np.percentile(values, q, method="inverted_cdf"))
        assert histogram.percentile(q) == pytest.approx(exact, rel=histogram.relative_error)
    assert histogram.count == len(values)
    assert histogram.max == float(values.max())
    assert histogram.min == float(values.min())
    assert histogram.percentile(100) == histogram.max


def test_one_value_is_every_percentile_and_out_of_range_values_keep_exact_extremes() -> None:
    histogram = LogHistogram(lowest=1e-3, highest=1.0)
    histogram.record(0.02)
    assert histogram.percentile(0) == histogram.percentile(100) == 0.02
    histogram.record(5.0)  # above highest: clamped into the last bucket, max exact
    histogram.record(1e-6)  # below lowest
    assert histogram.max == 5.0
    assert histogram.min == 1e-6
    assert histogram.percentile(100) <= 5.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lowest": 0.0}, "lowest < highest"),
        ({"lowest": 2.0, "highest": 1.0}, "lowest < highest"),
        ({"relative_error": 0.0}, "relative_error"),
        ({"relative_error": 0.7}, "relative_error"),
    ],
)
def test_bad_histogram_bounds_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogHistogram(**kwargs)


def test_empty_histogram_and_bad_inputs_say_so() -> None:
    histogram = LogHistogram()
    with pytest.raises(ValueError, match="no values"):
        histogram.percentile(50)
    with pytest.raises(ValueError, match="NaN"):
        histogram.record(math.nan)
    histogram.record(0.01)
    with pytest.raises(ValueError, match="q must be"):
        histogram.percentile(101)


async def test_latency_counts_from_the_scheduled_time_not_the_late_send() -> None:
    """A sink with known delays; one send stalls the sender for 0.5 s.

    Closed-loop accounting would charge only the stalled query; open-loop charges
    every query that was due during the stall for the time it waited.
    """
    clock = FakeClock()
    book = LatencyBook()
    loop = OpenLoop(book, clock=clock, sleep=clock.sleep)
    service_s = 0.010
    stall_s = 0.500
    sent_at: dict[int, float] = {}

    async def send(i: int) -> None:
        sent_at[i] = clock.now
        if i == 2:
            clock.now += stall_s  # the producer blocks on this one

    keys = list(range(10))
    await loop.offer(keys, fixed_rate(100.0, len(keys)), send)  # one every 10 ms
    start = book.scheduled[0]
    for i in keys:  # the sink answers each query service_s after it really left
        book.arrived(i, sent_at[i] + service_s)

    assert book.histogram.count == 10
    assert book.outstanding == 0
    # Query 3 was due at +30 ms and left at +520 ms (after the stall): 500 ms late.
    assert sent_at[3] == pytest.approx(start + 0.020 + stall_s)
    expected = [sent_at[i] + service_s - (start + i / 100.0) for i in keys]
    assert max(expected) == pytest.approx(stall_s + service_s - 0.010)
    assert book.histogram.max == pytest.approx(max(expected))
    assert book.histogram.min == pytest.approx(service_s)
    assert loop.max_send_lag_s == pytest.approx(stall_s - 0.010)
    # Six of ten queries waited behind the stall: p50 is far above the service time.
    assert book.histogram.percentile(50) > 0.3


def test_duplicates_and_foreign_keys_are_not_latencies() -> None:
    book = LatencyBook()
    book.schedule("a", 1.0)
    book.arrived("a", 1.25)
    book.arrived("a", 9.0)  # an at-least-once replay
    book.arrived("someone-else", 2.0)
    assert book.histogram.count == 1
    assert book.histogram.max == 0.25
    assert book.duplicates == 1
    assert book.outstanding == 0


@pytest.mark.parametrize(("rate", "count"), [(0.0, 3), (-1.0, 3), (10.0, -1)])
def test_fixed_rate_refuses_nonsense(rate: float, count: int) -> None:
    with pytest.raises(ValueError, match="rate > 0"):
        fixed_rate(rate, count)


async def test_offer_refuses_mismatched_keys() -> None:
    async def send(i: int) -> None:
        raise AssertionError("nothing is sent")

    with pytest.raises(ValueError, match="2 keys for 3 offsets"):
        await OpenLoop(LatencyBook()).offer(["a", "b"], [0.0, 0.1, 0.2], send)


def test_open_loop_rates_are_fractions_of_the_maximum_and_1000_only_when_reachable() -> None:
    from openloop import planned_rates

    assert planned_rates(800.0) == [200.0, 400.0, 640.0]
    assert planned_rates(1600.0) == [400.0, 800.0, 1280.0, 1000.0]
