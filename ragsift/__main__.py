"""``python -m ragsift`` runs the CLI."""

from ragsift.entry import main

main()
