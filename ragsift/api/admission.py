"""What every request to the query API passes before its route runs: the caller
resolved from its credential, every error answered as the API's JSON error, and
every answer counted by route and status."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import Counter

from ragsift.api.auth import Authenticator, AuthError, Principal, credential_headers
from ragsift.api.console import PUBLIC_CONSOLE_ROUTES
from ragsift.api.query_input import error_response, http_error_response

__all__ = ["PRINCIPAL", "PUBLIC_ROUTES", "Admission"]

#: the caller of a request that passed :meth:`Admission.admit`
PRINCIPAL = web.RequestKey("principal", Principal)
#: the routes served without a credential: the contract and the console's page and assets
PUBLIC_ROUTES = frozenset({"/openapi.json"}) | PUBLIC_CONSOLE_ROUTES
_log = logging.getLogger(__name__)


def route_name(request: web.Request) -> str:
    """The route a request matched, as the ``route`` label counts it."""
    route = request.match_info.route.resource
    return route.canonical if route is not None else "unmatched"


class Admission:
    """The query API's checks before a route runs, and its count of answers.

    Args:
        auth: resolves a request's credential into its caller.
        requests: ``ragsift_api_requests_total``, by route and status.
    """

    def __init__(self, auth: Authenticator, requests: Counter) -> None:
        self.auth = auth
        self.requests = requests

    def admit(self, request: web.Request) -> None:
        """Resolve the caller into ``request[PRINCIPAL]`` (AuthError: refused); public
        routes and unmatched ones (a 404 or 405 follows) need no credential."""
        name = route_name(request)
        if name not in PUBLIC_ROUTES and request.match_info.route.resource is not None:
            request[PRINCIPAL] = self.auth.authenticate(*credential_headers(request.headers))

    def count(self, request: web.Request, response: web.StreamResponse) -> None:
        """One answer, by route and status."""
        self.requests.labels(route_name(request), str(response.status)).inc()

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Resolve the caller before any query route runs; count every answer by route."""
        try:
            self.admit(request)
            response = await handler(request)
        except AuthError as exc:
            response = error_response(exc.status, exc.code, exc.message)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise  # a redirect is an answer, not an error
            response = http_error_response(exc)
        except Exception:
            # Last resort: a bug is still a counted JSON error, not aiohttp's bare 500
            # with a traceback (a malformed JWKS key's TypeError was one).
            _log.exception("%s %s: an unexpected error", request.method, route_name(request))
            response = error_response(500, "internal_error", "an unexpected error, logged")
        self.count(request, response)
        return response
