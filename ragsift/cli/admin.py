"""Administration: ``version``, ``settings``, and the groups ``schemas``, ``k8s``,
``keys`` (API keys) and ``audit`` (the hash chain)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ragsift import __version__
from ragsift.cli.common import (
    _check_writable,
    _fail,
    _settings,
    console,
    err_console,
    keys_file,
    print_error,
)
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

__all__ = [
    "audit_app",
    "k8s_app",
    "keys_app",
    "schemas_app",
    "show_settings",
    "version",
]


schemas_app = typer.Typer(help="Event contracts (JSON Schema).", no_args_is_help=True)
k8s_app = typer.Typer(
    help="Kubernetes manifests generated from ragsift's tables.", no_args_is_help=True
)
audit_app = typer.Typer(help="The audit trail: check its hash chain.", no_args_is_help=True)
keys_app = typer.Typer(
    help="API keys for `ragsift api`: create (shown once), list, revoke.", no_args_is_help=True
)


#: How long ``audit verify`` waits before reading a torn-looking last line again.
TORN_SETTLE_S = 0.5


def _settle() -> None:
    time.sleep(TORN_SETTLE_S)


def version() -> None:
    """Print ragsift's version."""
    console.print(__version__)


def _applied_confidence(settings: Settings) -> dict[str, Any]:
    """The confidence values queries are judged by, those the calibration sets marked so.

    A calibrated scorer replaces the configured hit threshold with the artifact's
    (unless RAGSIFT_CONFIDENCE_SIMILARITY_THRESHOLD is set), answers from one
    document, and answers at the artifact's conformal threshold (EngineSet).
    """
    from ragsift.retrieval.engines import EngineSet
    from ragsift.wiring import build_embedder

    try:
        engines = EngineSet(settings.confidence, build_embedder(settings.embedder).embedder_id)
    except (RagsiftError, OSError) as exc:
        # The settings are still worth showing: they are how one finds what is wrong.
        err_console.print(
            Text.assemble(
                ("warning: ", "yellow"), f"cannot tell the confidence values in effect: {exc}"
            )
        )
        return {"applied": f"unknown: {exc}"}
    base, calibration = engines.base, engines.calibration
    if settings.confidence.scorer != "calibrated" or calibration is None:
        return {
            "min_documents": base.min_documents,
            "answer_threshold": engines.engine("threshold", "hybrid").answer_threshold,
        }
    source = f"calibration {calibration.version} ({calibration.embedder_id})"
    threshold: Any = base.similarity_threshold
    if base.similarity_threshold != settings.confidence.similarity_threshold:
        threshold = {"value": threshold, "from": source}
    applied: dict[str, Any] = {
        "similarity_threshold": threshold,
        "min_documents": {"value": base.min_documents, "from": "calibrated scorer"},
        "answer_threshold": {
            "value": engines.engine("threshold", "hybrid").answer_threshold,
            "from": f"{source}, conformal at risk <= {calibration.conformal.alpha}",
        },
        "calibration_version": calibration.version,
    }
    keyword = engines.engine("threshold", "keyword")
    if keyword.scorer.name == "calibrated":  # the artifact's keyword model (ADR 029)
        applied["keyword_only"] = {
            "similarity_threshold": keyword.config.similarity_threshold,
            "answer_threshold": keyword.answer_threshold,
            "from": f"{source}, its keyword model",
        }
    return applied


def show_settings() -> None:
    """Print the settings in effect as JSON: secrets masked, and the confidence values a
    calibration sets shown as applied, marked with where they come from."""
    settings = _settings()
    shown = settings.masked()
    shown["confidence"].update(_applied_confidence(settings))
    if shown["api"]["keys_file"] is None:  # the file in effect: the data dir's by default
        from ragsift.api.keys_file import resolve_keys_file

        shown["api"]["keys_file"] = str(resolve_keys_file(settings.api, settings.data_dir)[0])
    console.print_json(json.dumps(shown))


@schemas_app.command("export")
def schemas_export(
    out: Annotated[
        Path | None, typer.Option(help="Directory to write to (default: ragsift/schemas/json).")
    ] = None,
) -> None:
    """Write the JSON Schema of every event contract."""
    from ragsift.schemas.registry import JSON_DIR, export_json_schemas

    try:
        written = export_json_schemas(out or JSON_DIR)
    except OSError as exc:
        print_error(f"cannot write the schemas to {out or JSON_DIR}: {exc.strerror or exc}")
        raise typer.Exit(1) from exc
    for path in written:
        console.print(f"wrote {path}")


def _key_store() -> Any:
    from ragsift.api.auth import KeyStore

    return KeyStore(keys_file(_settings()))


@keys_app.command("create")
def keys_create(
    tenant: Annotated[
        list[str], typer.Option("--tenant", help="A tenant the key may act for (repeatable).")
    ],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="query, read or admin; repeatable (default: query and read)."),
    ] = None,
    label: Annotated[str, typer.Option(help="A note: who or what holds the key.")] = "",
) -> None:
    """Create a key; it is printed once and only its sha256 is stored."""
    store = _key_store()
    try:
        key, record = store.create(tenant, scope or ["query", "read"], label)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    err_console.print(
        f"key {record.key_id} for {', '.join(record.tenants)} ({', '.join(record.scopes)})"
        f" stored in {store.path}; copy it now, it is not shown again:"
    )
    print(key)


@keys_app.command("list")
def keys_list() -> None:
    """Every key's id, tenants, scopes and state (never the key)."""
    table = Table("id", "tenants", "scopes", "label", "created", "revoked")
    try:
        records = _key_store().records()
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    for r in records:
        table.add_row(
            r.key_id,
            ",".join(r.tenants),
            ",".join(r.scopes),
            r.label,
            r.created_at,
            r.revoked_at or "",
        )
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The id shown by `keys list`.")],
) -> None:
    """Revoke a key: a running API refuses it from its next request."""
    try:
        record = _key_store().revoke(key_id)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    console.print(f"revoked {record.key_id} at {record.revoked_at}")


@k8s_app.command("topics")
def k8s_topics(
    out: Annotated[Path, typer.Option("--out", help="YAML file to write.")] = Path(
        "k8s/base/kafka-topics.yaml"
    ),
    prefix: Annotated[str, typer.Option(help="Topic name prefix.")] = "ragsift",
    partitions: Annotated[int, typer.Option(help="Partitions per topic.")] = 8,
    replicas: Annotated[int, typer.Option(help="Replication factor.")] = 3,
    cluster: Annotated[str, typer.Option(help="Strimzi Kafka cluster name.")] = "ragsift-kafka",
) -> None:
    """Write Strimzi KafkaTopic resources from the topic registry."""
    from ragsift.deploy_manifests import write_strimzi_topics

    _check_writable(out, "--out")
    try:
        path = write_strimzi_topics(
            out, prefix=prefix, partitions=partitions, replicas=replicas, cluster=cluster
        )
    except ValueError as exc:  # partitions or replicas under 1
        _fail(str(exc))
    console.print(f"wrote {path}")


@audit_app.command("verify")
def audit_verify(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Audit files in chain order, or a sink folder (its rotated files, then"
            " audit.jsonl).",
            exists=True,
        ),
    ],
    key_env: Annotated[
        str,
        typer.Option(help="Environment variable holding the HMAC key; unset: HMACs not checked."),
    ] = "RAGSIFT_AUDIT_HMAC_KEY",
    anchor: Annotated[
        str | None,
        typer.Option(help="A head hash recorded elsewhere; the chain must contain it."),
    ] = None,
    from_genesis: Annotated[
        bool,
        typer.Option(help="The files must hold the chain from its first row, every row chained."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Walk the hash chain; name the first broken row and exit 1, or print a summary.

    Nothing to verify (no audit files, or files without a row) exits 1 as well."""
    from ragsift.audit import GENESIS, AuditFileSink, verify_chain
    from ragsift.audit.verify import ChainReport, describe

    def walk() -> tuple[list[Path], ChainReport]:
        files: list[Path] = []
        for path in paths:
            files.extend(AuditFileSink.chain_files(path) if path.is_dir() else [path])
        return files, verify_chain(files, key=key, anchor=anchor, from_genesis=from_genesis)

    secret = os.environ.get(key_env)
    key = secret.encode() if secret else None
    files, report = walk()
    if not files:  # a folder without audit files: the wrong folder, or a wiped trail
        shown = ", ".join(str(p) for p in paths)
        err_console.print(
            Text.assemble(("nothing to verify", "red"), f": no audit files in {shown}")
        )
        raise typer.Exit(1)
    if report.problem is not None and report.problem.kind == "torn":
        # A running sink may be mid-write: read once more before calling the line torn.
        _settle()
        files, report = walk()
    if as_json:
        console.print_json(json.dumps(describe(report)))
    elif report.problem is not None:
        err_console.print(Text.assemble(("chain broken", "red"), f" at {report.problem}"))
    elif not report.rows:  # an emptied trail vouches for nothing, whatever its files hold
        err_console.print(
            Text.assemble(("nothing to verify", "red"), f": no rows in {len(files)} file(s)")
        )
    else:
        console.print(
            f"chain intact: {report.rows} rows in {len(files)} file(s), seq"
            f" {report.first_seq}..{report.last_seq}, {report.first_time} .. {report.last_time}"
        )
        console.print(f"head: {report.head}")
        if report.unchained:
            console.print(f"{report.unchained} leading rows predate the chain (not covered)")
        if report.starts_after not in (None, GENESIS):
            console.print(f"starts after {report.starts_after}: earlier rows are in other files")
        if report.macs_checked:
            console.print(f"HMAC checked with the key in {key_env}")
        elif report.macs_present:
            console.print(
                Text(f"HMACs present but not checked: {key_env} is unset", style="yellow")
            )
    if report.problem is not None or not report.rows:
        raise typer.Exit(1)
