"""`ragsift topics --create`, `submit` and `tail` against the real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ragsift.cli import app


def _topics_created(kafka_bootstrap: str, prefix: str, *, partitions: int) -> dict[str, str]:
    """The CLI's environment for topics under ``prefix``, once they are created."""
    env = {
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGSIFT_KAFKA_TOPIC_PREFIX": prefix,
        "RAGSIFT_KAFKA_PARTITIONS": str(partitions),
        "COLUMNS": "300",
    }
    created = CliRunner().invoke(app, ["topics", "--create"], env=env)
    assert created.exit_code == 0, created.output
    return env


def test_topics_create_submit_then_tail(kafka_bootstrap: str, unique: str, tmp_path: Path) -> None:
    env = {
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGSIFT_KAFKA_TOPIC_PREFIX": f"it-cli-{unique}",  # topics of this test alone
        "RAGSIFT_KAFKA_PARTITIONS": "1",  # the broker is shared: no more than needed
        "RAGSIFT_EMBEDDER_KIND": "hashing",
        "COLUMNS": "200",
    }
    runner = CliRunner()
    created = runner.invoke(app, ["topics", "--create"], env=env)
    assert created.exit_code == 0, created.output
    assert f"it-cli-{unique}.queries.v1" in created.stdout

    events = tmp_path / "q.jsonl"
    good = {"query_id": f"q-{unique}", "tenant_id": "acme", "query": "How long is the warranty?"}
    bad = {"query_id": "q-bad", "tenant_id": "acme", "query": "x", "k": 60}
    events.write_text(f"{json.dumps(good)}\n{json.dumps(bad)}\n", encoding="utf-8")
    sent = runner.invoke(app, ["submit", str(events)], env=env)
    assert sent.exit_code == 2  # one line was rejected
    assert f"sent 1 events to it-cli-{unique}.queries.v1; rejected 1" in sent.stdout
    assert "line 2: rejected" in sent.stderr

    tailed = runner.invoke(
        app,
        ["tail", "queries", "--from-beginning", "--limit", "1", "--idle-timeout", "30"],
        env=env,
    )
    assert tailed.exit_code == 0, tailed.output
    assert f'"query_id": "q-{unique}"' in tailed.stdout
    assert f"1 events from it-cli-{unique}.queries.v1" in tailed.stderr


def test_submit_files_publishes_documents_keyed_by_tenant_and_again_as_the_same_events(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    from tests.factories import make_pdf

    env = _topics_created(kafka_bootstrap, f"it-docs-{unique}", partitions=1)
    runner = CliRunner()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "faq.html").write_text(
        "<title>FAQ</title><nav>Home</nav><p>Returns are accepted for 30 days.</p>", "utf-8"
    )
    (docs / "tank.pdf").write_bytes(make_pdf([["The tank holds 200 litres."]], title="Tank"))
    command = ["submit", str(docs), "--files", "-t", "acme", "-c", "manuals"]
    for _ in range(2):  # a second time: the same events, ids and all
        sent = runner.invoke(app, command, env=env)
        assert sent.exit_code == 0, sent.output
        assert f"sent 2 events to it-docs-{unique}.documents.v1; rejected 0" in sent.stdout
    events = _tail_documents(runner, env, 4)
    assert len(events) == 4
    by_doc = {e["doc_id"]: e for e in events}
    assert set(by_doc) == {"faq.html", "tank.pdf"}
    assert by_doc["faq.html"]["text"] == "Returns are accepted for 30 days."
    assert by_doc["faq.html"]["title"] == "FAQ"
    assert "200 litres" in by_doc["tank.pdf"]["text"]
    assert {(e["tenant_id"], e["collection"], e["op"]) for e in events} == {
        ("acme", "manuals", "upsert")
    }
    assert len({e["event_id"] for e in events}) == 2  # each document's twice, one id


def _tail_documents(runner: CliRunner, env: dict[str, str], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` events of the documents topic, read back with `ragsift tail`."""
    tailed = runner.invoke(
        app,
        ["tail", "documents", "--from-beginning", "--limit", str(limit), "--idle-timeout", "30"],
        env=env,
    )
    assert tailed.exit_code == 0, tailed.output
    return [json.loads(block) for block in _json_blocks(tailed.stdout)]


def _json_blocks(text: str) -> list[str]:
    """The JSON objects `tail` printed, one after each rule line."""
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("{") and current:
            blocks.append("\n".join(current))
            current = []
        if line.startswith("{") or current:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return [b[: b.rindex("}") + 1] for b in blocks]


def test_submit_files_prune_deletes_what_left_the_folder_and_only_that(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """The topic is the streaming index's record: a document whose file is gone gets a
    tombstone; one passed over this time, another collection's and another tenant's stay."""
    import asyncio

    from ragsift.settings import KafkaSettings
    from ragsift.streams.live_documents import live_documents

    prefix = f"it-prune-{unique}"
    env = {
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGSIFT_KAFKA_TOPIC_PREFIX": prefix,
        "RAGSIFT_KAFKA_PARTITIONS": "2",  # keys spread over both: the read covers each
        "COLUMNS": "300",
    }
    runner = CliRunner()
    assert runner.invoke(app, ["topics", "--create"], env=env).exit_code == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {"a.md": "Boilers", "b.md": "Tanks", "c.md": "Pumps", "d.md": "Fans"}.items():
        (docs / name).write_text(f"{text} are serviced yearly.", "utf-8")

    def submit(tenant: str, collection: str, *extra: str) -> str:
        command = ["submit", str(docs), "--files", "-t", tenant, "-c", collection, *extra]
        sent = runner.invoke(app, command, env=env)
        assert sent.exit_code == 0, sent.output
        return sent.stdout

    submit("acme", "manuals")
    submit("other", "manuals")
    submit("acme", "faq")
    (docs / "b.md").unlink()
    (docs / "d.md").unlink()
    (docs / "c.md").write_text("  ", "utf-8")  # passed over as empty: its version stays
    out = submit("acme", "manuals", "--prune")
    assert f"sent 1 events to {prefix}.documents.v1; rejected 0" in out
    assert f"pruned 2 documents no longer under {docs}: b.md, d.md" in out

    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    topic = f"{prefix}.documents.v1"

    def live(tenant: str, collection: str) -> set[str]:
        return asyncio.run(live_documents(kafka, topic, tenant, collection))

    assert live("acme", "manuals") == {"a.md", "c.md"}
    assert live("other", "manuals") == {"a.md", "b.md", "c.md", "d.md"}
    assert live("acme", "faq") == {"a.md", "b.md", "c.md", "d.md"}
    assert "pruned nothing" in submit("acme", "manuals", "--prune")
    (docs / "b.md").write_text("Tanks are back.", "utf-8")  # a pruned document published again
    submit("acme", "manuals", "--prune")
    assert live("acme", "manuals") == {"a.md", "b.md", "c.md"}


def test_submit_writes_a_document_over_a_mebibyte_and_names_what_the_broker_refuses(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """660,000 Chinese characters are 2 MB as an event: over the broker's default
    1 MiB, and refused ("Kafka is not usable"). Where a topic does refuse an event, the
    event is named and the exit status is 1: `submit` used to count it as sent."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from ragsift.streams.topics import MAX_MESSAGE_BYTES

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.txt").write_text("检索增强生成的置信度。" * 60_000, "utf-8")
    (docs / "small.txt").write_text("Returns are accepted for 30 days.", "utf-8")
    env = {
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGSIFT_KAFKA_TOPIC_PREFIX": f"it-big-{unique}",  # no topic yet: submit makes it
        "RAGSIFT_KAFKA_PARTITIONS": "1",
        "COLUMNS": "200",
    }
    runner = CliRunner()
    command = ["submit", str(docs), "--files", "-t", "acme", "-c", "manuals"]
    sent = runner.invoke(app, command, env=env)
    assert sent.exit_code == 0, sent.output
    assert f"sent 2 events to it-big-{unique}.documents.v1; rejected 0" in sent.stdout
    texts = {e["doc_id"]: e["text"] for e in _tail_documents(runner, env, 2)}
    assert len(texts["big.txt"]) == 660_000

    # A documents topic made before (here: with a 64 KiB limit) refuses the big one.
    small_prefix = f"it-small-{unique}"

    async def make_small_topic() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            limit = {"cleanup.policy": "compact", "max.message.bytes": str(64 * 1024)}
            await admin.create_topics(
                [NewTopic(f"{small_prefix}.documents.v1", 1, 1, topic_configs=limit)]
            )
        finally:
            await admin.close()

    asyncio.run(make_small_topic())
    refused = runner.invoke(app, command, env={**env, "RAGSIFT_KAFKA_TOPIC_PREFIX": small_prefix})
    assert refused.exit_code == 1, refused.output
    assert f"sent 1 events to {small_prefix}.documents.v1; rejected 0; not written 1" in (
        refused.stdout
    )
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert lines[0] == (
        f"warning: {small_prefix}.documents.v1 takes messages up to 65536 bytes, under the"
        f" {MAX_MESSAGE_BYTES} a document may need; kafka-configs.sh --bootstrap-server"
        f" BROKER --alter --entity-type topics --entity-name {small_prefix}.documents.v1"
        f" --add-config max.message.bytes={MAX_MESSAGE_BYTES}"
    )
    assert lines[1].startswith("big.txt: not written MessageSizeTooLargeError")
    assert f"--add-config max.message.bytes={MAX_MESSAGE_BYTES}" in lines[2]


def test_a_documents_topic_made_with_the_broker_defaults_is_named_with_its_fix(
    kafka_bootstrap: str, unique: str
) -> None:
    """A broker that creates topics on first use made the documents topic itself when a
    producer came before any worker: deleted by age (so a rebuilt index loses documents)
    and 1 MiB messages. `topics --create` and every worker now say so, with the fix."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    prefix = f"it-defaults-{unique}"
    name = f"{prefix}.documents.v1"

    async def make_topic_with_defaults() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(name, 1, 1)])
        finally:
            await admin.close()

    asyncio.run(make_topic_with_defaults())
    env = {
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGSIFT_KAFKA_TOPIC_PREFIX": prefix,
        "RAGSIFT_KAFKA_PARTITIONS": "1",
        "COLUMNS": "200",
    }
    created = CliRunner().invoke(app, ["topics", "--create"], env=env)
    assert created.exit_code == 0, created.output
    warnings = [line for line in created.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, created.stderr
    assert warnings[0].startswith(f"warning: {name} is not compacted (cleanup.policy=delete)")
    assert warnings[0].endswith(f"--entity-name {name} --add-config cleanup.policy=compact")
    assert "max.message.bytes=4259840" in warnings[1]
    # the topics it made itself lack nothing
    again = CliRunner().invoke(
        app, ["topics", "--create"], env={**env, "RAGSIFT_KAFKA_TOPIC_PREFIX": f"{prefix}x"}
    )
    assert again.exit_code == 0, again.output
    assert "warning:" not in again.stderr


def test_a_record_no_client_can_read_does_not_stop_a_prune(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """One record whose header name is not UTF-8 (any tenant's: the broker stores it,
    compaction keeps it) made every `submit --files --prune` fail with a traceback."""
    import asyncio
    import os
    import subprocess
    import sys

    from ragsift.settings import KafkaSettings
    from ragsift.streams.live_documents import live_documents
    from tests.e2e.test_unreadable_record import UNREADABLE_NAME, UNREADABLE_WRITER

    prefix = f"it-unreadable-{unique}"
    env = _topics_created(kafka_bootstrap, prefix, partitions=2)
    runner = CliRunner()
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (docs / name).write_text(f"{name} is serviced yearly.", "utf-8")

    def submit(*extra: str) -> str:
        command = ["submit", str(docs), "--files", "-t", "acme", "-c", "manuals", *extra]
        sent = runner.invoke(app, command, env=env)
        assert sent.exit_code == 0, sent.output
        return sent.stdout

    submit()
    for partition in ("0", "1"):  # wherever acme's keys went, a record before and after
        subprocess.run(
            [
                sys.executable,
                "-c",
                UNREADABLE_WRITER,
                kafka_bootstrap,
                f"{prefix}.documents.v1",
                partition,
                UNREADABLE_NAME.hex(),
            ],
            input=b'{"tenant_id": "globex"}',
            env={**os.environ, "AIOKAFKA_NO_EXTENSIONS": "1"},
            capture_output=True,
            check=True,
            timeout=60,
        )
    (docs / "d.md").write_text("d.md is new.", "utf-8")
    submit()  # after the unreadable records: must be read past them
    (docs / "b.md").unlink()
    out = submit("--prune")
    assert f"pruned 1 documents no longer under {docs}: b.md" in out
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    topic = f"{prefix}.documents.v1"
    live = asyncio.run(live_documents(kafka, topic, "acme", "manuals"))
    assert live == {"a.md", "c.md", "d.md"}  # d.md, after both records, was read
