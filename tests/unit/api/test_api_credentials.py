"""API keys stored hashed, JWT verification, and the key-management CLI."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from typer.testing import CliRunner

from ragsift.api.auth import Authenticator, AuthError, JwtVerifier, KeyStore
from ragsift.cli import app
from ragsift.errors import ConfigurationError
from ragsift.settings import ApiSettings

SECRET = "a-test-secret-of-at-least-32-bytes!!"
ISSUER, AUDIENCE = "https://id.example", "ragsift"


def test_keys_are_stored_as_hashes_only(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key, record = store.create(["alpha"], ["query"], "ci")
    text = (tmp_path / "keys.json").read_text()
    assert key not in text
    assert key.split("_", 2)[2] not in text
    assert record.sha256 in text
    assert (tmp_path / "keys.json").stat().st_mode & 0o077 == 0
    principal = KeyStore(tmp_path / "keys.json").lookup(key)
    assert principal is not None
    assert principal.tenants == frozenset({"alpha"})


@pytest.mark.parametrize(
    ("tenants", "scopes"),
    [
        ([], ["query"]),
        (["bad tenant"], ["query"]),
        (["acme\n"], ["query"]),  # the pattern's $ let a trailing newline through re.match
        (["a"], ["root"]),
        (["a"], []),
    ],
)
def test_bad_key_requests_are_refused(
    tmp_path: Path, tenants: list[str], scopes: list[str]
) -> None:
    with pytest.raises(ConfigurationError):
        KeyStore(tmp_path / "keys.json").create(tenants, scopes)


def test_a_corrupt_keys_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="unreadable API keys file"):
        KeyStore(tmp_path / "keys.json").records()


def test_a_keys_file_with_one_id_twice_or_another_version_is_refused(tmp_path: Path) -> None:
    # Two records of id "a": `keys list` showed the second, and `keys revoke a` rewrote
    # the file without the first: a key's record deleted, not revoked.
    store = KeyStore(tmp_path / "keys.json")
    store.create(["alpha"], ["query"])
    data = json.loads((tmp_path / "keys.json").read_text())
    twin = {**data["keys"][0], "tenants": ["beta"], "label": "twin"}
    (tmp_path / "keys.json").write_text(json.dumps({**data, "keys": [*data["keys"], twin]}))
    with pytest.raises(ConfigurationError, match="appears twice"):
        KeyStore(tmp_path / "keys.json").records()
    (tmp_path / "keys.json").write_text(json.dumps({**data, "version": 2}))
    with pytest.raises(ConfigurationError, match="reads version 1"):
        KeyStore(tmp_path / "keys.json").records()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tenants", ["*"], "tenants must match"),
        ("tenants", ["../x"], "tenants must match"),
        ("tenants", ["alpha\n"], "tenants must match"),
        ("tenants", [], "tenants must match"),
        ("scopes", ["root"], "scopes must be some of"),
        ("scopes", [], "scopes must be some of"),
    ],
)
def test_a_hand_edited_key_with_what_keys_create_refuses_is_refused(
    tmp_path: Path, field: str, value: list[str], message: str
) -> None:
    store = KeyStore(tmp_path / "keys.json")
    store.create(["alpha"], ["query"])
    data = json.loads((tmp_path / "keys.json").read_text())
    data["keys"][0][field] = value
    (tmp_path / "keys.json").write_text(json.dumps(data))
    with pytest.raises(ConfigurationError, match=message):
        KeyStore(tmp_path / "keys.json").records()


def test_a_keys_file_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    # A directory where the file should be (a mis-mounted Secret) used to escape as
    # IsADirectoryError with a traceback; a permission problem likewise.
    (tmp_path / "keys.json").mkdir()
    with pytest.raises(ConfigurationError, match="cannot read the API keys file"):
        KeyStore(tmp_path / "keys.json").records()


def test_a_same_size_replace_within_the_mtime_granularity_is_read(tmp_path: Path) -> None:
    # The file was cached by (mtime, size): a replace of the same size whose mtime
    # matched (coarse filesystems, or a copy that kept it) left a revoked key working.
    path = tmp_path / "keys.json"
    store = KeyStore(path)
    key, record = store.create(["alpha"], ["query"])
    assert store.lookup(key) is not None
    before = path.stat()
    replaced = path.read_text().replace(record.sha256, "0" * len(record.sha256))
    (tmp_path / "new.json").write_text(replaced)
    os.utime(tmp_path / "new.json", ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(tmp_path / "new.json", path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert store.lookup(key) is None


def _settings(tmp_path: Path, **overrides: Any) -> ApiSettings:
    fields: dict[str, Any] = {
        "keys_file": tmp_path / "none.json",
        "jwt_hs256_secret": SECRET,
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
    }
    return ApiSettings(**{**fields, **overrides})


def _claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "sub": "svc-1",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": now + 300,
        "tenant_id": "alpha",
        "scope": "query read",
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def test_a_valid_hs256_token_names_tenant_and_scopes(tmp_path: Path) -> None:
    auth = Authenticator.from_settings(_settings(tmp_path))
    principal = auth.authenticate(f"Bearer {jwt.encode(_claims(), SECRET)}", None)
    assert principal.tenants == frozenset({"alpha"})
    assert principal.scopes == frozenset({"query", "read"})


@pytest.mark.parametrize(
    "claims",
    [
        _claims(exp=int(time.time()) - 3600),
        _claims(iss="https://evil.example"),
        _claims(aud="someone-else"),
        _claims(tenant_id=None),
        _claims(tenant_id={"nested": ["alpha"]}),
        _claims(tenant_id=["alpha\n"]),  # a trailing newline passed re.match and $
        _claims(tenant_id="alpha beta"),  # one tenant with a space: was alpha and beta
        _claims(exp=None),
    ],
)
def test_bad_tokens_are_401(tmp_path: Path, claims: dict[str, Any]) -> None:
    auth = Authenticator.from_settings(_settings(tmp_path))
    with pytest.raises(AuthError) as caught:
        auth.authenticate(f"Bearer {jwt.encode(claims, SECRET)}", None)
    assert caught.value.status == 401


def test_a_string_tenant_claim_is_one_tenant_and_a_scope_string_is_split(
    tmp_path: Path,
) -> None:
    auth = Authenticator.from_settings(_settings(tmp_path))
    token = jwt.encode(_claims(tenant_id="alpha", scope="query read"), SECRET)
    principal = auth.authenticate(f"Bearer {token}", None)
    assert principal.tenants == frozenset({"alpha"})
    assert principal.scopes == frozenset({"query", "read"})
    token = jwt.encode(_claims(tenant_id="acme corp"), SECRET)
    with pytest.raises(AuthError, match="names no tenant"):
        auth.authenticate(f"Bearer {token}", None)


def test_wrong_signature_and_alg_none_are_401(tmp_path: Path) -> None:
    auth = Authenticator.from_settings(_settings(tmp_path))
    for token in (
        jwt.encode(_claims(), "another-secret-of-at-least-32-bytes"),
        jwt.encode(_claims(), None, algorithm="none"),
    ):
        with pytest.raises(AuthError):
            auth.authenticate(f"Bearer {token}", None)


@pytest.mark.parametrize(
    "token", ["eyJ\udcff.a.b", "rsk_abc_\udcff", "eyJ\x00.a.b", "eyJhbGciOiJIUzI1NiJ9.é.x"]
)
def test_a_credential_that_is_not_printable_ascii_is_401(tmp_path: Path, token: str) -> None:
    # A header's bytes that are not UTF-8 arrive as surrogates: PyJWT and the key hash
    # raised UnicodeEncodeError on them, a 500.
    auth = Authenticator.from_settings(_settings(tmp_path), keys_file=tmp_path / "k.json")
    for authorization, api_key in ((f"Bearer {token}", None), (None, token)):
        with pytest.raises(AuthError) as caught:
            auth.authenticate(authorization, api_key)
        assert caught.value.status == 401


def test_an_algorithm_name_is_shown_cut_short(tmp_path: Path) -> None:
    auth = Authenticator.from_settings(_settings(tmp_path))
    header = base64.urlsafe_b64encode(json.dumps({"alg": "X" * 5_000}).encode()).rstrip(b"=")
    token = header.decode() + "." + jwt.encode(_claims(), SECRET).split(".", 1)[1]
    with pytest.raises(AuthError) as caught:
        auth.authenticate(f"Bearer {token}", None)
    assert len(str(caught.value)) < 200


def test_es256_token_verified_against_a_jwks_file(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "ES256"}]}))
    settings = _settings(tmp_path, jwt_hs256_secret=None, jwt_jwks_file=jwks)
    verifier = JwtVerifier(settings)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    token = jwt.encode(_claims(tenant_id=["alpha", "beta"]), pem, "ES256", headers={"kid": "k1"})
    assert verifier.verify(token).tenants == frozenset({"alpha", "beta"})
    # an HS256 token signed with the public key's bytes (alg confusion) is refused
    forged = jwt.encode(_claims(), SECRET, "HS256")
    with pytest.raises(AuthError):
        verifier.verify(forged)


@pytest.mark.parametrize("secret", ["!", "a" * 31, "é" * 15])
def test_an_hs256_secret_shorter_than_32_bytes_is_refused_at_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    # A 1-byte secret was accepted: any token it signed gives it away to a brute force.
    with pytest.raises(ConfigurationError, match="at least 32") as caught:
        Authenticator.from_settings(_settings(tmp_path, jwt_hs256_secret=secret))
    assert secret not in str(caught.value)
    monkeypatch.setenv("RAGSIFT_API_KEYS_FILE", str(tmp_path / "keys.json"))
    monkeypatch.setenv("RAGSIFT_API_JWT_HS256_SECRET", secret)
    monkeypatch.setenv("RAGSIFT_API_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("RAGSIFT_API_JWT_AUDIENCE", AUDIENCE)
    refused = CliRunner().invoke(app, ["api"])
    assert refused.exit_code == 2
    assert "RAGSIFT_API_JWT_HS256_SECRET" in refused.output
    assert JwtVerifier(_settings(tmp_path, jwt_hs256_secret="é" * 16))  # 32 bytes


def test_jwt_needs_issuer_and_audience(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="jwt_issuer"):
        ApiSettings(jwt_hs256_secret=SECRET)


def test_keys_cli_create_list_revoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_API_KEYS_FILE", str(tmp_path / "keys.json"))
    runner = CliRunner()
    created = runner.invoke(app, ["keys", "create", "--tenant", "alpha", "--scope", "query"])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("rsk_")
    key_id = key.split("_")[1]
    listed = runner.invoke(app, ["keys", "list"])
    assert key_id in listed.stdout
    assert key not in listed.stdout
    assert runner.invoke(app, ["keys", "revoke", key_id]).exit_code == 0
    assert KeyStore(tmp_path / "keys.json").lookup(key) is None
    assert runner.invoke(app, ["keys", "revoke", "no-such-id"]).exit_code == 2


def test_api_refuses_insecure_mode_off_loopback_and_no_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_API_KEYS_FILE", str(tmp_path / "keys.json"))
    runner = CliRunner()
    exposed = runner.invoke(app, ["api", "--insecure-no-auth", "--host", "0.0.0.0"])
    assert exposed.exit_code == 2
    assert "loopback" in exposed.output
    no_keys = runner.invoke(app, ["api"])
    assert no_keys.exit_code == 2
    assert "ragsift keys create" in no_keys.output


def test_openapi_documents_security_and_auth_errors() -> None:
    from ragsift.api import openapi_document

    doc = openapi_document()
    assert set(doc["components"]["securitySchemes"]) == {"bearerAuth", "apiKeyHeader"}
    assert doc["security"]
    post = doc["paths"]["/v1/query"]["post"]["responses"]
    assert {"401", "403", "415", "413"} <= set(post)
    assert {"401", "403"} <= set(doc["paths"]["/v1/queries/{query_id}"]["get"]["responses"])
    assert "tenant_id" not in doc["components"]["schemas"]["QueryRequest"].get("required", [])
