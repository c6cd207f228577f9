"""Serving over HTTP: ``api`` (the query API on Kafka) and ``console`` (the web
console on the embedded runtime)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from ragsift.cli.common import (
    DataDir,
    _kafka,
    _runtime,
    _settings,
    err_console,
    keys_file,
    print_error,
    print_warning,
)
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

__all__ = ["CONSOLE_DEFAULT_PORT", "LOOPBACK_HOSTS", "api", "serve_console"]


#: hosts an unauthenticated development API may bind to: this machine only
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def api(
    port: Annotated[
        int | None,
        typer.Option(help="Query API port (default: RAGSIFT_API_PORT or 8080).", min=1, max=65_535),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Interface for the query API (default: RAGSIFT_API_HOST or 127.0.0.1);"
            " pass 0.0.0.0 to expose it."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Port of /metrics, /healthz, /readyz (default: RAGSIFT_API_METRICS_PORT or 9464).",
            min=1,
            max=65_535,
        ),
    ] = None,
    metrics_host: Annotated[
        str | None,
        typer.Option(
            help="Interface of /metrics, /healthz, /readyz"
            " (default: RAGSIFT_API_METRICS_HOST or 127.0.0.1)."
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Development only: accept every request without a credential"
            " (refused unless --host is a loopback address).",
        ),
    ] = False,
) -> None:
    """Serve the HTTP API: POST /v1/query, POST /v1/feedback (a label on a result),
    GET /v1/queries/{id} (API key or JWT needed), the web console at /console;
    /healthz, /readyz, /metrics on a separate port."""
    import signal

    from aiohttp import web

    from ragsift.api import Authenticator, QueryApi, create_admin_app, create_web_app
    from ragsift.api.guarded_site import GuardedSite
    from ragsift.streams.admin import ensure_topics

    settings = _settings()
    host = host or settings.api.host
    port = port or settings.api.port
    metrics_host = metrics_host or settings.api.metrics_host
    metrics_port = metrics_port or settings.api.metrics_port
    if insecure_no_auth and host not in LOOPBACK_HOSTS:
        print_error(f"--insecure-no-auth is only allowed on a loopback --host, got {host}")
        raise typer.Exit(2)
    if port == metrics_port and host == metrics_host:
        print_error("the query API and metrics need different ports")
        raise typer.Exit(2)
    try:
        auth = Authenticator.from_settings(
            settings.api, keys_file=keys_file(settings), insecure=insecure_no_auth
        )
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    if insecure_no_auth:
        print_warning("--insecure-no-auth: anyone on this host")
    query_api = QueryApi(
        settings.kafka,
        auth=auth,
        settings=settings.api,
        limits=settings.limits,
        shared=_shared_results(settings),
        hub=_console_hub(settings),
    )

    _kafka(settings, ensure_topics(settings.kafka))  # unreachable brokers: one line, exit 1

    async def serve() -> None:
        runners = [
            web.AppRunner(create_web_app(query_api)),
            web.AppRunner(create_admin_app(query_api)),
        ]
        for runner, (bind, bind_port) in zip(
            runners, [(host, port), (metrics_host, metrics_port)], strict=True
        ):
            await runner.setup()
            await GuardedSite(runner, bind, bind_port, refused=query_api.refused).start()
        err_console.print(
            f"query API on http://{host}:{port}, metrics on http://{metrics_host}:{metrics_port}"
        )
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            for runner in reversed(runners):
                await runner.cleanup()

    asyncio.run(serve())


#: where ``ragsift console`` listens unless told otherwise
CONSOLE_DEFAULT_PORT = 8765


def serve_console(
    data_dir: DataDir = None,
    host: Annotated[
        str,
        typer.Option(
            help="Interface to listen on; off loopback, the API's keys or JWTs are required."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port of the console.", min=1, max=65_535)
    ] = CONSOLE_DEFAULT_PORT,
) -> None:
    """Serve the web console on the embedded runtime: ask, watch results live, and label
    them (POST /v1/query and POST /v1/feedback with the API's contract)."""
    import signal

    from aiohttp import web

    from ragsift.api.auth import Authenticator
    from ragsift.api.guarded_site import GuardedSite
    from ragsift.console_server import create_console_app

    try:
        # credentials first: a console that may not start opens (and creates) nothing
        settings = _settings(data_dir)
        auth = Authenticator.from_settings(
            settings.api, keys_file=keys_file(settings), insecure=host in LOOPBACK_HOSTS
        )
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    _, runtime = _runtime(data_dir)

    async def serve() -> None:
        runner = web.AppRunner(create_console_app(runtime, auth=auth))
        await runner.setup()
        try:
            await GuardedSite(runner, host, port).start()
            shown = f"[{host}]" if ":" in host else host
            err_console.print(
                f"console on http://{shown}:{port}/console (data dir {runtime.data_dir};"
                " Ctrl-C stops it)"
            )
            stop = asyncio.Event()
            for signum in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(signum, stop.set)
            await stop.wait()
        finally:
            await runner.cleanup()
            await runtime.close()

    try:
        asyncio.run(serve())
    except OSError as exc:
        print_error(f"cannot listen on {host}:{port}: {exc.strerror}")
        raise typer.Exit(1) from exc


def _shared_results(settings: Settings) -> Any:
    """Redis behind GET /v1/queries/{id} (None when RAGSIFT_API_RESULT_TTL_S=0)."""
    if settings.api.result_ttl_s == 0:
        return None
    import redis.asyncio as aioredis

    from ragsift.api.store import SharedResults

    redis = settings.redis
    client = aioredis.from_url(
        redis.url,
        password=redis.password.get_secret_value() if redis.password else None,
        socket_timeout=redis.socket_timeout_s,
        socket_connect_timeout=redis.socket_timeout_s,
    )
    return SharedResults(client, prefix=redis.key_prefix, ttl_s=settings.api.result_ttl_s)


def _console_hub(settings: Settings) -> Any:
    """The web console's hub (None when RAGSIFT_API_CONSOLE=false)."""
    if not settings.api.console:
        return None
    from ragsift.api.console import ConsoleHub

    return ConsoleHub(
        backlog=settings.runtime.console_backlog,
        max_tenants=settings.worker.metrics_max_tenants,
        pinned_tenants=settings.worker.metrics_tenants,
    )
