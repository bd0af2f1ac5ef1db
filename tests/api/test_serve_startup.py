"""How a ``raftlog serve`` process starts, run as an operator runs it: the admin token never on its command
line (``--admin-token-file`` or ``$RAFTLOG_ADMIN_TOKEN``; ``--admin-token T`` is refused in one line on
stderr with exit code 2, before anything is made)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from api import dev
from api.serve import SECRET_ENV, TOKEN_ENV

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {key: value for key, value in os.environ.items() if key not in (SECRET_ENV, TOKEN_ENV)}
ENV["PYTHONPATH"] = str(ROOT)
TOKEN = "an-admin-token-for-the-startup-test"
READY_S = 60.0


def serve(
    tmp_path: pathlib.Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``raftlog serve`` with a cluster secret and ``argv``, run until it exits (a refusal)."""
    secret = tmp_path / "cluster.secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    command = [sys.executable, "-m", "raftlog_cli", "serve", "--node-id", "n1", "--data-dir",
               str(tmp_path / "n1"), "--secret-file", str(secret), *argv]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**ENV, **(env or {})})


def assert_refused(done: subprocess.CompletedProcess[str], tmp_path: pathlib.Path, *words: str) -> str:
    """Exit code 2 and one line on stderr naming ``words``, nothing else said, nothing made."""
    told = done.stderr.strip()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and "\n" not in told and told.startswith("raftlog serve: "), done.stderr
    for word in words:
        assert word in told, told
    assert not (tmp_path / "n1").exists(), "nothing was made"
    return told


def loopback_addresses(port: int) -> list[str]:
    return ["--http", f"127.0.0.1:{dev.free_port()}", "--raft", f"127.0.0.1:{port}"]


def test_an_admin_token_on_the_command_line_is_refused(tmp_path: pathlib.Path) -> None:
    done = serve(tmp_path, *loopback_addresses(dev.free_port()), "--admin-token", TOKEN)
    told = assert_refused(done, tmp_path, "--admin-token-file FILE", f"${TOKEN_ENV}", "ps")
    assert TOKEN not in told
