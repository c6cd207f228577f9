"""The sentence a report adds when its sources disagree (D7: acknowledge both sides)."""

from __future__ import annotations

from collections.abc import Sequence

from ragsift.schemas import Contradiction, RetrievedChunk

__all__ = ["contradiction_note"]


def contradiction_note(contradiction: Contradiction, sources: Sequence[RetrievedChunk]) -> str:
    """``Note: the sources disagree: [1] says "30 days", [2] says "14 days".``

    Sources are named by their ``[n]`` in the report (the chunk's position in
    ``sources``), or by document id when the report did not use that chunk.
    """
    numbers = {s.chunk_id: n for n, s in enumerate(sources, 1)}
    names = [
        f"[{numbers[chunk_id]}]" if chunk_id in numbers else f"document {doc_id!r}"
        for chunk_id, doc_id in zip(contradiction.chunk_ids, contradiction.doc_ids, strict=True)
    ]
    said = contradiction.values if contradiction.kind == "value" else contradiction.statements
    sides = ", ".join(f"{name} says “{text}”" for name, text in zip(names, said, strict=True))
    return f"Note: the sources disagree: {sides}."
