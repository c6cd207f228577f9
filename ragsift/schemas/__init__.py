"""ragsift.schemas."""
