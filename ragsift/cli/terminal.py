"""The consoles' one rule for text that is not ragsift's own: it cannot steer the terminal.

A document may hold escape sequences: a log ingested with its colour codes (text by
:mod:`ragsift.ingest.plain_text`'s rules), or a JSONL line or a documents-topic event
with ``\\u001b`` in its text. Printed as they are, a hit's ``ESC ]0;...BEL`` retitled
the operator's terminal and ``ESC [2J`` cleared it. Rich strips only BEL, backspace,
VT, FF and CR. So every character a terminal acts on (C0 but tab and newline, DEL, C1)
is shown as a visible stand-in of the same width: C0 and DEL as their Unicode Control
Pictures (``␛`` for ESC), C1 as U+FFFD. Rich's own styles and cursor moves (progress
bars) are segments of its own and pass untouched; ``--json`` output escapes the
characters itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

__all__ = ["PlainConsole", "visible"]

_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_PICTURES[0x7F] = 0x2421
_PICTURES.update({c: 0xFFFD for c in range(0x80, 0xA0)})


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
