"""ragsift.confidence."""
