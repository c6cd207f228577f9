"""The pace bench's table: a worker's wall time split into processing, flushing and waiting."""

from __future__ import annotations

import pytest
from pace import pace_table


def _line(
    start: float, processed: float, flushed: float, size: int, cpu: float, send: float
) -> str:
    return f"{start} {processed} {flushed} {size} {cpu} {send}"


def test_wall_time_is_split_into_process_flush_and_the_wait_between_batches() -> None:
    lines = [
        _line(10.0, 10.3, 10.4, 256, 0.25, 0.03),  # 300 ms work, 100 ms flush
        _line(10.5, 10.8, 10.9, 256, 0.25, 0.03),  # 100 ms wait before it
        _line(11.0, 11.1, 11.2, 88, 0.05, 0.01),
    ]
    table = pace_table(lines, wall_s=1.25)
    assert table["batches"] == 3
    assert table["span_s"] == pytest.approx(1.2)
    assert table["batch_size"] == {"mean": 200.0, "median": 256, "min": 88, "max": 256}
    shares = table["share_of_span"]
    assert shares["process"] == pytest.approx(0.7 / 1.2, abs=1e-3)
    assert shares["flush"] == pytest.approx(0.3 / 1.2, abs=1e-3)
    assert shares["between batches"] == pytest.approx(0.2 / 1.2, abs=1e-3)
    assert shares["process, CPU of the worker during it"] == pytest.approx(0.55 / 1.2, abs=1e-3)
    assert shares["process, of it handing outputs to the producer"] == pytest.approx(
        0.07 / 1.2, abs=1e-3
    )
    assert table["ms_per_batch"]["between batches"] == pytest.approx(100.0)
    assert table["per_batch"][0] == [256, 300.0, 100.0, 100.0]
    assert table["per_batch"][-1][-1] is None  # nothing after the last batch


def test_a_worker_that_logged_no_batch_is_an_error_not_an_empty_table() -> None:
    with pytest.raises(RuntimeError, match="logged no batch"):
        pace_table(["", "  "], wall_s=1.0)
