"""Every worker's handler behind its own batch router, for feeding it hostile records.

Built as the workers build them, on embedded backends (a Qdrant Edge shard, the
hashing embedder, an audit folder, a SQLite feedback store): no broker. Each
worker's router sends to a :class:`RecordingSender` and counts in its own
:class:`Metrics`, so a test reads exactly what one batch did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragsift.confidence.artifact import load_calibration
from ragsift.confidence.registry import CalibrationRegistry, DirectoryCalibrationStore
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.feedback_store import SqliteFeedbackStore
from ragsift.retrieval.index import SearchRequest
from ragsift.schemas import (
    DeadLetter,
    DocumentEvent,
    EvidenceData,
    EvidenceEvent,
    EvidenceType,
    FeedbackEvent,
    QueryEvent,
    RetrievalResult,
)
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.settings import AuditSettings, FeedbackSettings, GuardrailSettings
from ragsift.streams.codec import EventCodec
from ragsift.streams.routing import BatchRouter, Received
from ragsift.streams.topics import TOPICS
from ragsift.workers.audit import build_audit_handler
from ragsift.workers.base import Handler
from ragsift.workers.calibration import FeedbackHandler, FeedbackLoop, ResultJoinHandler
from ragsift.workers.decision import DecisionHandler
from ragsift.workers.indexer import IndexerHandler
from ragsift.workers.retrieval import RetrievalHandler
from tests.factories import embedded_settings
from tests.unit.streams.scripted import RecordingSender, record_key

#: Generous for the hashing embedder on a shared CI core; a hang still fails fast.
DEADLINE_S = 10.0
TENANT = "acme"
#: Every worker's handler, by the name it counts under.
WORKERS = (
    "retrieval",
    "indexer",
    "audit",
    "decision",
    "report",
    "calibration-results",
    "calibration",
)
#: Stages a dead letter may name (RagsiftError.stage of what the workers raise).
STAGES = {"decode", "validate", "embed", "search", "handler", "feedback", "emit"}
#: Workers whose valid record must come out as an output naming its query id.
EMITTING = {"retrieval", "decision", "report"}


@dataclass
class Batch:
    """What one batch did: the dead letters and outputs of each record, and the counts."""

    letters: dict[int, list[DeadLetter]] = field(default_factory=dict)
    outputs: list[BaseModel] = field(default_factory=list)
    counted: dict[str, float] = field(default_factory=dict)


class Worker:
    """One handler, its router, what it sent and what it counted."""

    def __init__(self, handler: Handler[Any]):
        self.handler = handler
        self.sender, self.metrics = RecordingSender(), Metrics()
        self.router = BatchRouter(handler, self.sender, metrics=self.metrics, deadline_s=DEADLINE_S)

    def count(self, metric: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(
            metric, {"worker": self.handler.name, **labels}
        )
        return value or 0.0

    def counts(self) -> dict[str, float]:
        """Every sample of the router's counters for this worker, by name and labels."""
        out: dict[str, float] = {}
        for family in self.metrics.registry.collect():
            for sample in family.samples:
                if sample.labels.get("worker") == self.handler.name:
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    out[f"{sample.name}{{{labels}}}"] = sample.value
        return out


class Rig:
    """The workers of one process, a scored result to replay, and fresh ids and offsets."""

    def __init__(self, runtime: EmbeddedRuntime, feedback: FeedbackLoop, result: RetrievalResult):
        self.runtime = runtime
        self.feedback = feedback
        self.result = result
        self._serial = iter(range(10**9))
        handlers: list[Handler[Any]] = [
            RetrievalHandler(runtime.pipeline),
            IndexerHandler(runtime.indexer),
            build_audit_handler(AuditSettings(), Path(runtime.data_dir) / "rig-audit"),
            DecisionHandler(GuardrailSettings(), Metrics()),
            runtime.reports,
            ResultJoinHandler(feedback),
            FeedbackHandler(feedback),
        ]
        self.workers = {handler.name: Worker(handler) for handler in handlers}

    def fresh(self, stem: str) -> str:
        return f"{stem}-{next(self._serial)}"

    def valid(self, worker: str) -> tuple[bytes, str]:
        """A well-formed event for ``worker``'s topic with fresh ids, and its query id."""
        source = self.workers[worker].handler.source
        event = self._valid_event(source)
        query_id = getattr(event, "query_id", None) or getattr(event, "subject", None) or ""
        return EventCodec(TOPICS[source].model).encode(event), query_id

    def _valid_event(self, source: str) -> BaseModel:
        if source == "queries":
            return QueryEvent(query_id=self.fresh("q"), tenant_id=TENANT, query="refund policy?")
        if source == "documents":
            text = "Refunds are paid within fourteen days by bank transfer."
            return DocumentEvent(
                event_id=self.fresh("e"), tenant_id=TENANT, doc_id=self.fresh("d"), text=text
            )
        if source == "audit":
            data = EvidenceData(query_id=self.fresh("q"), tenant_id=TENANT, summary="ok")
            return EvidenceEvent.for_query(EvidenceType.REFUSAL, data, source="/rig")
        result = self.result.model_copy(update={"query_id": self.fresh("q")})
        if source == "retrievals":
            return result
        self.feedback.remember([result])  # feedback: a label for a result the loop knows
        return FeedbackEvent(
            event_id=self.fresh("f"), query_id=result.query_id, tenant_id=TENANT, relevant=True
        )

    async def feed(self, worker: str, records: list[tuple[bytes | None, bytes | None]]) -> Batch:
        """Hand ``records`` ((value, key) pairs) to ``worker`` as one batch: offsets 0..n-1."""
        chosen = self.workers[worker]
        topic = TOPICS[chosen.handler.source].name()
        base = next(self._serial) * 1_000
        sent_before, counted_before = len(chosen.sender.sent), chosen.counts()
        source = chosen.handler.source
        await chosen.router.process(
            [
                Received(value, record_key(source, value, key), topic, 0, base + n)
                for n, (value, key) in enumerate(records)
            ]
        )
        batch = Batch(letters={n: [] for n in range(len(records))})
        for topic_name, _, value in chosen.sender.sent[sent_before:]:
            event = EventCodec(TOPICS[topic_name].model).decode(value)
            if isinstance(event, DeadLetter):
                assert event.offset is not None
                batch.letters[event.offset - base].append(event)
            else:
                batch.outputs.append(event)
        after = chosen.counts()
        batch.counted = {k: v - counted_before.get(k, 0.0) for k, v in after.items()}
        return batch

    async def tenant_search_works(self) -> None:
        """The shard answers the tenant's searches (raises if a record broke it)."""
        vector = (await self.runtime.embedder.embed(["refund"]))[0]
        request = SearchRequest(TENANT, "refund", dense_vector=vector, mode="hybrid", limit=50)
        await self.runtime.index.search("default", request)

    async def close(self) -> None:
        self.feedback.store.close()
        await self.runtime.close()


async def build_rig(data_dir: Path) -> Rig:
    """A rig whose shard holds the sample handbook for ``acme``, and one scored result."""
    runtime = EmbeddedRuntime(embedded_settings(data_dir))
    await runtime.ingest(TENANT, sample_documents())
    [result] = await runtime.ask(
        [QueryEvent(query_id="seed", tenant_id=TENANT, query="How do refunds work?")]
    )
    assert isinstance(result, RetrievalResult)
    assert result.hits, "the seed result must carry hits for the mutations to reach"
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    registry = CalibrationRegistry(
        load_calibration(path), DirectoryCalibrationStore(data_dir / "calibrations"), refresh_s=0
    )
    feedback = FeedbackLoop(
        SqliteFeedbackStore(data_dir / "feedback.sqlite"),
        registry,
        FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600),
        Metrics(),
    )
    return Rig(runtime, feedback, result)


@dataclass
class Driver:
    """A rig and the event loop it lives on, for sync property tests (hypothesis)."""

    runner: asyncio.Runner
    rig: Rig


@contextmanager
def driving(data_dir: Path) -> Iterator[Driver]:
    """A rig on its own event loop for the life of the block (a module's tests)."""
    with asyncio.Runner() as runner:
        rig = runner.run(build_rig(data_dir))
        try:
            yield Driver(runner, rig)
        finally:
            runner.run(rig.close())


def readable(letter: DeadLetter, value: bytes | None) -> None:
    """A letter says where and why in one line, and keeps the record's bytes (cut)."""
    assert letter.stage in STAGES, letter
    assert letter.error_type
    assert letter.error.strip()
    assert "\n" not in letter.error, letter.error  # one line: a log line, a console row
    assert len(letter.error) <= 4_000
    assert letter.original == (value or b"")[:DEFAULT_MAX_ORIGINAL_BYTES]


def feed(
    driver: Driver, worker: str, value: bytes | None, key: bytes | None = b"k", *, refused: bool
) -> None:
    """The hostile record, then a valid one, as one batch; check what each became."""
    rig = driver.rig
    valid, query_id = rig.valid(worker)
    batch = driver.runner.run(rig.feed(worker, [(value, key), (valid, b"ok")]))
    hostile, after = batch.letters[0], batch.letters[1]
    assert after == [], [a.error for a in after]
    assert len(hostile) <= 1, [h.error for h in hostile]
    if refused:
        assert hostile, "a record that is no event was not dead-lettered"
    name = rig.workers[worker].handler.name
    counted = batch.counted
    for letter in hostile:
        readable(letter, value)
        stage = f"ragsift_dead_letters_total{{stage={letter.stage},worker={name}}}"
        assert counted.get(stage) == 1
    ok = counted.get(f"ragsift_events_total{{result=ok,worker={name}}}", 0)
    assert ok == 2 - len(hostile)
    assert not any(k.startswith("ragsift_dead_letters_dropped") and v for k, v in counted.items())
    assert not any(k.startswith("ragsift_dead_letter_send") and v for k, v in counted.items())
    if worker in EMITTING:
        assert query_id in {getattr(o, "query_id", None) for o in batch.outputs}
    if worker == "indexer":
        driver.runner.run(rig.tenant_search_works())


def nested(depth: int, opener: str) -> str:
    """JSON text nested ``depth`` levels: arrays (``[``) or objects (``{``)."""
    closer = "]" if opener == "[" else "}"
    inner = "[" if opener == "[" else '{"a":'
    return inner * depth + ("1" if opener == "{" else "") + closer * depth
