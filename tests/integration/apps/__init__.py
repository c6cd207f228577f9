"""Small Faust apps the integration tests run as real worker processes, and how to run one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
#: a worker on a busy 2-core machine can take a while to join its group
READY_TIMEOUT_S = 90


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_faust_worker(
    app: Path, *, bootstrap: str, env: dict[str, str], workdir: Path, log_name: str
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``app`` as ``faust worker`` and wait until it logs Ready: the process, its log."""
    full_env = {**os.environ, **env, "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    full_env["PYTHONPATH"] = str(REPO)
    log = workdir / log_name
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(app),
                "--datadir",
                str(workdir / "faust"),
                "worker",
                "-l",
                "info",
                "--web-port",
                str(free_port()),
            ],
            cwd=workdir,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "Ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            end(proc)
            pytest.fail(f"{app.name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc, log


def end(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``, and kill it if it is still there after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def faust_worker(
    app: Path, *, bootstrap: str, env: dict[str, str], workdir: Path, log_name: str
) -> Iterator[Path]:
    """Run ``app`` as ``faust worker`` until it logs Ready; stop it on exit. Yields its log."""
    proc, log = start_faust_worker(
        app, bootstrap=bootstrap, env=env, workdir=workdir, log_name=log_name
    )
    try:
        yield log
    finally:
        end(proc)
