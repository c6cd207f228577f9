"""The API's OpenAPI 3.1 document, built from the same pydantic models it validates with."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragsift import __version__
from ragsift.confidence import TASK_STRATEGIES
from ragsift.schemas import (
    MAX_COLLECTIONS,
    MAX_K,
    MAX_QUERY_CHARS,
    TENANT_PATTERN,
    Report,
    RetrievalResult,
    Selection,
)
from ragsift.schemas.base import COLLECTION_PATTERN, CountOrNone, Number
from ragsift.schemas.query import MAX_ENTITY_CHARS

__all__ = [
    "MAX_TIMEOUT_S",
    "ErrorBody",
    "FeedbackAccepted",
    "FeedbackRequest",
    "QueryAnswer",
    "QueryRequest",
    "openapi_document",
]

MAX_TIMEOUT_S = 60.0  # a synchronous caller should not hold a connection longer
DEFAULT_TIMEOUT_S = 10.0
MIN_TIMEOUT_S = 1.0  # a trip through Kafka and a worker batch; less is a guaranteed 504
MAX_ENTITIES = 64  # as the query event's contract

#: Some non-space character. Python's (and pydantic's Rust) \s and JSON Schema's
#: ECMAScript \s differ by U+001C-U+001F and U+0085 (spaces to Python's ``strip``,
#: characters to ECMAScript) and U+FEFF (the other way round); naming them keeps
#: the server and schema-driven clients (schemathesis) agreeing on blank queries.
_NOT_ONLY_SPACE = r"[^\s\u001c-\u001f\u0085\ufeff]"
_Collection = Annotated[str, Field(pattern=COLLECTION_PATTERN)]
_Entity = Annotated[str, Field(min_length=1, max_length=MAX_ENTITY_CHARS)]
_TASKS = sorted(TASK_STRATEGIES)
#: The query event's rule, stated in the schema so clients (and schemathesis) see it:
#: a task type applies to adaptive selection only (unset selection means adaptive).
_TASK_NEEDS_ADAPTIVE: dict[str, Any] = {
    "if": {
        "required": ["selection"],
        "properties": {"selection": {"enum": ["threshold", "top_k"]}},
    },
    "then": {"properties": {"task_type": {"type": "null"}}},
}
#: Request fields that are query event fields of the same name and contract.
EVENT_FIELDS = frozenset(
    {
        "query",
        "collection",
        "collections",
        "k",
        "mode",
        "selection",
        "task_type",
        "similarity_threshold",
        "entities",
        "want_report",
    }
)


class QueryRequest(BaseModel):
    """A query submitted over HTTP; the API adds a query id when none is given.

    The tenant comes from the caller's credential: ``tenant_id`` may be left out
    when the credential covers one tenant, and must name one of its tenants when given.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=_TASK_NEEDS_ADAPTIVE)

    tenant_id: str | None = Field(default=None, pattern=TENANT_PATTERN, min_length=1, max_length=64)
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=_NOT_ONLY_SPACE)
    query_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    collection: str = Field(default="default", pattern=COLLECTION_PATTERN)
    collections: list[_Collection] = Field(
        default_factory=list,
        max_length=MAX_COLLECTIONS,
        json_schema_extra={"uniqueItems": True},
        description="D3: further collections searched with ``collection``, in any order.",
    )
    k: CountOrNone = Field(default=None, ge=1, le=MAX_K)
    mode: str = Field(default="hybrid", pattern=r"^(hybrid|dense|keyword)$")
    selection: Selection | None = Field(
        default=None, description="threshold, adaptive or top_k; the deployment's when unset."
    )
    task_type: str | None = Field(
        default=None,
        json_schema_extra={"enum": [*_TASKS, None]},
        description="E2 task type; implies adaptive selection, refused with another one.",
    )
    similarity_threshold: Number | None = Field(
        default=None, ge=0.0, le=1.0, description="A1 hit bar for this query."
    )
    entities: list[_Entity] = Field(
        default_factory=list, max_length=MAX_ENTITIES, description="E1 entities for coverage."
    )
    want_report: bool = Field(default=False, strict=True)
    timeout_s: Number = Field(default=DEFAULT_TIMEOUT_S, ge=MIN_TIMEOUT_S, le=MAX_TIMEOUT_S)

    @field_validator("task_type")
    @classmethod
    def _known_task(cls, task: str | None) -> str | None:
        if task is not None and task not in TASK_STRATEGIES:
            raise ValueError(f"task_type must be one of {', '.join(_TASKS)}, got {task!r}")
        return task


class FeedbackRequest(BaseModel):
    """A label on a result: did its kept context hold the answer (docs/feedback.md)?

    The tenant comes from the credential, as for a query. ``sampled``: the result was
    picked for labelling without looking at how it turned out (the ``label_sample``
    review queue, a random audit); false for a label a user chose to give, which is
    kept and never re-fit on (ADR 023).
    """

    model_config = ConfigDict(extra="forbid")

    tenant_id: str | None = Field(default=None, pattern=TENANT_PATTERN, min_length=1, max_length=64)
    query_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    relevant: bool = Field(strict=True, description="True when the kept context held the answer.")
    sampled: bool = Field(default=True, strict=True)
    comment: str | None = Field(
        default=None,
        max_length=2_000,
        description="Free text for people: kept in the event on the feedback topic, not in"
        " the stored label nor in the event id (the same label with another comment is the"
        " same event).",
    )


class FeedbackAccepted(BaseModel):
    """A label the broker has taken, for the calibration worker to join and fit on."""

    event_id: str
    query_id: str
    tenant_id: str
    relevant: bool
    sampled: bool


class ErrorBody(BaseModel):
    """Every error response: what went wrong, and where."""

    error: str
    detail: str
    query_id: str | None = None
    fields: list[dict[str, Any]] = Field(default_factory=list)


class QueryAnswer(BaseModel):
    """The result of a query (and its report when asked for).

    ``report_error`` is set, and ``report`` null, when a report was asked for and
    the report worker dead-lettered it (error ``report_failed``; the LLM refused
    the request or answered garbage): the result stands without its report.
    """

    query_id: str
    result: RetrievalResult
    report: Report | None = None
    report_error: ErrorBody | None = None


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, str]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        components[name] = sub
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(ref: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref}}}


def openapi_document(max_k: int = MAX_K, max_query_chars: int = MAX_QUERY_CHARS) -> dict[str, Any]:
    """The OpenAPI document served at ``/openapi.json``, with this deployment's limits."""
    components: dict[str, Any] = {}
    request = _schema(QueryRequest, components)
    props = components["QueryRequest"]["properties"]
    props["query"]["maxLength"] = max_query_chars
    for option in props["k"].get("anyOf", []):
        if option.get("type") == "integer":
            option["maximum"] = max_k
    answer = _schema(QueryAnswer, components)
    feedback = _schema(FeedbackRequest, components)
    accepted = _schema(FeedbackAccepted, components)
    error = _schema(ErrorBody, components)
    result = _schema(RetrievalResult, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ragsift query API",
            "version": __version__,
            "description": (
                "Publish a query to the ragsift pipeline and wait for its result."
                " /healthz, /readyz and /metrics are served on the separate admin port."
            ),
        },
        "paths": {
            "/v1/query": {
                "post": {
                    "operationId": "query",
                    "summary": "Run a query through the pipeline and return its result",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": request}},
                    },
                    "responses": {
                        "200": _json(
                            answer,
                            "The result, and the report if asked for (report_error says"
                            " why it is missing when the pipeline could not build it).",
                        ),
                        "400": _json(error, "The body is not JSON, or nests too deep."),
                        "401": _json(error, "No valid credential (see WWW-Authenticate)."),
                        "403": _json(error, "The credential lacks the scope or the tenant."),
                        "404": _json(error, "The collection does not exist."),
                        "408": _json(error, "The body did not arrive in time."),
                        "409": _json(
                            error, "The query id has a result (or a wait) for another question."
                        ),
                        "413": _json(error, "The body is too large."),
                        "415": _json(error, "The body is not application/json."),
                        "417": _json(error, "An Expect header other than 100-continue."),
                        "422": _json(error, "The body breaks the contract; fields say where."),
                        "429": _json(
                            error,
                            "The tenant has as many requests waiting as it may; not sent."
                            " Retry after the Retry-After header's seconds.",
                        ),
                        "503": _json(
                            error,
                            "Kafka is unavailable (Retry-After: when it can be ready again),"
                            " or API keys cannot be read.",
                        ),
                        "504": _json(error, "No result within timeout_s; query_id to poll."),
                    },
                }
            },
            "/v1/feedback": {
                "post": {
                    "operationId": "feedback",
                    "summary": "Label a result: did its kept context hold the answer?",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": feedback}},
                    },
                    "responses": {
                        "202": _json(accepted, "The label is on the broker."),
                        "400": _json(error, "The body is not JSON, or nests too deep."),
                        "401": _json(error, "No valid credential (see WWW-Authenticate)."),
                        "403": _json(error, "The credential lacks the query scope or tenant."),
                        "408": _json(error, "The body did not arrive in time."),
                        "413": _json(error, "The body is too large."),
                        "415": _json(error, "The body is not application/json."),
                        "417": _json(error, "An Expect header other than 100-continue."),
                        "422": _json(error, "The body breaks the contract; fields say where."),
                        "503": _json(
                            error,
                            "Kafka is unavailable (Retry-After: when it can be ready again),"
                            " or API keys cannot be read.",
                        ),
                    },
                }
            },
            "/v1/queries/{query_id}": {
                "get": {
                    "operationId": "getQuery",
                    "summary": "A recent result by query id",
                    "parameters": [
                        {
                            "name": "query_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "minLength": 1, "maxLength": 128},
                        },
                        {
                            "name": "tenant_id",
                            "in": "query",
                            "required": False,
                            "description": "Which of the credential's tenants (default: all).",
                            "schema": {"type": "string", "pattern": TENANT_PATTERN},
                        },
                    ],
                    "responses": {
                        "200": _json(result, "The latest result seen for the query."),
                        "401": _json(error, "No valid credential (see WWW-Authenticate)."),
                        "403": _json(error, "The credential lacks the read scope or tenant."),
                        "404": _json(error, "No result for this id in the caller's tenants."),
                        "422": _json(error, "The tenant_id parameter is no tenant id."),
                        "503": _json(error, "The server cannot read its API keys now."),
                    },
                }
            },
        },
        # an API key (rsk_...) or a JWT, as a bearer token or in X-API-Key
        "security": [{"bearerAuth": []}, {"apiKeyHeader": []}],
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key from `ragsift keys create`, or an OIDC JWT.",
                },
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
    }
