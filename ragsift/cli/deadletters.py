"""``ragsift deadletters``: list the dead-letter topic's letters, and replay them.

The listing reads the topic from its beginning to where it ended when the command
started, with no consumer group (nothing committed), one line (or one JSON object) per
letter on stdout and a count by worker and stage on stderr. ``replay`` sends each
matching letter's original bytes, with its original key, back to the topic the worker
read it from (:mod:`ragsift.streams.deadletters` decides which can be).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import partial, wraps
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from ragsift.cli.common import EXIT_FAILURE, _fail, _kafka, _settings, err_console
from ragsift.cli.letter_lines import (
    ERROR_CHARS,
    letter_json,
    letter_line,
    number,
    one_line,
    summary,
)

if TYPE_CHECKING:
    from ragsift.schemas import DeadLetter
    from ragsift.settings import Settings
    from ragsift.streams.deadletters import LetterFilter, Letters, ReplayPlan

__all__ = ["LetterFilters", "deadletters_app", "parse_since"]

#: Letters named one per line among those a replay passes over; past this many, a count.
SKIPPED_SHOWN: Final = 20

deadletters_app = typer.Typer(
    short_help="The dead-letter topic's letters: list them, or replay their originals to"
    " their topics.",
    help="List the dead letters, or replay them (`ragsift deadletters replay`). The"
    " dead-letter topic is read from its beginning to its end as the command starts, with"
    " no consumer group (nothing committed): one line per matching letter (failed_at,"
    " worker, stage, topic:partition@offset, tenant/query id, error on one line, and"
    " `truncated` when the letter holds only the original's first bytes), or with --json"
    " one JSON object per line (without original_b64 unless --with-original); then a count"
    " by worker and stage on stderr.",
)

#: What --worker, --stage and --topic say of a name no letter carries.
_LISTED: Final = "; another is refused (exit 2) with the list"
Worker = Annotated[
    str | None,
    typer.Option("--worker", help=f"Only letters of this worker (retrieval, ...){_LISTED}."),
]
Stage = Annotated[
    str | None,
    typer.Option("--stage", help=f"Only letters of this stage (decode, embed, ...){_LISTED}."),
]
Topic = Annotated[
    str | None,
    typer.Option(
        "--topic",
        help=f"Only letters read from this topic: its name or logical name (queries){_LISTED}.",
    ),
]
TenantFilter = Annotated[str | None, typer.Option("--tenant", help="Only this tenant's letters.")]
Since = Annotated[
    str | None,
    typer.Option(
        "--since", help="Only letters that failed at or after this ISO 8601 time (UTC if no zone)."
    ),
]
Limit = Annotated[
    int | None, typer.Option("--limit", help="At most this many matching letters (1 or more).")
]


def parse_since(value: str | None) -> datetime | None:
    """``--since`` as a time (UTC when it names no zone); exit 2 naming a bad one."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        _fail(f"--since must be an ISO 8601 time such as 2026-12-01T09:30:00Z, got {value!r}")


@dataclass(frozen=True)
class LetterFilters:
    """The filter options the listing and ``replay`` both take, as given."""

    worker: str | None = None
    stage: str | None = None
    topic: str | None = None
    tenant: str | None = None
    since: str | None = None
    limit: int | None = None

    def given(self) -> bool:
        """Whether any filter was given."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    def checked(self, prefix: str) -> LetterFilter:
        """The filters as the letters are matched with (topics under ``prefix``); exit 2
        naming a bad one, and for a worker, stage or topic no letter carries, the ones
        there are."""
        from ragsift.errors import shown_value
        from ragsift.streams.deadletters import LetterFilter
        from ragsift.streams.topics import TOPICS

        if self.limit is not None and self.limit < 1:
            _fail(f"--limit must be 1 or more, got {self.limit}")
        chosen = LetterFilter(
            self.worker, self.stage, self.topic, self.tenant, parse_since(self.since)
        )
        for option, value, known in chosen.unknown(prefix):
            full = TOPICS["queries"].name(prefix)
            under = f", or its full name ({full}, ...)" if option == "topic" else ""
            _fail(
                f"--{option} {shown_value(value)} names no ragsift {option};"
                f" choose from {', '.join(known)}{under}"
            )
        return chosen


#: Each field of LetterFilters and its option, in the order --help lists them.
_FILTER_OPTIONS: Final = {
    "worker": Worker,
    "stage": Stage,
    "topic": Topic,
    "tenant": TenantFilter,
    "since": Since,
    "limit": Limit,
}
_PLAIN: Final = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _filtered(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the filter options in place of its ``filters: LetterFilters``
    parameter: Typer reads the signature, so both commands declare the options once, here,
    and get them gathered into one :class:`LetterFilters`."""
    signature = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name != "filters":
            params.append(param)
            continue
        params += [
            inspect.Parameter(name, _PLAIN, default=None, annotation=option)
            for name, option in _FILTER_OPTIONS.items()
        ]

    @wraps(command)
    def gathered(**given: Any) -> None:
        filters = LetterFilters(**{name: given.pop(name) for name in _FILTER_OPTIONS})
        command(filters=filters, **given)

    gathered.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]  # read by Typer
    gathered.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return gathered


def _read(settings: Settings) -> tuple[str, Letters]:
    """The dead-letter topic's name and its letters; exit 1 when it cannot be read."""
    from ragsift.streams.deadletters import read_letters
    from ragsift.streams.topic_read import TopicReadTimeout
    from ragsift.streams.topics import TOPICS

    name = TOPICS["deadletter"].name(settings.kafka.topic_prefix)
    try:
        read = _kafka(settings, read_letters(settings.kafka, name))
    except TopicReadTimeout as exc:
        _fail(str(exc), EXIT_FAILURE)
    if not read.found:
        err_console.print(f"{name} does not exist yet: nothing was dead-lettered")
    for where in read.unreadable[:SKIPPED_SHOWN]:
        err_console.print(f"warning: {name} {one_line(where, ERROR_CHARS)}: not a dead letter")
    return name, read


@deadletters_app.callback(invoke_without_command=True)
@_filtered
def deadletters(
    ctx: typer.Context,
    filters: LetterFilters,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per letter (no original_b64).")
    ] = False,
    with_original: Annotated[
        bool, typer.Option("--with-original", help="With --json: keep original_b64.")
    ] = False,
) -> None:
    """List the dead letters (the group's help says how)."""
    if ctx.invoked_subcommand is not None:
        if filters.given() or as_json or with_original:
            command = ctx.invoked_subcommand
            _fail(f"the options go after the command: ragsift deadletters {command} ...")
        return
    if with_original and not as_json:
        _fail("--with-original goes with --json: the listing's lines show no bytes")
    settings = _settings()
    prefix = settings.kafka.topic_prefix
    chosen = filters.checked(prefix)
    name, read = _read(settings)
    shown: list[DeadLetter] = []
    for letter in read.letters:
        if filters.limit is not None and len(shown) >= filters.limit:
            break
        if chosen.matches(letter, prefix):
            shown.append(letter)
            print(
                letter_json(letter, with_original=with_original) if as_json else letter_line(letter)
            )
    err_console.print(summary(shown, len(read.letters), name))


@deadletters_app.command("replay")
@_filtered
def replay(
    filters: LetterFilters,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be replayed; send nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Replay without asking.")] = False,
) -> None:
    """Send each matching letter's original bytes, with its original key, to the topic
    it was read from, which must be one a ragsift worker consumes under this prefix
    (queries, documents, feedback, retrievals, audit); the others are named and skipped,
    as are letters holding only the original's first bytes (`truncated`), none
    (`empty original`: an unreadable span, a tombstone) or other bytes than it records
    or another tenant's event than it names (`damaged`), a documents record that is no
    document under its own key (`refused key`: sent again, it would withdraw the
    document its key names again, another tenant's or a newer version), and a second
    letter of one source record or of the same bytes under the same key (`duplicate`:
    an event that failed again after a replay goes once). Asks first on a terminal;
    elsewhere needs --yes (or --dry-run). Prints the counts: replayed, skipped by why,
    filtered out.

    Replay is safe to repeat: every output a worker derives from an event has an id
    derived from the tenant and query id (or the document's content), so downstream
    consumers and the audit sink keep one copy (ADR 004). A document letter replayed
    after a later version of that document was published brings the older version back:
    replay documents letters only when no later version was."""
    if not dry_run and not yes and not _on_terminal():
        _fail(
            "replay asks for confirmation on a terminal and stdin is not one: pass --yes to"
            " replay, or --dry-run to see what would be replayed"
        )
    settings = _settings()
    chosen = filters.checked(settings.kafka.topic_prefix)
    from ragsift.streams.deadletters import plan_replay

    _, read = _read(settings)
    plan = plan_replay(read.letters, chosen, settings.kafka.topic_prefix, filters.limit)
    _name_skipped(plan)
    if dry_run:
        for letter in plan.send:
            print(f"would replay {_source(letter)}  {letter_line(letter)}")
        print(_counts(plan, "would replay"))
        return
    if plan.send and not yes:
        targets = ", ".join(sorted({one_line(x.topic) for x in plan.send}))
        if not typer.confirm(f"replay {len(plan.send)} letters to {targets}?"):
            err_console.print("nothing replayed")
            raise typer.Exit(EXIT_FAILURE)
    refused = _send(settings, plan)
    print(_counts(plan, "replayed", refused))
    if refused:
        raise typer.Exit(EXIT_FAILURE)


def _on_terminal() -> bool:
    """Whether a confirmation can be asked: stdin is a terminal."""
    return sys.stdin.isatty()


def _source(letter: DeadLetter) -> str:
    return one_line(f"{letter.topic}:{number(letter.partition)}@{number(letter.offset)}")


def _name_skipped(plan: ReplayPlan) -> None:
    """Each letter passed over, with why, on stderr (the first ones, then a count)."""
    named = 0
    for reason, letters in plan.skipped.items():
        for letter in letters:
            if named == SKIPPED_SHOWN:
                rest = sum(len(x) for x in plan.skipped.values()) - named
                err_console.print(f"… and {rest} more skipped")
                return
            named += 1
            err_console.print(
                f"skipped ({reason}): {_source(letter)} dead letter"
                f" {one_line(letter.dead_letter_id)}{_why(reason, letter)}"
            )


def _why(reason: str, letter: DeadLetter) -> str:
    from ragsift.streams.deadletters import REPLAYABLE_TOPICS, NotReplayed

    if reason == NotReplayed.TRUNCATED:
        return f": the letter holds part of its {number(letter.original_length)} bytes"
    if reason == NotReplayed.TOPIC:
        return f": no ragsift worker consumes it (replayable: {', '.join(REPLAYABLE_TOPICS)})"
    if reason == NotReplayed.DUPLICATE:
        return ": another letter of this replay sends that record"
    if reason == NotReplayed.REFUSED:
        return ": no document under its own key; sent again it withdraws what its key names"
    if reason == NotReplayed.DAMAGED:
        return ": its bytes are not the length, SHA-256 or tenant the letter records"
    return ""


def _label(letters: Sequence[DeadLetter], index: int) -> str:
    return _source(letters[index])


def _counts(plan: ReplayPlan, verb: str, refused: int = 0) -> str:
    from ragsift.streams.deadletters import NotReplayed

    skipped = ", ".join(f"{why} {len(plan.skipped.get(why, []))}" for why in NotReplayed)
    failed = f"; not written {refused}" if refused else ""
    return (
        f"{verb} {len(plan.send) - refused}{failed}; skipped: {skipped};"
        f" filtered out {plan.filtered_out}"
    )


def _send(settings: Settings, plan: ReplayPlan) -> int:
    """Send the plan's letters, topic by topic in source order; how many were not written
    (each named on stderr)."""
    from ragsift.cli.publish import report_refused, send_events
    from ragsift.streams.deadletters import replay_key, replay_value

    by_topic: dict[str, list[DeadLetter]] = {}
    for letter in plan.send:
        by_topic.setdefault(letter.topic, []).append(letter)

    async def run() -> int:
        refused = 0
        for name, letters in by_topic.items():
            events = [(replay_key(x), replay_value(x)) for x in letters]
            lost = await send_events(settings, name, events)
            report_refused(lost, partial(_label, letters), name)
            refused += len(lost)
        return refused

    return _kafka(settings, run())
