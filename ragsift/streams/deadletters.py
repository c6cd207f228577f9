"""The dead-letter topic read back: which letters match, and which can be replayed.

``ragsift deadletters`` lists the letters and ``ragsift deadletters replay`` sends
each one's original bytes, with its original key, back to the topic it was read
from. What is decided here is pure (no broker): a filter over the letters, and for
each matching letter whether it can be replayed byte for byte into one of the topics
ragsift's own workers consume, and if not, why. Reading the topic is
:func:`read_letters`, on :mod:`ragsift.streams.topic_read` (no consumer group).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from ragsift.errors import RagsiftError
from ragsift.schemas import DeadLetter
from ragsift.settings import KafkaSettings
from ragsift.streams.codec import EventCodec
from ragsift.streams.topic_read import Record, read_to_end
from ragsift.streams.topics import TOPICS, TopicSpec

__all__ = [
    "LETTER_STAGES",
    "LETTER_WORKERS",
    "REPLAYABLE_TOPICS",
    "LetterFilter",
    "Letters",
    "NotReplayed",
    "ReplayPlan",
    "plan_replay",
    "read_letters",
    "replay_key",
    "replay_value",
    "why_not_replayable",
]

#: The logical topics a ragsift handler consumes (each handler's ``source``:
#: retrieval, indexer, feedback, report/decision/calibration, audit). A letter read from
#: any other topic (the dead-letter topic itself, reports, decisions) has no worker to
#: take it again; tests/unit/streams/test_deadletters.py keeps this equal to the handlers'.
REPLAYABLE_TOPICS: Final = ("queries", "documents", "feedback", "retrievals", "audit")
#: The ``worker`` a letter records: each handler's ``name`` (test_deadletters.py checks
#: each is here). One retired stays while the topic (30 days) may hold its letters.
LETTER_WORKERS: Final = (
    "audit",
    "calibration",
    "calibration-results",
    "decision",
    "indexer",
    "report",
    "retrieval",
)
#: The ``stage`` a letter records: the stage of a ragsift error (``handler`` for any
#: other exception, :func:`ragsift.streams.isolation.failure_stage`); test_deadletters.py
#: checks every stage declared under ragsift/ is here. One retired stays as a worker does.
LETTER_STAGES: Final = (
    "auth",
    "collection_limit",
    "config",
    "deadline",
    "decode",
    "embed",
    "emit",
    "feedback",
    "generate",
    "handler",
    "integration",
    "poison",
    "redis",  # a key Redis refuses for good (ragsift.retrieval.redis_replies)
    "rerank",
    "search",
    "service",
    "unknown",
    "validate",
)


class NotReplayed(StrEnum):
    """Why a matching letter is not replayed."""

    TRUNCATED = "truncated"
    """The letter holds the original's (or its key's) first bytes only."""
    DAMAGED = "damaged"
    """Its original or key is not base64, or not the length or SHA-256 it records, or
    its original does not name the tenant the letter names."""
    EMPTY = "empty original"
    """No bytes to send: a span the Kafka client could not read, a tombstone, or an empty
    message; a null value cannot be told from an empty one in a letter."""
    TOPIC = "not replayable topic"
    """Its topic is not one a ragsift worker consumes under this topic prefix."""
    REFUSED = "refused key"
    """On the compacted documents topic: its bytes are no event of its key (no document
    event, or another key's), so it withdrew the document its key names; sent again, it
    is refused again and withdraws that document again (another tenant's, or a version
    published since), from the live index and from what compaction keeps."""
    DUPLICATE = "duplicate"
    """Another letter of this replay names the same source record (two workers refused
    it), or sends the same bytes with the same key to the same topic, later in it (the
    event was replayed before and failed again)."""


@dataclass(frozen=True, slots=True)
class LetterFilter:
    """Which letters a listing or a replay takes; None takes every value."""

    worker: str | None = None
    stage: str | None = None
    topic: str | None = None
    """A full topic name (``ragsift.queries.v1``) or a logical one (``queries``)."""
    tenant: str | None = None
    since: datetime | None = None
    """Letters that failed at or after this moment (aware; UTC when given without zone)."""

    def matches(self, letter: DeadLetter, prefix: str) -> bool:
        """Whether ``letter`` passes every filter given (topic names under ``prefix``)."""
        if self.worker is not None and letter.worker != self.worker:
            return False
        if self.stage is not None and letter.stage != self.stage:
            return False
        if self.tenant is not None and letter.tenant_id != self.tenant:
            return False
        if self.topic is not None and letter.topic not in self._topic_names(prefix):
            return False
        return self.since is None or _aware(letter.failed_at) >= _aware(self.since)

    def unknown(self, prefix: str) -> list[tuple[str, str, tuple[str, ...]]]:
        """Each filter given a value no letter carries, as (filter, value, the values it
        takes): a typo matched nothing, and read as "no letters". A topic is taken by
        its logical name (the ones named) or its name under ``prefix``."""
        names = {spec.name(prefix) for spec in TOPICS.values()}
        given = (
            ("worker", self.worker, LETTER_WORKERS, ()),
            ("stage", self.stage, LETTER_STAGES, ()),
            ("topic", self.topic, tuple(TOPICS), names),
        )
        return [
            (name, value, known)
            for name, value, known, also in given
            if value is not None and value not in known and value not in also
        ]

    def _topic_names(self, prefix: str) -> set[str]:
        assert self.topic is not None
        names = {self.topic}
        if self.topic in TOPICS:
            names.add(TOPICS[self.topic].name(prefix))
        return names


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass
class Letters:
    """The letters read from the dead-letter topic, in partition and offset order."""

    letters: list[DeadLetter] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    """``partition@offset`` of each record that is not a dead letter, with why."""
    found: bool = True
    """False when the dead-letter topic does not exist."""


async def read_letters(kafka: KafkaSettings, topic: str) -> Letters:
    """Every letter on ``topic`` from its beginning to its end when the read began.

    Raises:
        TopicReadTimeout: the topic stopped giving records before its end.
        KafkaError: the cluster cannot be reached.
    """
    codec = EventCodec(DeadLetter)
    read = Letters()

    def take(record: Record) -> None:
        try:
            read.letters.append(codec.decode(record.value or b""))
        except RagsiftError as exc:
            read.unreadable.append(f"{record.partition}@{record.offset}: {exc}")

    read.found = await read_to_end(kafka, topic, take)
    return read


@dataclass
class ReplayPlan:
    """What a replay sends (in source order: topic, partition, offset) and passes over."""

    send: list[DeadLetter] = field(default_factory=list)
    skipped: dict[NotReplayed, list[DeadLetter]] = field(default_factory=dict)
    filtered_out: int = 0
    """Letters that did not match the filters, or came after ``--limit`` matching ones."""

    def skip(self, reason: NotReplayed, letter: DeadLetter) -> None:
        """Pass ``letter`` over for ``reason``."""
        self.skipped.setdefault(reason, []).append(letter)


def plan_replay(
    letters: Iterable[DeadLetter], chosen: LetterFilter, prefix: str, limit: int | None = None
) -> ReplayPlan:
    """Which of ``letters`` a replay sends to their source topics under ``prefix``, and
    why each other matching one is passed over; at most ``limit`` matching letters."""
    plan = ReplayPlan()
    replayable = {TOPICS[logical].name(prefix) for logical in REPLAYABLE_TOPICS}
    compacted = {
        spec.name(prefix): spec
        for spec in (TOPICS[logical] for logical in REPLAYABLE_TOPICS)
        if spec.cleanup_policy == "compact"
    }
    seen: set[tuple[str, int | None, int | None] | str] = set()
    matched = 0
    for letter in letters:
        if not chosen.matches(letter, prefix) or (limit is not None and matched >= limit):
            plan.filtered_out += 1
            continue
        matched += 1
        reason = why_not_replayable(letter, replayable)
        spec = compacted.get(letter.topic)
        if reason is None and spec is not None and not _under_its_key(letter, spec):
            reason = NotReplayed.REFUSED
        source = (
            (letter.topic, letter.partition, letter.offset)
            if letter.offset is not None
            else letter.dead_letter_id
        )
        if reason is None and source in seen:
            reason = NotReplayed.DUPLICATE
        if reason is not None:
            plan.skip(reason, letter)
            continue
        seen.add(source)
        plan.send.append(letter)
    plan.send.sort(key=lambda x: (x.topic, x.partition or 0, x.offset or 0))
    # One event's copies (a replayed event that failed again is a new letter, at a new
    # offset) go once, the last: its place among the topic's other records is the one
    # that stands. Sent once a letter, each replay of them doubled their letters.
    last = {_record(x): x for x in plan.send}
    for letter in [x for x in plan.send if last[_record(x)] is not x]:
        plan.skip(NotReplayed.DUPLICATE, letter)
    plan.send = [x for x in plan.send if last[_record(x)] is x]
    return plan


def _under_its_key(letter: DeadLetter, spec: TopicSpec) -> bool:
    """Whether ``letter``'s original is an event of ``spec``'s topic under its own key,
    as the router of a compacted topic takes it (``BatchRouter._mismatched_key``)."""
    try:
        event = EventCodec(spec.model).decode(replay_value(letter))
    except RagsiftError:  # DecodeError: no event, so no key of one
        return False
    return replay_key(letter) == spec.key_of(event).encode()


def _record(letter: DeadLetter) -> tuple[str, str | None, str]:
    """What a replay of ``letter`` writes: its topic, key and value."""
    return (letter.topic, letter.key_b64, letter.original_b64)


def why_not_replayable(letter: DeadLetter, replayable: set[str]) -> NotReplayed | None:
    """Why ``letter`` cannot be sent back byte for byte to a topic of ``replayable``
    (full names), or None when it can."""
    if letter.topic not in replayable:
        return NotReplayed.TOPIC
    if letter.original_truncated:
        return NotReplayed.TRUNCATED
    try:
        original = replay_value(letter)
        replay_key(letter)
    except binascii.Error:
        return NotReplayed.DAMAGED
    if not original:
        return NotReplayed.EMPTY
    if (letter.original_length is not None and letter.original_length != len(original)) or (
        letter.original_sha256 is not None
        and letter.original_sha256 != hashlib.sha256(original).hexdigest()
    ):
        return NotReplayed.DAMAGED  # not the bytes the worker refused
    if letter.tenant_id is not None and _named_tenant(original) != letter.tenant_id:
        # The worker names the tenant of the event it decoded from these bytes. Letters
        # come from a topic every worker writes: one naming a tenant its bytes do not
        # would have `replay --tenant` write another tenant's event.
        return NotReplayed.DAMAGED
    return None


def _named_tenant(original: bytes) -> str | None:
    """The tenant an event's bytes name (``tenant_id``, or the evidence's
    ``data.tenant_id``), or None when they are no JSON object naming one."""
    try:
        event = json.loads(original.decode("utf-8-sig", "surrogatepass"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the stack
        return None
    if not isinstance(event, dict):
        return None
    data = event.get("data")
    tenant = event.get("tenant_id", data.get("tenant_id") if isinstance(data, dict) else None)
    return tenant if isinstance(tenant, str) else None


def replay_value(letter: DeadLetter) -> bytes:
    """The original message value ``letter`` holds, read strictly (a letter's base64
    with characters outside the alphabet is damaged, not skipped over).

    Raises:
        binascii.Error: ``original_b64`` is not base64.
    """
    return base64.b64decode(letter.original_b64, validate=True)


def replay_key(letter: DeadLetter) -> bytes | None:
    """The message key ``letter`` was read with (None: it had none).

    Raises:
        binascii.Error: ``key_b64`` is not base64.
    """
    if letter.key_b64 is None:
        return None
    return base64.b64decode(letter.key_b64, validate=True)
