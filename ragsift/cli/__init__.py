"""The ``ragsift`` command (Typer + Rich): one module per command group.

``common`` holds what every command shares (consoles, exit statuses, errors, options),
``render`` how results are drawn; ``embedded``, ``review``, ``evaluation``,
``calibration``, ``calibrations``, ``streaming``, ``deadletters``, ``serve`` and ``admin`` hold the
commands. They are registered here, in the order ``ragsift --help`` lists them.
"""

from __future__ import annotations

import inspect

import typer

from ragsift.cli.admin import (
    audit_app,
    k8s_app,
    keys_app,
    schemas_app,
    show_settings,
    version,
)
from ragsift.cli.calibration import calibrate
from ragsift.cli.calibrations import calibrations_app
from ragsift.cli.common import print_error
from ragsift.cli.deadletters import deadletters_app
from ragsift.cli.documents import documents
from ragsift.cli.embedded import ask, demo, ingest
from ragsift.cli.evaluation import evaluate
from ragsift.cli.review import assess, feedback
from ragsift.cli.serve import api, serve_console
from ragsift.cli.streaming import submit, tail, topics, worker
from ragsift.errors import ConfigurationError, InvalidEventError, RagsiftError

__all__ = ["app", "main"]

app = typer.Typer(
    name="ragsift",
    help="Streaming retrieval for RAG with calibrated confidence.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(version)
app.command("settings")(show_settings)
app.command()(topics)
app.command()(demo)
app.command()(ingest)
app.command()(ask)
app.command()(documents)
app.command()(assess)
app.command()(feedback)
app.command()(calibrate)
app.add_typer(calibrations_app, name="calibrations")
app.command("eval")(evaluate)
app.command()(worker)
app.command()(submit)
app.command()(tail)
app.add_typer(deadletters_app, name="deadletters")
app.command()(api)
app.command("console")(serve_console)
app.add_typer(schemas_app, name="schemas")
app.add_typer(k8s_app, name="k8s")
app.add_typer(audit_app, name="audit")
app.add_typer(keys_app, name="keys")


def _flowing_help(typer_app: typer.Typer) -> None:
    """Each command's help as flowing paragraphs, its summary as one line.

    Typer keeps a docstring's line breaks: mid-sentence in the command list (where
    ``settings`` broke after "values a") and ragged in ``--help``'s body.
    """
    for info in typer_app.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if not doc:
            continue
        paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n")]
        info.help = "\n\n".join(paragraphs)
        if info.short_help is None:
            info.short_help = paragraphs[0]
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _flowing_help(group.typer_instance)


_flowing_help(app)


def main() -> None:
    """Entry point of the ``ragsift`` console script.

    Commands turn the errors they expect into one line and an exit status themselves.
    An error ragsift raised on purpose that a command did not expect (a shard another
    process holds, a damaged index file) still gets one line, never a traceback: exit 2
    for a setting or an input, 1 for anything else.
    """
    try:
        app()
    except RagsiftError as exc:
        print_error(str(exc))
        raise SystemExit(
            2 if isinstance(exc, ConfigurationError | InvalidEventError) else 1
        ) from exc
