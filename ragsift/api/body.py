"""Reading a request's JSON body defensively: type, size, time and nesting are all bounded."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web, web_protocol

from ragsift.errors import RagsiftError, shown_value
from ragsift.schemas.payload import RepeatsNoted, not_utf8

__all__ = [
    "CLIENT_CLOSED_REQUEST",
    "MAX_JSON_DEPTH",
    "BodyError",
    "check_body_head",
    "read_json_body",
]

#: the query contract is a flat object; anything nested deeper is hostile input,
#: and refusing it before json.loads keeps the parser far from the recursion limit
MAX_JSON_DEPTH = 32
_STRUCTURE = b'"\\[]{}'
# every byte that cannot change the nesting depth, dropped before the scan
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STRUCTURE)
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPENERS, _CLOSERS = frozenset(b"[{"), frozenset(b"]}")
#: The status counted for a request whose client left before its body was in (nginx's
#: name and number): no answer reaches it, and it is no fault of the server's.
CLIENT_CLOSED_REQUEST = 499


class BodyError(RagsiftError):
    """A body the API will not parse, with the HTTP status and error code to answer with."""

    stage = "decode"

    def __init__(self, status: int, error: str, message: str, *, close: bool = False):
        super().__init__(message)
        self.status = status
        self.error = error
        #: The connection cannot carry another request: answer with Connection: close.
        self.close = close


def _too_deep(body: bytes) -> bool:
    """Whether brackets outside strings nest deeper than MAX_JSON_DEPTH (one linear pass)."""
    depth, in_string, escaped = 0, False, False
    for byte in body.translate(None, _NOT_STRUCTURE):
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPENERS:
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif byte in _CLOSERS:
            depth -= 1
    return False


def check_body_head(request: web.BaseRequest, *, max_bytes: int) -> None:
    """What the headers alone say of the body, or BodyError: 415 not JSON, 413 a
    Content-Length over ``max_bytes``. Checked again before reading it, and before
    answering ``Expect: 100-continue`` (:mod:`ragsift.api.admission`), so a client is
    refused before it sends a body that would be refused."""
    if request.content_type != "application/json":
        raise BodyError(
            415,
            "unsupported_media_type",
            f"the body must be application/json, got {request.content_type or 'none'!r}",
        )
    if request.content_length is not None and request.content_length > max_bytes:
        raise BodyError(413, "body_too_large", f"the body is over {max_bytes} bytes")


async def read_json_body(request: web.Request, *, max_bytes: int, timeout_s: float) -> Any:
    """The parsed body, or BodyError: 415 not JSON, 413 too big, 408 too slow, 400 unparsable,
    499 the client left before sending it all."""
    check_body_head(request, max_bytes=max_bytes)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await request.content.readany():
                size += len(chunk)
                if size > max_bytes:
                    raise BodyError(413, "body_too_large", f"the body is over {max_bytes} bytes")
                chunks.append(chunk)
    except TimeoutError as exc:
        raise BodyError(
            408, "body_timeout", f"the body did not arrive within {timeout_s} s"
        ) from exc
    except web_protocol.RequestPayloadError as exc:  # e.g. gzip that is not gzip
        # Not to be read to its end: the body is over for aiohttp, and the connection
        # closes after the answer (its parser is past use). Else aiohttp drained the rest
        # after answering, met the same error and logged a traceback per request.
        request.content.feed_eof()
        raise BodyError(400, "bad_body", f"the body cannot be read: {exc}", close=True) from exc
    except ConnectionResetError as exc:
        # The connection was lost mid-body (a client's or a proxy's timeout): it was a
        # 500 and a logged traceback per request, a server fault on every dashboard.
        raise BodyError(
            CLIENT_CLOSED_REQUEST,
            "client_closed_request",
            "the client closed the connection before its body was in",
            close=True,
        ) from exc
    body = b"".join(chunks)
    if encoding := not_utf8(body):
        raise BodyError(400, "bad_json", f"the body is {encoding}; JSON must be UTF-8 (RFC 8259)")
    if _too_deep(body):
        raise BodyError(400, "bad_json", f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        # Decoded as the stream decodes (codec.py): json.loads on the bytes would take
        # b"\x00\x00\x00\x07junk" for UTF-32.
        data = json.loads(body.decode("utf-8-sig", "surrogatepass"), object_pairs_hook=RepeatsNoted)
    except ValueError as exc:  # also bad UTF-8 and integers past the digit limit
        raise BodyError(400, "bad_json", f"the body is not JSON: {exc}") from exc
    if isinstance(data, RepeatsNoted) and data.repeated:
        # A proxy that read the first "tenant_id" would authorize another body than ours.
        names = ", ".join(shown_value(name) for name in sorted(data.repeated)[:5])
        raise BodyError(400, "bad_json", f"the body gives {names} more than once")
    return data
