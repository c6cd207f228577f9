"""Who an authenticated caller is (:class:`Principal`: its tenants and scopes) and
the error for one who is not, or may not (:class:`AuthError`).

:mod:`ragsift.api.auth` turns a credential into a principal; the routes ask the
principal for a scope and for the tenant a request acts for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ragsift.errors import RagsiftError, shown_value

__all__ = ["ANONYMOUS", "SCOPES", "AuthError", "Principal", "Scope"]

Scope = Literal["query", "read", "admin"]
#: query: POST /v1/query; read: GET /v1/queries/{id}; admin: both (and what comes later)
SCOPES: tuple[Scope, ...] = ("query", "read", "admin")


class AuthError(RagsiftError):
    """A request without a valid credential (401), without the right (403), or that
    cannot be checked now (503: the keys file is unreadable, so every key is refused).

    Args:
        message: what is wrong, safe to show to the caller.
        status: 401 (who are you?), 403 (you may not) or 503 (ask again later).
    """

    stage = "auth"

    def __init__(self, message: str, *, status: Literal[401, 403, 503] = 401):
        super().__init__(message)
        self.status = status

    @property
    def code(self) -> str:
        """The ``error`` field of the JSON answer."""
        return {401: "unauthorized", 403: "forbidden"}.get(self.status, "auth_unavailable")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its tenants (``None``: any, dev mode only) and scopes."""

    subject: str
    tenants: frozenset[str] | None
    scopes: frozenset[str]

    def require(self, scope: Scope) -> None:
        """Raise a 403 unless the caller holds ``scope`` (``admin`` holds them all)."""
        if scope not in self.scopes and "admin" not in self.scopes:
            raise AuthError(f"this credential lacks the {scope!r} scope", status=403)

    def tenant_for(self, asked: str | None) -> str:
        """The tenant a request acts for: the credential's, checked against the body's."""
        if self.tenants is None:
            # no credential to take it from (--insecure-no-auth): the body must say
            return asked or ""
        if asked is None:
            if len(self.tenants) == 1:
                return next(iter(self.tenants))
            raise AuthError(
                "this credential covers several tenants: say which in tenant_id", status=403
            )
        if asked not in self.tenants:
            raise AuthError(
                f"this credential may not act for tenant {shown_value(asked)}", status=403
            )
        return asked


ANONYMOUS = Principal(
    subject="anonymous (--insecure-no-auth)", tenants=None, scopes=frozenset(SCOPES)
)
