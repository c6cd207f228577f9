"""An HTTP body read no further than a cap, its content codings undone in bounded steps.

httpx decodes each chunk off the wire whole: one 64 KiB chunk of gzip is up to
64 MiB of output, of zstd gigabytes, and ``Content-Encoding: gzip, gzip`` a thousand
times more, all in memory before a reader can compare the body with its cap. Here
the body is read raw and each coding is undone at most :data:`STEP` bytes at a time,
pulled only while the body is under its cap: a small compressed body that expands
without end costs the cap and a step, not its expansion.

Only the codings that zlib can undo in bounded steps are taken (``gzip``,
``x-gzip``, ``deflate``, and stacks of up to :data:`MAX_CODINGS` of them):
:data:`ACCEPT_ENCODING` asks for nothing else, and a server that sends another
(``br``, ``zstd``) or more gets :class:`BodyDecodingError`, as does a body those
codings cannot read.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

import httpx

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_CODINGS",
    "STEP",
    "BodyDecoder",
    "BodyDecodingError",
    "read_capped",
]

#: What the clients ask for: the codings :class:`BodyDecoder` undoes in bounded steps.
ACCEPT_ENCODING = "gzip, deflate"
#: Most bytes one decoding step makes, as httpcore's read size: a step's output is
#: one network read's worth, whatever the compression ratio.
STEP = 64 * 1024
#: Codings of one body undone at most. A server applies one (a proxy may add a second);
#: each is a zlib stream and a generator wrapping the one before, so 1,500 of them (a
#: 9 KB header) raised RecursionError out of the reader.
MAX_CODINGS = 4
_GZIP = ("gzip", "x-gzip")
_IDENTITY = ("", "identity")
_ZLIB_DEFLATE = 8  # a zlib header's compression method (RFC 1950)


class BodyDecodingError(ValueError):
    """A body in a coding that is not taken, or that its coding cannot read."""


class _Inflate:
    """One zlib coding of a body (gzip or deflate), undone at most ``STEP`` bytes a call."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._inflater: Any = None  # zlib's decompress object; deflate's waits for its header
        self._head = b""
        if coding in _GZIP:
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)

    def _start(self, data: bytes, *, ended: bool = False) -> bytes:
        """``data`` once the coding knows its framing: "deflate" is zlib-wrapped by the
        RFC and raw from some servers, told apart by the zlib header (2 bytes)."""
        if self._inflater is not None:
            return data
        self._head += data
        if len(self._head) < 2 and not ended:
            return b""
        cmf, flg = (self._head + b"\0\0")[:2]
        zlib_wrapped = cmf & 0x0F == _ZLIB_DEFLATE and (cmf * 256 + flg) % 31 == 0
        self._inflater = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
        data, self._head = self._head, b""
        return data

    def decode(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        """The output of ``pieces``, in pieces of at most ``STEP`` bytes, made as pulled."""
        for piece in pieces:
            data = self._start(piece)
            if self._inflater is None:
                continue
            while not self._inflater.eof:
                out = self._inflate(data)
                data = self._inflater.unconsumed_tail
                if out:
                    yield out
                if not data and len(out) < STEP:
                    break  # input used up and nothing held back (a full step may hold more)

    def finish(self) -> Iterator[bytes]:
        """What the coding still holds once its input has ended."""
        data = self._start(b"", ended=True)
        while not self._inflater.eof:
            out = self._inflate(data)
            data = self._inflater.unconsumed_tail
            if not out:
                return
            yield out

    def _inflate(self, data: bytes) -> bytes:
        try:
            out: bytes = self._inflater.decompress(data, STEP)
            return out
        except zlib.error as exc:
            raise BodyDecodingError(f"body is not valid {self.coding}: {exc}") from exc


class BodyDecoder:
    """Undoes a body's ``Content-Encoding`` in pieces of at most :data:`STEP` bytes.

    Args:
        content_encoding: the header's value; codings listed in the order applied.

    Raises:
        BodyDecodingError: a coding other than gzip, x-gzip, deflate and identity, or
            more than :data:`MAX_CODINGS` of them.
    """

    def __init__(self, content_encoding: str) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        if len(codings) > MAX_CODINGS:
            raise BodyDecodingError(
                f"content-encoding stacks {len(codings)} codings; at most {MAX_CODINGS} are taken"
            )
        refused = [c for c in codings if c not in (*_IDENTITY, *_GZIP, "deflate")]
        if refused:
            raise BodyDecodingError(
                f"content-encoding {content_encoding!r} is not taken"
                f" (asked for {ACCEPT_ENCODING!r}; {refused[0]!r} cannot be read in bounded steps)"
            )
        # The last coding applied is undone first.
        self._stages = [_Inflate(c) for c in reversed(codings) if c not in _IDENTITY]

    def decode(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw chunk, each made when pulled."""
        pieces: Iterable[bytes] = (raw,)
        for stage in self._stages:
            pieces = stage.decode(pieces)
        return (piece for piece in pieces if piece)

    def finish(self) -> Iterator[bytes]:
        """The decoded pieces the codings still hold once the raw body has ended."""
        pieces: Iterable[bytes] = ()
        for stage in self._stages:
            pieces = chain(stage.decode(pieces), stage.finish())
        return (piece for piece in pieces if piece)


async def read_capped(response: httpx.Response, limit: int | None) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of ``response``'s decoded body, and whether that is all of it.

    ``response`` is a streamed one, not yet read. Reading stops once more than
    ``limit`` bytes were decoded, or more than ``limit`` came over the wire (a coding
    may turn much input into little output, and that input is held too): memory
    stays within ``limit`` plus a step and a network read. ``None``: no cap.

    Raises:
        BodyDecodingError: a coding that is not taken, or a body it cannot read.
    """
    decoder = BodyDecoder(response.headers.get("content-encoding", ""))
    if response.is_stream_consumed:
        # Read (and decoded) whole before it came here: only a transport that builds its
        # answers from bytes in memory (httpx.MockTransport) hands over such a response.
        content = response.content
        return content[:limit], limit is None or len(content) <= limit
    body = bytearray()
    wire = 0

    def over(pieces: Iterable[bytes]) -> bool:
        for piece in pieces:
            body.extend(piece)
            if limit is not None and len(body) > limit:
                return True
        return False

    async for raw in response.aiter_raw():
        wire += len(raw)
        if over(decoder.decode(raw)) or (limit is not None and wire > limit):
            return bytes(body[:limit]), False
    if over(decoder.finish()):
        return bytes(body[:limit]), False
    return bytes(body), True
