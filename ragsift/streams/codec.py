"""Bytes ⇄ event models, with errors that name the field and the value.

Agents consume raw bytes and decode with :class:`EventCodec` themselves, so a
payload that fails to decode is dead-lettered byte for byte instead of being
skipped inside the stream machinery (Faust acks what it cannot deserialize).
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ragsift.errors import DecodeError, describe_validation_error
from ragsift.schemas.payload import RepeatsNoted, lone_surrogate, not_utf8

__all__ = ["EventCodec"]

M = TypeVar("M", bound=BaseModel)

# A payload this big is refused before parsing: the largest legal event (a
# document of MAX_TEXT_CHARS) fits well within it.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024


class EventCodec(Generic[M]):
    """Encodes and decodes one event model as UTF-8 JSON."""

    def __init__(self, model: type[M]):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"model must be a pydantic model class, got {model!r}")
        self.model = model
        self._unrepeated = tuple(
            (key, f'"{key}"'.encode()) for key in getattr(model, "UNREPEATED_KEYS", ())
        )

    def encode(self, event: M) -> bytes:
        """The event as compact JSON bytes."""
        if not isinstance(event, self.model):
            raise TypeError(f"expected {self.model.__name__}, got {type(event).__name__}")
        return event.model_dump_json().encode("utf-8")

    def decode(self, payload: bytes | str | None) -> M:
        """Parse and validate; raise :class:`DecodeError` saying what is wrong.

        Nothing else escapes: any failure to turn these bytes into an event is a
        :class:`DecodeError` (stage ``decode``), which the runtimes dead-letter.
        """
        name = self.model.__name__
        if payload is None:
            raise DecodeError(f"{name}: empty message (null value)")
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise DecodeError(
                f"{name}: payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES} bytes"
            )
        try:
            if self._unrepeated:
                self._refuse_repeated(payload)
            try:
                # Parsing and validating in one pydantic-core call is the fast path; a
                # payload it refuses takes the step-by-step path, which names the fault.
                return self.model.model_validate_json(payload)
            except ValidationError:
                pass
            return self._decode_slowly(payload)
        except DecodeError:
            raise
        except RecursionError as exc:
            # Deep nesting ("[" * 5000) exhausts the parser's or the validator's stack.
            raise DecodeError(f"{name}: payload nests too deeply to parse") from exc
        except Exception as exc:
            # Whatever else the parser or a validator raises about these bytes must be
            # dead-lettered, never crash the agent that reads them.
            raise DecodeError(
                f"{name}: payload could not be decoded ({type(exc).__name__}: {exc})"
            ) from exc

    def _refuse_repeated(self, payload: bytes) -> None:
        """Raise when the payload's object gives one of the model's ``UNREPEATED_KEYS``
        twice (:class:`~ragsift.schemas.base.EventModel`).

        Two byte searches decide almost every payload: a name written once cannot be
        repeated, unless an escape spells it (``"tenant\\u005fid"``). Only a payload
        that holds the name twice (say in its metadata) or an escape is parsed here.
        """
        # A lone byte is searched with memchr: most payloads hold no backslash at all.
        escaped = b"\\" in payload and b"\\u" in payload
        if not escaped and all(payload.count(q) < 2 for _, q in self._unrepeated):
            return
        try:
            data = json.loads(payload, object_pairs_hook=RepeatsNoted)
        except ValueError:  # not JSON, or not UTF-8: the decode proper names the fault
            return
        if not isinstance(data, RepeatsNoted):  # not an object: the decode proper says so
            return
        for key, _ in self._unrepeated:
            if key in data.repeated:
                query_id = data.get("query_id")
                raise DecodeError(
                    f"{self.model.__name__}: payload gives {key} more than once; parsers"
                    " disagree on which one counts, so none is taken",
                    query_id=query_id if isinstance(query_id, str) else None,
                )

    def _decode_slowly(self, payload: bytes) -> M:
        """Parse, then validate: slower than one call, but each failure names its cause."""
        name = self.model.__name__
        # The fast path reads UTF-8 only; json.loads would read UTF-16 and UTF-32 too.
        if encoding := not_utf8(payload):
            raise DecodeError(f"{name}: payload is {encoding}; events must be UTF-8 JSON")
        try:
            # Decoded here, not by json.loads: it would take b"\x00\x00\x00\x07junk"
            # for UTF-32 and call valid UTF-8 "not UTF-8".
            text = payload.decode("utf-8-sig", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{name}: payload is not UTF-8 ({exc.reason})") from exc
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DecodeError(
                f"{name}: payload is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from exc
        except ValueError as exc:
            # What json refuses beyond syntax: an integer of more than 4,300 digits
            # (sys.get_int_max_str_digits, CPython's guard against quadratic parsing).
            raise DecodeError(f"{name}: payload is not usable JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise DecodeError(f"{name}: payload must be a JSON object, got {type(data).__name__}")
        query_id = data.get("query_id")
        query_id = query_id if isinstance(query_id, str) else None
        # The fast path refuses an escape such as "\ud800" as invalid JSON; json.loads
        # reads a lone surrogate, which free text fields took, and the event failed
        # where its text was encoded (an audit write, a report's send): a stage that
        # reads as an outage, whose letter a replay sent back to fail again.
        if (surrogate := lone_surrogate(data)) is not None:
            raise DecodeError(
                f"{name}: payload holds {surrogate}, a lone surrogate: not Unicode text",
                query_id=query_id,
            )
        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            raise DecodeError(
                f"{name}: {describe_validation_error(exc)}",
                query_id=query_id,
                errors=[dict(e) for e in exc.errors(include_url=False, include_input=False)],
            ) from exc
