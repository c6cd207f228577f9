"""The agents' per-batch path without Kafka: a poison event fails alone, the batch goes on."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from ragsift.observability.metrics import Metrics
from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.streams import routing
from ragsift.streams.codec import EventCodec
from ragsift.streams.routing import BatchRouter, Received
from ragsift.workers.base import Outcome
from tests.unit.streams.scripted import (
    RecordingSender,
    ScriptedHandler,
    huge_query,
    long_integer,
    nested_brackets,
    raw,
)

TOPIC = "ragsift.queries.v1"
# Short, so a hanging event costs the suite a fraction of a second.
DEADLINE_S = 0.2


def received(values: list[bytes]) -> list[Received]:
    return [Received(v, f"k{i}".encode(), TOPIC, 0, i) for i, v in enumerate(values)]


def router(sender: RecordingSender, metrics: Metrics) -> BatchRouter:
    return BatchRouter(ScriptedHandler(), sender, metrics=metrics, deadline_s=DEADLINE_S)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "DEAD_LETTER_BACKOFF_S", 0.0)


async def test_a_batch_that_raises_dead_letters_only_the_events_that_fail_alone() -> None:
    # Before: handle_batch raising dead-lettered all 39 events (36 legit lost to 3 poison).
    sender, metrics = RecordingSender(), Metrics()
    values = [raw(f"ok-{i}") for i in range(36)]
    for n, text in enumerate(("crash", "recurse", "crash")):
        values.insert(n * 12 + 5, raw(f"bad-{n}", text))
    await router(sender, metrics).process(received(values))
    assert sorted(sender.output_ids()) == sorted(f"ok-{i}" for i in range(36))
    letters = sender.dead_letters()
    assert sorted(d.query_id or "" for d in letters) == ["bad-0", "bad-1", "bad-2"]
    assert {d.stage for d in letters} == {"handler"}
    assert {d.error_type for d in letters} == {"RuntimeError", "RecursionError"}
    assert sample(metrics, "ragsift_batch_retries_total", worker="scripted", reason="error") == 1
    assert sample(metrics, "ragsift_events_total", worker="scripted", result="ok") == 36


async def test_a_letter_names_the_tenant_whose_event_failed_when_it_decoded() -> None:
    # A platform team routes each tenant's failures back to it; the letter named only
    # the query, whose id is unique per tenant alone.
    sender, metrics = RecordingSender(), Metrics()
    values = [raw("bad-0", "crash"), b"not json", raw("ok-0")]
    await router(sender, metrics).process(received(values))
    letters = {d.stage: d for d in sender.dead_letters()}
    assert (letters["handler"].tenant_id, letters["handler"].query_id) == ("acme", "bad-0")
    assert letters["handler"].minimal().tenant_id == "acme"
    assert letters["decode"].tenant_id is None  # nothing in it can be trusted to name one


async def test_an_event_past_its_deadline_is_dead_lettered_with_stage_deadline() -> None:
    sender, metrics = RecordingSender(), Metrics()
    values = [raw("a"), raw("slow", "hang"), raw("b")]
    await router(sender, metrics).process(received(values))
    assert sorted(sender.output_ids()) == ["a", "b"]
    [letter] = sender.dead_letters()
    assert letter.stage == "deadline"
    assert letter.query_id == "slow"
    assert "within 0.2 s" in letter.error
    assert sample(metrics, "ragsift_batch_retries_total", worker="scripted", reason="deadline") == 1
    assert sample(metrics, "ragsift_dead_letters_total", worker="scripted", stage="deadline") == 1


@pytest.mark.parametrize(
    ("poison", "reason"),
    [
        (nested_brackets(), "nests too deeply"),
        (long_integer(), "not usable JSON"),
        (raw("nl", "x").replace(b'"default"', b'"default\\n"'), "collection"),
        (b'{"query": "\xff"}', "not UTF-8"),
        (None, "empty message"),
        (raw("twice", "x").replace(b'"tenant_id"', b'"tenant_id":"evil","tenant_id"'), "more than"),
    ],
)
async def test_undecodable_events_are_dead_lettered_and_the_next_ones_processed(
    poison: bytes | None, reason: str
) -> None:
    sender, metrics = RecordingSender(), Metrics()
    batch = [Received(poison, None, TOPIC, 0, 0), *received([raw("after")])[:1]]
    await router(sender, metrics).process(batch)
    [letter] = sender.dead_letters()
    assert letter.stage == "decode"
    assert reason in letter.error
    assert sender.output_ids() == ["after"]


async def test_a_huge_poison_gets_a_letter_that_fits_with_length_and_hash() -> None:
    # Before: the letter carried the whole 950 KB (1.27 MB base64) and could not be sent.
    sender, metrics = RecordingSender(max_message_bytes=1_000_000), Metrics()
    poison = huge_query()
    await router(sender, metrics).process(received([poison, raw("after")]))
    [letter] = sender.dead_letters()
    assert letter.original == poison[:DEFAULT_MAX_ORIGINAL_BYTES]
    assert letter.original_truncated
    assert letter.original_length == len(poison)
    assert letter.original_sha256 == hashlib.sha256(poison).hexdigest()
    assert sender.output_ids() == ["after"]


async def test_a_letter_that_cannot_be_sent_is_retried_then_sent_minimal() -> None:
    sender, metrics = RecordingSender(fail_dead_letters=routing.DEAD_LETTER_ATTEMPTS), Metrics()
    await router(sender, metrics).process(received([b"not json", raw("after")]))
    [letter] = sender.dead_letters()
    assert letter.original == b""
    assert letter.original_length == len(b"not json")
    assert sender.output_ids() == ["after"]
    failures = sample(
        metrics, "ragsift_dead_letter_send_failures_total", worker="scripted", letter="full"
    )
    assert failures == routing.DEAD_LETTER_ATTEMPTS
    assert sample(metrics, "ragsift_dead_letters_dropped_total", worker="scripted") == 0


async def test_a_letter_nothing_can_send_is_dropped_counted_and_the_batch_goes_on() -> None:
    sender, metrics = RecordingSender(fail_dead_letters=100), Metrics()
    await router(sender, metrics).process(received([b"not json", raw("after")]))
    assert sender.dead_letters() == []
    assert sender.output_ids() == ["after"]
    assert sample(metrics, "ragsift_dead_letters_dropped_total", worker="scripted") == 1
    assert sample(metrics, "ragsift_dead_letters_total", worker="scripted", stage="decode") == 1


async def test_an_output_that_cannot_be_sent_fails_its_own_event_only() -> None:
    sender, metrics = RecordingSender(), Metrics()
    sender.fail_outputs_for.add(b"refused")
    await router(sender, metrics).process(received([raw("refused"), raw("fine")]))
    assert sender.output_ids() == ["fine"]
    [letter] = sender.dead_letters()
    assert letter.stage == "emit"
    assert letter.query_id == "refused"
    assert "ConnectionError" in letter.error


async def test_a_handler_returning_the_wrong_number_of_outcomes_is_retried_alone() -> None:
    class Short(ScriptedHandler):
        async def handle_batch(self, events):  # type: ignore[no-untyped-def]  # test double
            outcomes = await super().handle_batch(events)
            return outcomes[:1]  # drops every outcome but the first

    sender, metrics = RecordingSender(), Metrics()
    batch_router = BatchRouter(Short(), sender, metrics=metrics, deadline_s=DEADLINE_S)
    await batch_router.process(received([raw("a"), raw("b"), raw("c")]))
    assert sorted(sender.output_ids()) == ["a", "b", "c"]
    assert sender.dead_letters() == []


def test_settings_are_checked_where_they_are_given() -> None:
    with pytest.raises(ValueError, match="deadline_s must be > 0, got 0"):
        BatchRouter(ScriptedHandler(), RecordingSender(), metrics=Metrics(), deadline_s=0)
    with pytest.raises(ValueError, match="max_original_bytes must be >= 0, got -1"):
        BatchRouter(
            ScriptedHandler(),
            RecordingSender(),
            metrics=Metrics(),
            deadline_s=1,
            max_original_bytes=-1,
        )


class _WorkGrows(ScriptedHandler):
    """A handler whose slow events get a longer deadline, as the indexer's long
    documents do (``deadline_for``): ``slow`` takes SLOW_S, past DEADLINE_S."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[int, float]] = []

    def deadline_for(self, events: list[object], default: float) -> float:
        self.asked.append((len(events), default))
        slow = sum(getattr(e, "query", "") == "slow" for e in events)
        return default + slow * 2.0


async def test_a_handler_whose_work_grows_gets_the_deadline_it_asks_for_each_call() -> None:
    """Before, one flat deadline: a long document past it was dead-lettered though the
    indexer was only slow, not stuck (a 300-chunk page of a manual, a busy machine)."""
    from tests.unit.streams.scripted import SLOW_S

    assert SLOW_S > DEADLINE_S
    sender, metrics, handler = RecordingSender(), Metrics(), _WorkGrows()
    routed = BatchRouter(handler, sender, metrics=metrics, deadline_s=DEADLINE_S)
    await routed.process(received([raw("a"), raw("long", "slow"), raw("b")]))
    assert sorted(sender.output_ids()) == ["a", "b", "long"]
    assert sender.dead_letters() == []
    assert handler.asked == [(3, DEADLINE_S)]  # one call, the whole batch's deadline
    # a hang still ends at its deadline, and so does the retry of each event alone
    handler.asked.clear()
    await routed.process(received([raw("c"), raw("stuck", "hang")]))
    [letter] = sender.dead_letters()
    assert (letter.query_id, letter.stage) == ("stuck", "deadline")
    assert handler.asked == [(2, DEADLINE_S), (1, DEADLINE_S), (1, DEADLINE_S)]


async def test_a_message_read_from_no_kafka_topic_is_dead_lettered_not_raised() -> None:
    # Before: DeadLetter.build refused topic None (a Faust channel's message) with a
    # ValidationError that escaped process(), and the batch failed as a whole.
    sender, metrics = RecordingSender(), Metrics()
    batch = [
        Received(b"{not json", None, None, None, None),  # type: ignore[arg-type]
        Received(raw("ok"), None, None, None, None),  # type: ignore[arg-type]
    ]
    await router(sender, metrics).process(batch)
    letters = sender.dead_letters()
    assert [(d.topic, d.stage) for d in letters] == [("(none)", "decode")]
    assert sender.output_ids() == ["ok"]


async def test_a_dead_letter_that_cannot_be_built_is_dropped_and_counted() -> None:
    sender, metrics = RecordingSender(), Metrics()
    hostile = Received(b"{not json", None, TOPIC, 0, 0)
    bad = _BadTenant()  # not a model: what a buggy handler could hand back
    await router(sender, metrics).dead_letter(hostile, ValueError("x"), bad)  # type: ignore[arg-type]
    assert sender.dead_letters() == []
    assert sample(metrics, "ragsift_dead_letters_dropped_total", worker="scripted") == 1


class _BadTenant:
    """A decoded event whose tenant is not text: the letter cannot be built."""

    tenant_id = 42


@pytest.mark.parametrize("query_id", [r"\ud800", r"x\udfffy", r"\udc80\ud800"])
async def test_a_query_id_holding_a_lone_surrogate_still_gets_its_dead_letter(
    query_id: str,
) -> None:
    # Before: the decode error named the raw query id ("\ud800" decodes to a lone
    # surrogate), the letter carried it, and neither the full nor the minimal letter
    # could be serialized as UTF-8: every attempt failed and the letter was dropped,
    # one lost event per such record on every topic with a query id.
    sender, metrics = RecordingSender(), Metrics()
    hostile = raw("SENTINEL").replace(b'"SENTINEL"', f'"{query_id}"'.encode())
    await router(sender, metrics).process(received([hostile, raw("ok")]))
    [letter] = sender.dead_letters()
    assert letter.stage == "decode"
    assert letter.original == hostile
    assert letter.query_id == query_id  # the escape, as text every consumer can read
    assert sender.output_ids() == ["ok"]
    assert sample(metrics, "ragsift_dead_letters_dropped_total", worker="scripted") == 0
    assert (
        sample(metrics, "ragsift_dead_letter_send_failures_total", worker="scripted", letter="full")
        == 0
    )


class _RefusesEvidence:
    """An audit-topic handler that fails every event, as a sink that refuses a row."""

    name = "audit"
    source = "audit"

    @property
    def model(self) -> type[EvidenceEvent]:
        return EvidenceEvent

    async def handle_batch(self, events: Sequence[EvidenceEvent]) -> list[Outcome]:
        return [ValueError("refused") for _ in events]

    async def close(self) -> None:
        return None


async def test_a_letter_of_evidence_names_its_tenant_and_query() -> None:
    # Evidence keeps its tenant and query id in ``data`` (CloudEvents): the letter named
    # neither, so `ragsift deadletters --tenant` never listed or replayed a tenant's
    # refused evidence, and a platform team could not route it back to the tenant.
    evidence = EvidenceEvent.for_query(
        EvidenceType.REFUSAL,
        EvidenceData(query_id="q-7", tenant_id="globex", summary="no answer"),
        source="/test",
    )
    sender, metrics = RecordingSender(), Metrics()
    audit = BatchRouter(_RefusesEvidence(), sender, metrics=metrics, deadline_s=DEADLINE_S)
    value = EventCodec(EvidenceEvent).encode(evidence)
    await audit.process([Received(value, b"q-7", "ragsift.audit.v1", 0, 0)])
    [letter] = sender.dead_letters()
    assert (letter.tenant_id, letter.query_id) == ("globex", "q-7")
