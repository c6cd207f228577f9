"""`ragsift topics --create`, `submit` and `tail` against the real broker."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ragsift.cli import app


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
