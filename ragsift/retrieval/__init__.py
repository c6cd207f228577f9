"""ragsift.retrieval."""
