"""The mix monitor's histograms outlive a process (saved, restored, or skipped)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.mix_state import (
    MAX_AGE_S,
    FileMixState,
    ScopeState,
    decode_states,
    encode_states,
)
from tests.unit.confidence.test_mix import _draw, _table


def _warm(monitor: MixMonitor, n: int = 300, version: str = "v1") -> None:
    rng = np.random.default_rng(20)
    table = _table(rng)
    unanswerable, _ = _draw(rng, 0, n)
    for c in unanswerable:
        monitor.observe("t1", "c", version, table, c)


def test_a_restored_scope_reads_at_its_first_query_as_the_saved_one_did() -> None:
    rng = np.random.default_rng(21)
    table = _table(rng)
    before = MixMonitor()
    _warm(before)
    saved = before.reading("t1", "c", "v1")
    assert saved is not None
    assert saved.share > 0.9
    after = MixMonitor()
    assert after.restore(before.export()) == 1
    assert after.reading("t1", "c", "v1") is None  # taken up with the scope's next query
    first = after.observe("t1", "c", "v1", table, 0.01)
    assert first is not None  # no 30-query warm-up
    assert first.share == pytest.approx(saved.share, abs=0.01)
    # A cold monitor has nothing to say after one query.
    assert MixMonitor().observe("t1", "c", "v1", table, 0.01) is None


def test_a_state_of_another_calibration_or_a_seen_scope_is_not_taken_up() -> None:
    rng = np.random.default_rng(22)
    table = _table(rng)
    before = MixMonitor()
    _warm(before)
    states = before.export()
    other = MixMonitor()
    other.restore(states)
    assert other.observe("t1", "c", "v2", table, 0.01) is None  # a new version: cold
    seen = MixMonitor()
    seen.observe("t1", "c", "v1", table, 0.99)
    assert seen.restore(states) == 0  # this process's own histogram stays


def test_states_round_trip_and_stale_or_malformed_ones_are_skipped(tmp_path: Path) -> None:
    good = ScopeState(tenant="テナント", collection="c", version="v", counts=(1.0,) * 20)
    old = good.model_copy(update={"tenant": "old", "saved_at": good.saved_at - MAX_AGE_S - 1})
    states, skipped = decode_states(encode_states([good, old]))
    assert (states, skipped) == ([good], 1)
    assert "scale" not in encode_states([good])  # unset: written as before ADR 040
    scaled = good.model_copy(update={"scale": "base", "near_scale": "base"})
    assert decode_states(encode_states([scaled]))[0] == [scaled]
    odd = good.model_copy(update={"scale": "版本\x00\n", "near_scale": "‮cal"})
    assert decode_states(encode_states([odd]))[0] == [odd]  # a name, compared, never read
    doc = json.loads(encode_states([good]))
    bad = dict(doc["scopes"][0])
    for broken in (
        {**bad, "counts": [1.0] * 19},
        {**bad, "counts": [math.nan] + [1.0] * 19},  # JSON NaN: not a weight
        {**bad, "counts": [-1.0] + [1.0] * 19},
        {**bad, "tenant": ""},
        {**bad, "scale": ""},  # a scale names a calibration version (ADR 040)
        {**bad, "near_scale": "x" * 4097},
        {**bad, "scale": 7},
        {**bad, "near_scale": ["v"]},
        {**bad, "extra": 1},
        "not a state",
    ):
        assert decode_states(json.dumps({"scopes": [bad, broken]})) == ([good], 1)
    deep = '{"scopes": ' + "[" * 100_000 + "]" * 100_000 + "}"  # raised RecursionError
    for garbage in (b"\xff\x00", "[1, 2]", '{"scopes": 3}', "{", deep):
        assert decode_states(garbage) == ([], 1)


def test_a_file_merges_processes_and_an_unreadable_one_loads_as_nothing(tmp_path: Path) -> None:
    store = FileMixState(tmp_path / "calibrations" / "_mix.json")
    assert store.load() == []
    one = ScopeState(tenant="a", collection="c", version="v", counts=(1.0,) * 20)
    two = one.model_copy(update={"tenant": "b"})
    store.save([one])
    store.save([two])  # another process's scopes stay
    assert sorted(s.tenant for s in store.load()) == ["a", "b"]
    store.path.write_bytes(b"\x00garbage")
    assert store.load() == []
    store.save([one])  # and it is written over whole
    assert store.load() == [one]
