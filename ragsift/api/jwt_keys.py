"""The public keys a bearer JWT is verified with (a PEM file's, a JWKS file's), each
with the algorithms it fits, so a token is only ever checked against a key of its kind.

PyJWT given a key of another kind than the token's ``alg`` raised ``TypeError`` (a
500) or an error naming a generator object; a JWKS key whose ``alg`` was no string
broke the whole set at startup, and one whose ``kid`` was no string was matched by
no token's. Here every key is
read and checked once, at startup: a malformed one is left out with a warning that
says why, and the others still verify.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ragsift.errors import ConfigurationError, shown_value

__all__ = [
    "ASYMMETRIC",
    "KeyMismatch",
    "VerificationKey",
    "keys_for",
    "load_jwks",
    "load_pem",
]

_log = logging.getLogger(__name__)

#: The RSA algorithms accepted (RFC 7518 §3.3, §3.5); any RSA key verifies each.
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256"})
#: Each ECDSA algorithm is bound to one curve (RFC 7518 §3.4).
EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
#: Every algorithm a token may name to be checked against a public key.
ASYMMETRIC = RSA_ALGORITHMS | frozenset(EC_ALGORITHMS.values())

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


class KeyMismatch(ValueError):
    """No configured key fits a token's ``kid`` and ``alg``; the message says why."""


@dataclass(frozen=True)
class VerificationKey:
    """One public key and the algorithms it verifies.

    Attributes:
        key: the public key.
        algorithms: the token algorithms it may verify (its ``alg`` only, when its
            JWK names one).
        kid: its JWK's key id (None: the JWK has none, or the key is the PEM file's).
        any_kid: True for the PEM file's key, which a token's ``kid`` does not select.
        source: where it came from and what it is, for messages.
    """

    key: PublicKey
    algorithms: frozenset[str]
    kid: str | None
    any_kid: bool
    source: str


def _kind(key: object) -> tuple[PublicKey, str, frozenset[str]]:
    """A public key, what it is, and the algorithms it verifies (ValueError: none of ours)."""
    if isinstance(key, rsa.RSAPublicKey):
        return key, "RSA", RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePublicKey):
        alg = EC_ALGORITHMS.get(key.curve.name)
        if alg is None:
            raise ValueError(f"its EC curve {key.curve.name} fits none of ES256, ES384, ES512")
        return key, f"EC {key.curve.name}", frozenset({alg})
    raise ValueError(f"a {type(key).__name__} verifies none of {', '.join(sorted(ASYMMETRIC))}")


def load_pem(text: str) -> VerificationKey:
    """The key of ``RAGSIFT_API_JWT_PUBLIC_KEY_FILE``, which verifies the algorithms of
    its kind (ConfigurationError: no PEM public key, or one of another kind)."""
    try:
        public, kind, algorithms = _kind(_pem_public_key(text.encode()))
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ConfigurationError(
            f"the JWT public key file holds no usable PEM public key (RSA or EC): {exc}"
        ) from exc
    return VerificationKey(public, algorithms, None, True, f"the public key file's {kind} key")


def _pem_public_key(data: bytes) -> object:
    """The public key of a PEM public key, or of a private key (PyJWT took an EC one)."""
    try:
        return serialization.load_pem_public_key(data)
    except ValueError:
        private = serialization.load_pem_private_key(data, password=None)
    _log.warning("the JWT public key file holds a private key: mount its public key alone")
    return private.public_key()


def load_jwks(text: str) -> list[VerificationKey]:
    """The usable keys of a JWKS document; each unusable one is logged and left out.

    Raises:
        ConfigurationError: not a JWKS document, or not one usable key in it.
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigurationError(f"the JWKS file is not JSON: {exc}") from exc
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigurationError("the JWKS file holds no 'keys' list of keys")
    keys, refused = [], []
    for number, entry in enumerate(entries, 1):
        try:
            keys.append(_jwk(entry, number))
        except ValueError as exc:
            refused.append(str(exc))
            _log.warning("JWKS key left out, tokens it signed get 401: %s", exc)
    if not keys:
        raise ConfigurationError(f"the JWKS file holds no usable key: {'; '.join(refused)}")
    return keys


def _jwk(entry: Any, number: int) -> VerificationKey:
    """One JWKS key, checked (ValueError naming the key and what is wrong with it)."""
    if not isinstance(entry, dict):
        raise ValueError(f"key {number} is a {type(entry).__name__}, not an object")
    kid, alg, use = entry.get("kid"), entry.get("alg"), entry.get("use")
    name = f"key {number}" + (f" (kid {shown_value(kid)})" if isinstance(kid, str) else "")
    for field in ("kty", "kid", "alg", "use"):
        # RFC 7517 §4: each is a string; PyJWT raised TypeError on an `alg` list
        if entry.get(field) is not None and not isinstance(entry[field], str):
            raise ValueError(f"{name}: {field} must be a string, got {shown_value(entry[field])}")
    if use not in (None, "sig"):
        raise ValueError(f"{name}: its use is {shown_value(use)}, not 'sig'")
    if entry.get("kty") == "oct":
        raise ValueError(f"{name}: a shared secret (kty oct) goes in the HS256 secret setting")
    try:
        key = jwt.PyJWK(entry).key
    except (jwt.PyJWTError, TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{name}: {type(exc).__name__}: {shown_value(str(exc))}") from exc
    if isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        key = key.public_key()  # a private JWK also verifies, as its public half
    public, kind, algorithms = _kind(key)
    if alg is not None:
        if alg not in algorithms:
            raise ValueError(f"{name}: alg {shown_value(alg)} is not one of {sorted(algorithms)}")
        algorithms = frozenset({alg})
    return VerificationKey(public, algorithms, kid, False, f"JWKS {name}, {kind}")


def keys_for(keys: list[VerificationKey], alg: str, kid: str | None) -> list[VerificationKey]:
    """The keys that may have signed a token of ``alg`` and ``kid``: every key of its
    algorithm when it names no kid (an issuer need not), the kid's otherwise.

    Raises:
        KeyMismatch: no such key, with the reason (safe to show: keys are public).
    """
    named = [k for k in keys if k.any_kid or kid is None or k.kid == kid]
    if not named:
        raise KeyMismatch(f"no key with kid {shown_value(kid)} in the JWKS")
    fitting = [k for k in named if alg in k.algorithms]
    if fitting:
        return fitting
    if len(named) == 1:
        held = f"{named[0].source} takes {', '.join(sorted(named[0].algorithms))}"
    else:
        taken = sorted(set().union(*(k.algorithms for k in named)))
        held = f"the {len(named)} keys it could be take {', '.join(taken)}"
    raise KeyMismatch(f"token algorithm {shown_value(alg)} fits no configured key: {held}")
