"""One limit per field: the CLI, the API, the JSON Schemas and the settings agree."""

from __future__ import annotations

import json
from typing import Any

from ragsift.api.openapi import openapi_document
from ragsift.schemas import MAX_K, MAX_QUERY_CHARS, QueryEvent
from ragsift.schemas.registry import JSON_DIR
from ragsift.settings import LimitSettings


def _integer_maximum(prop: dict[str, Any]) -> int:
    return next(int(o["maximum"]) for o in prop.get("anyOf", [prop]) if "maximum" in o)


def test_the_deployment_defaults_are_the_contracts_limits() -> None:
    limits = LimitSettings()
    assert (limits.max_k, limits.max_query_chars) == (MAX_K, MAX_QUERY_CHARS)


def test_the_schemas_carry_the_same_limits() -> None:
    for schema in (
        QueryEvent.model_json_schema(),
        json.loads((JSON_DIR / "query_event.v1.schema.json").read_text(encoding="utf-8")),
    ):
        props = schema["properties"]
        assert _integer_maximum(props["k"]) == MAX_K
        assert props["query"]["maxLength"] == MAX_QUERY_CHARS


def test_the_api_documents_the_same_limits() -> None:
    props = openapi_document()["components"]["schemas"]["QueryRequest"]["properties"]
    assert _integer_maximum(props["k"]) == MAX_K
    assert props["query"]["maxLength"] == MAX_QUERY_CHARS
