"""Where API keys live when ``RAGSIFT_API_KEYS_FILE`` is unset: in the data dir.

Until 2026-11-30 they went to ``.ragsift/api-keys.json`` under the working directory
even with ``RAGSIFT_DATA_DIR`` set elsewhere, so ``ragsift keys create`` run from one
directory and ``ragsift api`` from another (a service manager's) disagreed about which
keys exist. A file left at the old place is still read, with a warning, until moved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsift.api.auth import Authenticator
from ragsift.api.keys_file import resolve_keys_file
from ragsift.errors import ConfigurationError
from ragsift.settings import ApiSettings
from tests.unit.cli.conftest import Invoke, error_lines


def _create(cli: Invoke, env: dict[str, str]) -> str:
    result = cli(["keys", "create", "--tenant", "acme"], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_keys_go_to_the_data_dir_and_the_api_finds_them_there(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "srv" / "ragsift"
    env = {"RAGSIFT_DATA_DIR": str(data)}
    key = _create(cli, env)
    assert (data / "api-keys.json").is_file()
    assert not (tmp_path / ".ragsift").exists()  # nothing under the working directory
    shown = json.loads(cli(["settings"], env=env).stdout)
    assert shown["api"]["keys_file"] == str(data / "api-keys.json")
    # the API started from elsewhere, with the same data dir, accepts the key
    monkeypatch.chdir(tmp_path / "srv")
    path, note = resolve_keys_file(ApiSettings(), data)
    assert (path, note) == (data / "api-keys.json", None)
    auth = Authenticator.from_settings(ApiSettings(), keys_file=path)
    assert auth.authenticate(None, key).tenants == frozenset({"acme"})


def test_keys_left_under_the_working_directory_are_still_read_with_a_warning(
    cli: Invoke, tmp_path: Path
) -> None:
    key = _create(cli, {})  # no data dir set: .ragsift/ under the working directory
    old = tmp_path / ".ragsift" / "api-keys.json"
    assert old.is_file()
    data = tmp_path / "data"
    result = cli(["keys", "list"], env={"RAGSIFT_DATA_DIR": str(data)})
    assert result.exit_code == 0, result.output
    assert key.split("_")[1] in result.stdout
    [warning] = error_lines(result)
    assert warning.startswith(f"warning: API keys are read from {old}")
    assert f"move the file to {data / 'api-keys.json'}" in warning
    assert not data.exists()  # listing creates nothing
    # once the data dir has its own file, that one is read, without a word
    moved = data / "api-keys.json"
    data.mkdir()
    moved.write_bytes(old.read_bytes())
    revoke = cli(["keys", "revoke", key.split("_")[1]], env={"RAGSIFT_DATA_DIR": str(data)})
    assert revoke.exit_code == 0, revoke.output
    assert error_lines(revoke) == []
    assert json.loads(moved.read_text())["keys"][0]["revoked_at"]
    assert not json.loads(old.read_text())["keys"][0]["revoked_at"]


def test_a_keys_file_set_is_the_one_used_wherever_the_data_dir_is(
    cli: Invoke, tmp_path: Path
) -> None:
    _create(cli, {})  # a file at the old place, which must not be read
    chosen = tmp_path / "secrets" / "keys.json"
    env = {"RAGSIFT_DATA_DIR": str(tmp_path / "data"), "RAGSIFT_API_KEYS_FILE": str(chosen)}
    _create(cli, env)
    assert chosen.is_file()
    result = cli(["keys", "list"], env=env)
    assert error_lines(result) == []
    assert result.stdout.count("acme") == 1  # the chosen file's one key, not the old one's


def test_the_api_refusing_to_start_names_the_file_it_looked_in(tmp_path: Path) -> None:
    path, _ = resolve_keys_file(ApiSettings(), tmp_path / "data")
    with pytest.raises(ConfigurationError, match=f"no API keys in {path} "):
        Authenticator.from_settings(ApiSettings(), keys_file=path)
