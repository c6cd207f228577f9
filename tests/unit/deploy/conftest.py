"""Fixtures for the deployment tests: kustomize builds run once per session."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_support import REPO, load_yaml_all, run, tool

OVERLAYS = ("dev", "prod")


@pytest.fixture(scope="session")
def kustomize() -> str:
    """Path of the kustomize binary (skips, or fails under CI, when missing)."""
    return tool("kustomize")


@pytest.fixture(scope="session")
def promtool() -> str:
    """Path of promtool (skips, or fails under CI, when missing)."""
    return tool("promtool")


@pytest.fixture(scope="session")
def built_overlays(kustomize: str) -> dict[str, list[dict[str, Any]]]:
    """``kustomize build`` of every overlay, parsed: overlay name -> resources."""
    return {
        overlay: load_yaml_all(run([kustomize, "build", str(REPO / "k8s" / "overlays" / overlay)]))
        for overlay in OVERLAYS
    }


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest, built_overlays: dict[str, Any]) -> list[dict[str, Any]]:
    """The resources of one overlay (the test runs once per overlay)."""
    return built_overlays[request.param]
