"""What every ``ragsift`` command shares: the consoles, exit statuses, one-line errors,
the settings, the embedded runtime and the common options.

The underscore names are the package's own helpers (imported by its command modules,
not by anything outside ``ragsift.cli``).
"""

from __future__ import annotations

import contextlib
import logging
import shlex
from collections import Counter
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from ragsift.cli.run_loop import run
from ragsift.cli.terminal import PlainConsole
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

if TYPE_CHECKING:
    from ragsift.ingest.loaders import SourceDocument

__all__ = [
    "ADVISORY_LOGGER",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "SERVICE_SETTINGS",
    "Collection",
    "DataDir",
    "Tenant",
    "console",
    "err_console",
    "keys_file",
]


T = TypeVar("T")


_run = run  # the commands' name for it


# No markup and no emoji codes: what is printed (paths, documents, queries, errors) is
# shown as it is; style goes in Text objects (a "[/x]" in a file name once crashed the
# CLI, and /etc/passwd's "root:x:0" read "root❌0"). Every Console here is made by
# plain_console.
def plain_console(**options: Any) -> Console:
    """A Console that prints text as it is (no markup, no emoji codes), with ``options``
    besides."""
    return PlainConsole(markup=False, emoji=False, **options)


console = plain_console()
# soft_wrap: an error is one line however narrow the terminal (or a pipe's 80 columns)
err_console = plain_console(stderr=True, soft_wrap=True)

#: exit status of input the command refuses: a bad option, or an id or a name that does
#: not exist (a query id, a collection, a tenant, a calibration scope, a topic, a key)
EXIT_USAGE = 2
#: exit status of a service that cannot be reached or a query that failed
EXIT_FAILURE = 1


def print_error(message: str) -> None:
    """Print ``error: message``, the message as plain text: a path or an exception's
    text with ``[/x]`` in it is shown as it is, never read as Rich markup."""
    err_console.print(Text.assemble(("error: ", "red"), message))


def print_warning(message: str) -> None:
    """Print ``warning: message`` on stderr, the message as plain text."""
    err_console.print(Text.assemble(("warning: ", "yellow"), message))


def read_documents(
    path: Path,
    source_type: str = "unknown",
    skipped: list[tuple[Path, str]] | None = None,
    data_dir: Path | None = None,
) -> list[SourceDocument]:
    """The documents under ``path``, as ``ingest`` and ``submit --files`` read them, never
    from the data directory (``data_dir``, else the configured one); the files passed
    over in one warning line (and appended to ``skipped``); bad input one error line
    and exit 2."""
    from ragsift.ingest.loaders import iter_documents

    skipped = [] if skipped is None else skipped
    own = [data_dir if data_dir is not None else Path(_settings().data_dir)]
    try:
        documents = list(
            iter_documents(path, source_type=source_type, skipped=skipped, exclude=own)
        )
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    print_skipped(path, skipped)
    return documents


def print_skipped(path: Path, skipped: Sequence[tuple[Path, str]]) -> None:
    """One warning line counting the files (and folders) under ``path`` that were passed
    over, by why (:func:`~ragsift.ingest.loaders.iter_documents`); nothing when none were."""
    if not skipped:
        return
    from ragsift.ingest.docx_text import UNREADABLE_DOCX
    from ragsift.ingest.epub_text import ENCRYPTED_EPUB, UNREADABLE_EPUB
    from ragsift.ingest.html_text import REDIRECT
    from ragsift.ingest.loaders import EMPTY_LINE
    from ragsift.ingest.loaders import PLURALS as FOLDER_PLURALS
    from ragsift.ingest.odt_text import UNREADABLE_ODT
    from ragsift.ingest.pdf_text import PLURALS

    plurals = {
        EMPTY_LINE: f"{EMPTY_LINE}s",
        REDIRECT: f"{REDIRECT}s",
        UNREADABLE_DOCX: f"{UNREADABLE_DOCX}s",
        UNREADABLE_ODT: f"{UNREADABLE_ODT}s",
        UNREADABLE_EPUB: f"{UNREADABLE_EPUB}s",
        ENCRYPTED_EPUB: f"{ENCRYPTED_EPUB}s",
        **PLURALS,
        **FOLDER_PLURALS,
    }

    why = Counter(reason for _, reason in skipped)
    lines = why[EMPTY_LINE]
    folders = sum(1 for p, reason in skipped if reason != EMPTY_LINE and p.is_dir())
    files = len(skipped) - lines - folders
    counted = [
        f"{n} {what}{'s' if n > 1 else ''}"
        for n, what in ((files, "file"), (folders, "folder"), (lines, "JSONL line"))
        if n
    ]
    print_warning(
        f"skipped {' and '.join(counted)} under {path}: "
        + ", ".join(
            f"{n} {plurals.get(reason, reason) if n > 1 else reason}"
            for reason, n in sorted(why.items())
        )
        + f" (first: {skipped[0][0]})"
    )


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` as one plain line (no markup, no traceback) and exit."""
    print_error(message)
    raise typer.Exit(code)


def _check_writable(path: Path | None, option: str) -> None:
    """Refuse an output file now, not after the run it would hold: a folder, a parent that
    is missing or a file, no permission. A file made only to check is removed again."""
    if path is None:
        return
    existed = path.exists()
    try:
        path.open("a", encoding="utf-8").close()
    except OSError as exc:
        _fail(f"{option}: cannot write {path}: {exc.strerror or exc}")
    if not existed:
        path.unlink(missing_ok=True)


def _check_names(*, tenant: str | None = None, collection: str | None = None) -> None:
    """The names `ask` and the workers accept, or one error line naming the option."""
    from pydantic import TypeAdapter, ValidationError

    from ragsift.errors import describe_validation_error
    from ragsift.schemas.base import CollectionName, TenantId

    for field, adapter, value in (
        ("tenant", TypeAdapter(TenantId), tenant),
        ("collection", TypeAdapter(CollectionName), collection),
    ):
        if value is None:
            continue
        try:
            adapter.validate_python(value)
        except ValidationError as exc:
            _fail(f"--{field}: {describe_validation_error(exc).removeprefix('<event>: ')}")


def _settings(data_dir: Path | None = None) -> Settings:
    """The settings from the environment, with ``data_dir`` (a ``--data-dir``) in place
    of ``RAGSIFT_DATA_DIR`` when given; exit 2 on a bad setting."""
    try:
        settings = Settings.from_env()
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    return settings if data_dir is None else settings.model_copy(update={"data_dir": data_dir})


#: the report builder's C3 "advisory only" warning: the CLI shows the flag itself
ADVISORY_LOGGER = "ragsift.report.builder"


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Silence a logger's warnings and errors while the command reports the error itself."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _kafka(settings: Settings, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` against the cluster; a broker that cannot be reached is a one-line error."""
    from aiokafka.errors import KafkaError

    try:
        with _quiet("aiokafka"):
            return _run(work)
    except KafkaError as exc:
        reason = " ".join(str(exc).split())  # aiokafka's text has newlines
        if not reason.startswith(type(exc).__name__):
            reason = f"{type(exc).__name__}: {reason}"
        _fail(
            f"Kafka at {settings.kafka.bootstrap_servers} ({settings.kafka.security_protocol})"
            f" is not usable ({reason}); start the brokers or set RAGSIFT_KAFKA_BOOTSTRAP_SERVERS",
            EXIT_FAILURE,
        )


def keys_file(settings: Settings) -> Path:
    """The API keys file of ``settings`` (its data dir's unless set), saying on stderr
    when it is still the one under the working directory (``resolve_keys_file``)."""
    from ragsift.api.keys_file import resolve_keys_file

    path, note = resolve_keys_file(settings.api, Path(settings.data_dir))
    if note is not None:
        print_warning(note)
    return path


def _data_dir_settings(data_dir: Path | None) -> Settings:
    """The settings on ``data_dir``, refused (one line, exit 2) when the embedded data
    directory is a file: ``ingest`` calls it before it reads a folder (it said so only
    after reading all of it), and :func:`_runtime` before it opens anything."""
    settings = _settings(data_dir)
    folder = Path(settings.data_dir)
    if settings.qdrant.mode == "edge" and folder.exists() and not folder.is_dir():
        # `ask` read it as "nothing indexed there", `ingest` as a missing setting's file
        _fail(f"the data directory {settings.data_dir} is a file, not a folder: name another")
    return settings


def _runtime(
    data_dir: Path | None, *, existing: bool = False, answers: bool = True
) -> tuple[Settings, Any]:
    """The embedded runtime on ``data_dir``; ``existing``: a command that only reads
    refuses a data directory nothing was ingested into, and does not create it;
    ``answers=False``: a command that asks nothing opens no result or feedback store."""
    from ragsift.embedded import EmbeddedRuntime

    settings = _data_dir_settings(data_dir)
    local = settings.qdrant.mode == "edge"  # a Qdrant server holds its data elsewhere
    if existing and local and not Path(settings.data_dir).is_dir():
        _fail(
            f"no ragsift data in {settings.data_dir}: nothing has been indexed there; run"
            f" `ragsift ingest PATH --tenant T --data-dir {shlex.quote(str(settings.data_dir))}`"
            " first"
        )
    try:
        return settings, EmbeddedRuntime(settings, answers=answers)
    except RagsiftError as exc:
        _fail(str(exc))
    except OSError as exc:  # a file a setting names (a calibration artifact, a model) is missing
        _fail(f"{exc} (check the RAGSIFT_* settings that name files: `ragsift settings`)")


#: the setting that points at each backing service, named when it cannot be reached
SERVICE_SETTINGS = {
    "qdrant": "RAGSIFT_QDRANT_URL",
    "redis": "RAGSIFT_REDIS_URL",
    "embedder": "RAGSIFT_EMBEDDER_BASE_URL",
    "reranker": "RAGSIFT_RERANKER_URL",
    "llm": "RAGSIFT_LLM_BASE_URL",
}


def service_hint(exc: BaseException) -> str:
    """``"; start it or set RAGSIFT_…_URL"`` for a backing service that did not answer,
    else ``""``: the error says what failed, the hint what to do."""
    from ragsift.errors import ServiceUnavailableError

    setting = (
        SERVICE_SETTINGS.get(exc.service) if isinstance(exc, ServiceUnavailableError) else None
    )
    return f"; start it or set {setting}" if setting else ""


def _embedded(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on the embedded runtime; a service it cannot reach is a one-line error."""
    from ragsift.errors import ServiceUnavailableError

    try:
        return _run(work)
    except ServiceUnavailableError as exc:
        _fail(f"{exc}{service_hint(exc)}", EXIT_FAILURE)


def _data_dir(value: str | Path) -> Path:
    """``--data-dir ""`` read as ``.``: the data written into the working folder. (A
    default, ``demo``'s, comes here as a Path.)"""
    if not str(value).strip():
        raise typer.BadParameter("an empty path; leave the option out for the default")
    return Path(value)


DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        parser=_data_dir,
        help="Embedded data directory (default: RAGSIFT_DATA_DIR or .ragsift).",
    ),
]


Tenant = Annotated[str, typer.Option("--tenant", "-t", help="Tenant the documents belong to.")]
Collection = Annotated[str, typer.Option("--collection", "-c", help="Collection name.")]
