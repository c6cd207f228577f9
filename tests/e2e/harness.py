"""Run ragsift worker processes against the real broker, and talk to the topics.

Every loop here is bounded in count and time; everything listens on loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import BaseModel

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import EmbedderSettings, Settings
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS

REPO = Path(__file__).resolve().parents[2]
SERVICES = REPO / "scripts" / "services"
READY_TIMEOUT_S = 120
TENANT = "demo"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def prepare_index(data_dir: Path, embedder: EmbedderSettings | None = None) -> None:
    """An embedded shard holding the sample handbook for tenant ``demo``.

    ``embedder`` defaults to the environment's (the default onnx unless
    RAGSIFT_EMBEDDER_KIND says otherwise); workers must run with the same one.
    """
    settings = Settings(data_dir=data_dir)
    if embedder is not None:
        settings = settings.model_copy(update={"embedder": embedder})
    runtime = EmbeddedRuntime(settings)
    try:
        await runtime.ingest(TENANT, sample_documents())
    finally:
        await runtime.close()


@dataclass
class Stack:
    """Names shared by the workers and the test: one topic prefix, group, key prefix."""

    bootstrap: str
    redis_url: str
    prefix: str
    base_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self, data_dir: Path) -> dict[str, str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "RAGSIFT_DATA_DIR": str(data_dir),
            "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "RAGSIFT_KAFKA_TOPIC_PREFIX": self.prefix,
            "RAGSIFT_KAFKA_APP_ID": self.prefix,
            "RAGSIFT_KAFKA_PARTITIONS": "4",
            "RAGSIFT_REDIS_URL": self.redis_url,
            "RAGSIFT_REDIS_KEY_PREFIX": self.prefix,
        }
        env.update(self.extra_env)
        return env

    def topic(self, logical: str) -> str:
        return TOPICS[logical].name(self.prefix)


class WorkerProcess:
    """One ``ragsift worker`` process with its own data directory copy and web port."""

    def __init__(self, stack: Stack, names: Sequence[str], template: Path, label: str):
        self.stack = stack
        self.names = list(names)
        self.dir = stack.base_dir / label
        if not self.dir.exists():
            shutil.copytree(template, self.dir)
        self.port = free_port()
        self.log = self.dir / "worker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready_seen = 0  # restarts append to the same log

    def start(self) -> WorkerProcess:
        self.port = free_port()  # a killed process's port may linger
        handle = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragsift",
                "worker",
                *self.names,
                "--web-port",
                str(self.port),
                "--loglevel",
                "info",
            ],
            cwd=self.dir,
            env=self.stack.env(self.dir),
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        handle.close()
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> WorkerProcess:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if text.count("Worker]: Ready") > self._ready_seen:
                self._ready_seen += 1
                return self
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"worker exited {self.proc.returncode}:\n{text[-4000:]}")
            time.sleep(0.25)
        raise RuntimeError(f"worker not ready in {timeout_s}s:\n{self.log.read_text()[-4000:]}")

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Sum of a metric's samples on /metrics (filtered by the given labels)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            body = r.read().decode()
        total = 0.0
        for line in body.splitlines():
            if not line.startswith(name):
                continue
            head, _, value = line.rpartition(" ")
            if head.split("{")[0] != name:
                continue
            if labels and not all(f'{k}="{v}"' in head for k, v in labels.items()):
                continue
            total += float(value)
        return total

    def readyz(self) -> int:
        """The HTTP status of /readyz (503 while an agent is down or rebalancing)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def rss_bytes(self) -> int:
        """Resident memory of the worker process (Linux /proc)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {self.proc.pid}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def hashing_worker(
    stack: Stack, names: Sequence[str], tmp_path_factory: Any, label: str
) -> WorkerProcess:
    """A started, ready worker over a handbook shard indexed with the hashing embedder
    (the stack's env must say ``RAGSIFT_EMBEDDER_KIND=hashing`` too)."""
    template = tmp_path_factory.mktemp("hashing-index")
    asyncio.run(prepare_index(template, EmbedderSettings(kind="hashing")))
    return WorkerProcess(stack, names, template, label).start().wait_ready()


def services(*args: str) -> None:
    """``scripts/services ARGS`` (stop/start/restart kafka|redis), failing loudly."""
    subprocess.run([str(SERVICES), *args], check=True, capture_output=True, timeout=120)


def audit_rows(data_dir: Path) -> list[dict[str, object]]:
    """Every complete row the audit sink wrote under ``data_dir/audit``.

    A running worker may be mid-write: a last line without its newline is not a
    row yet (callers poll), so it is left for the next read.
    """
    rows: list[dict[str, object]] = []
    for file in sorted((data_dir / "audit").glob("audit*.jsonl")):
        text = file.read_text()
        complete = text[: text.rfind("\n") + 1]
        rows.extend(json.loads(line) for line in complete.splitlines() if line.strip())
    return rows


async def produce(
    stack: Stack, logical: str, items: Iterable[BaseModel | bytes], key: str | None = None
) -> int:
    """Send ``items`` to a topic, keyed by the field ``key`` or, by default, as the
    topic's spec keys them."""
    spec = TOPICS[logical]
    codec = EventCodec(spec.model)
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    sent = 0
    try:
        for item in items:
            if isinstance(item, bytes):
                await producer.send(stack.topic(logical), item, key=b"raw")
            else:
                keyed = spec.key_of(item) if key is None else str(getattr(item, key))
                await producer.send(stack.topic(logical), codec.encode(item), key=keyed.encode())
            sent += 1
        await producer.flush()
    finally:
        await producer.stop()
    return sent


class TopicReader:
    """Reads a topic from the beginning, keeping everything it has seen."""

    def __init__(self, stack: Stack, logical: str):
        self.stack = stack
        self.logical = logical
        self.codec = EventCodec(TOPICS[logical].model)
        self.events: list[BaseModel] = []
        self._consumer: AIOKafkaConsumer | None = None

    async def __aenter__(self) -> TopicReader:
        self._consumer = AIOKafkaConsumer(
            self.stack.topic(self.logical),
            bootstrap_servers=self.stack.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._consumer is not None
        await self._consumer.stop()

    async def poll(self) -> None:
        assert self._consumer is not None
        batches = await self._consumer.getmany(timeout_ms=300, max_records=5000)
        for records in batches.values():
            self.events.extend(self.codec.decode(r.value) for r in records)

    async def until(self, done: object, timeout_s: float = 120) -> list[BaseModel]:
        """Poll until ``done(events)`` is true; fail with what was seen on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await self.poll()
            if done(self.events):  # type: ignore[operator]  # a predicate over the events
                return self.events
        raise AssertionError(
            f"{self.logical}: condition not met in {timeout_s}s; saw {len(self.events)} events"
        )


class Pacer:
    """Produces events at a steady rate in the background (10 sends a second)."""

    def __init__(self, stack: Stack, logical: str, items: Sequence[BaseModel], rate: float):
        self.stack = stack
        self.logical = logical
        self.items = items
        self.rate = rate
        self.sent = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self._task is not None and self._task.done()

    async def __aenter__(self) -> Pacer:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        await self._task  # bounded: len(items) / rate seconds

    async def _run(self) -> None:
        codec = EventCodec(TOPICS[self.logical].model)
        producer = AIOKafkaProducer(bootstrap_servers=self.stack.bootstrap, acks="all")
        await producer.start()
        try:
            topic = self.stack.topic(self.logical)
            start = time.monotonic()
            for item in self.items:
                due = start + self.sent / self.rate
                if due > time.monotonic() + 0.1:
                    await producer.flush()
                    await asyncio.sleep(due - time.monotonic())
                key = str(getattr(item, "query_id", self.sent)).encode()
                await producer.send(topic, codec.encode(item), key=key)
                self.sent += 1
            await producer.flush()
        finally:
            await producer.stop()


async def until_cache_hit(stack: Stack, text: str, timeout_s: float = 60) -> None:
    """Ask ``text`` once a second until a result says it came from the cache."""
    async with TopicReader(stack, "retrievals") as results:
        deadline = time.monotonic() + timeout_s
        for i in range(int(timeout_s) + 1):
            qid = f"hit-{uuid.uuid4().hex[:8]}-{i}"
            query = QueryEvent(query_id=qid, tenant_id=TENANT, query=text)
            await produce(stack, "queries", [query])
            events = await results.until(
                lambda ev, q=qid: any(getattr(e, "query_id", None) == q for e in ev)
            )
            result = next(e for e in events if getattr(e, "query_id", None) == qid)
            assert isinstance(result, RetrievalResult)
            if result.cache.hit:
                return
            assert time.monotonic() < deadline, "caching did not resume"
            await asyncio.sleep(1.0)
        raise AssertionError(f"no cache hit for {text!r} in {timeout_s}s")
