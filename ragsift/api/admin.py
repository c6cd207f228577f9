"""``/metrics``, ``/healthz`` and ``/readyz``: the query API's admin application, served
on its own bind so the cluster's probes and scrapes never share the public port."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from ragsift.api.app import QueryApi

__all__ = ["create_admin_app"]


def create_admin_app(api: QueryApi) -> web.Application:
    """``/metrics``, ``/healthz``, ``/readyz``: for the cluster, on their own bind."""

    async def healthz(request: web.Request) -> web.Response:
        """Liveness."""
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        """Readiness: connected to Kafka, reading results, and the brokers answer."""
        ok = api.ready
        return web.json_response(
            {"status": "ready" if ok else "not_ready"}, status=200 if ok else 503
        )

    async def metrics_page(request: web.Request) -> web.Response:
        """Prometheus metrics."""
        return web.Response(
            body=generate_latest(api.metrics.registry),
            content_type=CONTENT_TYPE_LATEST.split(";")[0],
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    return app
