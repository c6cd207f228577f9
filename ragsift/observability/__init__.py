"""ragsift.observability."""
