"""Which process holds a Qdrant Edge shard, for the error of the one that cannot open it.

A shard is locked by the process that opened it until that process exits (a console
or a worker keeps it for good; an ingest until it ends). The one refused could only
say "another process": a user with a console in one terminal and a forgotten ingest
in another did not know which to stop. Each process that opens a shard writes
``<root>/.<collection>.holder.json`` (its pid, command and since when); the refused
one reads it back and names the holder while that pid is alive. A dotfile: the demo's
folder check reads dotfiles as locks.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

__all__ = ["describe_holder", "record_holder", "release_holder"]


def _holder_file(root: Path, collection: str) -> Path:
    return root / f".{collection}.holder.json"


def _command() -> str:
    """``ragsift console``: the program and its subcommand, never the rest of the line
    (a question asked, a path)."""
    words = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"]
    if len(sys.argv) > 1 and sys.argv[1].isidentifier():
        words.append(sys.argv[1])
    return " ".join(words)


def record_holder(root: Path, collection: str) -> None:
    """Note that this process holds ``collection``'s shard; best effort (a read-only
    folder still opens)."""
    target = _holder_file(root, collection)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    record = {"pid": os.getpid(), "command": _command(), "since": time.time()}
    try:
        tmp.write_text(json.dumps(record))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)


def release_holder(root: Path, collection: str) -> None:
    """Remove this process's record as it closes the shard (another's stays)."""
    target = _holder_file(root, collection)
    try:
        if json.loads(target.read_text(encoding="utf-8")).get("pid") == os.getpid():
            target.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def describe_holder(root: Path, collection: str) -> str | None:
    """``ragsift console (pid 4242, since 09:14:03)``, or None when the record is
    missing, unreadable, or names a process that is gone (it was not the holder)."""
    try:
        record = json.loads(_holder_file(root, collection).read_text(encoding="utf-8"))
        pid, command, since = int(record["pid"]), str(record["command"]), float(record["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid():
        return f"this process (pid {pid}: a second index on the same folder)"
    if pid <= 0 or not _alive(pid):
        return None
    started = time.strftime("%H:%M:%S", time.localtime(since))
    return f"`{command}` (pid {pid}, since {started})"
