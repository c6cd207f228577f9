"""ragsift.streams."""
