"""Sending checked events to a topic, and naming each one that was not written.

``submit`` used to send its events and flush, and count them all as sent. A flush
waits for the broker's answers but raises none of them: an event the broker refused
(over the topic's ``max.message.bytes``, a topic it may not write) was lost without a
word. Each event's acknowledgement is now awaited, and a refusal is that event's
line on stderr and exit status 1, after the others were sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

from ragsift.cli.common import err_console, print_warning
from ragsift.settings import Settings

__all__ = ["Event", "Refused", "report_refused", "send_events"]

Event = tuple[bytes | None, bytes | None]
#: Refusals named one per line; past this many, a count.
REFUSED_SHOWN = 20


@dataclass(frozen=True, slots=True)
class Refused:
    """An event (its position in what was sent) that was not written, and why."""

    index: int
    reason: str


async def send_events(settings: Settings, name: str, events: Sequence[Event]) -> list[Refused]:
    """Create the registry's missing topics (warning of what an existing one lacks), send
    keyed events to topic ``name`` (a None value is a tombstone) and wait for each one's
    acknowledgement; the events that were not written, in order.

    Raises:
        KafkaError: the cluster cannot be reached (nothing is known to be written).
    """
    from aiokafka.errors import KafkaError, MessageSizeTooLargeError

    from ragsift.streams import clients
    from ragsift.streams.admin import prepare_topics
    from ragsift.streams.topics import MAX_MESSAGE_BYTES

    # A broker that creates topics on first use would make the documents topic with its
    # defaults (not compacted, 1 MiB messages) if `submit` came before any worker; one
    # made so before is named, with the setting it lacks.
    _, shortfalls = await prepare_topics(settings.kafka)
    for note in shortfalls:
        print_warning(note)
    producer = clients.producer(settings.kafka, linger_ms=5, max_request_size=MAX_MESSAGE_BYTES)
    pending = []
    refused: list[Refused] = []
    try:
        await producer.start()
        for index, (key, payload) in enumerate(events):
            try:
                pending.append((index, await producer.send(name, payload, key=key)))
            except MessageSizeTooLargeError as exc:  # the client's own check: this event only
                refused.append(Refused(index, _reason(exc)))
        await producer.flush()
        for index, acknowledged in pending:
            try:
                await acknowledged
            except KafkaError as exc:  # the broker's answer for this event
                refused.append(Refused(index, _reason(exc)))
    finally:
        await producer.stop()
    return sorted(refused, key=lambda r: r.index)


def report_refused(refused: Sequence[Refused], label: Callable[[int], str], name: str) -> None:
    """Name each event that was not written (``label`` of its index) on stderr, and how
    to let the topic take a message too large for it."""
    from ragsift.streams.admin import config_fix
    from ragsift.streams.topics import MAX_MESSAGE_BYTES

    for r in refused[:REFUSED_SHOWN]:
        err_console.print(Text.assemble(f"{label(r.index)}: ", ("not written ", "red"), r.reason))
    if len(refused) > REFUSED_SHOWN:
        err_console.print(f"… and {len(refused) - REFUSED_SHOWN} more not written")
    if any("MessageSizeTooLarge" in r.reason for r in refused):
        fix = config_fix(name, "max.message.bytes", MAX_MESSAGE_BYTES)
        err_console.print(
            f"{name} takes messages up to its max.message.bytes (the broker's 1 MiB unless"
            f" set). ragsift creates its documents topic with {MAX_MESSAGE_BYTES} since"
            f" 2026-11-30; to raise a topic's: {fix}"
        )


def _reason(exc: Exception) -> str:
    reason = " ".join(str(exc).split())  # aiokafka's text has newlines
    return reason if reason.startswith(type(exc).__name__) else f"{type(exc).__name__}: {reason}"
