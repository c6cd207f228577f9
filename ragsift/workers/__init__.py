"""ragsift.workers."""
