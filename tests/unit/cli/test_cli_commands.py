"""The commands that need no service: happy paths, and refusals with their exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsift import __version__
from ragsift.streams.topics import TOPICS
from tests.unit.cli.conftest import Invoke, error_lines


def test_version(cli: Invoke) -> None:
    result = cli(["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def test_topics_lists_every_topic_without_kafka(cli: Invoke) -> None:
    result = cli(["topics"], env={"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert result.exit_code == 0, result.output
    for spec in TOPICS.values():
        assert spec.name("ragsift") in result.stdout


def test_schemas_export_writes_every_contract(cli: Invoke, tmp_path: Path) -> None:
    result = cli(["schemas", "export", "--out", str(tmp_path / "json")])
    assert result.exit_code == 0, result.output
    written = sorted((tmp_path / "json").glob("*.schema.json"))
    assert written
    for path in written:
        assert json.loads(path.read_text(encoding="utf-8"))["title"]


def test_k8s_topics_writes_one_resource_per_topic(cli: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "topics.yaml"
    result = cli(["k8s", "topics", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").count("kind: KafkaTopic") == len(TOPICS)


def test_keys_create_list_revoke(cli: Invoke, tmp_path: Path) -> None:
    env = {"RAGSIFT_API_KEYS_FILE": str(tmp_path / "keys.json")}
    created = cli(["keys", "create", "--tenant", "acme", "--label", "ci"], env=env)
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    key_id = created.stderr.split()[1]
    listed = cli(["keys", "list"], env=env)
    assert key_id in listed.stdout
    assert key not in listed.stdout + (tmp_path / "keys.json").read_text(encoding="utf-8")
    revoked = cli(["keys", "revoke", key_id], env=env)
    assert revoked.exit_code == 0, revoked.output
    assert f"revoked {key_id}" in revoked.stdout


def test_keys_revoke_unknown_id_exits_2(cli: Invoke, tmp_path: Path) -> None:
    result = cli(["keys", "revoke", "nope"], env={"RAGSIFT_API_KEYS_FILE": str(tmp_path / "k")})
    assert result.exit_code == 2
    assert error_lines(result)[0].startswith("error: no key with id 'nope'")


def test_audit_verify_the_demo_trail_then_a_tampered_copy(
    cli: Invoke, demo_dir: Path, tmp_path: Path
) -> None:
    trail = demo_dir / "audit" / "audit.jsonl"
    intact = cli(["audit", "verify", str(trail)])
    assert intact.exit_code == 0, intact.output
    assert "chain intact" in intact.stdout
    rows = trail.read_text(encoding="utf-8").splitlines()
    first = json.loads(rows[0])
    first["subject"] = "someone-else"
    tampered = tmp_path / "audit.jsonl"
    tampered.write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n", encoding="utf-8")
    broken = cli(["audit", "verify", str(tampered)])
    assert broken.exit_code == 1
    assert "chain broken" in broken.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["submit", "q.jsonl", "--topic", "nope"], "unknown topic 'nope'"),
        (["submit", "missing.jsonl"], "no such file: missing.jsonl"),
        (["tail", "nope"], "unknown topic 'nope'"),
        (["worker", "nope"], "unknown worker ['nope']"),
        (["worker", "decision", "--runtime", "threads"], "unknown runtime 'threads'"),
        (["api", "--insecure-no-auth", "--host", "0.0.0.0"], "only allowed on a loopback"),
        (["api", "--port", "9000", "--metrics-port", "9000"], "need different ports"),
        (["calibrate", "--out", "cal.json"], "give --dataset"),
        (["eval", "--dataset", "nowhere"], "neither squad2 nor a BEIR folder"),
        (["eval", "--labelled", "missing.json"], "no such file: missing.json"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_refused_input_exits_2_with_one_error_line(
    cli: Invoke, args: list[str], message: str
) -> None:
    result = cli(args, env={"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert result.exit_code == 2, result.output
    errors = error_lines(result)
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: ")
    assert message in errors[0]
    assert "Traceback" not in result.output


def test_worker_port_out_of_range_is_a_usage_error(cli: Invoke) -> None:
    result = cli(["worker", "retrieval", "--web-port", "0"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "ImproperlyConfigured" not in result.output


def test_submit_names_each_rejected_line_and_exits_2_without_a_broker(
    cli: Invoke, tmp_path: Path
) -> None:
    events = tmp_path / "q.jsonl"
    events.write_text(
        '{"query_id": "q1", "tenant_id": "acme", "query": "hi", "k": 60}\n\nnot json\n',
        encoding="utf-8",
    )
    result = cli(["submit", str(events)], env={"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert result.exit_code == 2
    assert error_lines(result) == [
        "line 1: rejected QueryEvent: k: Input should be less than or equal to 50 (got 60)",
        "line 3: rejected QueryEvent: payload is not JSON (Expecting value at line 1 column 1)",
    ]
    assert "sent 0 events" in result.stdout
    assert "Kafka" not in result.stderr  # nothing valid to send: no broker needed


@pytest.mark.parametrize(
    "args",
    [
        ["console", "--port", "99999"],  # was an OverflowError traceback from bind()
        ["api", "--port", "0"],
        ["api", "--metrics-port", "70000"],
        ["eval", "--dataset", "squad2", "--k", "0"],  # was "limit must be > 0" in a traceback
        ["eval", "--dataset", "squad2", "--mode", "sparse"],
        ["calibrate", "--dataset", "squad2", "--k", "51", "--out", "x.json"],
    ],
    ids=lambda args: " ".join(args[:1] + args[-2:]),
)
def test_an_out_of_range_port_or_k_is_refused_before_anything_starts(
    cli: Invoke, args: list[str]
) -> None:
    result = cli(args)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


#: A labelled set of one question the test writes itself: a clone without
#: ../shared/data (the SQuAD files ``--dataset squad2`` reads) runs it too.
LABELLED = "one-question.json"


def _one_question_squad(path: Path) -> None:
    qas = [{"id": "q1", "question": "Which car?", "answers": [{"text": "red"}]}]
    paragraphs = [{"context": "The car was red.", "qas": qas}]
    path.write_text(json.dumps({"data": [{"title": "Cars", "paragraphs": paragraphs}]}))


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        # each was a traceback: FileNotFoundError (the --per-query one after the whole
        # run), ConfidenceError after reading the dataset, pydantic's report with a URL
        (["schemas", "export", "--out", "/proc/nope"], 1, "cannot write the schemas to /proc/nope"),
        (
            ["eval", "--labelled", LABELLED, "--per-query", "/proc/nope.jsonl"],
            2,
            "--per-query: cannot write /proc/nope.jsonl",
        ),
        (
            ["calibrate", "--dataset", "squad2", "--alpha", "1.5", "--out", "x.json"],
            2,
            "--alpha must be in (0, 1), got 1.5",
        ),
        (["feedback", "", "--relevant"], 2, "query_id: id must match"),
    ],
    ids=["schemas export", "eval --per-query", "calibrate --alpha", "feedback ''"],
)
def test_an_unwritable_path_or_bad_value_is_one_line_before_the_work(
    cli: Invoke, tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    if LABELLED in args:  # the working directory (the cli fixture's) holds it
        _one_question_squad(tmp_path / LABELLED)
    result = cli(args)
    assert result.exit_code == code, result.output
    lines = error_lines(result)
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {says}"), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
