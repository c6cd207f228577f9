"""Every event ragsift emits is valid under the JSON Schema it publishes for it.

A consumer in another language validates ragsift's outputs against
``ragsift/schemas/json``: each must pass. Real outputs of the embedded runtime (the
same handlers the workers run), with strict mode off and every result sampled for
labels so that each kind of event shows: results of every outcome, reports,
decisions, review items of each queue, evidence, dead letters.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from pydantic import BaseModel

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import ALL_SCHEMAS, QueryEvent
from ragsift.schemas.registry import JSON_DIR
from tests.factories import embedded_settings

QUESTIONS = [
    "How do refunds work?",
    "hello",
    "what is in this index?",
    "zzzz qqqq unrelated quantum chromodynamics",
    "How many days does a refund take?",
]


def _validator(model: type[BaseModel]) -> jsonschema.Draft202012Validator:
    snake = "".join("_" + c.lower() if c.isupper() else c for c in model.__name__).lstrip("_")
    text = (JSON_DIR / f"{snake}.v1.schema.json").read_text(encoding="utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


async def test_every_emitted_event_passes_its_published_schema(tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path)
    settings = settings.model_copy(
        update={
            "guardrails": settings.guardrails.model_copy(update={"strict_mode": False}),
            "feedback": settings.feedback.model_copy(update={"sample_share": 1.0}),
        }
    )
    seen: list[BaseModel] = []
    async with EmbeddedRuntime(settings) as runtime:
        runtime.bus.subscribe(lambda _topic, event: seen.append(event))
        await runtime.ingest("acme", sample_documents())
        queries = [
            QueryEvent(query_id=f"q{i}", tenant_id="acme", query=q, want_report=True)
            for i, q in enumerate(QUESTIONS)
        ]
        queries += [
            QueryEvent(query_id="nobody", tenant_id="nobody", query="refunds?"),
            QueryEvent(query_id="unknown", tenant_id="acme", query="refunds?", collection="nope"),
        ]
        await runtime.answer(queries)
        await runtime.bus.publish("queries", "cut", b'{"query_id": "cut"')
        await runtime.bus.drain()
    validators = {model: _validator(model) for model in ALL_SCHEMAS}
    kinds = {type(event).__name__ for event in seen}
    assert kinds >= {"RetrievalResult", "Report", "Decision", "ReviewItem", "EvidenceEvent"}
    assert "DeadLetter" in kinds
    invalid = [
        (type(event).__name__, list(error.absolute_path), error.message)
        for event in seen
        for error in validators[type(event)].iter_errors(json.loads(event.model_dump_json()))
    ]
    assert invalid == []
