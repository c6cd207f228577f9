"""The one root exception of ragsift and the subclasses handlers branch on.

Every exception carries the fields a handler needs to route it (stage, query
id, retry hint) instead of burying them in the message.
"""

from __future__ import annotations

from pydantic import ValidationError

__all__ = [
    "ConfigurationError",
    "DecodeError",
    "InvalidEventError",
    "RagsiftError",
    "RetrievalFailedError",
    "ServiceUnavailableError",
    "describe_validation_error",
    "shown_value",
    "unusable_store",
]


class RagsiftError(Exception):
    """Root of every error ragsift raises on purpose.

    Args:
        message: what went wrong, naming the bad value.
        stage: the pipeline stage that failed (``decode``, ``validate``,
            ``embed``, ``search``, ``cache``, ``score``, ``emit``...).
        query_id: the query the error belongs to, when known.
    """

    stage: str = "unknown"

    def __init__(self, message: str, *, stage: str | None = None, query_id: str | None = None):
        super().__init__(message)
        self.message = message
        if stage is not None:
            self.stage = stage
        self.query_id = query_id

    def to_dict(self) -> dict[str, str | None]:
        """Fields for a dead letter or a log line."""
        return {
            "error_type": type(self).__name__,
            "error": self.message,
            "stage": self.stage,
            "query_id": self.query_id,
        }


class ConfigurationError(RagsiftError):
    """Settings that cannot work together (raised at start-up, never per event)."""

    stage = "config"


class DecodeError(RagsiftError):
    """Bytes on a topic that are not a valid event: bad JSON or a schema violation."""

    stage = "decode"

    def __init__(
        self,
        message: str,
        *,
        stage: str | None = None,
        query_id: str | None = None,
        errors: list[dict[str, object]] | None = None,
    ):
        super().__init__(message, stage=stage, query_id=query_id)
        self.errors = errors or []


class InvalidEventError(RagsiftError):
    """A well-formed event the service refuses: unknown tenant, embedder mismatch..."""

    stage = "validate"


class ServiceUnavailableError(RagsiftError):
    """A backing service (Qdrant, Redis, Kafka) did not answer; may succeed later."""

    stage = "service"

    def __init__(
        self,
        message: str,
        *,
        service: str,
        stage: str | None = None,
        query_id: str | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message, stage=stage, query_id=query_id)
        self.service = service
        self.retry_after = retry_after


class RetrievalFailedError(RagsiftError):
    """Retrieval gave up after its bounded retries; the result carries an error status."""

    stage = "search"


def describe_validation_error(exc: ValidationError, *, whole: str = "<event>") -> str:
    """Every problem in one line: ``field.path: message (got value)``, joined by ``; ``.

    ``whole`` names a problem with the input as a whole (not JSON, say).
    """
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(_shown_loc(p) for p in err["loc"]) or whole
        value = shown_value(err.get("input"))
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg} (got {value})")
    return "; ".join(parts)


#: Longest field name shown as is; a longer location part is a key from the input.
_MAX_LOC_CHARS = 64


def _shown_loc(part: object) -> str:
    """A field name or list index as is; a key taken from the input (an unknown field)
    as :func:`shown_value` shows values, so that it cannot break the message's line
    (a newline forging a log line) or its length."""
    text = str(part)
    if text.isprintable() and len(text) <= _MAX_LOC_CHARS:
        return text
    return shown_value(part)


def shown_value(value: object) -> str:
    """``repr`` for an error message, cut to 80 characters; some inputs (deep nesting)
    cannot be shown at all."""
    try:
        shown = repr(value)
    except (RecursionError, ValueError) as exc:  # ValueError: an int past the digit limit
        return f"<{type(value).__name__}: {type(exc).__name__}>"
    return shown if len(shown) <= 80 else shown[:77] + "..."


def unusable_store(what: str, path: object, exc: Exception, lost: str) -> ConfigurationError:
    """The error for a SQLite store (``what`` at ``path``) that could not be opened, with
    the way out its cause calls for. Every failure read as damage before: "move it
    aside" for a file another process held locked (moving it loses what it keeps,
    ``lost``) or one that may not be written here."""
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        advice = (
            "another ragsift process holds it (a console, an ask or an ingest on this data"
            " dir): try again once it is done"
        )
    elif "readonly" in text or "read-only" in text or "unable to open" in text:
        advice = "it cannot be written here: check the permissions of the file and its folder"
    elif "full" in text:
        advice = "its disk is full: free space and try again (nothing needs to move)"
    else:
        advice = f"move it aside, and a new one is started ({lost})"
    return ConfigurationError(f"the {what} {path} is not usable ({exc}): {advice}")
