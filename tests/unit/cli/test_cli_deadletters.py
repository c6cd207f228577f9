"""``ragsift deadletters [replay]``: lines, JSON, refusals and counts, on letters read
and sent by stand-ins for the broker (tests/integration has the real one)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

import pytest

from ragsift.cli.deadletters import LetterFilters
from ragsift.cli.letter_lines import letter_json, letter_line, one_line
from ragsift.streams.deadletters import Letters
from tests.unit.cli.conftest import error_lines, run_cli
from tests.unit.streams.test_deadletters import letter


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The letters ``read_letters`` gives and what ``send_events`` was handed."""
    state: dict[str, Any] = {"letters": Letters(), "sent": [], "read": 0}

    async def read_letters(kafka: object, topic: str) -> Letters:
        state["read"] += 1
        state["topic"] = topic
        return state["letters"]

    async def send_events(settings: object, name: str, events: Sequence[Any]) -> list[Any]:
        state["sent"].append((name, list(events)))
        return []

    monkeypatch.setattr("ragsift.streams.deadletters.read_letters", read_letters)
    monkeypatch.setattr("ragsift.cli.publish.send_events", send_events)
    return state


def test_one_line_flattens_and_defuses_text() -> None:
    assert one_line("a\n  b\tc\u2028d") == "a b c d"
    assert "\x1b" not in one_line("\x1b]0;owned\x07 x")
    assert one_line("x" * 300, 10) == "x" * 9 + "…"
    assert one_line(None) == "-"
    assert one_line("   ") == "-"


def test_letter_line() -> None:
    line = letter_line(
        letter(error="qdrant\ndown\x1b[2J", failed_at=datetime(2026, 12, 1, tzinfo=UTC))
    )
    assert line == (
        "2026-12-01T00:00:00Z  retrieval  service  ragsift.queries.v1:0@7  acme/q1"
        "  ServiceUnavailableError: qdrant down␛[2J"
    )
    assert "\n" not in line
    cut = letter_line(letter(original=b"x" * 20, max_original_bytes=5))
    assert cut.endswith("  truncated")
    anonymous = letter_line(letter(partition=None, offset=None, tenant_id=None, query_id=None))
    assert "ragsift.queries.v1:-@-  -/-  " in anonymous


def test_letter_json_leaves_the_original_out_unless_asked() -> None:
    one = letter()
    plain = json.loads(letter_json(one))
    assert "original_b64" not in plain
    assert plain["original_sha256"] == one.original_sha256
    assert json.loads(letter_json(one, with_original=True))["original_b64"] == one.original_b64
    assert letter_json(letter(error="é\u0085")).isascii()  # nothing that steers a terminal


def test_listing_prints_matching_letters_and_counts(broker: dict[str, Any]) -> None:
    broker["letters"] = Letters(
        [letter(offset=1), letter(offset=2, worker="indexer", stage="embed"), letter(offset=3)],
        unreadable=["0@9: not JSON"],
    )
    done = run_cli(["deadletters", "--worker", "retrieval"])
    assert done.exit_code == 0, done.output
    assert [line.split("  ")[3] for line in done.stdout.splitlines()] == [
        "ragsift.queries.v1:0@1",
        "ragsift.queries.v1:0@3",
    ]
    assert "2 dead letters of 3 on ragsift.deadletter.v1; by worker/stage: retrieval/service 2" in (
        done.stderr
    )
    assert "0@9: not JSON: not a dead letter" in done.stderr
    assert broker["topic"] == "ragsift.deadletter.v1"

    as_json = run_cli(["deadletters", "--json", "--limit", "1"])
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["offset"] for r in rows] == [1]
    assert "original_b64" not in rows[0]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["deadletters", "--since", "yesterday"], "error: --since must be an ISO 8601 time"),
        (["deadletters", "--limit", "0"], "error: --limit must be 1 or more, got 0"),
        (["deadletters", "--with-original"], "error: --with-original goes with --json"),
        (["deadletters", "--stage", "decode", "replay"], "error: the options go after the"),
        (["deadletters", "replay"], "error: replay asks for confirmation on a terminal"),
        (["deadletters", "replay", "--yes", "--since", "2026-13-01"], "error: --since must"),
        (
            ["deadletters", "--worker", "retreival"],
            "error: --worker 'retreival' names no ragsift worker; choose from audit,"
            " calibration, calibration-results, decision, indexer, report, retrieval",
        ),
        (
            ["deadletters", "--stage", "Decode"],
            "error: --stage 'Decode' names no ragsift stage; choose from auth,"
            " collection_limit, config,",
        ),
        (
            ["deadletters", "--topic", "query"],
            "error: --topic 'query' names no ragsift topic; choose from queries, retrievals,",
        ),
        (
            ["deadletters", "replay", "--yes", "--worker", "x"],
            "error: --worker 'x' names no ragsift worker",
        ),
        (
            ["deadletters", "replay", "--dry-run", "--stage", "x"],
            "error: --stage 'x' names no ragsift stage",
        ),
        (
            ["deadletters", "replay", "--yes", "--topic", "x"],
            "error: --topic 'x' names no ragsift topic",
        ),
    ],
)
def test_bad_flags_are_one_line_and_exit_2_before_the_broker(
    broker: dict[str, Any], args: list[str], error: str
) -> None:
    done = run_cli(args)
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(error)
    assert len(done.stderr.strip().splitlines()) == 1
    assert broker["read"] == 0


def test_an_unknown_topic_names_the_full_names_too(broker: dict[str, Any]) -> None:
    done = run_cli(["deadletters", "--topic", "ragsift.query.v1"])
    assert done.exit_code == 2, done.output
    assert "or its full name (ragsift.queries.v1, ...)" in " ".join(done.stderr.split())
    staging = run_cli(
        ["deadletters", "--topic", "ragsift.queries.v1"],
        env={"RAGSIFT_KAFKA_TOPIC_PREFIX": "staging"},
    )
    assert staging.exit_code == 2, staging.output  # its letters are staging.queries.v1's
    assert "(staging.queries.v1, ...)" in " ".join(staging.stderr.split())
    assert broker["read"] == 0


@pytest.mark.parametrize(
    "value",
    ["\x1b]0;owned\x07\x1b[2J", "検索" * 50_000, "{" * 10_000, "9" * 5_000, "acme\nretrieval"],
    ids=["controls", "huge non-Latin", "nesting", "huge number", "newline"],
)
@pytest.mark.parametrize("option", ["--worker", "--stage", "--topic"])
def test_a_hostile_name_is_one_short_line_with_no_controls(
    broker: dict[str, Any], option: str, value: str
) -> None:
    done = run_cli(["deadletters", option, value])
    assert done.exit_code == 2, done.output
    assert len(error_lines(done)) == 1, done.stderr
    assert "\x1b" not in done.output
    assert "\x07" not in done.output
    assert len(done.stderr) < 500  # the value is cut, the names it could be are not
    assert broker["read"] == 0


def test_known_names_are_taken(broker: dict[str, Any]) -> None:
    broker["letters"] = Letters(
        [
            letter(
                offset=1,
                worker="calibration-results",
                stage="feedback",
                topic="ragsift.retrievals.v1",
            )
        ]
    )
    for args in (
        ["--worker", "calibration-results", "--stage", "feedback", "--topic", "retrievals"],
        ["--topic", "ragsift.retrievals.v1", "--tenant", "no-such-tenant"],  # any tenant
    ):
        done = run_cli(["deadletters", *args])
        assert done.exit_code == 0, done.output
    assert broker["read"] == 2


def test_replay_sends_originals_with_keys_and_counts_what_it_skips(
    broker: dict[str, Any],
) -> None:
    whole = letter(offset=5, key=b"q5")
    broker["letters"] = Letters(
        [
            whole,
            letter(original=b"x" * 100, max_original_bytes=10, offset=6),
            letter(topic="ragsift.deadletter.v1", offset=7),
            letter(offset=8, tenant_id="globex"),
        ]
    )
    done = run_cli(["deadletters", "replay", "--tenant", "acme", "--yes"])
    assert done.exit_code == 0, done.output
    assert broker["sent"] == [("ragsift.queries.v1", [(b"q5", whole.original)])]
    assert done.stdout.strip() == (
        "replayed 1; skipped: truncated 1, damaged 0, empty original 0,"
        " not replayable topic 1, refused key 0, duplicate 0; filtered out 1"
    )
    assert "skipped (truncated): ragsift.queries.v1:0@6" in done.stderr
    assert "the letter holds part of its 100 bytes" in done.stderr
    assert "skipped (not replayable topic): ragsift.deadletter.v1:0@7" in done.stderr
    assert "no ragsift worker consumes it" in done.stderr


def test_dry_run_sends_nothing(broker: dict[str, Any]) -> None:
    broker["letters"] = Letters([letter()])
    done = run_cli(["deadletters", "replay", "--dry-run"])
    assert done.exit_code == 0, done.output
    assert broker["sent"] == []
    assert done.stdout.startswith("would replay ragsift.queries.v1:0@7  ")
    assert done.stdout.splitlines()[-1].startswith("would replay 1; skipped: truncated 0")


@pytest.mark.parametrize(("answer", "code", "sent"), [("y\n", 0, 1), ("n\n", 1, 0)])
def test_replay_asks_on_a_terminal(
    broker: dict[str, Any], monkeypatch: pytest.MonkeyPatch, answer: str, code: int, sent: int
) -> None:
    monkeypatch.setattr("ragsift.cli.deadletters._on_terminal", lambda: True)
    broker["letters"] = Letters([letter()])
    done = run_cli(["deadletters", "replay"], stdin=answer)
    assert done.exit_code == code, done.output
    assert "replay 1 letters to ragsift.queries.v1?" in done.stdout
    assert len(broker["sent"]) == sent


def test_a_missing_topic_is_no_letters(broker: dict[str, Any]) -> None:
    broker["letters"] = Letters(found=False)
    done = run_cli(["deadletters"])
    assert done.exit_code == 0
    assert "does not exist yet: nothing was dead-lettered" in done.stderr


#: the options the listing and ``replay`` share (``LetterFilters``), in --help's order
FILTER_OPTIONS = ["--worker", "--stage", "--topic", "--tenant", "--since", "--limit"]


def _option_rows(args: list[str]) -> dict[str, str]:
    """``ragsift ARGS --help``'s option rows, each by its option's name."""
    result = run_cli([*args, "--help"])
    assert result.exit_code == 0, result.output
    rows = [line.strip("│ ").split(maxsplit=1) for line in result.stdout.splitlines()]
    return {row[0]: row[1].strip() for row in rows if len(row) == 2 and row[0].startswith("--")}


def test_the_listing_and_replay_take_the_same_filter_options() -> None:
    assert [f"--{f.name}" for f in fields(LetterFilters)] == FILTER_OPTIONS
    listing, replaying = _option_rows(["deadletters"]), _option_rows(["deadletters", "replay"])
    assert [o for o in listing if o in FILTER_OPTIONS] == FILTER_OPTIONS
    assert [o for o in replaying if o in FILTER_OPTIONS] == FILTER_OPTIONS
    assert {o: listing[o] for o in FILTER_OPTIONS} == {o: replaying[o] for o in FILTER_OPTIONS}
    assert "ISO 8601" in listing["--since"]  # the rows hold their help, not only a type
    # each keeps its own options after the filters
    assert {"--json", "--with-original"} <= listing.keys() - replaying.keys()
    assert {"--dry-run", "--yes"} <= replaying.keys() - listing.keys()
