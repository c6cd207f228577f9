"""JSON Lines files read line by line, each line's trouble named by file and line.

A folder ingest refuses a JSONL file with a bad line (nothing of the ingest is
written): one of its lines would otherwise silently be a document short. The
refusal names every bad line of the file, not only the first, so a user fixes
them in one go (before, each run named one line, and a file with ten bad lines
took ten runs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragsift.errors import InvalidEventError
from ragsift.schemas.payload import lone_surrogate

__all__ = ["MAX_LINES_NAMED", "BadLines", "json_line", "jsonl_rows"]

#: A refusal names this many bad lines and counts the rest.
MAX_LINES_NAMED = 10
#: A \uD800-\uDFFF escape: only a line holding one can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def jsonl_rows(path: Path, bad: BadLines | None = None) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON Lines file, parsed, with its 1-based line number.

    With ``bad``, a line that is not JSON is recorded there and passed over (the
    caller raises :meth:`BadLines.check` at the end); without, it raises at once.

    Raises:
        InvalidEventError: a line is not JSON (:func:`json_line`), or the file is
            not UTF-8 text: named by file and line.
    """
    try:
        # utf-8-sig: a BOM, as editors on Windows write, is no text
        with path.open(encoding="utf-8-sig") as handle:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json_line(line, f"{path}:{lineno}")
                except InvalidEventError as exc:
                    if bad is None:
                        raise
                    bad.add(str(exc))
                    continue
                yield lineno, row
    except UnicodeDecodeError as exc:
        raise InvalidEventError(f"{path}: not UTF-8 text ({exc.reason})") from exc


def json_line(line: str, where: str) -> Any:
    """One line of a JSON Lines file parsed; ``where`` (``file:line``) names it in errors.

    Raises:
        InvalidEventError: not JSON, nested too deep for the parser, an integer past
            Python's digit limit, or a string with a lone surrogate escape (``\\ud800``:
            JSON, but no text to embed or print).
    """
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidEventError(f"{where}: not JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InvalidEventError(f"{where}: not JSON (nested too deep)") from exc
    except ValueError as exc:  # an int past Python's digit limit
        raise InvalidEventError(f"{where}: not JSON ({exc})") from exc
    if _SURROGATE_ESCAPE.search(line) and (surrogate := lone_surrogate(row)) is not None:
        raise InvalidEventError(f"{where}: holds {surrogate}, a lone surrogate: not Unicode text")
    return row


class BadLines:
    """The bad lines of one JSONL file, gathered while it is read."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[str] = []

    def add(self, problem: str) -> None:
        """Record one line's problem (its text names the file and line)."""
        self.problems.append(problem)

    def check(self) -> None:
        """Raise when any line was bad: the first :data:`MAX_LINES_NAMED` named, the
        rest counted; a single bad line reads as it always did."""
        if not self.problems:
            return
        if len(self.problems) == 1:
            raise InvalidEventError(self.problems[0])
        named = "; ".join(self.problems[:MAX_LINES_NAMED])
        more = len(self.problems) - MAX_LINES_NAMED
        rest = f"; and {more:,} more" if more > 0 else ""
        raise InvalidEventError(
            f"{self.path}: {len(self.problems):,} bad lines, fix them all: {named}{rest}"
        )
