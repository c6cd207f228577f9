"""The list of wire contracts and their JSON Schema export.

``ragsift schemas export`` writes one file per contract into
``ragsift/schemas/json/``; a unit test fails when the committed files differ
from what the models generate, so other-language consumers never read stale
schemas.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from ragsift.schemas.deadletter import DeadLetter
from ragsift.schemas.downstream import Decision, Report, ReviewItem
from ragsift.schemas.evidence import EvidenceEvent
from ragsift.schemas.ingest import DocumentEvent, FeedbackEvent
from ragsift.schemas.query import QueryEvent
from ragsift.schemas.retrieval import RetrievalResult

__all__ = ["ALL_SCHEMAS", "JSON_DIR", "export_json_schemas", "json_schema_documents"]

ALL_SCHEMAS: tuple[type[BaseModel], ...] = (
    QueryEvent,
    RetrievalResult,
    EvidenceEvent,
    Report,
    Decision,
    ReviewItem,
    DeadLetter,
    DocumentEvent,
    FeedbackEvent,
)

JSON_DIR = Path(__file__).parent / "json"


def _file_name(model: type[BaseModel]) -> str:
    snake = "".join("_" + c.lower() if c.isupper() else c for c in model.__name__).lstrip("_")
    return f"{snake}.v1.schema.json"


def json_schema_documents() -> dict[str, str]:
    """File name → JSON Schema text (stable formatting) for every contract."""
    docs: dict[str, str] = {}
    for model in ALL_SCHEMAS:
        schema = model.model_json_schema(mode="validation")
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"urn:ragsift:schema:{_file_name(model).removesuffix('.schema.json')}"
        docs[_file_name(model)] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return docs


def export_json_schemas(directory: Path = JSON_DIR) -> list[Path]:
    """Write every contract's JSON Schema into ``directory``; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in json_schema_documents().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
