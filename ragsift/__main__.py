"""``python -m ragsift`` runs the CLI."""

from ragsift.cli import main

main()
