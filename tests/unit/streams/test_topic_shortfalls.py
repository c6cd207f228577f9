"""What the check of an existing topic's settings makes of what the broker says.

The values come from the broker (DescribeConfigs): text, usually numbers, but any
reply must leave a worker starting, with at most a warning.
"""

from __future__ import annotations

import pytest

from ragsift.streams.admin import _shortfalls, config_fix
from ragsift.streams.topics import MAX_MESSAGE_BYTES, TOPICS

DOCS = TOPICS["documents"]
NAME = "p.documents.v1"


def shortfalls(**have: object) -> list[str]:
    return _shortfalls(DOCS, "p", {NAME: dict(have)})


def test_the_registry_settings_lack_nothing() -> None:
    assert shortfalls(**DOCS.config()) == []
    assert shortfalls(**{"cleanup.policy": "compact,delete", "max.message.bytes": "9999999"}) == []


def test_a_topic_made_with_the_broker_defaults_is_named_twice() -> None:
    notes = shortfalls(**{"cleanup.policy": "delete", "max.message.bytes": "1048588"})
    compact = config_fix(NAME, "cleanup.policy", "compact")
    assert notes == [
        f"{NAME} is not compacted (cleanup.policy=delete): its records are deleted by age,"
        f" and an index rebuilt from it loses them; {compact}",
        f"{NAME} takes messages up to 1048588 bytes, under the {MAX_MESSAGE_BYTES} a document"
        f" may need; {config_fix(NAME, 'max.message.bytes', MAX_MESSAGE_BYTES)}",
    ]
    assert config_fix(NAME, "cleanup.policy", "compact").endswith(
        f"--entity-name {NAME} --add-config cleanup.policy=compact"
    )


@pytest.mark.parametrize(
    "size", [None, "", "abc", "-5", "1e9", "１２", "²", "9" * 400, "\x00", 12.5, ["1"], {"a": 1}]
)
def test_a_size_the_broker_gives_as_no_number_is_unknown_not_a_crash(size: object) -> None:
    assert shortfalls(**{"cleanup.policy": "compact", "max.message.bytes": size}) == []


@pytest.mark.parametrize("policy", [None, "", "delete", "Compact", "\u202ecompact"])
def test_a_policy_other_than_compact_is_named_with_what_it_is(policy: object) -> None:
    [note] = shortfalls(**{"cleanup.policy": policy, "max.message.bytes": str(MAX_MESSAGE_BYTES)})
    assert note.startswith(f"{NAME} is not compacted (cleanup.policy={policy or 'delete'})")


def test_a_topic_whose_settings_were_not_given_is_not_named() -> None:
    assert _shortfalls(DOCS, "p", {}) == []
    assert _shortfalls(DOCS, "p", {"other.documents.v1": {"cleanup.policy": "delete"}}) == []
