"""Where the API keys file is (``RAGSIFT_API_KEYS_FILE``, else the data dir's), and
what it must hold.

``ragsift keys`` writes it and ``ragsift api`` and ``ragsift console`` read it
(:class:`~ragsift.api.auth.KeyStore`); all three find it here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsift.schemas.base import TENANT_PATTERN, is_tenant_id
from ragsift.settings import DEFAULT_DATA_DIR, ApiSettings

__all__ = [
    "KEYS_FILE_NAME",
    "WORKING_DIR_KEYS_FILE",
    "FileVersion",
    "file_version",
    "read_keys",
    "resolve_keys_file",
]


KEYS_FILE_NAME = "api-keys.json"
#: The keys file when neither it nor the data dir is set (and, before 2026-11-30, even
#: when the data dir was): relative to the working directory.
WORKING_DIR_KEYS_FILE = DEFAULT_DATA_DIR / KEYS_FILE_NAME


#: What tells one version of the keys file from another without reading it.
FileVersion = tuple[int, int, int, int]


def file_version(stat: os.stat_result) -> FileVersion:
    """The keys file's version as ``stat`` shows it: (inode, size, mtime_ns, ctime_ns).

    mtime and size alone missed a same-size replace within the filesystem's mtime
    granularity (a revoke that flips one character, or ``kubectl`` swapping a Secret's
    file): the old keys stayed in force. An atomic replace is a new inode, and any
    write or ``touch`` moves ctime, which no caller can set back.
    """
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def resolve_keys_file(settings: ApiSettings, data_dir: Path) -> tuple[Path, str | None]:
    """The keys file ``ragsift keys`` writes and the API reads, and a note for the user.

    ``RAGSIFT_API_KEYS_FILE`` when set, else ``<data dir>/api-keys.json``. Until
    2026-11-30 the default was ``.ragsift/api-keys.json`` under the working directory
    whatever the data dir, so where that file exists and the data dir's does not, it
    is still the one used, and the note says so: a deployment that set only the data
    dir keeps its keys.
    """
    if settings.keys_file is not None:
        return settings.keys_file, None
    path = data_dir / KEYS_FILE_NAME
    old = WORKING_DIR_KEYS_FILE
    if not path.exists() and old.is_file() and old.resolve() != path.resolve():
        return old, (
            f"API keys are read from {old.resolve()}, where ragsift kept them before it"
            f" kept them in the data dir: move the file to {path}, or set"
            " RAGSIFT_API_KEYS_FILE to it"
        )
    return path, None


def read_keys(text: bytes, scopes: Sequence[str]) -> list[dict[str, Any]]:
    """The key records of a keys file's bytes, each as ``KeyRecord``'s fields.

    Raises:
        ValueError: not a version-1 keys file, a key of the wrong shape, or one id twice
            (one record would shadow the other, and a revoke would rewrite the file
            without it: the record deleted, not revoked).
    """
    data = json.loads(text)
    keys = data["keys"] if isinstance(data, dict) else None
    if not isinstance(keys, list):
        raise ValueError("no 'keys' list")
    if data.get("version", 1) != 1:
        raise ValueError(f"version {data.get('version')!r}; this ragsift reads version 1")
    records = [_key_fields(raw, scopes) for raw in keys]
    seen: set[str] = set()
    for record in records:
        if record["key_id"] in seen:
            raise ValueError(f"key id {record['key_id']!r} appears twice")
        seen.add(record["key_id"])
    return records


def _key_fields(raw: Any, known_scopes: Sequence[str]) -> dict[str, Any]:
    """One key as the keys file holds it, every field of the type ``KeyStore`` writes: a
    hand-edited ``"tenants": "alpha"`` would otherwise read as tenants a, l, p and h.
    What ``keys create`` refuses a hand-edited file may not hold either: a tenant no
    query can name (``*`` is no wildcard), or a scope no route asks for.

    Raises:
        ValueError: a field is missing, of another type, or unknown.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"a key must be an object, got {type(raw).__name__}")
    strings = ("key_id", "sha256", "label", "created_at")
    if not all(isinstance(raw.get(name, ""), str) for name in strings) or not isinstance(
        raw.get("revoked_at"), str | None
    ):
        raise ValueError(f"key {raw.get('key_id')!r}: {', '.join(strings)} must be strings")
    lists: dict[str, tuple[str, ...]] = {}
    for name in ("tenants", "scopes"):
        value = raw.get(name)
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"key {raw.get('key_id')!r}: {name} must be a list of strings")
        lists[name] = tuple(value)
    tenants, scopes = list(lists["tenants"]), list(lists["scopes"])
    if not tenants or not all(is_tenant_id(t) for t in tenants):
        raise ValueError(
            f"key {raw.get('key_id')!r}: tenants must match {TENANT_PATTERN}, got {tenants}"
        )
    if not scopes or set(scopes) - set(known_scopes):
        raise ValueError(
            f"key {raw.get('key_id')!r}: scopes must be some of {list(known_scopes)}, got {scopes}"
        )
    return {**raw, **lists}
