"""W3C Trace Context: the ``traceparent`` a query carries to its outputs.

The Trace Context recommendation (https://www.w3.org/TR/trace-context/, "traceparent
Header") tells a receiver to *ignore* a ``traceparent`` it cannot parse and carry on
without one. A tracing header is never a reason to refuse a query: before, a header
past the contract's 128 characters turned POST /v1/query into a 422 and a Kafka event
into a dead letter, while a malformed one short enough travelled on to every output
and trace backend.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

__all__ = ["TraceParent", "trace_context"]

# version "-" trace-id "-" parent-id "-" trace-flags, lowercase hex only.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_LENGTH = 55  # of a version-00 traceparent


def trace_context(value: str) -> str | None:
    """``value`` as a version-00 ``traceparent``, or None when it is not one to keep.

    Version 00 must be exactly the four fields. A later version may append fields
    after a ``-``: its first four are read and carried on as version 00, the only one
    this reader knows (as the recommendation asks). Version ``ff`` and all-zero ids
    are invalid.
    """
    head = _TRACEPARENT.match(value)
    if head is None:
        return None
    version, trace_id, parent_id, _flags = head.groups()
    if version == "ff" or set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        return None
    if version == "00":
        return value if len(value) == _LENGTH else None
    if len(value) > _LENGTH and value[_LENGTH] != "-":
        return None
    return "00" + value[2:_LENGTH]


def _ignore_unparsable(value: Any) -> Any:
    # Non-strings stay as they are, so the contract still refuses ``"traceparent": 5``.
    return trace_context(value) if isinstance(value, str) else value


#: A ``traceparent`` field: a valid one kept (a later version rewritten to 00), an
#: unparsable string read as absent.
TraceParent = Annotated[str | None, BeforeValidator(_ignore_unparsable)]
