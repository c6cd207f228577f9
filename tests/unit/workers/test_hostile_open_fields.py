"""What an event's open fields hold (metadata, details, signals) cannot break later records.

An open field (``dict[str, Any]`` or ``dict[str, float]``) passes its contents on to
a backend: document metadata to the shard, evidence details to the audit files, a
result's signals to the feedback store. Whatever one holds, the event is refused at
decode or processed, and what later records need of it still works: the document
can be replaced and searched, the next evidence is written, and feedback on the
result is applied or refused for what it is (``stage == "feedback"``), never failed
by what the result carried.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsift.schemas import FeedbackEvent
from ragsift.streams.codec import EventCodec
from tests.unit.workers.hostile_rig import TENANT, Driver, driving, feed, nested

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Each worker's open fields, as a path in its valid event.
OPEN_FIELDS = {
    "indexer": [("metadata",)],
    "audit": [("data", "details")],
    "calibration-results": [("breakdown", "signals"), ("timings_ms",)],
    "decision": [("breakdown", "signals"), ("hits", 0, "raw_scores")],
    "report": [("breakdown", "signals"), ("hits", 0, "raw_scores")],
}
#: JSON text for one value inside an open field: deep nesting (Qdrant reads payloads
#: back with a recursion limit of 128), numbers no float holds, lone surrogates.
VALUES = st.one_of(
    st.builds(nested, st.integers(100, 1_500), st.sampled_from("[{")),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "9" * 5_000, "-1e-400"]),
    st.sampled_from(['"\\ud800"', '"\\udfff x"', '"\\u0000"', "null", "true", '"text"', "[]"]),
    st.integers().map(str),
    st.floats().map(json.dumps),
    st.sampled_from([10**3, 10**5, 2 * 10**6]).map(lambda n: json.dumps("m" * n)),
)
#: JSON text for a key: any text, a lone surrogate, a reserved payload key, empty.
KEYS = st.text(max_size=12).map(json.dumps) | st.sampled_from(
    ['"\\ud800"', '"text"', '"tenant_id"', '""', '"\\n"']
)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with driving(Path(tmp_path_factory.mktemp("open-fields"))) as built:
        yield built


def with_open_field(
    valid: bytes, path: tuple[str | int, ...], items: list[tuple[str, str]]
) -> bytes:
    """``valid`` with the open field at ``path`` holding ``items`` (JSON texts of key, value)."""
    data = json.loads(valid)
    holder = data
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = "__open__"
    shown = ", ".join(f"{key}: {value}" for key, value in items)
    return json.dumps(data).replace('"__open__"', "{" + shown + "}", 1).encode()


def follow_up(driver: Driver, worker: str, valid: bytes) -> None:
    """What a later record needs of the hostile one (``valid`` with its ids) still works."""
    rig = driver.rig
    event = json.loads(valid)
    if worker == "indexer":
        replacement = {
            "event_id": rig.fresh("e"),
            "tenant_id": TENANT,
            "doc_id": event["doc_id"],
            "text": "Refunds are paid within a week.",
        }
        feed(driver, worker, json.dumps(replacement).encode(), refused=False)
        driver.runner.run(rig.tenant_search_works())
    if worker == "calibration-results":
        label = FeedbackEvent(
            event_id=rig.fresh("f"), query_id=event["query_id"], tenant_id=TENANT, relevant=True
        )
        value = EventCodec(FeedbackEvent).encode(label)
        batch = driver.runner.run(rig.feed("calibration", [(value, b"k")]))
        for letter in batch.letters[0]:
            assert letter.stage == "feedback", letter.error  # refused for what it is, or applied


@pytest.mark.parametrize("worker", sorted(OPEN_FIELDS))
def test_whatever_an_open_field_holds_the_records_after_it_work(
    driver: Driver, worker: str
) -> None:
    @PROPERTY
    @given(
        path=st.sampled_from(OPEN_FIELDS[worker]),
        items=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=3),
    )
    def check(path: tuple[str | int, ...], items: list[tuple[str, str]]) -> None:
        valid, _ = driver.rig.valid(worker)
        feed(driver, worker, with_open_field(valid, path, items), refused=False)
        follow_up(driver, worker, valid)

    check()
