"""``--quick`` for every bench: the same script at sizes that finish in a minute or two.

Quick runs check that a bench works (``make bench-quick``); their figures are
too small to quote.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["parse_args"]


def parse_args(parser: argparse.ArgumentParser, quick: dict[str, Any]) -> argparse.Namespace:
    """Parse with a ``--quick`` flag that sets each option named in ``quick`` to its value."""
    shown = ", ".join(f"--{name.replace('_', '-')} {value}" for name, value in quick.items())
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {shown}")
    args = parser.parse_args()
    if args.quick:
        for name, value in quick.items():
            setattr(args, name, value)
    return args
