"""What every request to the query API passes before its route runs: the caller
resolved from its credential, every error answered as the API's JSON error, and
every answer counted by route and status.

A request with ``Expect: 100-continue`` passes the same checks before it is asked
for its body (:meth:`Admission.expect`): aiohttp's default answered ``100 Continue``
to every one, and a client with a bad credential or a body over the limit sent the
whole body only to be refused after it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import HttpVersion11, hdrs, web
from prometheus_client import Counter

from ragsift.api.auth import Authenticator, AuthError, Principal, credential_headers
from ragsift.api.body import BodyError, check_body_head
from ragsift.api.console import PUBLIC_CONSOLE_ROUTES
from ragsift.api.query_input import error_response, http_error_response
from ragsift.errors import shown_value

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

    The embedded console (:mod:`ragsift.console_server`) admits its requests with one
    too: its own copy of these checks answered every ``Expect`` with 100 Continue.

    Args:
        auth: resolves a request's credential into its caller.
        requests: ``ragsift_api_requests_total``, by route and status (None: not counted).
        max_body_bytes: the largest body a route reads (``RAGSIFT_API_MAX_BODY_BYTES``).
        public: the routes served without a credential.
    """

    def __init__(
        self,
        auth: Authenticator,
        requests: Counter | None,
        *,
        max_body_bytes: int,
        public: frozenset[str] = PUBLIC_ROUTES,
    ) -> None:
        self.auth = auth
        self.requests = requests
        self.max_body_bytes = max_body_bytes
        self.public = public

    def admit(self, request: web.Request) -> None:
        """Resolve the caller into ``request[PRINCIPAL]`` (AuthError: refused); public
        routes and unmatched ones (a 404 or 405 follows) need no credential."""
        name = route_name(request)
        if name not in self.public and request.match_info.route.resource is not None:
            request[PRINCIPAL] = self.auth.authenticate(*credential_headers(request.headers))

    def count(self, request: web.Request, response: web.StreamResponse) -> None:
        """One answer, by route and status."""
        if self.requests is not None:
            self.requests.labels(route_name(request), str(response.status)).inc()

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Resolve the caller before any query route runs; count every answer by route."""
        try:
            if PRINCIPAL not in request:  # else admitted by the Expect path already
                self.admit(request)
            response = await handler(request)
        except AuthError as exc:
            response = error_response(exc.status, exc.code, exc.message)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise  # a redirect (the console's home page) is an answer, not an error
            response = http_error_response(exc)
        except Exception:
            # Last resort: a bug is still a counted JSON error, not aiohttp's bare 500
            # with a traceback (a malformed JWKS key's TypeError was one).
            _log.exception("%s %s: an unexpected error", request.method, route_name(request))
            response = error_response(500, "internal_error", "an unexpected error, logged")
        self.count(request, response)
        return response

    async def expect(self, request: web.Request) -> web.StreamResponse | None:
        """A route's ``expect_handler`` (aiohttp runs it before the middleware): ``100
        Continue`` for a request the checks before its route pass, else their refusal
        now, before the body is sent. See :meth:`expect_body` for a route that reads one."""
        return await self._expect(request, body=False)

    async def expect_body(self, request: web.Request) -> web.StreamResponse | None:
        """:meth:`expect` for a route that reads a JSON body: what its headers say of it
        is checked too (:func:`~ragsift.api.body.check_body_head`: 415, 413)."""
        return await self._expect(request, body=True)

    async def _expect(self, request: web.Request, *, body: bool) -> web.StreamResponse | None:
        if request.version != HttpVersion11:
            return None  # RFC 9110 section 10.1.1: HTTP/1.0 ignores it; the body follows
        expect = request.headers.get(hdrs.EXPECT, "")
        if expect.strip().lower() != "100-continue":
            detail = f"the only expectation served is 100-continue, got {shown_value(expect)}"
            response = error_response(417, "expectation_failed", detail)
        else:
            try:
                self.admit(request)
                if body:
                    check_body_head(request, max_bytes=self.max_body_bytes)
            except AuthError as exc:
                response = error_response(exc.status, exc.code, exc.message)
            except BodyError as exc:
                response = error_response(exc.status, exc.error, exc.message)
            else:
                await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                request.writer.output_size = 0  # the answer's own bytes start after it
                return None
        # The body is not asked for: the connection closes after the answer, with no
        # lingering read of a body that may never come (aiohttp waited 10 s for one).
        request.content.feed_eof()
        response.force_close()
        self.count(request, response)
        return response
