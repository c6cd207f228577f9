"""Who is calling the HTTP API: API keys (stored hashed) and OIDC/JWT bearer tokens.

A credential resolves to a :class:`~ragsift.api.principal.Principal`: the
tenants it may act for and its scopes. The tenant of a request always comes from
the credential, never from the body alone (see docs/security.md).

API keys look like ``rsk_<key id>_<secret>``. The keys file keeps the key id,
the sha256 of the whole key, its tenants and scopes, and never the key itself:
the secret part is 256 random bits, so a fast hash is as safe as a slow one and
costs nothing per request. The file is re-read when it changes, so a revoked
key stops working without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import jwt

from ragsift.api.jwt_keys import (
    ASYMMETRIC,
    KeyMismatch,
    VerificationKey,
    keys_for,
    load_jwks,
    load_pem,
)
from ragsift.api.keys_file import FileVersion, file_version, read_keys, resolve_keys_file
from ragsift.api.principal import ANONYMOUS, SCOPES, AuthError, Principal, Scope
from ragsift.errors import ConfigurationError, shown_value
from ragsift.schemas.base import TENANT_PATTERN, is_tenant_id
from ragsift.settings import DEFAULT_DATA_DIR, ApiSettings

__all__ = [
    "HS256_MIN_SECRET_BYTES",
    "KEY_PREFIX",
    "SCOPES",
    "AuthError",
    "Authenticator",
    "JwtVerifier",
    "KeyRecord",
    "KeyStore",
    "Principal",
    "Scope",
    "credential_headers",
]

KEY_PREFIX = "rsk"
_KEY_ID_BYTES = 6  # 12 hex characters: enough to tell keys apart in a listing
_SECRET_BYTES = 32  # 256 bits: guessing is out of reach, so sha256 storage is enough
#: clock skew tolerated on exp/nbf/iat between the issuer and this host
JWT_LEEWAY_S = 30
#: RFC 7518 §3.2: an HS256 key must be at least as long as the hash output, 256 bits
HS256_MIN_SECRET_BYTES = 32
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyRecord:
    """One API key as stored: its id, the sha256 of the key, tenants and scopes."""

    key_id: str
    sha256: str
    tenants: tuple[str, ...]
    scopes: tuple[str, ...]
    label: str = ""
    created_at: str = ""
    revoked_at: str | None = None

    def principal(self) -> Principal:
        """The caller this key stands for."""
        return Principal(f"key:{self.key_id}", frozenset(self.tenants), frozenset(self.scopes))


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class KeyStore:
    """The keys file: create, list, revoke, and look a presented key up."""

    path: Path
    _records: dict[str, KeyRecord] = field(default_factory=dict)
    _seen: FileVersion | None = None  # the version of the file last read

    def records(self) -> list[KeyRecord]:
        """Every key, revoked ones included, oldest first."""
        self._reload()
        return list(self._records.values())

    def active(self) -> list[KeyRecord]:
        """Keys that still work."""
        return [r for r in self.records() if r.revoked_at is None]

    def create(
        self, tenants: list[str], scopes: list[str], label: str = ""
    ) -> tuple[str, KeyRecord]:
        """A new key: returns the key (shown once, never stored) and its stored record."""
        if not tenants:
            raise ConfigurationError("a key needs at least one tenant")
        for tenant in tenants:
            if not is_tenant_id(tenant):
                raise ConfigurationError(f"tenant must match {TENANT_PATTERN}, got {tenant!r}")
        bad = sorted(set(scopes) - set(SCOPES))
        if bad or not scopes:
            raise ConfigurationError(f"scopes must be some of {list(SCOPES)}, got {scopes}")
        key_id = secrets.token_hex(_KEY_ID_BYTES)
        key = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(_SECRET_BYTES)}"
        record = KeyRecord(
            key_id=key_id,
            sha256=_digest(key),
            tenants=tuple(sorted(set(tenants))),
            scopes=tuple(s for s in SCOPES if s in scopes),
            label=label,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self._reload()
        self._records[key_id] = record
        self._write()
        return key, record

    def revoke(self, key_id: str) -> KeyRecord:
        """Mark a key revoked (kept in the file so listings show when)."""
        self._reload()
        record = self._records.get(key_id)
        if record is None:
            raise ConfigurationError(f"no key with id {key_id!r} in {self.path}")
        if record.revoked_at is None:
            record = KeyRecord(
                **{**record.__dict__, "revoked_at": datetime.now(UTC).isoformat(timespec="seconds")}
            )
            self._records[key_id] = record
            self._write()
        return record

    def lookup(self, key: str) -> Principal | None:
        """The principal for a presented key, or None when it is unknown or revoked."""
        parts = key.split("_", 2)
        if len(parts) != 3 or parts[0] != KEY_PREFIX:
            return None
        self._reload()
        record = self._records.get(parts[1])
        if record is None or record.revoked_at is not None:
            return None
        if not hmac.compare_digest(record.sha256, _digest(key)):
            return None
        return record.principal()

    def _reload(self) -> None:
        try:
            stat = self.path.stat()
            if self._seen == file_version(stat):
                return
            text = self.path.read_bytes()
        except FileNotFoundError:
            self._records, self._seen = {}, None
            return
        except OSError as exc:  # a directory, a file for a folder, no permission, I/O
            raise ConfigurationError(
                f"cannot read the API keys file {self.path}: {exc.strerror or exc}"
            ) from exc
        try:
            records = [KeyRecord(**fields) for fields in read_keys(text, SCOPES)]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise ConfigurationError(f"unreadable API keys file {self.path}: {exc}") from exc
        self._records = {r.key_id: r for r in records}
        self._seen = file_version(stat)

    def _write(self) -> None:
        """Replace the file atomically, readable by its owner only (ConfigurationError
        where its folder cannot be made or written to)."""
        body = {
            "version": 1,
            "keys": [
                {**r.__dict__, "tenants": list(r.tenants), "scopes": list(r.scopes)}
                for r in self._records.values()
            ],
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".api-keys-")
        except OSError as exc:
            raise ConfigurationError(
                f"cannot write the API keys file {self.path}: {exc.strerror or exc}"
            ) from exc
        with os.fdopen(fd, "w") as out:
            json.dump(body, out, indent=2)
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
        self._seen = None  # re-read on next use (mtime granularity may hide this write)


class JwtVerifier:
    """Verifies bearer JWTs: signature, issuer, audience, expiry; tenants and scopes from claims."""

    def __init__(self, settings: ApiSettings):
        if not settings.jwt_enabled:
            raise ConfigurationError("JwtVerifier needs a secret, public key or JWKS file")
        self.settings = settings
        self._hs_secret = (
            settings.jwt_hs256_secret.get_secret_value() if settings.jwt_hs256_secret else None
        )
        if self._hs_secret is not None and len(self._hs_secret.encode()) < HS256_MIN_SECRET_BYTES:
            # a short secret is guessed offline from any one token it signed
            raise ConfigurationError(
                f"RAGSIFT_API_JWT_HS256_SECRET is {len(self._hs_secret.encode())} bytes;"
                f" HS256 needs at least {HS256_MIN_SECRET_BYTES} (RFC 7518 section 3.2):"
                " generate one with `openssl rand -base64 48`"
            )
        #: the public key file's (any kid) and the JWKS's (by kid) keys, checked once here
        self._keys: list[VerificationKey] = []
        try:
            if settings.jwt_public_key_file is not None:
                self._keys.append(load_pem(settings.jwt_public_key_file.read_text()))
            if settings.jwt_jwks_file is not None:
                self._keys += load_jwks(settings.jwt_jwks_file.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"cannot load the JWT verification key: {exc}") from exc

    def _keys_for(self, token: str) -> tuple[list[Any], str]:
        """The keys that may have signed ``token``, and its algorithm."""
        header = jwt.get_unverified_header(token)
        alg = header.get("alg")
        if not isinstance(alg, str):
            raise AuthError(f"the token's alg must be a string, got {shown_value(alg)}")
        if alg == "HS256" and self._hs_secret is not None:
            return [self._hs_secret], alg
        if alg in ASYMMETRIC and self._keys:
            try:  # only keys of the token's kind: another made PyJWT raise TypeError
                return [k.key for k in keys_for(self._keys, alg, header.get("kid"))], alg
            except KeyMismatch as exc:
                raise AuthError(str(exc)) from exc
        # never let the token pick "none" or an algorithm we hold no key for
        raise AuthError(f"token algorithm {shown_value(alg)} is not accepted here")

    def _decode(self, token: str, keys: list[Any], alg: str) -> dict[str, Any]:
        """The claims of ``token``, signed by one of ``keys`` (tried in turn: a token
        without a kid may have been signed by any key of its algorithm)."""
        for key in keys[:-1]:
            try:
                return self._decode_with(token, key, alg)
            except jwt.InvalidSignatureError:
                continue  # not this key's signature; a claim error is the token's
        return self._decode_with(token, keys[-1], alg)

    def _decode_with(self, token: str, key: Any, alg: str) -> dict[str, Any]:
        return jwt.decode(
            token,
            key,
            algorithms=[alg],
            audience=self.settings.jwt_audience,
            issuer=self.settings.jwt_issuer,
            leeway=JWT_LEEWAY_S,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )

    def verify(self, token: str) -> Principal:
        """The principal for a valid token; AuthError (401) otherwise."""
        try:
            claims = self._decode(token, *self._keys_for(token))
        except jwt.PyJWTError as exc:
            raise AuthError(f"invalid token: {exc}") from exc
        # A string is one tenant, spaces and all ("acme corp" is not acme and corp):
        # space-separated lists are OAuth's convention for scope, not for tenants.
        tenants = _claim_list(claims.get(self.settings.jwt_tenant_claim), split=False)
        if not tenants or not all(is_tenant_id(t) for t in tenants):
            raise AuthError(f"the token's {self.settings.jwt_tenant_claim!r} claim names no tenant")
        scopes = frozenset(_claim_list(claims.get(self.settings.jwt_scope_claim))) & set(SCOPES)
        return Principal(f"jwt:{claims['sub']}", frozenset(tenants), scopes)


def _claim_list(value: Any, *, split: bool = True) -> list[str]:
    """A claim as a list of strings: ["a", "b"], or a string, split on whitespace
    ("a b", OAuth scope style) when ``split``, else one item."""
    if isinstance(value, str):
        return value.split() if split else [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return []


class Headers(Protocol):
    """A request's headers, each name's values in order (aiohttp's ``request.headers``)."""

    def getall(self, key: str, default: list[str], /) -> list[str]:
        """Every value of header ``key``, or ``default``."""
        ...


def credential_headers(headers: Headers) -> tuple[str | None, str | None]:
    """A request's ``Authorization`` and ``X-API-Key`` headers, for
    :meth:`Authenticator.authenticate`; AuthError (401) for either given twice with two
    values: which one counts would be ours to pick, and a proxy that checked the other
    would have authorized another caller than the one ragsift serves."""
    found: list[str | None] = []
    for name in ("Authorization", "X-API-Key"):
        values = {v for v in headers.getall(name, []) if v.strip()}  # blank: absent
        if len(values) > 1:
            raise AuthError(f"send one credential: the {name} header is given twice")
        found.append(values.pop() if values else None)
    return found[0], found[1]


class Authenticator:
    """Turns an ``Authorization`` / ``X-API-Key`` header into a principal."""

    def __init__(
        self, keys: KeyStore | None, jwt_verifier: JwtVerifier | None, *, insecure: bool = False
    ):
        self.keys = keys
        self.jwt = jwt_verifier
        self.insecure = insecure

    @classmethod
    def from_settings(
        cls, settings: ApiSettings, *, keys_file: Path | None = None, insecure: bool = False
    ) -> Authenticator:
        """Keys from ``keys_file`` (None: :func:`resolve_keys_file` in the default data
        dir), JWTs when configured; refuses to run with neither."""
        path = keys_file or resolve_keys_file(settings, DEFAULT_DATA_DIR)[0]
        keys = KeyStore(path)
        verifier = JwtVerifier(settings) if settings.jwt_enabled else None
        if not insecure and verifier is None and not keys.active():
            raise ConfigurationError(
                f"no API keys in {path} and no JWT verification configured:"
                " create a key with `ragsift keys create`, or pass --insecure-no-auth"
                " (loopback only) for local development"
            )
        return cls(keys, verifier, insecure=insecure)

    def authenticate(self, authorization: str | None, api_key: str | None) -> Principal:
        """The caller, or AuthError(401) for a missing, unknown or invalid credential."""
        try:
            return self._authenticate(authorization, api_key)
        except AuthError:
            raise
        except Exception as exc:
            # Last resort: a credential no check expected (a library's TypeError) is
            # refused and counted like any other, never a 500 with a traceback.
            _log.exception("an unexpected error checking a credential; refused with 401")
            raise AuthError("the credential could not be checked") from exc

    def _authenticate(self, authorization: str | None, api_key: str | None) -> Principal:
        if self.insecure:
            return ANONYMOUS
        # An empty header is no credential (a client template that left it blank): it
        # must not turn a valid one next to it into "two different credentials".
        token = api_key if api_key and api_key.strip() else None
        if authorization is not None and authorization.strip():
            scheme, _, rest = authorization.partition(" ")
            if scheme.lower() != "bearer" or not rest.strip():
                raise AuthError("the Authorization header must be 'Bearer <token>'")
            if token is not None and token != rest.strip():
                # Which one counts would be ours to pick: a proxy that checked the other
                # would have authorized another caller than the one ragsift serves.
                raise AuthError("send one credential: Authorization and X-API-Key differ")
            token = rest.strip()
        if not token:
            raise AuthError("no credential: send 'Authorization: Bearer <key or token>'")
        if not (token.isascii() and token.isprintable()):
            # Keys and JWTs are printable ASCII. A header's bytes that are not UTF-8 reach
            # here as surrogates, which hashing a key could not encode (a 500).
            raise AuthError("the credential must be printable ASCII")
        if token.startswith(KEY_PREFIX + "_"):
            try:
                principal = self.keys.lookup(token) if self.keys is not None else None
            except ConfigurationError as exc:  # edited by hand into something unreadable
                _log.error("API keys refused until it is fixed: %s", exc)
                raise AuthError(
                    "the server cannot check API keys now (its keys file is unreadable)",
                    status=503,
                ) from exc
            if principal is None:
                raise AuthError("unknown or revoked API key")
            return principal
        if self.jwt is None:
            raise AuthError("unknown API key (bearer JWTs are not enabled)")
        return self.jwt.verify(token)
