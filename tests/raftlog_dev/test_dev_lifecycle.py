"""``raftlog dev`` as a user meets it: ``status``, ``stop`` of the whole cluster, the terminal going away
(a real pty closed), the supervisor killed outright, and the hints it prints working as printed."""

from __future__ import annotations

import json
import os
import pathlib
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

from test_dev import ENV, Supervised, description, raftlog

from raftlog_client.local_cluster import alive
from raftlog_dev import layout
from tests.waiting import wait_for


def node_pids(data: pathlib.Path) -> list[int]:
    return [n["pid"] for n in description(data)["nodes"] if n["pid"] is not None]


def test_status_then_stop_of_the_whole_cluster(tmp_path: pathlib.Path) -> None:
    supervised = Supervised(tmp_path / "data", nodes=2)
    try:
        data = str(supervised.data)
        status = raftlog("dev", "status", "--json", "--data-dir", data)
        assert status.returncode == 0, status.stdout + status.stderr
        seen = json.loads(status.stdout)
        assert (
            seen["healthy"] and seen["supervisor_alive"] and seen["supervisor_pid"] == supervised.process.pid
        )
        assert [(n["id"], n["state"], n["ready"]) for n in seen["nodes"]] == [
            ("n1", "running", True),
            ("n2", "running", True),
        ]
        table = raftlog("dev", "status", "--data-dir", data)
        assert table.returncode == 0 and re.search(r"^n2\s+running\s+\d+\s+yes\s+http://", table.stdout, re.M)
        pids = node_pids(supervised.data)

        stopped = raftlog("dev", "stop", "--data-dir", data)

        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.startswith("stopped n1, n2; raftlog dev exits")
        assert supervised.process.wait(30) == 0  # the supervisor exited by itself
        assert not any(alive(pid) for pid in pids)
        after = raftlog("dev", "status", "--json", "--data-dir", data)
        assert after.returncode == 1
        seen = json.loads(after.stdout)
        assert not seen["healthy"] and not seen["supervisor_alive"]
        assert {(n["state"], n["pid"]) for n in seen["nodes"]} == {("stopped", None)}
    finally:
        supervised.close()


def _status(data: str) -> tuple[int, dict[str, Any]]:
    result = raftlog("dev", "status", "--json", "--data-dir", data)
    return result.returncode, json.loads(result.stdout)


def test_status_is_unhealthy_while_a_node_is_stopped_or_killed(tmp_path: pathlib.Path) -> None:
    supervised = Supervised(tmp_path / "data", nodes=2)
    try:
        data = str(supervised.data)
        assert raftlog("dev", "stop", "n2", "--data-dir", data).returncode == 0
        code, seen = _status(data)
        assert (code, seen["healthy"]) == (1, False), seen
        assert raftlog("dev", "start", "n2", "--data-dir", data).returncode == 0
        code, seen = _status(data)
        assert (code, seen["healthy"]) == (0, True), seen
        os.kill(node_pids(supervised.data)[1], signal.SIGKILL)
        wait_for(lambda: _status(data)[0] == 1, "status to see the killed node", timeout_s=30, every_s=0.1)
        assert _status(data)[1]["healthy"] is False
    finally:
        supervised.close()


def test_status_of_a_folder_without_a_cluster(tmp_path: pathlib.Path) -> None:
    result = raftlog("dev", "status", "--data-dir", str(tmp_path))
    assert (
        result.returncode == 3
        and "no cluster in" in result.stdout
        and "raftlog dev --data-dir" in result.stdout
    )


def _readable(fd: int, timeout_s: float) -> bool:
    """poll, not select: a test process may hold more than select's 1024 descriptors."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def _read_until(fd: int, text: str, timeout_s: float) -> str:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while text.encode() not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        if _readable(fd, 0.5):
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child is gone
                break
            seen += chunk
    return seen.decode(errors="replace")


def test_closing_the_terminal_stops_every_node(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    argv = [sys.executable, "-m", "raftlog_cli", "dev", "--nodes", "2", "--data-dir", str(data)]
    argv += ["--base-port", str(layout.free_base_port(2))]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: raftlog dev with the pty as its controlling terminal
        # as in a user's terminal, not as in a run under nohup (SIGHUP ignored, and kept so across exec:
        # raftlog dev then leaves it ignored, as nohup asks)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.execve(sys.executable, argv, ENV)
    try:
        _read_until(terminal, "up; cluster.json", 90)
        pids = node_pids(data)
        assert len(pids) == 2 and all(alive(p) for p in pids)
    finally:
        os.close(terminal)  # the terminal goes away: SIGHUP to its session
    _, status = os.waitpid(pid, 0)
    wait_for(lambda: not any(alive(p) for p in pids), "every node gone", timeout_s=30, every_s=0.1)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_a_supervisor_killed_outright_leaves_no_node_behind(tmp_path: pathlib.Path) -> None:
    supervised = Supervised(tmp_path / "data", nodes=1)
    pids = node_pids(supervised.data)
    supervised.process.send_signal(signal.SIGKILL)
    supervised.process.wait(10)
    wait_for(
        lambda: not any(alive(p) for p in pids),
        "the node gone with its supervisor",
        timeout_s=30,
        every_s=0.1,
    )


def _request(command: str) -> tuple[int, Any]:
    """A printed ``curl -s [-XPOST] URL [-H h] [-d body]`` line, sent as it says."""
    words = shlex.split(command)
    assert words[:2] == ["curl", "-s"], command
    method, headers, body, url = "GET", {}, None, None
    rest = iter(words[2:])
    for word in rest:
        if word.startswith("-X"):
            method = word[2:]
        elif word == "-H":
            name, _, value = next(rest).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            body = next(rest).encode()
        else:
            url = word
    assert url is not None, command
    with urllib.request.urlopen(
        urllib.request.Request(url, body, headers, method=method), timeout=30
    ) as answer:
        return answer.status, json.loads(answer.read())


def test_the_printed_hints_work_in_sequence(tmp_path: pathlib.Path) -> None:
    supervised = Supervised(tmp_path / "data", nodes=1)
    try:
        hints = [line.strip() for line in supervised.text().splitlines() if line.strip().startswith("curl ")]
        assert len(hints) == 3, supervised.text()
        created, produced, fetched = (_request(h) for h in hints)
        assert created[0] == 201 and produced[0] == 200
        assert [(r["key"], r["value"]) for r in fetched[1]] == [("k", {"hello": "world"})]
        control = [line.strip() for line in supervised.text().splitlines() if " dev status " in line]
        # as printed, from the directory raftlog dev ran in, with no .venv on the PATH (a user's shell)
        venv = os.path.dirname(sys.executable)
        path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv)
        status = subprocess.run(["bash", "-c", control[0]], capture_output=True, text=True, timeout=60,
                                env={**ENV, "PATH": path})  # fmt: skip
        assert status.returncode == 0, (control[0], status.stdout, status.stderr)
        assert "n1" in status.stdout
    finally:
        supervised.close()
