"""The ``ragsift`` command (Typer + Rich)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ragsift import __version__
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

__all__ = ["app", "main"]

app = typer.Typer(
    name="ragsift",
    help="Streaming retrieval for RAG with calibrated confidence.",
    no_args_is_help=True,
    add_completion=False,
)
schemas_app = typer.Typer(help="Event contracts (JSON Schema).", no_args_is_help=True)
app.add_typer(schemas_app, name="schemas")
console = Console()
err_console = Console(stderr=True)


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


@app.command()
def version() -> None:
    """Print ragsift's version."""
    console.print(__version__)


@app.command("settings")
def show_settings() -> None:
    """Print the effective settings as JSON, secrets masked."""
    console.print_json(json.dumps(_settings().masked()))


@app.command()
def topics() -> None:
    """List every topic ragsift reads or writes, with key and retention."""
    from ragsift.streams.topics import TOPICS

    prefix = _settings().kafka.topic_prefix
    table = Table("topic", "contract", "key", "cleanup", "retention (days)", "what")
    for spec in TOPICS.values():
        days = "-" if spec.retention_ms is None else f"{spec.retention_ms / 86_400_000:g}"
        table.add_row(
            spec.name(prefix),
            spec.model.__name__,
            spec.key,
            spec.cleanup_policy,
            days,
            spec.description,
        )
    console.print(table)


@schemas_app.command("export")
def schemas_export(
    out: Annotated[
        Path | None, typer.Option(help="Directory to write to (default: ragsift/schemas/json).")
    ] = None,
) -> None:
    """Write the JSON Schema of every event contract."""
    from ragsift.schemas.registry import JSON_DIR, export_json_schemas

    for path in export_json_schemas(out or JSON_DIR):
        console.print(f"wrote {path}")


def main() -> None:
    """Entry point of the ``ragsift`` console script."""
    app()
