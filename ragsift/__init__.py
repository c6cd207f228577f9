"""ragsift: streaming retrieval for RAG with calibrated confidence."""

__version__ = "0.1.0"

__all__ = ["__version__"]
