"""An id or a name that does not exist is refused input, as a bad option is: one
``error:`` line naming the value, exit 2 (``EXIT_USAGE`` in ``ragsift.cli.common``),
whichever command was given it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragsift.cli.common import EXIT_USAGE
from tests.unit.cli.conftest import error_lines, run_cli

pytestmark = pytest.mark.unit

#: The value each case names, so the test can check the message names it back.
BAD = "no-such-9f3e"
DATA = "{data}"

#: (arguments, the value the error line must name); DATA is the demo's data directory
CASES: list[tuple[list[str], str]] = [
    (["feedback", BAD, "--relevant", "--data-dir", DATA], BAD),
    (["feedback", "demo-0", "--relevant", "--tenant", BAD, "--data-dir", DATA], BAD),
    (["assess", BAD, "--data-dir", DATA], BAD),
    (["assess", "--query", "refund?", "--chunks", BAD, "-t", "demo", "--data-dir", DATA], BAD),
    (["documents", "--tenant", BAD, "--data-dir", DATA], BAD),
    (["documents", "--tenant", "demo", "--collection", BAD, "--data-dir", DATA], BAD),
    (["ask", "refund?", "--tenant", BAD, "--data-dir", DATA], BAD),
    (["ask", "refund?", "--tenant", "demo", "--collection", BAD, "--data-dir", DATA], BAD),
    (["calibrations", "remove", "--collection", BAD, "--data-dir", DATA], BAD),
    (["calibrations", "remove", "--tenant", BAD, "--data-dir", DATA], BAD),
    (["calibrations", "reprobe", "--collection", BAD, "--data-dir", DATA], BAD),
    (["calibrations", "reprobe", "-c", "default", "-t", BAD, "--data-dir", DATA], BAD),
    (["calibrations", "reprobe", "--tenant", BAD, "--data-dir", DATA], BAD),
    (["calibrations", "reprobe", "--tenant", BAD, "--json", "--data-dir", DATA], BAD),
    (["calibrate", "--collection", BAD, "--data-dir", DATA], BAD),
    (["keys", "revoke", BAD], BAD),
    (["tail", BAD], BAD),
    (["worker", BAD], BAD),
]


@pytest.fixture(scope="module")
def data(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo's data directory: a refusal must write nothing, but a
    regression that does should not spoil the shared one."""
    copy = tmp_path_factory.mktemp("unknown") / "data"
    shutil.copytree(demo_dir, copy)
    return copy


@pytest.mark.parametrize(
    ("args", "named"), CASES, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _) in enumerate(CASES)]
)
def test_an_unknown_id_or_name_exits_2_naming_it(
    data: Path, tmp_path: Path, args: list[str], named: str
) -> None:
    argv = [str(data) if a == DATA else a for a in args]
    env = {
        "RAGSIFT_API_KEYS_FILE": str(tmp_path / "keys.json"),
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
    }
    result = run_cli(argv, env=env)
    assert result.exit_code == EXIT_USAGE, result.output
    errors = error_lines(result)
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: ")
    assert named in errors[0]
    assert "Traceback" not in result.output
