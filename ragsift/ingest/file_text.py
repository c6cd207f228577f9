"""What a document file's reader gives ``ragsift ingest``: its text and title, or why not."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["FileText", "UnreadableFile"]


class FileText(NamedTuple):
    """A file's text (its paragraphs apart) and title (None: the file's name stands in)."""

    text: str
    title: str | None


class UnreadableFile(Exception):
    """A file whose text cannot be indexed; ``reason`` says why, for the skipped line."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
