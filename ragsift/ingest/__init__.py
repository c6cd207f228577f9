"""ragsift.ingest."""
