"""The request/response HTTP API in front of the Kafka pipeline (X6)."""

from ragsift.api.admin import create_admin_app
from ragsift.api.app import QueryApi, create_web_app
from ragsift.api.auth import Authenticator, KeyStore, Principal
from ragsift.api.openapi import openapi_document

__all__ = [
    "Authenticator",
    "KeyStore",
    "Principal",
    "QueryApi",
    "create_admin_app",
    "create_web_app",
    "openapi_document",
]
