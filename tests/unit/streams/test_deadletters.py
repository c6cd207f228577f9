"""Which dead letters a listing takes and a replay sends (no broker)."""

from __future__ import annotations

import ast
import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import ragsift
from ragsift.schemas import DeadLetter
from ragsift.streams.deadletters import (
    LETTER_STAGES,
    LETTER_WORKERS,
    REPLAYABLE_TOPICS,
    LetterFilter,
    NotReplayed,
    plan_replay,
    replay_key,
    replay_value,
)

PREFIX = "ragsift"
T0 = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
DOCUMENTS = f"{PREFIX}.documents.v1"
ACME_DOC = b'{"event_id": "e1", "tenant_id": "acme", "doc_id": "d-1", "text": "refunds"}'


def letter(**overrides: Any) -> DeadLetter:
    """A whole letter of a query the retrieval worker refused; keyword overrides."""
    fields: dict[str, Any] = {
        "original": b'{"query_id": "q1", "tenant_id": "acme", "query": "hi"}',
        "stage": "service",
        "error_type": "ServiceUnavailableError",
        "error": "qdrant down",
        "worker": "retrieval",
        "topic": "ragsift.queries.v1",
        "partition": 0,
        "offset": 7,
        "key": b"q1",
        "query_id": "q1",
        "tenant_id": "acme",
    }
    at = overrides.pop("failed_at", T0)
    fields.update(overrides)
    return DeadLetter.build(**fields).model_copy(update={"failed_at": at})


def event_letter(query_id: str, tenant_id: str, **overrides: Any) -> DeadLetter:
    """A letter of one tenant's query ``query_id`` (its own bytes: another event)."""
    original = f'{{"query_id": "{query_id}", "tenant_id": "{tenant_id}", "query": "hi"}}'
    fields = {"query_id": query_id, "tenant_id": tenant_id, "key": query_id.encode()}
    return letter(original=original.encode(), **{**fields, **overrides})


def test_replayable_topics_are_the_topics_the_handlers_consume() -> None:
    from ragsift.workers.audit import AuditSinkHandler
    from ragsift.workers.calibration import FeedbackHandler, ResultJoinHandler
    from ragsift.workers.decision import DecisionHandler
    from ragsift.workers.indexer import IndexerHandler
    from ragsift.workers.report import ReportHandler
    from ragsift.workers.retrieval import RetrievalHandler

    handlers = [
        RetrievalHandler,
        IndexerHandler,
        AuditSinkHandler,
        DecisionHandler,
        ReportHandler,
        FeedbackHandler,
        ResultJoinHandler,
    ]
    assert {h.source for h in handlers} == set(REPLAYABLE_TOPICS)
    # the name each handler writes into its letters is one --worker takes (a retired one
    # may stay listed while the topic, 30 days, still holds its letters)
    assert {h.name for h in handlers} <= set(LETTER_WORKERS)


def _declared_stages() -> set[str]:
    """Every stage a string gives under ragsift/: an error class's ``stage = "x"`` (or
    ``stage: str = "x"``) and a ``stage="x"`` passed to one."""
    found: set[str] = set()
    for path in Path(ragsift.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            given: list[tuple[ast.expr, ast.expr | None]] = []
            if isinstance(node, ast.ClassDef):
                given += [(x.targets[0], x.value) for x in node.body if isinstance(x, ast.Assign)]
                given += [(x.target, x.value) for x in node.body if isinstance(x, ast.AnnAssign)]
            elif isinstance(node, ast.keyword) and node.arg == "stage":
                given.append((ast.Name("stage"), node.value))
            found |= {
                value.value
                for target, value in given
                if isinstance(target, ast.Name)
                and target.id == "stage"
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            }
    return found


def test_letter_stages_are_the_stages_ragsift_declares() -> None:
    """A stage added to an error is one --stage takes (a retired one may stay listed while
    the topic, 30 days, still holds its letters)."""
    declared = _declared_stages()
    assert {"decode", "handler", "unknown", "embed"} <= declared  # the scan finds them
    assert declared <= set(LETTER_STAGES)


@pytest.mark.parametrize(
    ("chosen", "unknown"),
    [
        (LetterFilter(worker="retrieval", stage="embed", topic="queries"), []),
        (LetterFilter(worker="calibration-results", topic="ragsift.feedback.v1"), []),
        (LetterFilter(tenant="no-such-tenant"), []),  # any tenant: not a fixed set
        (LetterFilter(worker="retreival"), ["worker"]),
        (LetterFilter(stage="Decode"), ["stage"]),  # names are matched exactly
        (LetterFilter(topic="query"), ["topic"]),
        (LetterFilter(topic="staging.queries.v1"), ["topic"]),  # another prefix's name
        (LetterFilter(worker="", stage=" decode", topic="queries "), ["worker", "stage", "topic"]),
        (LetterFilter(worker="\x1b[2J" + "検索" * 10_000), ["worker"]),
    ],
)
def test_unknown_names_each_filter_no_letter_carries(
    chosen: LetterFilter, unknown: list[str]
) -> None:
    found = chosen.unknown(PREFIX)
    assert [name for name, _, _ in found] == unknown
    for name, value, known in found:
        assert value == getattr(chosen, name)
        assert value not in known
    assert LetterFilter(topic="staging.queries.v1").unknown("staging") == []


@pytest.mark.parametrize(
    ("chosen", "taken"),
    [
        (LetterFilter(), True),
        (LetterFilter(worker="retrieval"), True),
        (LetterFilter(worker="indexer"), False),
        (LetterFilter(stage="service"), True),
        (LetterFilter(stage="decode"), False),
        (LetterFilter(topic="queries"), True),  # the logical name
        (LetterFilter(topic="ragsift.queries.v1"), True),
        (LetterFilter(topic="documents"), False),
        (LetterFilter(tenant="acme"), True),
        (LetterFilter(tenant="globex"), False),  # another tenant's letters are not taken
        (LetterFilter(since=T0), True),
        (LetterFilter(since=T0 + timedelta(seconds=1)), False),
        (LetterFilter(since=datetime(2026, 12, 1, 9, 30)), True),  # no zone: UTC
        (LetterFilter(worker="retrieval", tenant="globex"), False),  # every filter holds
    ],
)
def test_filters(chosen: LetterFilter, taken: bool) -> None:
    assert chosen.matches(letter(), PREFIX) is taken


def test_a_logical_topic_is_read_under_the_prefix() -> None:
    other = letter(topic="staging.queries.v1")
    assert LetterFilter(topic="queries").matches(other, "staging")
    assert not LetterFilter(topic="queries").matches(other, PREFIX)


def test_plan_sends_whole_letters_in_source_order_with_their_keys() -> None:
    late, early = letter(offset=9, key=b"q9"), letter(offset=3, key=None)
    plan = plan_replay([late, early], LetterFilter(), PREFIX)
    assert plan.send == [early, late]
    assert [replay_key(x) for x in plan.send] == [None, b"q9"]
    assert replay_value(late) == late.original
    assert plan.skipped == {}


def test_plan_names_what_it_cannot_replay_byte_for_byte() -> None:
    truncated = letter(original=b"x" * 100, max_original_bytes=10, offset=1)
    long_key = letter(key=b"k" * 100, max_original_bytes=50, offset=2)
    minimal = letter(offset=3).minimal()  # the last resort: no original at all
    empty = letter(original=b"", offset=4)  # an unreadable span or a tombstone
    own_topic = letter(topic="ragsift.deadletter.v1", offset=5)
    reports = letter(topic="ragsift.reports.v1", offset=6)
    elsewhere = letter(topic="other.queries.v1", offset=8)  # another deployment's
    whole = letter(offset=7)
    twice = letter(offset=7, worker="decision")  # another worker refused the same record
    plan = plan_replay(
        [truncated, long_key, minimal, empty, own_topic, reports, elsewhere, whole, twice],
        LetterFilter(),
        PREFIX,
    )
    assert plan.send == [whole]
    assert plan.skipped == {
        NotReplayed.TRUNCATED: [truncated, long_key, minimal],
        NotReplayed.EMPTY: [empty],
        NotReplayed.TOPIC: [own_topic, reports, elsewhere],
        NotReplayed.DUPLICATE: [twice],
    }


@pytest.mark.parametrize(
    "update",
    [
        {"original_b64": "not base64!"},
        {"key_b64": "%%%"},
        {"original_sha256": "0" * 64},
        {"original_length": 3},
        {"original_b64": base64.b64encode(b"other bytes").decode()},
    ],
)
def test_a_letter_whose_bytes_are_not_what_it_records_is_damaged(update: dict[str, Any]) -> None:
    damaged = letter().model_copy(update=update)
    plan = plan_replay([damaged], LetterFilter(), PREFIX)
    assert plan.send == []
    assert plan.skipped == {NotReplayed.DAMAGED: [damaged]}


def test_filtered_out_and_limit() -> None:
    letters = [event_letter(f"q{n}", "acme" if n % 2 else "globex", offset=n) for n in range(6)]
    plan = plan_replay(letters, LetterFilter(tenant="acme"), PREFIX, limit=2)
    assert [x.offset for x in plan.send] == [1, 3]
    assert plan.filtered_out == 4  # three of globex's, and acme's third past the limit


@pytest.mark.parametrize("logical", REPLAYABLE_TOPICS)
def test_every_input_topic_is_replayable(logical: str) -> None:
    # On the compacted documents topic only a document under its own key is replayed.
    document = {"original": ACME_DOC, "key": b"acme/default/d-1"}
    extra = document if logical == "documents" else {}
    plan = plan_replay([letter(topic=f"{PREFIX}.{logical}.v1", **extra)], LetterFilter(), PREFIX)
    assert len(plan.send) == 1


def test_a_record_that_failed_again_after_a_replay_is_sent_once_not_once_a_letter() -> None:
    # Before: a replayed event that failed again was a new letter (a new offset), and the
    # next replay that took both sent the same bytes twice: each failed again, four
    # letters, then eight... an operator's replay of a stage doubled its letters every run.
    first = letter(offset=7)
    again = letter(offset=40, failed_at=T0 + timedelta(hours=1))  # the replayed copy's
    other = letter(offset=41, original=b'{"query_id": "q2", "tenant_id": "acme", "query": "x"}')
    plan = plan_replay([first, again, other], LetterFilter(), PREFIX)
    assert plan.send == [again, other]  # the latest copy: its place in the topic counts
    assert plan.skipped == {NotReplayed.DUPLICATE: [first]}


def test_copies_of_one_event_replayed_round_after_round_do_not_multiply() -> None:
    letters = [letter(offset=7)]
    for round_ in range(1, 5):  # each replay fails again: a letter per record sent
        plan = plan_replay(letters, LetterFilter(), PREFIX)
        assert len(plan.send) == 1
        letters += [letter(offset=100 * round_ + n) for n in range(len(plan.send))]


def test_the_same_bytes_under_another_key_are_another_record() -> None:
    keyed, unkeyed = letter(offset=7, key=b"q1"), letter(offset=8, key=None)
    plan = plan_replay([keyed, unkeyed], LetterFilter(), PREFIX)
    assert plan.send == [keyed, unkeyed]


def test_a_letter_whose_event_is_another_tenants_than_it_names_is_not_replayed() -> None:
    # A letter is read from a topic every worker may write; the tenant it names is what
    # --tenant filters on. Before: one naming acme whose bytes were globex's document
    # was replayed by `replay --tenant acme`, which wrote into globex's corpus.
    globex = event_letter("q1", "globex", offset=3)
    forged = globex.model_copy(update={"tenant_id": "acme", "offset": 4})
    acme = event_letter("q2", "acme", offset=5)
    plan = plan_replay([forged, acme, globex], LetterFilter(tenant="acme"), PREFIX)
    assert plan.send == [acme]
    assert plan.skipped == {NotReplayed.DAMAGED: [forged]}


@pytest.mark.parametrize(
    "original",
    [b"not json", b"[1]", b'{"tenant_id": 7}', b'{"query_id": "q1"}', b'{"tenant_id": "globex"}'],
)
def test_a_letter_naming_a_tenant_its_bytes_do_not_name_is_damaged(original: bytes) -> None:
    odd = letter(original=original, tenant_id="acme")
    plan = plan_replay([odd], LetterFilter(), PREFIX)
    assert plan.skipped == {NotReplayed.DAMAGED: [odd]}


def test_a_letter_naming_no_tenant_is_replayed_whatever_its_bytes() -> None:
    undecoded = letter(original=b"not json", tenant_id=None, query_id=None)
    assert plan_replay([undecoded], LetterFilter(), PREFIX).send == [undecoded]


def test_an_evidence_letter_is_checked_against_the_tenant_its_data_names() -> None:
    evidence = b'{"id": "e1", "data": {"query_id": "q1", "tenant_id": "globex"}}'
    own = letter(topic="ragsift.audit.v1", original=evidence, tenant_id="globex", offset=1)
    forged = letter(topic="ragsift.audit.v1", original=evidence, tenant_id="acme", offset=2)
    plan = plan_replay([own, forged], LetterFilter(), PREFIX)
    assert plan.send == [own]
    assert plan.skipped == {NotReplayed.DAMAGED: [forged]}


@pytest.mark.parametrize(
    ("original", "key", "tenant"),
    [
        (ACME_DOC, b"globex/default/d-1", "acme"),  # acme's body under globex's key
        (ACME_DOC, b"d-1", "acme"),  # the doc id alone, as before the topic was keyed so
        (ACME_DOC, None, "acme"),
        (b'{"not": "a document"}', b"globex/default/d-1", None),  # no event at all
    ],
)
def test_a_documents_record_refused_for_its_key_is_not_replayed(
    original: bytes, key: bytes | None, tenant: str | None
) -> None:
    # Such a record withdrew the document its key names (compaction keeps it as that
    # key's last). Before: a replay, `--tenant acme` among them, sent it again; the
    # indexer refused it again and withdrew that document again: another tenant's,
    # or a version published since, gone from the live index and the compacted topic.
    refused = letter(topic=DOCUMENTS, original=original, key=key, tenant_id=tenant)
    plan = plan_replay([refused], LetterFilter(), PREFIX)
    assert plan.send == []
    assert plan.skipped == {NotReplayed.REFUSED: [refused]}


def test_a_documents_record_under_its_own_key_is_replayed() -> None:
    own = letter(topic=DOCUMENTS, original=ACME_DOC, key=b"acme/default/d-1", tenant_id="acme")
    assert plan_replay([own], LetterFilter(), PREFIX).send == [own]


def test_a_record_of_a_topic_that_is_not_compacted_is_replayed_whatever_its_key() -> None:
    garbage = letter(original=b"not json", key=b"globex/default/d-1", tenant_id=None)
    assert plan_replay([garbage], LetterFilter(), PREFIX).send == [garbage]
