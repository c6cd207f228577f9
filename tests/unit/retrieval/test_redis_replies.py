"""Which Redis errors are outages and which are refusals for good (redis-py's own classes)."""

from __future__ import annotations

import pytest
from redis._parsers import _RESP2Parser
from redis.exceptions import ConnectionError, DataError, RedisError, ResponseError, TimeoutError

from ragsift.observability.metrics import Metrics
from ragsift.retrieval.redis_replies import (
    RedisRefusedError,
    refusal_counter,
    refused,
    reply_code,
)
from ragsift.streams.poison import is_transient

pytestmark = pytest.mark.unit


def reply(line: str) -> RedisError:
    """What redis-py raises for the server's error ``line``."""
    return _RESP2Parser.parse_error(line)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "line",
    [
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        "ERR value is not an integer or out of range",
        "ERR Error running script (call to f_1): @user_script:3: bad argument",
        "Error compiling script (new function): user_script:1: unexpected symbol",
        "EXECABORT Transaction discarded because of previous errors.",
        "ERR unknown command 'HSETEX', with args beginning with: ",
        "CROSSSLOT Keys in request don't hash to the same slot",
        # a script's own error, raised with its code in the message
        "WRONGTYPE Operation against a key holding the wrong kind of value script: 1f,"
        " on @user_script:8.",
    ],
)
def test_a_reply_redis_repeats_for_good_is_refused_not_an_outage(line: str) -> None:
    exc = reply(line)
    assert refused(exc)
    assert not is_transient(exc)


@pytest.mark.parametrize(
    "line",
    [
        "READONLY You can't write against a read only replica.",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "LOADING Redis is loading the dataset in memory",
        "MASTERDOWN Link with MASTER is down",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
        "MOVED 3999 127.0.0.1:6381",
        "ASK 3999 127.0.0.1:6381",
        "NOSCRIPT No matching script. Please use EVAL.",
        "NOPERM User ragsift has no permissions to run the 'eval' command",
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL",
        "MISCONF Redis is configured to save RDB snapshots, but it's unable to persist",
        "NOREPLICAS Not enough good replicas to write.",
        "UNBLOCKED force unblock from blocking operation, instance state changed",
        "NOAUTH Authentication required.",
        "ERR max number of clients reached",
    ],
)
def test_a_reply_that_passes_stays_an_outage(line: str) -> None:
    exc = reply(line)
    assert not refused(exc)
    assert is_transient(exc)


@pytest.mark.parametrize("exc", [ConnectionError("reset"), TimeoutError("read"), RedisError("?")])
def test_errors_that_are_not_replies_stay_outages(exc: RedisError) -> None:
    assert not refused(exc)
    assert is_transient(exc)


def test_a_value_redis_py_cannot_encode_is_refused_for_good() -> None:
    assert refused(DataError("Invalid input of type: 'NoneType'"))


def test_a_pipelines_prefix_quoting_the_command_is_not_taken_for_the_code() -> None:
    exc = reply("WRONGTYPE Operation against a key holding the wrong kind of value")
    exc.args = (f"Command # 2 (SADD t:owners:q1 acme (OOM) x) of pipeline caused error: {exc}",)
    assert reply_code(exc) == "WRONGTYPE"
    assert refused(exc)
    oom = reply("BUSY Redis is busy running a script.")
    oom.args = (f"Command # 1 (SET k WRONGTYPE) of pipeline caused error: {oom}",)
    assert reply_code(oom) == "BUSY"
    assert not refused(oom)


@pytest.mark.parametrize("text", ["", "lowercase words", "ÉTAT inconnu", "X" * 10_000, "\x00\n"])
def test_a_reply_without_a_code_reads_as_err_and_is_refused(text: str) -> None:
    exc = ResponseError(text) if text else ResponseError()
    assert reply_code(exc) == "ERR"
    assert refused(exc)


def test_a_refusal_raised_from_the_reply_is_not_taken_for_an_outage() -> None:
    error = RedisRefusedError("labels", store="feedback", key_kind="labels", code="WRONGTYPE")
    error.__cause__ = reply("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert not is_transient(error)


def test_refusals_are_counted_by_store_and_kind_of_key() -> None:
    metrics = Metrics()
    count = refusal_counter(metrics, "feedback")
    count("labels")
    count("labels")
    assert metrics.redis_refused.labels("feedback", "labels")._value.get() == 2
    assert metrics.redis_refused.labels("feedback", "refits")._value.get() == 0
