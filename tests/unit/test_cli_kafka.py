"""Commands that talk to Kafka say so in one line when the broker cannot be reached."""

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
    ],
)
def test_unreachable_broker_is_a_clear_error_not_a_traceback(
    tmp_path: Path, args: list[str]
) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query_id": "q1", "tenant_id": "alpha", "query": "hello there"}\n')
    env = {**os.environ, "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": CLOSED_PORT, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "ragsift", *(a.format(queries=queries) for a in args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert f"error: Kafka at {CLOSED_PORT} (PLAINTEXT) is not usable" in output
    assert "Traceback" not in output
    assert "Unclosed" not in output
