"""The waiting requests: found by query id, bounded per tenant, let go when the client leaves."""

from __future__ import annotations

import base64

import pytest

from ragsift.api.waiters import TenantBusyError, Waiters
from ragsift.schemas import DeadLetter


class _CountedId(str):
    """A query id that counts how often it is compared (the work a dead letter does)."""

    __slots__ = ()
    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountedId.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        _CountedId.compared += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


def retrieval_letter(query_id: str, original: bytes) -> DeadLetter:
    """The retrieval worker's letter for the query it could not take: no tenant, its bytes."""
    return DeadLetter(
        dead_letter_id="d1",
        stage="validate",
        error_type="InvalidEventError",
        error="unknown collection 'x'",
        worker="retrieval",
        topic="ragsift.queries.v1",
        original_b64=base64.b64encode(original).decode(),
        query_id=query_id,
    )


def test_a_retrieval_letter_looks_only_at_the_waiters_of_its_query_id() -> None:
    # It scanned every waiting request: 0.5 ms a letter at 4,096 waiters, 5.7 ms at
    # 40,000, on the reader that also answers every other request.
    waiters = Waiters()
    with (
        waiters.waiting(("alpha", "mine"), b"sent-by-alpha", False) as mine,
        waiters.waiting(("beta", "mine"), b"sent-by-beta", False) as theirs,
    ):
        others = [waiters.waiting(("alpha", _CountedId(f"q{i}")), b"x", False) for i in range(500)]
        for other in others:
            other.__enter__()
        _CountedId.compared = 0
        waiters.dead_letter(retrieval_letter("mine", b"sent-by-alpha"))
        assert _CountedId.compared <= 2, _CountedId.compared
        assert mine.letter is not None
        assert mine.wake.is_set()
        assert theirs.letter is None  # other bytes: another request's query
        assert not theirs.wake.is_set()
        for other in others:
            other.__exit__(None, None, None)
    assert waiters._pending == {}
    assert waiters._by_query == {}


def test_the_bound_counts_each_tenant_apart_and_frees_on_exit() -> None:
    waiters = Waiters(per_tenant=2)
    with (
        waiters.waiting(("alpha", "q1"), b"1", False),
        waiters.waiting(("alpha", "q1"), b"2", False),
    ):
        with pytest.raises(TenantBusyError, match="'alpha' already has 2 requests") as busy:
            waiters.waiting(("alpha", "q2"), b"3", False).__enter__()
        assert busy.value.retry_after == 60  # no timeout given: the most
        assert busy.value.query_id == "q2"
        with waiters.waiting(("beta", "q2"), b"4", False):  # another tenant's own bound
            assert {t: len(held.waiting) for t, held in waiters._by_tenant.items()} == {
                "alpha": 2,
                "beta": 1,
            }
    assert waiters._by_tenant == {}
    assert waiters._pending == {}
    assert waiters._by_query == {}
    with waiters.waiting(("alpha", "q2"), b"3", False):  # room again
        pass


@pytest.mark.parametrize(("per_tenant", "gone_check_s"), [(-1, 1.0), (0, 0.0), (0, -1.0)])
def test_a_bad_bound_or_check_interval_is_refused_by_name(
    per_tenant: int, gone_check_s: float
) -> None:
    with pytest.raises(ValueError, match=r"per_tenant|gone_check_s"):
        Waiters(per_tenant, gone_check_s=gone_check_s)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _refused(waiters: Waiters, tenant: str = "alpha") -> TenantBusyError:
    with pytest.raises(TenantBusyError) as busy:
        waiters.waiting((tenant, "refused"), b"x", False, timeout_s=10).__enter__()
    return busy.value


def test_retry_after_is_when_the_tenants_first_waiting_request_times_out() -> None:
    # Before: always 1 s, whatever the requests holding the slots were waiting for.
    clock = Clock()
    waiters = Waiters(per_tenant=2, clock=clock)
    with (
        waiters.waiting(("alpha", "q1"), b"1", False, timeout_s=45),
        waiters.waiting(("alpha", "q2"), b"2", False, timeout_s=30),
    ):
        clock.now = 4.5
        busy = _refused(waiters)
        assert busy.retry_after == 26  # a slot is free by 30 s, whatever the pipeline does
        assert "retry after 26 s" in busy.message


def test_retry_after_follows_the_pace_slots_free_at() -> None:
    clock = Clock()
    waiters = Waiters(per_tenant=2, clock=clock)
    first = waiters.waiting(("alpha", "q1"), b"1", False, timeout_s=30)
    second = waiters.waiting(("alpha", "q2"), b"2", False, timeout_s=30)
    first.__enter__()
    second.__enter__()
    clock.now = 1.0
    first.__exit__(None, None, None)
    third = waiters.waiting(("alpha", "q3"), b"3", False, timeout_s=30)
    third.__enter__()
    clock.now = 3.0
    second.__exit__(None, None, None)  # two seconds between freed slots
    fourth = waiters.waiting(("alpha", "q4"), b"4", False, timeout_s=30)
    fourth.__enter__()
    clock.now = 3.5
    assert _refused(waiters).retry_after == 2  # the pace
    clock.now = 6.0
    assert _refused(waiters).retry_after == 3  # none for 3 s: not sooner than that
    clock.now = 25.0
    assert _refused(waiters).retry_after == 6  # stuck: the first timeout (31 s) comes first


def test_retry_after_is_whole_seconds_from_1_to_60() -> None:
    clock = Clock()
    waiters = Waiters(per_tenant=1, clock=clock)
    with waiters.waiting(("alpha", "q1"), b"1", False, timeout_s=3600):
        assert _refused(waiters).retry_after == 60
    with waiters.waiting(("alpha", "q1"), b"1", False, timeout_s=0.2):
        busy = _refused(waiters)
        assert busy.retry_after == 1
        assert isinstance(busy.retry_after, int)
    with waiters.waiting(("alpha", "q1"), b"1", False):  # no timeout known: the most
        assert _refused(waiters).retry_after == 60
    assert waiters._by_tenant == {}  # nothing kept for a tenant with none waiting
