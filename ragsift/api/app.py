"""The HTTP API: POST a query, get its result when the pipeline publishes it.

The API publishes the query event to Kafka and reads the results (and
reports) topics itself, with every partition assigned to it (no consumer
group: each API replica sees every result), matching them to waiting requests
by query id. A request that gets no result within its timeout gets a 504 with
the query id, which ``GET /v1/queries/{id}`` can poll later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import OrderedDict
from typing import Any

from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from pydantic import ValidationError

from ragsift.api.openapi import ErrorBody, QueryAnswer, QueryRequest, openapi_document
from ragsift.errors import DecodeError
from ragsift.observability.metrics import Metrics
from ragsift.schemas import DeadLetter, QueryEvent, Report, RetrievalResult
from ragsift.settings import KafkaSettings, LimitSettings
from ragsift.streams import clients
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS

__all__ = ["QueryApi", "create_web_app"]

RECENT_RESULTS = 10_000  # results kept for GET /v1/queries/{id}


def _error(status: int, error: str, detail: str, **extra: Any) -> web.Response:
    body = ErrorBody(error=error, detail=detail, **extra)
    return web.json_response(body.model_dump(mode="json"), status=status)


class QueryApi:
    """Owns the producer, the result reader and the requests waiting for results."""

    def __init__(
        self,
        kafka: KafkaSettings,
        metrics: Metrics | None = None,
        limits: LimitSettings | None = None,
    ):
        self.kafka = kafka
        self.limits = limits or LimitSettings()
        self.metrics = metrics or Metrics()
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready = False
        self._waiting: dict[str, list[asyncio.Future[None]]] = {}
        self._results: OrderedDict[str, RetrievalResult] = OrderedDict()
        self._reports: OrderedDict[str, Report] = OrderedDict()
        self._rejected: OrderedDict[str, DeadLetter] = OrderedDict()
        self._result_codec = EventCodec(RetrievalResult)
        self._report_codec = EventCodec(Report)
        self._dead_codec = EventCodec(DeadLetter)
        self._query_codec = EventCodec(QueryEvent)
        r = self.metrics.registry
        self.requests = Counter(
            "ragsift_api_requests_total",
            "HTTP API requests by route and status.",
            ["route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "ragsift_api_request_duration_seconds",
            "Time to answer a POST /v1/query.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )

    def topic(self, logical: str) -> str:
        """Full name of a registered topic."""
        return TOPICS[logical].name(self.kafka.topic_prefix)

    async def start(self) -> None:
        """Connect to Kafka and start reading results from the end of each partition."""
        self._producer = clients.producer(self.kafka, linger_ms=2)
        await self._producer.start()
        self._consumer = clients.consumer(self.kafka)
        await self._consumer.start()
        partitions = []
        for logical in ("retrievals", "reports", "deadletter"):
            name = self.topic(logical)
            found = await self._consumer._client.fetch_all_metadata()
            ids = found.partitions_for_topic(name) or {0}
            partitions += [TopicPartition(name, p) for p in sorted(ids)]
        self._consumer.assign(partitions)
        await self._consumer.seek_to_end(*partitions)
        self._reader = asyncio.create_task(self._read(), name="ragsift-api-reader")
        self._ready = True

    async def stop(self) -> None:
        """Stop reading and disconnect."""
        self._ready = False
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()

    async def _read(self) -> None:
        assert self._consumer is not None
        results, reports = self.topic("retrievals"), self.topic("reports")
        dead = self.topic("deadletter")
        while True:
            batches = await self._consumer.getmany(timeout_ms=200, max_records=1000)
            for tp, records in batches.items():
                for record in records:
                    try:
                        if tp.topic == results:
                            self._remember(self._results, self._result_codec.decode(record.value))
                        elif tp.topic == reports:
                            self._remember(self._reports, self._report_codec.decode(record.value))
                        elif tp.topic == dead:
                            letter = self._dead_codec.decode(record.value)
                            if letter.query_id and letter.worker == "retrieval":
                                self._remember(self._rejected, letter)
                    except DecodeError:
                        continue  # not ours to dead-letter: the producing worker validated it

    def _remember(
        self, store: OrderedDict[str, Any], event: RetrievalResult | Report | DeadLetter
    ) -> None:
        assert event.query_id is not None
        store[event.query_id] = event
        store.move_to_end(event.query_id)
        while len(store) > RECENT_RESULTS:
            store.popitem(last=False)
        for fut in self._waiting.get(event.query_id, []):
            if not fut.done():
                fut.set_result(None)

    async def _wait_for(self, query_id: str, want_report: bool, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if query_id in self._rejected:
                return True
            if query_id in self._results and (not want_report or query_id in self._reports):
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            self._waiting.setdefault(query_id, []).append(fut)
            try:
                await asyncio.wait_for(fut, timeout=left)
            except TimeoutError:
                return False
            finally:
                waiters = self._waiting.get(query_id, [])
                if fut in waiters:
                    waiters.remove(fut)
                if not waiters:
                    self._waiting.pop(query_id, None)

    # -- handlers ---------------------------------------------------------------------

    async def post_query(self, request: web.Request) -> web.Response:
        """POST /v1/query."""
        with self.latency.time():
            response = await self._post_query(request)
        self.requests.labels("/v1/query", str(response.status)).inc()
        return response

    async def _post_query(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(400, "bad_json", f"the body is not JSON: {exc}")
        try:
            req = QueryRequest.model_validate(body)
            self._check_limits(req)
            event = QueryEvent(
                query_id=req.query_id or f"api-{uuid.uuid4().hex}",
                tenant_id=req.tenant_id,
                query=req.query,
                collection=req.collection,
                k=req.k,
                mode=req.mode,
                want_report=req.want_report,
                traceparent=request.headers.get("traceparent"),
            )
        except ValidationError as exc:
            fields = [
                {"loc": list(e["loc"]), "msg": e["msg"]}
                for e in exc.errors(include_url=False, include_input=False)
            ]
            return _error(422, "invalid_query", "the query breaks the contract", fields=fields)
        if not self._ready or self._producer is None:
            return _error(503, "not_ready", "not connected to Kafka yet", query_id=event.query_id)
        try:
            await self._producer.send_and_wait(
                self.topic("queries"), self._query_codec.encode(event), key=event.query_id.encode()
            )
        except KafkaError as exc:
            return _error(503, "kafka_unavailable", str(exc), query_id=event.query_id)
        if not await self._wait_for(event.query_id, req.want_report, req.timeout_s):
            return _error(
                504,
                "timeout",
                f"no result within {req.timeout_s} s; poll GET /v1/queries/{event.query_id}",
                query_id=event.query_id,
            )
        letter = self._rejected.get(event.query_id)
        if letter is not None and "unknown collection" in letter.error:
            return _error(404, "collection_not_found", letter.error, query_id=event.query_id)
        if letter is not None:
            return _error(
                422,
                "rejected",
                f"the pipeline rejected the query at {letter.stage}: {letter.error}",
                query_id=event.query_id,
            )
        answer = QueryAnswer(
            query_id=event.query_id,
            result=self._results[event.query_id],
            report=self._reports.get(event.query_id) if req.want_report else None,
        )
        return web.json_response(text=answer.model_dump_json())

    def _check_limits(self, req: QueryRequest) -> None:
        """This deployment's limits (tighter than the wire contract's), as validation errors."""
        problems = []
        if req.k is not None and req.k > self.limits.max_k:
            problems.append(("k", f"Input should be less than or equal to {self.limits.max_k}"))
        if len(req.query) > self.limits.max_query_chars:
            problems.append(
                ("query", f"String should have at most {self.limits.max_query_chars} characters")
            )
        if problems:
            raise ValidationError.from_exception_data(
                "QueryRequest",
                [
                    {
                        "type": "value_error",
                        "loc": (loc,),
                        "input": None,
                        "ctx": {"error": ValueError(msg)},
                    }
                    for loc, msg in problems
                ],
            )

    async def get_query(self, request: web.Request) -> web.Response:
        """GET /v1/queries/{query_id}."""
        query_id = request.match_info["query_id"]
        result = self._results.get(query_id)
        if result is None:
            response = _error(404, "not_found", f"no result seen for query id {query_id!r}")
        else:
            response = web.json_response(text=result.model_dump_json())
        self.requests.labels("/v1/queries/{id}", str(response.status)).inc()
        return response

    async def healthz(self, request: web.Request) -> web.Response:
        """Liveness."""
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        """Readiness: connected to Kafka and reading results."""
        ok = self._ready and self._reader is not None and not self._reader.done()
        return web.json_response(
            {"status": "ready" if ok else "starting"}, status=200 if ok else 503
        )

    async def metrics_page(self, request: web.Request) -> web.Response:
        """Prometheus metrics."""
        return web.Response(
            body=generate_latest(self.metrics.registry),
            content_type=CONTENT_TYPE_LATEST.split(";")[0],
        )

    async def openapi(self, request: web.Request) -> web.Response:
        """The OpenAPI document."""
        return web.json_response(openapi_document(self.limits.max_k, self.limits.max_query_chars))


def create_web_app(api: QueryApi) -> web.Application:
    """The aiohttp application; Kafka connects on start-up, disconnects on clean-up."""
    app = web.Application(client_max_size=1024 * 1024)
    app.router.add_post("/v1/query", api.post_query)
    app.router.add_get("/v1/queries/{query_id}", api.get_query)
    app.router.add_get("/healthz", api.healthz)
    app.router.add_get("/readyz", api.readyz)
    app.router.add_get("/metrics", api.metrics_page)
    app.router.add_get("/openapi.json", api.openapi)

    async def lifecycle(_: web.Application) -> Any:
        await api.start()
        yield
        await api.stop()

    app.cleanup_ctx.append(lifecycle)
    return app
