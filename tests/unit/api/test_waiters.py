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
        assert busy.value.retry_after == 1
        assert busy.value.query_id == "q2"
        with waiters.waiting(("beta", "q2"), b"4", False):  # another tenant's own bound
            assert waiters._by_tenant == {"alpha": 2, "beta": 1}
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
