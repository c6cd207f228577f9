"""Which files of a folder an ingest reads, and why it passes the others over.

Hidden files and folders, the data directory, links, pipes and devices are passed over
by design; a folder that cannot be listed or a file that cannot be read is passed over
too. Each is named, never dropped in silence (``--prune`` counts on knowing what was
not read).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "BROKEN_LINK",
    "CANNOT_READ",
    "DATA_DIR",
    "HIDDEN",
    "LINKED_FOLDER",
    "LINK_IN",
    "LINK_OUT",
    "NOT_A_FILE",
    "PLURALS",
    "UNREADABLE_FOLDER",
    "cannot_read",
    "files_under",
    "link_reason",
]

#: Why a folder's hidden file or folder, or its data directory, is passed over.
HIDDEN = "hidden"
DATA_DIR = "ragsift's data directory"
#: Why a link in a folder is passed over: it leads out of the folder (a folder of
#: uploads must not index /etc/passwd through one), or to a file indexed by its own name.
LINK_OUT = "link out of the folder"
LINK_IN = "link to a file indexed by its own name"
#: A link to a folder is not followed (it could lead anywhere, or round in a loop);
#: a link to nothing has nothing to read.
LINKED_FOLDER = "link to a folder (not followed)"
BROKEN_LINK = "broken link"
#: A pipe, a socket or a device: opening a pipe would wait for a writer for ever.
NOT_A_FILE = "not a regular file"
#: Why a folder is passed over: it cannot be listed. ``--prune`` then removes nothing,
#: since its documents cannot be told from removed ones.
UNREADABLE_FOLDER = "folder that cannot be read"
#: How the reason for a file that could not be opened or read starts (:func:`cannot_read`).
CANNOT_READ = "cannot be read"


#: The reasons above said of several files, for the skipped line.
PLURALS = {
    LINK_OUT: "links out of the folder",
    LINK_IN: "links to files indexed by their own names",
    DATA_DIR: "ragsift data directories",
    UNREADABLE_FOLDER: "folders that cannot be read",
    LINKED_FOLDER: "links to folders (not followed)",
    BROKEN_LINK: "broken links",
    NOT_A_FILE: "not regular files",
}


def cannot_read(exc: OSError) -> str:
    """Why a file that could not be opened or read is passed over."""
    return f"{CANNOT_READ} ({exc.strerror or type(exc).__name__})"


def link_reason(file: Path, root: Path) -> str:
    """Why the symbolic link ``file``, found under the folder ``root``, is passed over."""
    return LINK_IN if file.resolve().is_relative_to(root) else LINK_OUT


def files_under(path: Path, skipped: list[tuple[Path, str]], exclude: set[Path]) -> list[Path]:
    """The files under the folder ``path``, sorted; the rest passed over in ``skipped``
    with why: hidden and excluded ones (a hidden or excluded folder once, not each of
    its files), links to folders (not walked), broken links, pipes, sockets and devices.
    (Links to files are listed: the caller tells where they lead.)"""
    found: list[Path] = []

    def unread(exc: OSError) -> None:  # os.walk passed such a folder over without a word
        skipped.append((Path(exc.filename or path), UNREADABLE_FOLDER))

    for top, folders, names in os.walk(path, onerror=unread):
        here = Path(top)
        kept = []
        for name in sorted(folders):
            folder = here / name
            if name.startswith("."):
                skipped.append((folder, HIDDEN))
            elif folder.is_symlink():  # os.walk lists it and, rightly, never enters it
                skipped.append((folder, LINKED_FOLDER))
            elif folder.resolve() in exclude:
                skipped.append((folder, DATA_DIR))
            else:
                kept.append(name)
        folders[:] = kept
        for name in names:
            file = here / name
            if name.startswith("."):
                skipped.append((file, HIDDEN))
            elif file.is_file():
                found.append(file)
            elif file.is_symlink() and not file.exists():
                skipped.append((file, BROKEN_LINK))
            else:
                skipped.append((file, NOT_A_FILE))
    return sorted(found)
