"""Per-tenant thresholds (A13): level bounds, answer threshold and cache TTLs from a file.

The file (``RAGSIFT_GUARDRAILS_TENANT_THRESHOLDS_PATH``, YAML or JSON) maps
tenant ids to the values that differ from the deployment's::

    tenants:
      acme:
        high: 0.9            # level bounds; unset ones keep the configured value
        answer_threshold: 0.6
        ttl_high_s: 600      # cache TTLs by status; unset ones keep RAGSIFT_CACHE_*
        corrective: true     # B10 retry on or off; unset keeps RAGSIFT_CORRECTIVE_ENABLED
        corrective_strategy: wider          # unset keeps RAGSIFT_CORRECTIVE_STRATEGY
        corrective_trigger_confidence: 0.5  # unset keeps RAGSIFT_CORRECTIVE_TRIGGER_CONFIDENCE

:class:`TenantThresholdStore` reads it at start-up (a bad file is a
:class:`~ragsift.errors.ConfigurationError`) and re-reads it when its
modification time changes, checking at most once per poll interval, so a change
applies without a restart. A bad file on reload is logged and counted
(``ragsift_tenant_thresholds_reloads_total{result="error"}``); the last good
thresholds stay in force.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ragsift.confidence import LevelThresholds
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.policy import AnswerPolicy
from ragsift.errors import ConfigurationError
from ragsift.observability.metrics import Metrics
from ragsift.schemas import CorrectiveStrategy
from ragsift.schemas.base import TenantId
from ragsift.settings import CacheSettings, CorrectiveSettings

__all__ = [
    "MAX_TENANTS",
    "MAX_THRESHOLDS_FILE_BYTES",
    "TenantThresholdStore",
    "TenantThresholds",
    "load_tenant_thresholds",
]

log = logging.getLogger(__name__)

#: Tenants one file may configure; past it the file is refused (a generated file gone wrong).
MAX_TENANTS = 10_000
#: Bytes read from the file: 10,000 tenants of a few lines each fit with room to spare.
MAX_THRESHOLDS_FILE_BYTES = 4 * 1024 * 1024
#: Values a YAML file may stand for once its aliases are expanded: MAX_TENANTS tenants of
#: a dozen values each are ~250,000; a document past this is an alias bomb, not thresholds.
MAX_YAML_VALUES = 1_000_000
_MAX_TTL_S = 30 * 24 * 3600  # a month: longer and a stale answer outlives its documents


class TenantThresholds(BaseModel):
    """One tenant's values; each unset one keeps the deployment's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    high: float | None = Field(default=None, ge=0.0, le=1.0)
    medium: float | None = Field(default=None, ge=0.0, le=1.0)
    low: float | None = Field(default=None, ge=0.0, le=1.0)
    answer_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    ttl_high_s: int | None = Field(default=None, ge=0, le=_MAX_TTL_S)
    ttl_medium_s: int | None = Field(default=None, ge=0, le=_MAX_TTL_S)
    ttl_low_s: int | None = Field(default=None, ge=0, le=_MAX_TTL_S)
    ttl_none_s: int | None = Field(default=None, ge=0, le=_MAX_TTL_S)
    corrective: bool | None = None
    corrective_strategy: CorrectiveStrategy | None = None
    corrective_trigger_confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    def levels(self, base: LevelThresholds) -> LevelThresholds | None:
        """The tenant's level bounds over ``base``; None when it sets none.

        Raises:
            ConfidenceError: the merged bounds are not high > medium > low.
        """
        if self.high is None and self.medium is None and self.low is None:
            return None
        return LevelThresholds(
            high=base.high if self.high is None else self.high,
            medium=base.medium if self.medium is None else self.medium,
            low=base.low if self.low is None else self.low,
        )

    def cache_settings(self, base: CacheSettings) -> CacheSettings:
        """``base`` with this tenant's TTLs."""
        ttls = {
            name: value
            for name in ("ttl_high_s", "ttl_medium_s", "ttl_low_s", "ttl_none_s")
            if (value := getattr(self, name)) is not None
        }
        return base.model_copy(update=ttls) if ttls else base

    def corrective_settings(self, base: CorrectiveSettings) -> CorrectiveSettings:
        """``base`` with this tenant's corrective retrieval switch, strategy and trigger."""
        values = {
            "enabled": self.corrective,
            "strategy": self.corrective_strategy,
            "trigger_confidence": self.corrective_trigger_confidence,
        }
        update = {name: value for name, value in values.items() if value is not None}
        return base.model_copy(update=update) if update else base


class _ThresholdsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tenants: dict[TenantId, TenantThresholds] = Field(default_factory=dict, max_length=MAX_TENANTS)


def load_tenant_thresholds(path: Path, base: LevelThresholds) -> dict[str, TenantThresholds]:
    """Parse and check the file (YAML, or JSON for a ``.json`` name).

    Raises:
        ConfigurationError: unreadable, too large, not YAML/JSON, or a value out of range.
    """
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_THRESHOLDS_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"tenant thresholds {path}: cannot read it: {exc}") from exc
    if len(raw) > MAX_THRESHOLDS_FILE_BYTES:
        raise ConfigurationError(
            f"tenant thresholds {path}: over {MAX_THRESHOLDS_FILE_BYTES} bytes"
        )
    try:
        data: Any = json.loads(raw) if path.suffix == ".json" else _yaml(raw)
        parsed = _ThresholdsFile.model_validate({} if data is None else data)
        for tenant, values in parsed.tenants.items():
            try:
                values.levels(base)
            except ConfidenceError as exc:
                raise ConfigurationError(f"tenant {tenant!r}: {exc}") from exc
    except (ValueError, yaml.YAMLError) as exc:  # JSON, YAML and pydantic errors alike
        raise ConfigurationError(f"tenant thresholds {path}: {exc}") from exc
    except RecursionError as exc:  # "[" * 50_000: past the parser's stack
        raise ConfigurationError(f"tenant thresholds {path}: nested too deep") from exc
    return dict(parsed.tenants)


def _yaml(raw: bytes) -> Any:
    """The YAML document, refused when its aliases expand past :data:`MAX_YAML_VALUES`:
    nine lines of ``&x [*w, *w, ...]`` stand for 9^9 values, and checking them (naming
    them in the error) took minutes of CPU per read; a poll of the file froze its worker.

    Raises:
        ValueError: the document expands past the bound.
    """
    loader = yaml.SafeLoader(raw)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if _expanded(root, {}) > MAX_YAML_VALUES:
            raise ValueError(f"its aliases expand to more than {MAX_YAML_VALUES:,} values")
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _expanded(node: yaml.Node, seen: dict[int, int]) -> int:
    """Values ``node`` stands for once every alias is expanded (each shared node counted once)."""
    if id(node) not in seen:
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        seen[id(node)] = 1 + sum(_expanded(child, seen) for child in children)
    return seen[id(node)]


class TenantThresholdStore:
    """The per-tenant thresholds in force, re-read when the file changes (module docstring).

    Args:
        path: the thresholds file.
        base: the configured level bounds, which the tenants' values override.
        poll_interval_s: least seconds between two checks of the file's modification time.
        metrics: counts reloads by result, when given.
        clock: seconds source (monotonic; tests pass a fake).

    Raises:
        ConfigurationError: the file is bad at start-up.
    """

    def __init__(
        self,
        path: Path,
        base: LevelThresholds,
        *,
        poll_interval_s: float,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if poll_interval_s <= 0:
            raise ConfigurationError(f"poll_interval_s must be > 0, got {poll_interval_s}")
        self.path = path
        self.base = base
        self.poll_interval_s = poll_interval_s
        self.metrics = metrics
        self._clock = clock
        self._stamp = self._file_stamp()
        self._tenants = load_tenant_thresholds(path, base)
        self._checked_at = clock()

    @property
    def tenants(self) -> Mapping[str, TenantThresholds]:
        """Every configured tenant's thresholds."""
        return self._tenants

    def get(self, tenant_id: str) -> TenantThresholds | None:
        """The tenant's thresholds, or None when the file does not name it."""
        return self._tenants.get(tenant_id)

    def policy(self, tenant_id: str) -> AnswerPolicy:
        """The levels and answer threshold the tenant's results are judged by."""
        values = self._tenants.get(tenant_id)
        if values is None:
            return AnswerPolicy()
        return AnswerPolicy(
            levels=values.levels(self.base), answer_threshold=values.answer_threshold
        )

    def fingerprint(self, tenant_id: str) -> str | None:
        """A digest of the tenant's values (None when unset): cache keys change with them."""
        values = self._tenants.get(tenant_id)
        if values is None:
            return None
        dumped = values.model_dump_json(exclude_none=True).encode()
        return hashlib.blake2b(dumped, digest_size=8).hexdigest()

    def poll(self) -> bool:
        """Re-read the file if it changed and the poll interval has passed; True if reloaded.

        A file that fails to load is logged and counted; the previous thresholds stay.
        """
        now = self._clock()
        if now - self._checked_at < self.poll_interval_s:
            return False
        self._checked_at = now
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            tenants = load_tenant_thresholds(self.path, self.base)
        except ConfigurationError as exc:
            log.error("keeping the previous tenant thresholds: %s", exc)
            self._count("error")
            return False
        self._tenants = tenants
        self._count("ok")
        log.info("reloaded tenant thresholds from %s (%d tenants)", self.path, len(tenants))
        return True

    def _file_stamp(self) -> tuple[int, int] | None:
        # Modification time and size: an edit within the clock's resolution still
        # changes the size more often than not. A missing file is a change too.
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.tenant_thresholds_reloads.labels(result).inc()
