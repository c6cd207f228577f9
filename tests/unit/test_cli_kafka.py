"""Commands that talk to Kafka or Redis say so in one line when it cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLOSED_PORT = "127.0.0.1:1"  # nothing listens on port 1: connections are refused at once


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "{queries}"],
        ["topics", "--create"],
        ["tail", "retrievals", "--limit", "1"],
        ["deadletters"],
        ["deadletters", "replay", "--yes"],
        ["api", "--insecure-no-auth", "--port", "18080", "--metrics-port", "18081"],
        ["worker", "retrieval", "--web-port", "16066"],
    ],
    ids=lambda args: " ".join(a for a in args[:2] if not a.startswith("-")),
)
def test_unreachable_broker_is_a_clear_error_not_a_traceback(
    tmp_path: Path, args: list[str]
) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query_id": "q1", "tenant_id": "alpha", "query": "hello there"}\n')
    env = {
        **os.environ,
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": CLOSED_PORT,
        "RAGSIFT_EMBEDDER_KIND": "hashing",
        "RAGSIFT_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "ragsift", *(a.format(queries=queries) for a in args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert errors[0].startswith(f"error: Kafka at {CLOSED_PORT} (PLAINTEXT) is not usable")
    assert errors[0].endswith("set RAGSIFT_KAFKA_BOOTSTRAP_SERVERS")
    assert "Traceback" not in output
    assert "Unclosed" not in output
    assert "Unable connect" not in output  # aiokafka's own log line repeats the error


def test_worker_without_redis_warns_in_one_line(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": CLOSED_PORT,
        "RAGSIFT_REDIS_URL": f"redis://:hunter2@{CLOSED_PORT}/0",
        "RAGSIFT_EMBEDDER_KIND": "hashing",
        "RAGSIFT_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "ragsift", "worker", "retrieval"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith("warning: Redis at redis://:**********@127.0.0.1:1/0")
    assert warnings[0].endswith("set RAGSIFT_REDIS_URL")
    assert "hunter2" not in done.stderr
    assert "Traceback" not in done.stderr
