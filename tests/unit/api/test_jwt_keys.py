"""JWT verification keys: malformed JWKS keys and token headers are 401s, never 500s."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from ragsift.api import create_web_app
from ragsift.api.auth import Authenticator, AuthError, JwtVerifier
from ragsift.errors import ConfigurationError
from ragsift.settings import ApiSettings
from tests.unit.api.conftest import RecordingApi

pytestmark = pytest.mark.unit

ISSUER, AUDIENCE = "https://id.example", "ragsift"
EC_KEY = ec.generate_private_key(ec.SECP256R1())
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(private: Any, **fields: Any) -> dict[str, Any]:
    public = private.public_key()
    algorithm = jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else None
    text = (algorithm or jwt.algorithms.ECAlgorithm).to_jwk(public)
    return {k: v for k, v in {**json.loads(text), **fields}.items() if v is not None}


def _jwks(tmp_path: Path, *keys: Any) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": list(keys)}))
    return path


def _settings(tmp_path: Path, **fields: Any) -> ApiSettings:
    return ApiSettings(
        keys_file=tmp_path / "none.json", jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **fields
    )


def _token(private: Any, alg: str, **headers: Any) -> str:
    now = int(time.time())
    claims = {"sub": "svc", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 300, "tenant_id": "alpha"}
    return jwt.encode(claims, private, alg, headers=headers or None)


def _with_header(token: str, **header: Any) -> str:
    """``token`` with its header replaced (PyJWT refuses to encode a non-string kid)."""
    encoded = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    return encoded + "." + token.split(".", 1)[1]


MALFORMED_KEYS = [
    pytest.param(_jwk(EC_KEY, kid=5, alg="ES256"), "kid must be a string", id="kid-int"),
    pytest.param(_jwk(EC_KEY, kid="k", alg=["ES256"]), "alg must be a string", id="alg-list"),
    pytest.param(_jwk(EC_KEY, kid="k", alg={"a": 1}), "alg must be a string", id="alg-dict"),
    pytest.param(_jwk(EC_KEY, kid="k", alg=5), "alg must be a string", id="alg-int"),
    pytest.param(_jwk(EC_KEY, kid="k", alg="RS256"), "Not an RSA key", id="alg-kind"),
    pytest.param(_jwk(EC_KEY, kid="k", alg="ES384"), "alg 'ES384' is not one of", id="alg-curve"),
    pytest.param(_jwk(EC_KEY, kid="k", alg="EdDSA"), "key 1 (kid 'k')", id="alg-eddsa"),
    pytest.param(_jwk(EC_KEY, kid="k", use="enc"), "not 'sig'", id="use-enc"),
    pytest.param(_jwk(EC_KEY, kid="k", x=5), "key 1 (kid 'k')", id="x-int"),
    pytest.param({"kty": "oct", "k": "c2VjcmV0"}, "kty oct", id="oct"),
    pytest.param({"kid": "k"}, "key 1", id="no-kty"),
    pytest.param("a string", "not an object", id="string"),
    pytest.param({"kty": "EC", "crv": "P-256", "kid": "k" * 5_000}, "...", id="long-kid"),
]


@pytest.mark.parametrize(("bad", "reason"), MALFORMED_KEYS)
def test_a_malformed_jwks_key_is_left_out_and_the_good_ones_still_verify(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: Any, reason: str
) -> None:
    # An `alg` list made PyJWT raise TypeError while loading: the API did not start.
    good = _jwk(EC_KEY, kid="good", alg="ES256")
    settings = _settings(tmp_path, jwt_jwks_file=_jwks(tmp_path, bad, good))
    with caplog.at_level(logging.WARNING, logger="ragsift.api.jwt_keys"):
        verifier = JwtVerifier(settings)
    assert reason in caplog.text
    assert all(len(r.getMessage()) < 400 for r in caplog.records)
    token = _token(EC_KEY, "ES256", kid="good")
    assert verifier.verify(token).tenants == frozenset({"alpha"})


@pytest.mark.parametrize(
    "document",
    ["[]", '{"keys": []}', '{"keys": {"kid": "k"}}', "not json", '{"keys": ["x", {"kty": 5}]}'],
)
def test_a_jwks_file_without_one_usable_key_is_refused_at_startup(
    tmp_path: Path, document: str
) -> None:
    (tmp_path / "jwks.json").write_text(document)
    with pytest.raises(ConfigurationError, match="JWKS"):
        JwtVerifier(_settings(tmp_path, jwt_jwks_file=tmp_path / "jwks.json"))


def test_a_key_of_another_kind_than_the_tokens_alg_is_401(tmp_path: Path) -> None:
    # An RSA key under the token's kid, the token ES256: PyJWT raised TypeError ("Expecting
    # a PEM-formatted key"), a 500 with a traceback, uncounted.
    jwks = _jwks(tmp_path, _jwk(RSA_KEY, kid="k1"))
    verifier = JwtVerifier(_settings(tmp_path, jwt_jwks_file=jwks))
    with pytest.raises(AuthError, match="fits no configured key") as caught:
        verifier.verify(_token(EC_KEY, "ES256", kid="k1"))
    assert "RS256" in str(caught.value)
    assert caught.value.status == 401


@pytest.mark.parametrize(
    "header",
    [
        {"alg": 5, "kid": "k1"},
        {"alg": ["ES256"], "kid": "k1"},
        {"alg": {"ES256": 1}},
        {"alg": None},
        {"alg": "ES256", "kid": 5},
        {"alg": "ES256", "kid": ["k1"]},
        {"alg": "ES256", "kid": "k" * 10_000},
        {"alg": "ES256", "kid": "\u202eкључ\x00"},
        {"alg": "ES256", "crit": "exp"},
    ],
)
def test_a_token_header_of_the_wrong_types_is_401(tmp_path: Path, header: Any) -> None:
    jwks = _jwks(tmp_path, _jwk(EC_KEY, kid="k1", alg="ES256"), _jwk(RSA_KEY, kid="k2"))
    auth = Authenticator.from_settings(_settings(tmp_path, jwt_jwks_file=jwks))
    token = _with_header(_token(EC_KEY, "ES256", kid="k1"), **header)
    with pytest.raises(AuthError) as caught:
        auth.authenticate(f"Bearer {token}", None)
    assert caught.value.status == 401
    assert len(str(caught.value)) < 300


def test_an_unexpected_error_in_a_check_is_a_401_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    auth = Authenticator.from_settings(
        _settings(tmp_path, jwt_jwks_file=_jwks(tmp_path, _jwk(EC_KEY)))
    )

    def broken(token: str) -> Any:
        raise TypeError("a library bug")

    assert auth.jwt is not None
    monkeypatch.setattr(auth.jwt, "verify", broken)
    with pytest.raises(AuthError, match="could not be checked") as caught:
        auth.authenticate("Bearer eyJ.a.b", None)
    assert caught.value.status == 401
    assert "a library bug" in caplog.text


async def test_malformed_keys_and_errors_are_counted_json_answers(
    tmp_path: Path, make_api: Callable[..., RecordingApi], monkeypatch: pytest.MonkeyPatch
) -> None:
    jwks = _jwks(tmp_path, _jwk(RSA_KEY, kid="k1"), _jwk(EC_KEY, kid=5))
    api = make_api(jwt_jwks_file=jwks, jwt_issuer=ISSUER, jwt_audience=AUDIENCE)

    def counted(status: str) -> float:
        labels = {"route": "/v1/query", "status": status}
        return api.metrics.registry.get_sample_value("ragsift_api_requests_total", labels) or 0

    body = {"query": "q", "timeout_s": 1}
    headers = {"Authorization": "Bearer " + _token(EC_KEY, "ES256", kid="k1")}
    async with TestClient(TestServer(create_web_app(api))) as client:
        response = await client.post("/v1/query", json=body, headers=headers)
        assert response.status == 401
        assert "fits no configured key" in (await response.json())["detail"]
        assert counted("401") == 1

        def broken(*_: Any) -> Any:
            raise RuntimeError("a bug the guard in Authenticator does not see")

        monkeypatch.setattr(api.auth, "authenticate", broken)
        response = await client.post("/v1/query", json=body, headers=headers)
        assert response.status == 500
        assert (await response.json())["error"] == "internal_error"
        assert counted("500") == 1
    assert api.sent == []


def test_a_token_without_kid_is_tried_against_every_key_of_its_algorithm(tmp_path: Path) -> None:
    # Only the JWKS's first key was tried: a token from the issuer's second key (during
    # a rotation, when both are published) was a 401 "Signature verification failed".
    old, new = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keys = (_jwk(RSA_KEY), _jwk(old), _jwk(other_rsa, alg="RS256"), _jwk(new, kid="new"))
    verifier = JwtVerifier(_settings(tmp_path, jwt_jwks_file=_jwks(tmp_path, *keys)))
    signers = ((old, "ES256"), (new, "ES256"), (RSA_KEY, "RS384"), (other_rsa, "RS256"))
    for private, alg in signers:
        assert verifier.verify(_token(private, alg)).tenants == frozenset({"alpha"})
    with pytest.raises(AuthError, match="Signature verification failed"):
        verifier.verify(_token(other_rsa, "RS384"))  # its JWK says RS256 only
    with pytest.raises(AuthError, match="Signature verification failed"):
        verifier.verify(_token(ec.generate_private_key(ec.SECP256R1()), "ES256"))
    expired = _token(new, "ES256")
    claims = jwt.decode(expired, options={"verify_signature": False})
    expired = jwt.encode({**claims, "exp": int(time.time()) - 3600}, new, "ES256")
    with pytest.raises(AuthError, match="expired"):  # the claim error, not the first key's
        verifier.verify(expired)
    with pytest.raises(AuthError, match="Signature verification failed"):
        verifier.verify(_token(old, "ES256", kid="new"))  # a kid still picks its own key


def _pem(private: Any) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.mark.parametrize(
    ("configured", "signer", "alg", "says"),
    [
        (
            RSA_KEY,
            EC_KEY,
            "ES256",
            "the public key file's RSA key takes PS256, RS256, RS384, RS512",
        ),
        (EC_KEY, RSA_KEY, "RS256", "the public key file's EC secp256r1 key takes ES256"),
        (EC_KEY, ec.generate_private_key(ec.SECP384R1()), "ES384", "key takes ES256"),
    ],
)
def test_a_token_whose_alg_does_not_fit_the_pem_key_says_so(
    tmp_path: Path, configured: Any, signer: Any, alg: str, says: str
) -> None:
    # PyJWT's message was "Expected one of <generator object ...>, got: RSAPublicKey".
    (tmp_path / "key.pem").write_bytes(_pem(configured))
    verifier = JwtVerifier(_settings(tmp_path, jwt_public_key_file=tmp_path / "key.pem"))
    with pytest.raises(AuthError) as caught:
        verifier.verify(_token(signer, alg))
    assert caught.value.status == 401
    assert "generator" not in str(caught.value)
    assert says in str(caught.value)
    own = "RS256" if isinstance(configured, rsa.RSAPrivateKey) else "ES256"
    assert verifier.verify(_token(configured, own, kid="any kid")).subject == "jwt:svc"


@pytest.mark.parametrize(
    "text",
    [
        b"not a pem",
        b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        "encrypted",
        "ed25519",
    ],
)
def test_a_public_key_file_that_verifies_nothing_is_refused_at_startup(
    tmp_path: Path, text: Any
) -> None:
    # It was read as text and handed to PyJWT per request: a TypeError or ValueError there.
    if text == "encrypted":
        text = EC_KEY.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    elif text == "ed25519":
        text = _pem(ed25519.Ed25519PrivateKey.generate())
    (tmp_path / "key.pem").write_bytes(text)
    with pytest.raises(ConfigurationError, match="no usable PEM public key"):
        JwtVerifier(_settings(tmp_path, jwt_public_key_file=tmp_path / "key.pem"))


@pytest.mark.parametrize(("private", "alg"), [(EC_KEY, "ES256"), (RSA_KEY, "RS256")])
def test_a_private_key_in_the_public_key_file_verifies_with_its_public_half(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, private: Any, alg: str
) -> None:
    # PyJWT verified with an EC private key, and raised AttributeError on an RSA one.
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (tmp_path / "key.pem").write_bytes(pem)
    verifier = JwtVerifier(_settings(tmp_path, jwt_public_key_file=tmp_path / "key.pem"))
    assert "holds a private key" in caplog.text
    assert verifier.verify(_token(private, alg)).subject == "jwt:svc"
