"""The embedded result store: replace, prune, tenant scoping, hostile ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsift.runtime_store import ResultStore, StoredAnswer
from tests.unit.report.conftest import build_result


def answer(query_id: str, tenant: str = "acme") -> StoredAnswer:
    return StoredAnswer(build_result(query_id=query_id, tenant_id=tenant))


def test_keeps_only_the_newest(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite3", max_results=3)
    for i in range(10):
        store.put(answer(f"q{i}"))
    assert len(store) == 3
    assert [a.result.query_id for a in store.recent(10)] == ["q7", "q8", "q9"]
    assert store.get("q6") is None


def test_re_asking_replaces_and_becomes_newest(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite3", max_results=2)
    store.put(answer("a"))
    store.put(answer("b"))
    store.put(answer("a"))
    store.put(answer("c"))  # prunes b, the oldest, not the re-asked a
    assert [x.result.query_id for x in store.recent(5)] == ["a", "c"]


def test_tenants_are_apart(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite3", max_results=10)
    store.put(answer("same", tenant="acme"))
    store.put(answer("same", tenant="globex"))
    assert len(store) == 2
    found = store.get("same", "acme")
    assert found is not None
    assert found.result.tenant_id == "acme"
    assert store.get("same", "initech") is None


@pytest.mark.parametrize("query_id", ["x' OR '1'='1", "日本語-クエリ", "a\x00b", "%", "q" * 10_000])
def test_hostile_ids_find_nothing_and_break_nothing(tmp_path: Path, query_id: str) -> None:
    store = ResultStore(tmp_path / "r.sqlite3", max_results=10)
    store.put(answer("real"))
    assert store.get(query_id) is None
    assert len(store) == 1


def test_the_bound_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_results must be >= 1, got 0"):
        ResultStore(tmp_path / "r.sqlite3", max_results=0)


@pytest.mark.parametrize("damage", ["{bad", "newer"])
def test_a_row_that_does_not_read_is_passed_over_and_named_when_asked_for(
    tmp_path: Path, damage: str
) -> None:
    # One such row (damaged, or written by a newer release with a field this one does
    # not know) stopped the console from starting: it reads the recent answers.
    import json
    import sqlite3

    from ragsift.errors import RagsiftError

    path = tmp_path / "r.sqlite3"
    store = ResultStore(path, max_results=10)
    for name in ("a", "b", "c"):
        store.put(answer(name))
    with sqlite3.connect(path) as db:
        (body,) = db.execute("SELECT result FROM answers WHERE query_id = 'b'").fetchone()
        bad = "{bad" if damage == "{bad" else json.dumps({**json.loads(body), "added": 1})
        db.execute("UPDATE answers SET result = ? WHERE query_id = 'b'", (bad,))
    assert [x.result.query_id for x in store.recent(10)] == ["a", "c"]
    with pytest.raises(RagsiftError, match=r"stored answer of 'b' .* does not read"):
        store.get("b")
    found = store.get("c")
    assert found is not None
