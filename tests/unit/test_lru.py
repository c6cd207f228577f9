"""``Recent``: the one least-recently-used map the monitors and caches keep their state in."""

from __future__ import annotations

import pytest

from ragsift.lru import Recent

pytestmark = pytest.mark.unit


def test_past_the_bound_the_least_recently_used_goes_first() -> None:
    recent: Recent[str, int] = Recent(3)
    evicted = [recent.put(key, n) for n, key in enumerate("abcde")]
    assert evicted == [False, False, False, True, True]
    assert list(recent) == ["c", "d", "e"]  # oldest first
    assert list(recent.values()) == [2, 3, 4]
    assert list(recent.items()) == [("c", 2), ("d", 3), ("e", 4)]
    assert len(recent) == 3
    assert "a" not in recent
    assert "b" not in recent


def test_get_makes_a_key_the_most_recent() -> None:
    recent: Recent[str, int] = Recent(2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert recent.get("a") == 1
    assert recent.put("c", 3)  # "b" is now the least recently used
    assert list(recent) == ["a", "c"]
    assert recent.get("b") is None


def test_peek_and_indexing_leave_the_order_alone() -> None:
    recent: Recent[str, int] = Recent(2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert recent.peek("a") == 1
    assert recent["a"] == 1
    assert "a" in recent
    assert recent.put("c", 3)  # "a" was only looked at: still the oldest
    assert list(recent) == ["b", "c"]
    assert recent.peek("a") is None
    with pytest.raises(KeyError):
        recent["a"]


def test_putting_a_kept_key_again_replaces_it_without_evicting() -> None:
    recent: Recent[str, int] = Recent(2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert not recent.put("a", 10)  # same key: no room needed
    assert list(recent.items()) == [("b", 2), ("a", 10)]  # and now the most recent
    assert recent.put("c", 3)
    assert list(recent) == ["a", "c"]


def test_pop_and_clear_forget_without_counting_as_evictions() -> None:
    recent: Recent[tuple[str, str], str] = Recent(2)
    recent.put(("t", "c"), "x")
    recent.put(("u", "c"), "y")
    assert recent.pop(("t", "c")) == "x"
    assert recent.pop(("t", "c")) is None
    assert not recent.put(("v", "c"), "z")  # the popped one made room
    recent.clear()
    assert len(recent) == 0
    assert not recent.put(("w", "c"), "w")


def test_a_bound_of_one_keeps_only_the_last() -> None:
    recent: Recent[str, int] = Recent(1)
    assert not recent.put("a", 1)
    assert recent.put("b", 2)
    assert list(recent.items()) == [("b", 2)]


def test_hostile_keys_are_kept_as_they_are() -> None:
    recent: Recent[str, int] = Recent(3)
    keys = ["テナント", "t\x00\x1f", "x" * 100_000]
    for n, key in enumerate(keys):
        recent.put(key, n)
    assert [recent.peek(key) for key in keys] == [0, 1, 2]
    assert recent.peek("t") is None


@pytest.mark.parametrize("bad", [0, -1, -(10**30)])
def test_a_bound_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match=f"max_size must be >= 1, got {bad}"):
        Recent(bad)


@pytest.mark.parametrize("bad", [2.5, "3", None, True])
def test_a_bound_that_is_not_a_whole_number_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="max_size must be an int"):
        Recent(bad)  # type: ignore[arg-type]  # the wrong type is the point
