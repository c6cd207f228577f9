"""The consoles' one rule for text that is not ragsift's own: it cannot steer the terminal.

A document may hold escape sequences: a log ingested with its colour codes (text by
:mod:`ragsift.ingest.plain_text`'s rules), or a JSONL line or a documents-topic event
with ``\\u001b`` in its text. Printed as they are, a hit's ``ESC ]0;...BEL`` retitled
the operator's terminal and ``ESC [2J`` cleared it. Rich strips only BEL, backspace,
VT, FF and CR. So every character a terminal acts on (C0 but tab and newline, DEL, C1)
is shown as a visible stand-in of the same width: C0 and DEL as their Unicode Control
Pictures (``␛`` for ESC), C1 as U+FFFD. Rich's own styles and cursor moves (progress
bars) are segments of its own and pass untouched.

JSON output is data and keeps every character: the JSON encoder escapes C0 already, and
:meth:`PlainConsole.print_json` writes DEL and C1, which it leaves raw, as ``\\u007f`` to
``\\u009f`` escapes (raw, they can only stand inside a string, where the escape means the
same character), not as stand-ins.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.json import JSON
from rich.segment import Segment

__all__ = ["PlainConsole", "visible"]

_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_PICTURES[0x7F] = 0x2421
_PICTURES.update({c: 0xFFFD for c in range(0x80, 0xA0)})
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def visible(text: str) -> str:
    """``text`` with the characters a terminal acts on shown as stand-ins (module doc)."""
    return text.translate(_PICTURES)


class PlainConsole(Console):
    """A rich Console whose printed text cannot carry terminal controls (module doc)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Segments with `control` set are rich's own (cursor moves); the rest hold text.
        return super()._render_buffer(
            segment if segment.control else Segment(visible(segment.text), *segment[1:])
            for segment in buffer
        )

    def print_json(self, json: str | None = None, *, data: Any = None, **options: Any) -> None:
        """Rich's ``print_json``, with DEL and C1 escaped in the JSON (module doc)."""
        shown = JSON.from_data(data, **options) if json is None else JSON(json, **options)
        self.print(_JsonEscaped(shown), soft_wrap=True)


class _JsonEscaped:
    """A JSON renderable whose DEL and C1 characters are written as JSON escapes."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            if segment.control:
                yield segment
            else:
                yield Segment(segment.text.translate(_JSON_ESCAPES), *segment[1:])
