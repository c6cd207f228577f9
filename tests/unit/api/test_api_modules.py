"""``api/app.py`` split by concept: the Kafka link and the query body have modules of their own.

The embedded console and the API must read a query body with the very same
code (one contract, one set of limits), and the API's old import path for it
still works for code written before the split (issue 18, part 3).
"""

from __future__ import annotations

import pytest

from ragsift import console_server
from ragsift.api import QueryApi, app, kafka_link, query_input

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", ["read_query", "check_limits", "error_response"])
def test_the_api_module_still_exports_the_query_reader(name: str) -> None:
    assert getattr(app, name) is getattr(query_input, name)


@pytest.mark.parametrize("name", ["read_query", "error_response"])
def test_the_console_reads_queries_with_the_same_code(name: str) -> None:
    assert getattr(console_server, name) is getattr(query_input, name)


def test_the_api_reads_and_publishes_through_its_kafka_link() -> None:
    assert issubclass(QueryApi, kafka_link.KafkaLink)
    own = {name for name in vars(QueryApi) if name.startswith("_") and not name.startswith("__")}
    kafka_side = {"_connect", "_disconnect", "_run", "_probe", "_read", "_publish"}
    assert own & kafka_side == set()
