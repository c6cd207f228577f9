"""How ``ragsift deadletters`` shows a letter: one line, or one JSON object, and the
count that ends a listing. A letter is written by whoever could publish the event it
holds, so nothing of it reaches the terminal unescaped."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ragsift.cli.terminal import visible

if TYPE_CHECKING:
    from ragsift.schemas import DeadLetter

__all__ = ["ERROR_CHARS", "letter_json", "letter_line", "number", "one_line", "summary"]

#: Characters of a letter's error a listing line keeps (a letter keeps up to 4,000).
ERROR_CHARS: Final = 200


def one_line(text: str | None, limit: int | None = None) -> str:
    """``text`` on one line (every run of whitespace, newlines among them, one space),
    cut to ``limit`` characters with an ellipsis, terminal controls shown as stand-ins:
    a letter is written by whoever could publish the event it holds."""
    if text is None:
        return "-"
    flat = visible(" ".join(text.split()))
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat or "-"


def letter_line(letter: DeadLetter) -> str:
    """One listing line: when, who, where from, whose, why, and whether it was cut."""
    at = letter.failed_at.isoformat(timespec="seconds").replace("+00:00", "Z")
    where = f"{letter.topic}:{number(letter.partition)}@{number(letter.offset)}"
    cut = "  truncated" if letter.original_truncated else ""
    return (
        f"{at}  {one_line(letter.worker)}  {one_line(letter.stage)}  {one_line(where)}"
        f"  {one_line(letter.tenant_id)}/{one_line(letter.query_id)}"
        f"  {one_line(letter.error_type)}: {one_line(letter.error, ERROR_CHARS)}{cut}"
    )


def number(value: int | None) -> str:
    """An optional count or offset: ``-`` when unknown."""
    return "-" if value is None else str(value)


def letter_json(letter: DeadLetter, *, with_original: bool = False) -> str:
    """The letter as one JSON line (ASCII: nothing in it can steer a terminal), without
    ``original_b64`` unless ``with_original``."""
    data = letter.model_dump(mode="json", exclude=None if with_original else {"original_b64"})
    return json.dumps(data)


def summary(letters: Sequence[DeadLetter], total: int, name: str) -> str:
    """The listing's last line: how many letters matched, of how many, by worker/stage."""
    by = Counter(f"{one_line(x.worker)}/{one_line(x.stage)}" for x in letters)
    counts = ", ".join(f"{key} {n}" for key, n in sorted(by.items())) or "none"
    return f"{len(letters)} dead letters of {total} on {name}; by worker/stage: {counts}"
