"""`ragsift audit verify` names the first broken row and what is wrong with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.audit import AuditFileSink, verify_chain
from ragsift.audit.chain import HASH, MAC, row_hash
from ragsift.cli import app
from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType

KEY = b"audit-key"


def evidence(query_id: str) -> EvidenceEvent:
    data = EvidenceData(query_id=query_id, tenant_id="acme", summary="s", confidence=0.1)
    return EvidenceEvent.for_query(EvidenceType.REFUSAL, data, source="/ragsift/test")


def trail(tmp_path: Path, rows: int = 5, key: bytes | None = KEY) -> Path:
    sink = AuditFileSink(tmp_path, hmac_key=key)
    sink.write([evidence(f"q{i}") for i in range(rows)])
    return sink.path


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rewrite(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def rechain(rows: list[dict[str, object]]) -> None:
    """What someone without the key can do: recompute every hash after an edit."""
    prev = "0" * 64
    for seq, row in enumerate(rows):
        row.pop(MAC, None)
        row["auditseq"], row["auditprev"] = seq, prev
        row[HASH] = prev = row_hash(row)


def first_break(path: Path, key: bytes | None = KEY) -> tuple[int, str]:
    problem = verify_chain([path], key=key).problem
    assert problem is not None
    return problem.line, problem.kind


def test_intact_trail_summarised(tmp_path: Path) -> None:
    report = verify_chain([trail(tmp_path)], key=KEY)
    assert report.intact
    assert (report.rows, report.first_seq, report.last_seq) == (5, 0, 4)
    assert report.first_time is not None
    assert report.last_time is not None


def test_edited_row_is_named(tmp_path: Path) -> None:
    path = trail(tmp_path)
    rows = lines(path)
    rows[2]["data"] = {**rows[2]["data"], "summary": "nothing to see"}  # type: ignore[dict-item]  # a dict row
    rewrite(path, rows)
    assert first_break(path) == (3, "edited")


def test_rebuilt_chain_without_the_key_fails_the_hmac(tmp_path: Path) -> None:
    path = trail(tmp_path)
    rows = lines(path)
    rows[1]["source"] = "/forged"
    rechain(rows)
    rewrite(path, rows)
    assert verify_chain([path]).intact  # without the key a rebuilt chain looks fine...
    assert first_break(path) == (1, "bad_hmac")  # ...the key shows it


def test_forged_hmac_is_caught(tmp_path: Path) -> None:
    path = trail(tmp_path)
    rows = lines(path)
    rows[3][MAC] = "0" * 64
    rewrite(path, rows)
    assert first_break(path) == (4, "bad_hmac")


def test_deleted_row_is_named(tmp_path: Path) -> None:
    path = trail(tmp_path)
    rows = lines(path)
    del rows[2]
    rewrite(path, rows)
    assert first_break(path) == (3, "deleted")


def test_reordered_rows_are_named(tmp_path: Path) -> None:
    path = trail(tmp_path)
    rows = lines(path)
    rows[1], rows[2] = rows[2], rows[1]
    rewrite(path, rows)
    assert first_break(path) == (2, "deleted")  # seq 2 where seq 1 belongs: missing or moved
    replayed = tmp_path / "b"
    rows = lines(trail(replayed))
    rows.insert(3, rows[1])  # seq 0, 1, 2, 1, 3, 4: an earlier row copied further down
    rewrite(replayed / "audit.jsonl", rows)
    assert first_break(replayed / "audit.jsonl") == (4, "reordered")


def test_inserted_row_is_named(tmp_path: Path) -> None:
    path = trail(tmp_path, key=None)
    rows = lines(path)
    forged = {**rows[1], "source": "/forged", "auditprev": rows[1][HASH], "auditseq": 2}
    forged[HASH] = row_hash(forged)
    rows.insert(2, forged)
    rewrite(path, rows)
    assert first_break(path, key=None) == (3, "inserted")
    plain = tmp_path / "plain"
    rows = lines(trail(plain, key=None))
    rows.insert(1, json.loads(evidence("x").model_dump_json()))
    rewrite(plain / "audit.jsonl", rows)
    assert first_break(plain / "audit.jsonl", key=None) == (2, "inserted")


def test_rows_without_hmac_fail_when_a_key_is_given(tmp_path: Path) -> None:
    path = trail(tmp_path, key=None)
    assert first_break(path) == (1, "bad_hmac")


def test_truncation_needs_an_anchor(tmp_path: Path) -> None:
    path = trail(tmp_path)
    anchor = str(lines(path)[-1][HASH])
    rewrite(path, lines(path)[:-2])
    assert verify_chain([path], key=KEY).intact  # a cut end alone is invisible
    problem = verify_chain([path], key=KEY, anchor=anchor).problem
    assert problem is not None
    assert problem.kind == "truncated"


def test_torn_and_hostile_lines(tmp_path: Path) -> None:
    path = trail(tmp_path)
    with path.open("ab") as handle:
        handle.write(b'{"id": "to')
    assert first_break(path) == (6, "torn")
    for i, junk in enumerate([b"[" * 100_000, b'{"n": ' + b"9" * 5000 + b"}", b'{"x": NaN}']):
        bad = trail(tmp_path / f"bad{i}")
        content = bad.read_bytes().splitlines(keepends=True)
        content.insert(2, junk + b"\n")
        bad.write_bytes(b"".join(content))
        assert first_break(bad)[0] == 3


def test_cli_exit_codes_and_key_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    path = trail(tmp_path)
    monkeypatch.setenv("MY_AUDIT_KEY", KEY.decode())
    ok = runner.invoke(app, ["audit", "verify", str(tmp_path), "--key-env", "MY_AUDIT_KEY"])
    assert ok.exit_code == 0, ok.output
    assert "chain intact: 5 rows" in ok.output
    monkeypatch.setenv("MY_AUDIT_KEY", "wrong")
    bad = runner.invoke(app, ["audit", "verify", str(path), "--key-env", "MY_AUDIT_KEY", "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.output)["break"]["kind"] == "bad_hmac"
    rows = lines(path)
    del rows[0]
    rewrite(path, rows)
    gap = runner.invoke(app, ["audit", "verify", str(path), "--from-genesis", "--json"])
    assert gap.exit_code == 1
    assert json.loads(gap.output)["break"]["line"] == 1


def test_cli_reads_a_live_sinks_unfinished_last_line_again_before_calling_it_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sink mid-write shows a last line without its newline; ``verify`` looks once
    more after a pause. A line the pause completes is intact; one it does not is torn."""
    import ragsift.cli.admin as admin

    path = trail(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:-40])  # the last row's end not yet on disk
    monkeypatch.setattr(admin, "_settle", lambda: path.write_bytes(whole))
    monkeypatch.setenv("MY_AUDIT_KEY", KEY.decode())
    runner = CliRunner()
    live = runner.invoke(app, ["audit", "verify", str(tmp_path), "--key-env", "MY_AUDIT_KEY"])
    assert live.exit_code == 0, live.output
    assert "chain intact: 5 rows" in live.output
    path.write_bytes(whole[:-40])
    monkeypatch.setattr(admin, "_settle", lambda: None)  # a crash: nothing completes it
    torn = runner.invoke(app, ["audit", "verify", str(tmp_path), "--json"])
    assert torn.exit_code == 1
    assert json.loads(torn.output)["break"]["kind"] == "torn"


@pytest.mark.parametrize("flags", [[], ["--from-genesis"], ["--json"]])
def test_nothing_to_verify_is_not_an_intact_chain(tmp_path: Path, flags: list[str]) -> None:
    # An emptied trail, a folder without audit files and /dev/null all printed
    # "chain intact: 0 rows" and exited 0, with --from-genesis too.
    runner = CliRunner()
    trail = tmp_path / "audit"
    trail.mkdir()
    (trail / "audit.jsonl").write_text("")
    other = tmp_path / "elsewhere"
    other.mkdir()
    for target in (trail, trail / "audit.jsonl", other, Path("/dev/null")):
        done = runner.invoke(app, ["audit", "verify", str(target), *flags])
        assert done.exit_code == 1, (target, done.output)
        assert "chain intact" not in done.output
        if "--json" not in flags:
            assert "nothing to verify" in done.output


def strip_chain(row: dict[str, object]) -> None:
    for name in ("auditseq", "auditprev", HASH, MAC):
        row.pop(name, None)


@pytest.mark.parametrize("key", [None, KEY])
def test_a_trail_stripped_of_every_chain_field_is_a_break(
    tmp_path: Path, key: bytes | None
) -> None:
    # Such a trail reported "chain intact" and exited 0, even with the key: every row
    # counted as "written before the chain", so edits to any of them went unseen.
    path = trail(tmp_path)
    rows = lines(path)
    for row in rows:
        strip_chain(row)
    rows[2]["source"] = "/forged"
    rewrite(path, rows)
    report = verify_chain([path], key=key)
    assert report.problem is not None
    assert (report.problem.line, report.problem.kind) == (1, "unchained")
    assert "no chain fields" in report.problem.detail
    done = CliRunner().invoke(app, ["audit", "verify", str(path)])
    assert done.exit_code == 1
    assert "chain intact" not in done.output


def test_leading_unchained_rows_are_a_break_with_a_key_or_from_genesis(tmp_path: Path) -> None:
    # The first rows stripped and edited, the rest still chained and MACed: without a
    # key they read as rows that predate the chain; with one they cannot pass.
    path = trail(tmp_path)
    rows = lines(path)
    for row in rows[:2]:
        strip_chain(row)
    rows[0]["source"] = "/forged"
    rewrite(path, rows)
    loose = verify_chain([path])
    assert loose.intact
    assert loose.unchained == 2
    assert first_break(path) == (1, "unchained")
    strict = verify_chain([path], from_genesis=True).problem
    assert strict is not None
    assert (strict.line, strict.kind) == (1, "unchained")
