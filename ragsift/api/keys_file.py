"""Where the API keys file is: ``RAGSIFT_API_KEYS_FILE``, else the data dir's.

``ragsift keys`` writes it and ``ragsift api`` and ``ragsift console`` read it
(:class:`~ragsift.api.auth.KeyStore`); all three find it here.
"""

from __future__ import annotations

from pathlib import Path

from ragsift.settings import DEFAULT_DATA_DIR, ApiSettings

__all__ = ["KEYS_FILE_NAME", "WORKING_DIR_KEYS_FILE", "resolve_keys_file"]

KEYS_FILE_NAME = "api-keys.json"
#: The keys file when neither it nor the data dir is set (and, before 2026-11-30, even
#: when the data dir was): relative to the working directory.
WORKING_DIR_KEYS_FILE = DEFAULT_DATA_DIR / KEYS_FILE_NAME


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
