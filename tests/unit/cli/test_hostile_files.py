"""Files and folders a command is pointed at that are not what it expects: exit 2 with one
``error:`` line naming the path, never a traceback, and nothing else touched.

Each case here crashed or did damage before: ``keys list`` on a keys file edited into
something else (a traceback, or ``"tenants": "alpha"`` read as tenants a, l, p, h),
``submit`` on a file that is not UTF-8, ``feedback`` and ``demo`` on a data dir that is a
file, and ``demo --data-dir`` on a folder of the user's own, which it deleted whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsift.api.auth import KeyRecord, KeyStore
from ragsift.errors import ConfigurationError
from tests.unit.cli.conftest import error_lines, run_cli

_HOSTILE_KEYS: dict[str, bytes] = {
    "not JSON": b"{keys: []",
    "not UTF-8": b'{"keys": [{"key_id": "\xff"}]}',
    "a list": b"[]",
    "keys not a list": b'{"keys": 5}',
    "a key missing fields": b'{"keys": [{"key_id": "a"}]}',
    "an unhashable id": b'{"keys": [{"key_id": ["a"], "sha256": "x", "tenants": ["t"],'
    b' "scopes": ["query"]}]}',
    "tenants a string": b'{"keys": [{"key_id": "a", "sha256": "x", "tenants": "alpha",'
    b' "scopes": ["query"]}]}',
    "an unknown field": b'{"keys": [{"key_id": "a", "sha256": "x", "tenants": ["t"],'
    b' "scopes": ["query"], "admin": true}]}',
    "nested past the parser": b'{"keys": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


@pytest.mark.parametrize("body", _HOSTILE_KEYS.values(), ids=_HOSTILE_KEYS.keys())
def test_keys_commands_name_an_unreadable_keys_file(tmp_path: Path, body: bytes) -> None:
    keys = tmp_path / "api-keys.json"
    keys.write_bytes(body)
    env = {"RAGSIFT_API_KEYS_FILE": str(keys)}
    for args in (["keys", "list"], ["keys", "create", "--tenant", "t"], ["keys", "revoke", "a"]):
        result = run_cli(args, env=env)
        assert result.exit_code == 2, (args, result.output)
        [line] = error_lines(result)
        assert line.startswith(f"error: unreadable API keys file {keys}: "), line
    assert keys.read_bytes() == body  # refused, not rewritten


def test_keys_list_names_a_folder_given_as_the_keys_file(tmp_path: Path) -> None:
    result = run_cli(["keys", "list"], env={"RAGSIFT_API_KEYS_FILE": str(tmp_path)})
    assert result.exit_code == 2
    assert error_lines(result) == [
        f"error: cannot read the API keys file {tmp_path}: Is a directory"
    ]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
_KEY = st.fixed_dictionaries(
    {"key_id": _JSON, "sha256": _JSON, "tenants": _JSON, "scopes": _JSON},
    optional={"label": _JSON, "revoked_at": _JSON, "created_at": _JSON},
)


def _records(path: Path) -> tuple[list[KeyRecord], str | None]:
    try:
        return KeyStore(path).records(), None
    except ConfigurationError as exc:
        return [], str(exc)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(_JSON, st.fixed_dictionaries({"keys": st.lists(_KEY, max_size=3)})))
def test_any_keys_file_is_read_or_refused_with_one_error(
    tmp_path_factory: pytest.TempPathFactory, data: object
) -> None:
    """A keys file of any JSON shape: its records are what was written, each field of
    its type, or the store raises its one ConfigurationError; nothing else escapes."""
    path = tmp_path_factory.mktemp("keys") / "api-keys.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    records, refused = _records(path)
    if refused is not None:
        assert refused.startswith(f"unreadable API keys file {path}: ")
    for record in records:
        assert all(isinstance(t, str) for t in (*record.tenants, *record.scopes))
        assert isinstance(record.key_id, str)
        assert isinstance(record.sha256, str)


def test_submit_rejects_lines_that_are_not_utf8_by_number(tmp_path: Path) -> None:
    """Each line is checked before a broker is asked for: a Latin-1 line is rejected and
    named like any other bad line, and U+2028 inside a JSON string does not cut a line."""
    good = {"query_id": "q1", "tenant_id": "t", "query": "Is it\u2028split?"}
    events = tmp_path / "events.jsonl"
    events.write_bytes(
        json.dumps(good, ensure_ascii=False).encode() + b'\n{"query": "caf\xe9"}\n\xff\xfe\n'
    )
    result = run_cli(["submit", str(events)], env={"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "x:1"})
    assert "Traceback" not in result.output
    rejected = [line for line in error_lines(result) if " rejected " in line]
    assert [line.split(":")[0] for line in rejected] == ["line 2", "line 3"]
    assert "payload is not UTF-8" in rejected[0]
    # the good line (U+2028 and all) was only held back by the broker
    assert not any(line.startswith("line 1:") for line in error_lines(result))
    assert "is not usable" in error_lines(result)[-1]


def test_feedback_on_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a folder", encoding="utf-8")
    result = run_cli(["feedback", "q1", "--relevant", "--data-dir", str(data)])
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [f"error: cannot use the data directory {data}: File exists"]


def test_demo_keeps_a_folder_it_did_not_write(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "notes").mkdir(parents=True)
    (mine / "notes" / "thesis.md").write_text("Four years of work.", encoding="utf-8")
    result = run_cli(["demo", "--data-dir", str(mine)])
    assert result.exit_code == 2, result.output
    [line] = error_lines(result)
    assert line.startswith(f"error: --data-dir {mine} holds files an earlier `ragsift demo`")
    assert (mine / "notes" / "thesis.md").read_text(encoding="utf-8") == "Four years of work."
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    for data_dir, why in ((afile, "is not a folder"), (afile / "sub", "cannot write there")):
        result = run_cli(["demo", "--data-dir", str(data_dir)])
        assert result.exit_code == 2, result.output
        [line] = error_lines(result)
        assert line.startswith(f"error: --data-dir {data_dir}")
        assert why in line


def test_demo_starts_again_on_its_own_folder_and_on_an_empty_one(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for _ in range(2):  # the second run deletes what the first wrote
        result = run_cli(["demo", "--data-dir", str(empty)], env={
            "RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST": "false"})  # fmt: skip
        assert result.exit_code == 0, result.output
    assert (empty / "results.jsonl").is_file()


@pytest.mark.parametrize(
    ("ingested", "why"),
    [
        (
            ["--collection", "mydocs"],
            "holds collections an earlier `ragsift demo` did not write (mydocs)",
        ),
        ([], "indexes tenants an earlier `ragsift demo` did not (mine)"),
    ],
)
def test_demo_keeps_its_folder_once_a_user_ingested_into_it(
    tmp_path: Path, ingested: list[str], why: str
) -> None:
    # The demo checked its corpus folder only: a user's collection (or tenant) ingested
    # into a demo's data dir was deleted with it, without a word.
    quick = {"RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST": "false"}
    data = tmp_path / "demo"
    assert run_cli(["demo", "--data-dir", str(data)], env=quick).exit_code == 0
    mine = tmp_path / "mine.md"
    mine.write_text("Our own notes on the office.", encoding="utf-8")
    done = run_cli(
        ["ingest", str(mine), "--tenant", "mine", "--no-probe", "--data-dir", str(data), *ingested]
    )
    assert done.exit_code == 0, done.output
    result = run_cli(["demo", "--data-dir", str(data)], env=quick)
    assert result.exit_code == 2, result.output
    [line] = error_lines(result)
    assert why in line
    assert (data / "qdrant").is_dir()


@pytest.mark.parametrize("where", ["a folder", "an empty file", "binary", "truncated JSON"])
def test_ingest_of_odd_files_is_one_line_or_a_clean_skip(tmp_path: Path, where: str) -> None:
    """What ``ingest`` is pointed at: a folder with no documents, an empty file, binary
    bytes, a truncated JSONL line (a BOM and CRLF ends are read: test_bom_files.py)."""
    target = tmp_path / "in.jsonl"
    content = {
        "an empty file": b"",
        "binary": bytes(range(256)),
        "truncated JSON": b'{"text": "a"}\n{"text": "b',
    }.get(where)
    if content is None:
        target = tmp_path / "docs"
        (target / "sub").mkdir(parents=True)
        (target / "sub" / "x.pdf").write_bytes(b"%PDF")
    else:
        target.write_bytes(content)
    data = tmp_path / "data"
    result = run_cli(["ingest", str(target), "--tenant", "t", "--data-dir", str(data)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert error_lines(result)[-1].startswith("error: ")
    assert str(target) in error_lines(result)[-1]
    assert not data.exists()


def _squad(path: Path) -> Path:
    qas = [{"id": "q1", "question": "Which car?", "answers": [{"text": "red"}]}]
    paragraphs = [{"context": "The car was red.", "qas": qas}]
    path.write_text(json.dumps({"data": [{"title": "Cars", "paragraphs": paragraphs}]}))
    return path


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_an_output_path_is_refused_before_the_run_not_after(tmp_path: Path, where: str) -> None:
    """calibrate --out (a fit of minutes, lost at the end with a traceback), --held-out,
    and k8s topics --out: refused before anything is read or computed."""
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    bad = tmp_path if where == "a folder" else afile / "out.json"
    labelled = _squad(tmp_path / "dev.json")
    runs = {
        "--out": ["calibrate", "--labelled", str(labelled), "--out", str(bad)],
        "--held-out": ["calibrate", "--collection", "c", "--method", "pseudo-queries",
                       "--held-out", str(bad), "--data-dir", str(tmp_path / "none")],
        "--per-query": ["eval", "--labelled", str(labelled), "--per-query", str(bad)],
        "k8s --out": ["k8s", "topics", "--out", str(bad)],
    }  # fmt: skip
    for option, args in runs.items():
        result = run_cli(args)
        assert result.exit_code == 2, (option, result.output)
        [line] = error_lines(result)
        assert line.startswith(f"error: {option.split()[-1]}: cannot write {bad}: "), line


def test_a_refused_fit_leaves_no_empty_output_file(tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    result = run_cli(
        ["calibrate", "--labelled", str(_squad(tmp_path / "dev.json")), "-o", str(out)]
    )
    assert result.exit_code == 2
    assert "cannot fit" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("option", ["--partitions", "--replicas"])
def test_k8s_topics_counts_under_one_are_one_error(tmp_path: Path, option: str) -> None:
    result = run_cli(["k8s", "topics", "--out", str(tmp_path / "t.yaml"), option, "0"])
    assert result.exit_code == 2
    assert error_lines(result) == [f"error: {option[2:]} must be >= 1, got 0"]


_BAD_NAMES = {
    "prefix with a space": (["--prefix", "rag sift"], "prefix must be letters, digits"),
    "prefix with a slash": (["--prefix", "a/b"], "prefix must be letters, digits"),
    "prefix starting with a dash": (["--prefix", "-x"], "prefix must start with a letter"),
    "prefix starting with a dot": (["--prefix", ".x"], "prefix must start with a letter"),
    "prefix too long": (["--prefix", "p" * 240], "prefix is too long"),
    "prefix not Latin": (["--prefix", "ラグ"], "prefix must be letters, digits"),
    "prefix with a newline": (["--prefix", "rag\nsift"], "prefix must be letters, digits"),
    "cluster with a control character": (["--cluster", "kafka\x00"], "cluster must be a Strimzi"),
    "cluster upper case": (["--cluster", "My-Kafka"], "cluster must be a Strimzi"),
    "cluster with a dot": (["--cluster", "a.b"], "cluster must be a Strimzi"),
    "cluster empty": (["--cluster", ""], "cluster must be a Strimzi"),
    "cluster too long": (["--cluster", "k" * 64], "cluster must be a Strimzi"),
}


@pytest.mark.parametrize(("args", "message"), _BAD_NAMES.values(), ids=_BAD_NAMES.keys())
def test_k8s_topics_names_kafka_or_kubernetes_would_refuse_are_one_error(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Before, any --prefix or --cluster was written into the manifests, and the cluster
    refused them when they were applied (or, for a prefix, the workers at start-up)."""
    out = tmp_path / "t.yaml"
    result = run_cli(["k8s", "topics", "--out", str(out), *args])
    assert result.exit_code == 2
    [line] = error_lines(result)
    assert line.startswith(f"error: {message}"), line
    assert not out.exists()


def test_k8s_topics_accepts_what_a_worker_accepts(tmp_path: Path) -> None:
    out = tmp_path / "t.yaml"
    result = run_cli(
        ["k8s", "topics", "--out", str(out), "--prefix", "Team_A.rag", "--cluster", "kafka-1"]
    )
    assert result.exit_code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "topicName: Team_A.rag.queries.v1" in text
    assert "name: team-a-rag-queries-v1" in text
    assert "strimzi.io/cluster: kafka-1" in text


@pytest.mark.parametrize("store", ["results.sqlite3", "feedback.sqlite"])
def test_a_store_file_that_is_not_sqlite_is_named_not_a_traceback(
    tmp_path: Path, demo_dir: Path, store: str
) -> None:
    """A data dir's results or feedback store overwritten or damaged: ask, assess and
    feedback each say which file and what to do, and leave it as it is."""
    data = tmp_path / "demo"
    shutil.copytree(demo_dir, data)
    (data / store).write_bytes(b"not a database" * 100)
    runs = [
        ["ask", "How long is the warranty?", "--tenant", "demo", "--data-dir", str(data)],
        ["assess", "demo-0", "--data-dir", str(data)],
        ["feedback", "demo-0", "--relevant", "--data-dir", str(data)],
    ]
    for args in runs[:2] if store == "results.sqlite3" else [runs[0], runs[2]]:
        result = run_cli(args)
        assert result.exit_code == 2, (args, result.output)
        [line] = error_lines(result)
        assert line.startswith(f"error: the {store.split('.')[0]} store {data / store} is not")
    assert (data / store).read_bytes() == b"not a database" * 100


@pytest.mark.parametrize(("option", "value"), [("--collection", "../x"), ("--tenant", "a/b")])
def test_calibrate_collection_names_a_name_no_query_could_use(
    tmp_path: Path, option: str, value: str
) -> None:
    args = ["calibrate", "--collection", "default", option, value, "--data-dir", str(tmp_path)]
    result = run_cli(args)
    assert result.exit_code == 2, result.output
    [line] = error_lines(result)
    assert line.startswith(f"error: {option}: ")


def test_keys_commands_name_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    """The keys file lives in the data dir by default: one that is a file was a
    traceback (NotADirectoryError) from every keys command."""
    data = tmp_path / "data"
    data.write_text("not a folder")
    env = {"RAGSIFT_DATA_DIR": str(data)}
    for args in (["keys", "list"], ["keys", "create", "--tenant", "t"], ["keys", "revoke", "a"]):
        result = run_cli(args, env=env)
        assert result.exit_code == 2, (args, result.output)
        assert error_lines(result) == [
            f"error: cannot read the API keys file {data / 'api-keys.json'}: Not a directory"
        ]
    assert data.read_text() == "not a folder"


def test_keys_create_names_a_keys_file_it_cannot_write() -> None:
    result = run_cli(
        ["keys", "create", "--tenant", "t"], env={"RAGSIFT_API_KEYS_FILE": "/proc/api-keys.json"}
    )
    assert result.exit_code == 2, result.output
    [line] = error_lines(result)
    assert line.startswith("error: cannot write the API keys file /proc/api-keys.json: "), line


def test_feedback_on_a_data_dir_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    # It used to create the folder and a feedback.sqlite in it before refusing the id.
    data = tmp_path / "typo" / "data"
    result = run_cli(["feedback", "demo-0", "--relevant", "--data-dir", str(data)])
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [f"error: no data directory at {data}: no query was scored there"]
    assert not (tmp_path / "typo").exists()


def test_ask_and_ingest_name_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    # `ask` said "nothing has been indexed there", `ingest` "[Errno 20] Not a directory:
    # 'data/qdrant' (check the RAGSIFT_* settings that name files)".
    data = tmp_path / "data"
    data.write_text("not a folder")
    doc = tmp_path / "a.md"
    doc.write_text("Some text.", encoding="utf-8")
    for args in (["ask", "hi?", "-t", "t"], ["ingest", str(doc), "-t", "t", "--no-probe"]):
        result = run_cli([*args, "--data-dir", str(data)])
        assert result.exit_code == 2, (args, result.output)
        assert error_lines(result) == [
            f"error: the data directory {data} is a file, not a folder: name another"
        ]
    assert data.read_text() == "not a folder"


def test_ingest_names_a_data_dir_that_is_a_file_before_reading_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It said so only after reading the whole folder (minutes, for a large one).
    data = tmp_path / "data"
    data.write_text("not a folder")
    read: list[object] = []
    monkeypatch.setattr("ragsift.cli.embedded.read_documents", lambda *a: read.append(a) or [])
    result = run_cli(["ingest", str(tmp_path), "-t", "t", "--no-probe", "--data-dir", str(data)])
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [
        f"error: the data directory {data} is a file, not a folder: name another"
    ]
    assert read == []


@pytest.mark.parametrize("store", ["results.sqlite3", "feedback.sqlite"])
def test_a_damaged_answer_store_stops_only_the_commands_that_read_it(
    tmp_path: Path, store: str
) -> None:
    """``ingest`` and ``documents`` never read the kept answers or the labels, yet
    refused to run while either file was damaged; ``ask`` still says what to do."""
    docs, data = tmp_path / "docs", tmp_path / "data"
    docs.mkdir()
    (docs / "a.md").write_text("Refunds are issued within 30 days.", encoding="utf-8")
    where = ["--tenant", "t", "--data-dir", str(data)]
    assert run_cli(["ingest", str(docs), *where, "--no-probe"]).exit_code == 0
    (data / store).write_bytes(b"garbage" * 100)
    (docs / "b.md").write_text("Shipping takes five days.", encoding="utf-8")
    ingested = run_cli(["ingest", str(docs), *where, "--no-probe"])
    assert ingested.exit_code == 0, ingested.output
    listed = run_cli(["documents", *where, "--json"])
    assert listed.exit_code == 0, listed.output
    assert {"a.md", "b.md"} <= set(listed.output.replace('"', " ").split())
    asked = run_cli(["ask", "how long do refunds take?", *where])
    assert asked.exit_code != 0
    assert f"{data / store} is not usable" in error_lines(asked)[-1]


def test_an_empty_data_dir_option_is_refused_not_read_as_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("Refunds are issued within 30 days.", encoding="utf-8")
    result = run_cli(["ingest", "a.md", "--tenant", "t", "--data-dir", "", "--no-probe"])
    assert result.exit_code == 2, result.output
    assert "an empty path" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]


def test_the_data_dir_parser_takes_a_default_path_as_it_is() -> None:
    # demo's default (a Path) goes through the parser too: it raised AttributeError
    # on Path.strip, and `ragsift demo` without --data-dir failed.
    from ragsift.cli.common import _data_dir

    assert _data_dir(Path(".ragsift/demo")) == Path(".ragsift/demo")
    assert _data_dir("d") == Path("d")


@pytest.mark.parametrize(
    ("flags", "said"),
    [([], "neither given"), (["--relevant", "--not-relevant"], "both given")],
)
def test_feedback_says_which_way_its_label_flags_are_wrong(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    # Given neither flag, it said "one of the two, not both".
    result = run_cli(["feedback", "demo-0", *flags, "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [
        f"error: say --relevant or --not-relevant: one of the two ({said})"
    ]
