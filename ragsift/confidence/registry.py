"""Calibrations per collection and tenant: where they are kept and which one a query gets.

A shipped artifact is fit on one public corpus; a user's collection has its own
score levels. ``ragsift calibrate --collection`` (label-free self-calibration) and
the feedback re-fit write artifacts for a narrower *scope*; a worker scores each
query with the most specific artifact that exists:

    (tenant, collection)  ->  (collection)  ->  the shipped default

A :class:`CalibrationStore` keeps the scoped artifacts (a directory for the
embedded runtime; a shared store for replicas). :class:`CalibrationRegistry`
resolves a scope, caches what it read, and notices new versions by polling the
store's cheap :meth:`~CalibrationStore.generation` at most every ``refresh_s``:
a re-fit reaches every worker without a restart. An artifact for another
embedder or metric is refused when it is written and skipped when it is read:
logged once, and each query it leaves to a broader calibration is reported with
the reason (:data:`IGNORED_REASONS`) to :attr:`CalibrationRegistry.on_fallback`,
which the pipeline counts in ``ragsift_calibration_fallbacks_total{reason}``. A scope
read while the store was down (a :class:`~ragsift.errors.ServiceUnavailableError`) is
read again at the first poll the store answers, whose generation a pause kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from ragsift.confidence.artifact import CalibrationArtifact, read_bounded
from ragsift.confidence.errors import CalibrationMismatchError, ConfidenceError
from ragsift.errors import ServiceUnavailableError
from ragsift.lru import Recent

__all__ = [
    "IGNORED_REASONS",
    "CalibrationRegistry",
    "CalibrationScope",
    "CalibrationStore",
    "DirectoryCalibrationStore",
]

log = logging.getLogger(__name__)

# How often a registry asks its store whether anything changed: new calibrations
# reach workers within this many seconds, and a busy worker polls at most 1/s.
DEFAULT_REFRESH_S: Final = 5.0
#: Scopes a registry remembers (found or not), least recently used first out. A worker
#: serving many tenants looks one up per tenant and collection; unbounded, the answers
#: ("nothing stored") grew ~70 bytes a tenant for as long as the store did not change.
DEFAULT_MAX_CACHED_SCOPES: Final = 4096
_COLLECTION_FILE: Final = "_collection.json"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
#: Why a stored calibration is not used: fit for another embedder or metric; made on
#: another shipped calibration than the one in force (an upgrade refit it); invalid;
#: the store could not read it; it reads reader signals the pipeline does not read
#: (told by ``Engines.calibration_for``, not the registry).
IGNORED_REASONS: Final = ("mismatch", "base", "invalid", "unreadable", "reader_signals")
#: A scope as read: its usable artifact (None: none), and why a stored one is not used.
_Read = tuple[CalibrationArtifact | None, str | None]


@dataclass(frozen=True, slots=True, order=True)
class CalibrationScope:
    """What a calibration applies to: one collection, optionally one tenant in it."""

    collection: str
    tenant: str | None = None

    def __post_init__(self) -> None:
        if not self.collection:
            raise ConfidenceError("a calibration scope needs a collection")
        if self.tenant is not None and not self.tenant:
            raise ConfidenceError("a calibration scope's tenant must be None or non-empty")

    def __str__(self) -> str:
        return self.collection if self.tenant is None else f"{self.tenant}/{self.collection}"


@runtime_checkable
class CalibrationStore(Protocol):
    """Scoped calibration artifacts, shared by every worker that reads the same store."""

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        """The artifact stored for exactly ``scope``, or None."""
        ...

    def put(self, scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        """Store ``artifact`` for ``scope``, replacing the previous one atomically."""
        ...

    def delete(self, scope: CalibrationScope) -> bool:
        """Remove the artifact for ``scope``; True if there was one."""
        ...

    def scopes(self) -> list[CalibrationScope]:
        """Every scope that has an artifact, sorted."""
        ...

    def generation(self) -> str:
        """A token that changes whenever any artifact is put or deleted (cheap to read)."""
        ...


def _component(name: str) -> str:
    """A file-name-safe, collision-free form of a collection or tenant name."""
    slug = _SAFE.sub("_", name)[:48]
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{slug}-{digest}"


class DirectoryCalibrationStore:
    """Artifacts as JSON files under ``root`` (the embedded runtime's data dir).

    Layout: ``root/<collection>/_collection.json`` and ``root/<collection>/<tenant>.json``,
    names made file-safe and unique (a slug plus a hash of the real name); every
    file is written to a temporary name and renamed, so a reader never sees half
    an artifact.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _path(self, scope: CalibrationScope) -> Path:
        folder = self.root / _component(scope.collection)
        name = _COLLECTION_FILE if scope.tenant is None else f"{_component(scope.tenant)}.json"
        return folder / name

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        """The artifact for exactly ``scope``, or None (see :class:`CalibrationStore`)."""
        path = self._path(scope)
        try:
            text = read_bounded(path)
        except FileNotFoundError:
            return None
        return CalibrationArtifact.from_json(text)

    def put(self, scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        """Write ``artifact`` for ``scope`` atomically (see :class:`CalibrationStore`)."""
        path = self._path(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        # The scope's real names are kept beside the hashed file names, for `scopes()`.
        (path.parent / "_name").write_text(scope.collection, encoding="utf-8")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(artifact.to_json())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if scope.tenant is not None:
            (path.parent / f"{path.stem}.name").write_text(scope.tenant, encoding="utf-8")

    def delete(self, scope: CalibrationScope) -> bool:
        """Remove the artifact for ``scope`` (see :class:`CalibrationStore`)."""
        path = self._path(scope)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def scopes(self) -> list[CalibrationScope]:
        """Every stored scope, sorted (see :class:`CalibrationStore`)."""
        found: list[CalibrationScope] = []
        if not self.root.is_dir():
            return found
        for folder in self.root.iterdir():
            name_file = folder / "_name"
            if not name_file.is_file():
                continue
            collection = name_file.read_text(encoding="utf-8")
            for path in folder.glob("*.json"):
                if path.name.startswith(".tmp-"):
                    continue
                if path.name == _COLLECTION_FILE:
                    found.append(CalibrationScope(collection))
                    continue
                tenant_file = path.with_suffix(".name")
                if tenant_file.is_file():
                    found.append(CalibrationScope(collection, tenant_file.read_text("utf-8")))
        return sorted(found, key=lambda s: (s.collection, s.tenant or ""))

    def generation(self) -> str:
        """Names, sizes and mtimes of the artifact files, hashed (see :class:`CalibrationStore`)."""
        if not self.root.is_dir():
            return "empty"
        digest = hashlib.sha256()
        for path in sorted(self.root.glob("*/*.json")):
            if path.name.startswith(".tmp-"):
                continue
            stat = path.stat()
            digest.update(
                f"{path.relative_to(self.root)}:{stat.st_size}:{stat.st_mtime_ns};".encode()
            )
        return digest.hexdigest()[:16]


class CalibrationRegistry:
    """The calibration each query is scored with: the most specific one stored, else the default.

    Args:
        default: the shipped (or configured) artifact; every scope falls back to it.
        store: scoped artifacts; None means every scope gets ``default``.
        refresh_s: how often to ask the store whether anything changed.
        clock: monotonic seconds (tests pass a fake).
        max_cached_scopes: scopes remembered between store changes, least recently
            used evicted first (an evicted scope is read from the store again).

    Thread-safe: the embedded runtime resolves from its event loop while a feedback
    re-fit resolves and publishes from another thread (the console's feedback).
    """

    def __init__(
        self,
        default: CalibrationArtifact,
        store: CalibrationStore | None = None,
        *,
        refresh_s: float = DEFAULT_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        max_cached_scopes: int = DEFAULT_MAX_CACHED_SCOPES,
    ):
        if refresh_s < 0:
            raise ConfidenceError(f"refresh_s must be >= 0, got {refresh_s}")
        if max_cached_scopes < 2:  # a query reads two scopes: its tenant's and the collection's
            raise ConfidenceError(f"max_cached_scopes must be >= 2, got {max_cached_scopes}")
        self.max_cached_scopes = max_cached_scopes
        self.default = default
        self.store = store
        self.refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        #: Each scope as read, with why its stored artifact is not used (one of
        #: :data:`IGNORED_REASONS`), least recently used first.
        self._cache: Recent[CalibrationScope, _Read] = Recent(max_cached_scopes)
        #: Moved on when what is cached goes stale (a put, a new generation).
        self._epoch = 0
        self._generation: str | None = None
        self._checked_at = float("-inf")
        #: A read failed because the store was down (not a refusal, not a bad artifact):
        #: the scopes cached ``unreadable`` are read again at the next poll that answers.
        self._read_while_down = False
        #: Artifacts found in the store but refused (wrong embedder/metric, invalid).
        self.rejected = 0
        #: Told, for each query a stored calibration could not score, why not.
        self.on_fallback: Callable[[str], None] | None = None

    def put(self, scope: CalibrationScope, artifact: CalibrationArtifact) -> None:
        """Store ``artifact`` for ``scope`` after checking it fits the default's embedder.

        Raises:
            CalibrationMismatchError: fit for another embedder or metric.
            ConfidenceError: there is no store to write to.
        """
        if self.store is None:
            raise ConfidenceError("this registry has no calibration store to write to")
        artifact.check_compatible(self.default.embedder_id, self.default.metric)
        self.store.put(scope, artifact)
        with self._lock:
            self._cache.pop(scope)
            self._epoch += 1
            self._checked_at = float("-inf")

    def resolve(self, tenant: str | None, collection: str) -> CalibrationArtifact:
        """The artifact for a query: tenant+collection, else collection, else the default."""
        if self.store is None:
            return self.default
        self._maybe_refresh()
        scopes = [CalibrationScope(collection)]
        if tenant:
            scopes.insert(0, CalibrationScope(collection, tenant))
        skipped = None
        for scope in scopes:
            artifact, ignored = self._lookup(scope)
            if artifact is not None:
                break
            skipped = skipped or ignored
        else:
            artifact = self.default
        if skipped is not None and self.on_fallback is not None:
            self.on_fallback(skipped)
        return artifact

    def scope_of(self, tenant: str | None, collection: str) -> CalibrationScope | None:
        """The scope whose artifact :meth:`resolve` returns (None: the default)."""
        if self.store is None:
            return None
        for scope in ([CalibrationScope(collection, tenant)] if tenant else []) + [
            CalibrationScope(collection)
        ]:
            if self._lookup(scope)[0] is not None:
                return scope
        return None

    def _lookup(self, scope: CalibrationScope) -> _Read:
        with self._lock:
            cached = self._cache.get(scope)
            if cached is not None:
                return cached
            epoch = self._epoch
        read = self._read(scope)  # not under the lock: a store read is I/O
        with self._lock:
            # A read that a put or a new generation passed may hold what they replaced:
            # cached, the scope was served it until the store changed again (the query
            # path and a re-fit's thread share a registry). Used this once, not kept.
            if epoch == self._epoch:
                self._cache.put(scope, read)
        return read

    def examine(
        self, scope: CalibrationScope, *, raises: tuple[type[OSError], ...] = ()
    ) -> tuple[CalibrationArtifact | None, str | None, str | None]:
        """What the store holds for exactly ``scope``, read afresh (nothing cached or
        logged): ``(artifact, reason, why)``. ``reason`` (one of :data:`IGNORED_REASONS`)
        and ``why`` are None when the artifact is usable or there is none; ``artifact``
        is None when there is none or it cannot be read.

        ``raises``: the store's errors (``OSError`` subclasses, e.g. a store that is
        down) raised rather than read as ``unreadable``: for a writer that builds on
        what it reads (a re-fit on its scope's base), which must wait for such a store,
        not build on a broader calibration.
        """
        if self.store is None:
            return None, None, None
        try:
            artifact = self.store.get(scope)
            if artifact is None:
                return None, None, None
            artifact.check_compatible(self.default.embedder_id, self.default.metric)
        except CalibrationMismatchError as exc:
            return None, "mismatch", str(exc)
        except ConfidenceError as exc:
            return None, "invalid", str(exc)
        except OSError as exc:
            if isinstance(exc, raises):
                raise
            return None, "unreadable", str(exc)
        made_on = artifact.provenance.base_version if artifact.provenance else None
        if made_on is not None and made_on != self.default.version:
            return (
                artifact,
                "base",
                f"it re-certified calibration {made_on}, and the default is now"
                f" {self.default.version} (an upgrade refit it): run `ragsift calibrations"
                " reprobe` (every such scope), `ragsift calibrate --collection` again, or"
                " ingest into the scope (the bundled probes then run again)",
            )
        return artifact, None, None

    def _read(self, scope: CalibrationScope) -> _Read:
        """The scope's usable artifact, or None and why a stored one is not usable."""
        try:
            artifact, reason, why = self.examine(scope, raises=(OSError,))
        except OSError as exc:
            artifact, reason, why = None, "unreadable", str(exc)
            if isinstance(exc, ServiceUnavailableError):  # it may answer later: see _maybe_refresh
                with self._lock:
                    self._read_while_down = True
        if reason is None:
            return artifact, None
        self.rejected += 1
        log.warning("calibration for %s ignored (%s), using a broader one: %s", scope, reason, why)
        return None, reason

    def _maybe_refresh(self) -> None:
        assert self.store is not None
        now = self._clock()
        with self._lock:
            if now - self._checked_at < self.refresh_s:
                return
            self._checked_at = now
        try:
            generation = self.store.generation()
        except OSError as exc:  # keep serving what was read; try again next period
            log.warning("calibration store unreadable, keeping cached calibrations: %s", exc)
            return
        with self._lock:
            if generation != self._generation:
                self._generation = generation
                self._cache.clear()
                self._epoch += 1
            elif self._read_while_down:
                # The store answers again. Back from a pause or a failover with its data,
                # its generation has not moved: the scopes read while it was down kept the
                # broader calibration until some calibration was written somewhere. They
                # are read again now, at most once a period (a poll that fails leaves them).
                for scope in [s for s, (_, why) in self._cache.items() if why == "unreadable"]:
                    self._cache.pop(scope)
                self._epoch += 1
            self._read_while_down = False
