"""The ``ragsift`` console script's entry point, outside the CLI package.

Loading the command modules takes seconds (numpy, onnxruntime, Qdrant Edge, Faust);
Ctrl-C in that window printed a ``KeyboardInterrupt`` traceback of 15 to 46 lines,
because ``ragsift.cli`` imports every command before its ``main`` can catch anything.
Here the import itself is guarded: Ctrl-C then ends as it does later, one line and
exit 130.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

#: 128 + SIGINT, as a shell reports a command Ctrl-C stopped
EXIT_INTERRUPTED = 130


def main() -> None:
    """Load the CLI and run it."""
    try:
        from ragsift.cli import main as run
    except KeyboardInterrupt:
        print("\nAborted!", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    run()
