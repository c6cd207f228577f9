"""Hostile Kafka records against every worker: each is handled or dead-lettered, never more.

For each worker (retrieval, indexer, audit sink, decision, report, the calibration
worker's two handlers), a hostile record and a valid one go through the worker's
batch router as one batch, as both runtimes hand them over. Whatever the hostile
record holds, nothing escapes the router; it is either processed or dead-lettered
once, with a stage and a one-line reason, its bytes kept (cut to the letter's
limit), and counted; no letter is dropped; and the valid record after it is
processed with its outputs. The indexer's shard must still answer searches.

Record headers never reach a router (``Received`` has none); what an unreadable
header does to the consumer is tested in ``tests/unit/streams/test_loop_unreadable.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.unit.workers.hostile_rig import TENANT, WORKERS, Driver, Rig, driving, feed, nested

PROPERTY = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SENTINEL = "__hostile__"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with driving(Path(tmp_path_factory.mktemp("hostile"))) as built:
        yield built


# Records that are no event of any topic: each must be dead-lettered.
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
GARBAGE = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.binary(min_size=1, max_size=40).map(lambda b: b'{"query_id": "\xff' + b + b'"}'),
    JSON_VALUES.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=5).map(
        lambda v: json.dumps(v).encode()
    ),
    st.builds(nested, st.integers(1, 6_000), st.sampled_from("[{")).map(str.encode),
    st.integers(4_300, 9_000).map(lambda n: b'{"k": ' + b"9" * n + b"}"),
    st.sampled_from([b"NaN", b"-Infinity", b"1e999", b'{"k": 1e999}', b"\xef\xbb\xbf{}", b"{}"]),
    st.sampled_from([10**5, 10**6, 4 * 2**20 + 1]).map(
        lambda n: json.dumps({"query_id": "big", "tenant_id": TENANT, "query": "y" * n}).encode()
    ),
)
KEYS = st.none() | st.binary(max_size=64) | st.just(b"\xff" * 200_000)

# Values to put where a valid event has a field: JSON text, hostile for some field.
FRAGMENTS = st.one_of(
    JSON_VALUES.map(json.dumps),  # wrong types, null, NaN, infinities, huge floats
    st.integers(min_value=2**63).map(str),
    st.integers(max_value=-(2**63)).map(str),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "9" * 5_000, "[]", "{}", '""']),
    st.sampled_from(
        [
            *("../../etc/passwd", "..", "/", "acme/../other", "other", "ACME", "acme\n"),
            *("\u202eacme", "a" * 65, "💥", "\x00", "C:\\\\x", " ", "\t"),
            *("2", "0", "1.9", "v1", "1e3", "99.0"),  # schema versions no worker knows
        ]
    ).map(json.dumps),
    st.text(max_size=40).map(json.dumps),
    # Escapes JSON allows that decode to no Unicode text: a lone surrogate in a free text
    # field failed only where it was encoded; in an id, its letter could not be sent.
    st.sampled_from(['"\\ud800"', '"x\\udfff"', '"\\ude00\\ud83d"']),
    st.builds(nested, st.integers(1, 3_000), st.sampled_from("[{")),
    st.sampled_from([10**4, 10**6, 3 * 10**6]).map(lambda n: json.dumps("x" * n)),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field and list item of ``value`` down to three levels."""
    found: list[tuple[Any, ...]] = []
    if len(prefix) >= 3:
        return found
    items = value.items() if isinstance(value, dict) else enumerate(value[:2])
    for key, inner in items:
        found.append((*prefix, key))
        if isinstance(inner, dict | list):
            found.extend(paths(inner, (*prefix, key)))
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` with one field removed, replaced by a hostile value, or given twice."""
    data = json.loads(valid)
    path = draw(st.sampled_from(paths(data)))
    *parents, last = path
    holder = data
    for step in parents:
        holder = holder[step]
    how = draw(
        st.sampled_from(["drop", "replace", "twice"] if not parents else ["drop", "replace"])
    )
    fragment = draw(FRAGMENTS)
    if how == "drop":
        del holder[last]
        return json.dumps(data).encode()
    if how == "twice":  # a duplicate key: which copy wins is the parser's choice
        return (json.dumps(data)[:-1] + f", {json.dumps(last)}: {fragment}}}").encode()
    holder[last] = SENTINEL
    return json.dumps(data).replace(json.dumps(SENTINEL), fragment, 1).encode()


@pytest.mark.parametrize("worker", WORKERS)
def test_a_record_that_is_no_event_is_dead_lettered_and_the_next_one_processed(
    driver: Driver, worker: str
) -> None:
    @PROPERTY
    @given(value=GARBAGE, key=KEYS)
    def check(value: bytes | None, key: bytes | None) -> None:
        # a null value on the documents topic is a tombstone (test_indexer_tombstones.py)
        assume(not (worker == "indexer" and value is None))
        feed(driver, worker, value, key, refused=True)

    check()


@pytest.mark.parametrize("worker", WORKERS)
def test_an_event_with_a_hostile_field_is_handled_or_dead_lettered_alone(
    driver: Driver, worker: str
) -> None:
    template, _ = driver.rig.valid(worker)

    @PROPERTY
    @given(value=mutated(template))
    def check(value: bytes) -> None:
        # Fresh ids each time, so a record that is processed never replays the last one
        # (feedback keeps its query id: a fresh one names no result, and is refused).
        hostile = value if worker == "calibration" else fresh_ids(driver.rig, value)
        feed(driver, worker, hostile, refused=False)

    check()


def fresh_ids(rig: Rig, value: bytes) -> bytes:
    """``value`` with the template's ids swapped for fresh ones (text, so it stays hostile)."""
    for stem in ("q", "e", "d", "f"):
        value = value.replace(f'"{stem}-'.encode(), f'"{rig.fresh(stem)}x'.encode(), 1)
    return value
