"""Which process holds a Qdrant Edge shard, for the error of the one that cannot open it.

A shard is locked by the process that opened it until that process exits (a console
or a worker keeps it for good; an ingest until it ends). The one refused could only
say "another process": a user with a console in one terminal and a forgotten ingest
in another did not know which to stop. Each process that opens a shard writes
``<root>/.<collection>.holder.json`` (its pid, command and since when); the refused
one reads it back and names the holder while that pid is alive. A dotfile: the demo's
folder check reads dotfiles as locks. A holder that lets go within seconds (another
`ask`) is waited for instead: two asks at once on one collection failed one of them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["describe_holder", "load_waiting", "record_holder", "release_holder"]

T = TypeVar("T")

#: Commands that hold a shard for seconds and let it go: another process waits for
#: them (two `ragsift ask` at once on one collection: one failed, 2 of 8 in a test).
_BRIEF = frozenset({"ask", "assess", "documents", "feedback"})
#: The longest a process waits for a brief holder.
BRIEF_WAIT_S = 30.0
#: How long a holder that has not written its record yet (it just opened) is waited for.
UNNAMED_WAIT_S = 2.0
#: Longest command a record may name (a program and its subcommand).
_MAX_COMMAND_CHARS = 64


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


def _live_holder(root: Path, collection: str) -> tuple[int, str, float] | None:
    """The recorded holder's pid, command and start while that pid lives."""
    try:  # a file any process on the data dir can write: anything may be in it
        record = json.loads(_holder_file(root, collection).read_text(encoding="utf-8"))
        pid, command, since = record["pid"], record["command"], float(record["since"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    well_formed = (
        type(pid) is int
        and 0 < pid < 2**31
        and isinstance(command, str)
        and command.isprintable()
        and len(command) <= _MAX_COMMAND_CHARS
        and 0 <= since < 1e11  # a time.localtime can show (NaN, 1e308: it raised)
    )
    return (pid, command, since) if well_formed and _alive(pid) else None


def describe_holder(root: Path, collection: str) -> str | None:
    """``ragsift console (pid 4242, since 09:14:03)``, or None when the record is
    missing, unreadable, or names a process that is gone (it was not the holder)."""
    holder = _live_holder(root, collection)
    if holder is None:
        return None
    pid, command, since = holder
    if pid == os.getpid():
        return f"this process (pid {pid}: a second index on the same folder)"
    started = time.strftime("%H:%M:%S", time.localtime(since))
    return f"`{command}` (pid {pid}, since {started})"


def _patience(root: Path, collection: str) -> float:
    holder = _live_holder(root, collection)
    if holder is None:
        return UNNAMED_WAIT_S
    pid, command, _ = holder
    brief = pid != os.getpid() and command.split()[-1] in _BRIEF
    return BRIEF_WAIT_S if brief else 0.0


def load_waiting(load: Callable[[], T], root: Path, collection: str) -> T:
    """``load()`` the shard; while a brief command holds it (an `ask`), try again for
    up to :data:`BRIEF_WAIT_S`. A console, a worker or an ingest is not waited for: the
    last refusal is raised, for the caller to name the holder."""
    deadline = None
    while True:
        try:
            return load()
        except Exception as exc:  # the binding raises bare Exceptions with the engine's text
            if "WouldBlock" not in str(exc):
                raise
            now = time.monotonic()
            deadline = now + _patience(root, collection) if deadline is None else deadline
            if now >= deadline:
                raise
            time.sleep(0.05)
