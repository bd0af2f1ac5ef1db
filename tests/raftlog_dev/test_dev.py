"""``raftlog dev``: one supervisor per data folder, nodes probed as themselves, and stop/start/restart of
one node through the running supervisor, with cluster.json kept true and Ctrl-C stopping every node."""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from raftlog_client.local_cluster import alive
from raftlog_dev import control, layout, supervisor
from raftlog_dev.control import Answer, ControlError, Request
from tests.waiting import wait_for

ENV = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[2])}


def raftlog(*argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftlog_cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=ENV,
    )


def description(data: pathlib.Path) -> dict[str, Any]:
    with open(data / "cluster.json", encoding="utf-8") as f:
        return dict(json.load(f))


def node_entry(data: pathlib.Path, node_id: str) -> dict[str, Any]:
    return next(n for n in description(data)["nodes"] if n["id"] == node_id)


def ready_pid(url: str) -> int:
    with urllib.request.urlopen(url + "/status/ready", timeout=5) as answer:
        return int(json.loads(answer.read())["pid"])


class Supervised:
    """``raftlog dev`` in a child process (its own session, so SIGINT reaches it alone)."""

    def __init__(self, data: pathlib.Path, nodes: int = 1) -> None:
        self.data = data
        self.base_port = layout.free_base_port(nodes)
        data.mkdir(parents=True, exist_ok=True)
        self.output = data.parent / f"{data.name}-dev.out"
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "raftlog_cli", "dev", "--nodes", str(nodes), "--data-dir", str(data),
                 "--base-port", str(self.base_port)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=ENV,
            )  # fmt: skip
        wait_for(
            lambda: "up; cluster.json" in self.text() or self.process.poll() is not None,
            "cluster up",
            every_s=0.1,
        )
        assert self.process.poll() is None, self.text()

    def text(self) -> str:
        return self.output.read_text(encoding="utf-8", errors="replace")

    def interrupt(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(60)

    def close(self) -> None:
        if self.process.poll() is None:
            self.interrupt()


@pytest.fixture
def supervised(tmp_path: pathlib.Path) -> Iterator[Supervised]:
    running = Supervised(tmp_path / "data")
    try:
        yield running
    finally:
        running.close()


def test_restart_keeps_cluster_json_true_and_ctrl_c_stops_the_restarted_node(supervised: Supervised) -> None:
    data = supervised.data
    first = node_entry(data, "n1")
    assert first["state"] == "running" and ready_pid(first["http"]) == first["pid"]

    restarted = raftlog("dev", "restart", "n1", "--data-dir", str(data))
    assert restarted.returncode == 0, restarted.stderr
    second = node_entry(data, "n1")
    assert second["state"] == "running" and second["pid"] != first["pid"] and second["argv"] == first["argv"]
    assert not alive(first["pid"])
    assert ready_pid(second["http"]) == second["pid"]
    assert f"started (pid {second['pid']}) and ready" in restarted.stdout
    created = urllib.request.Request(
        second["http"] + "/v1/topics", data=b'{"name": "t"}', headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(created, timeout=30) as answer:
        assert answer.status == 201  # the restarted node serves
    with urllib.request.urlopen(second["schema_registry"] + "/schemas/types", timeout=30) as answer:
        assert json.load(answer) == ["JSON", "PROTOBUF", "AVRO"]  # cluster.json names the registry it serves

    # a crash (SIGKILL) and a start: the new process takes its data directory back
    killed = raftlog("dev", "stop", "n1", "--kill", "--data-dir", str(data))
    assert killed.returncode == 0 and "signal SIGKILL" in killed.stdout, killed.stderr
    assert node_entry(data, "n1")["pid"] is None and node_entry(data, "n1")["state"] == "stopped"
    assert not alive(second["pid"])
    started = raftlog("dev", "start", "n1", "--data-dir", str(data))
    assert started.returncode == 0, started.stderr
    third = node_entry(data, "n1")["pid"]
    with urllib.request.urlopen(second["http"] + "/topics/t", timeout=30) as answer:
        assert json.loads(answer.read())["name"] == "t"

    assert supervised.interrupt() == 0  # Ctrl-C
    assert not alive(third)
    assert node_entry(data, "n1")["state"] == "stopped" and not (data / "dev.sock").exists()


def test_a_second_raftlog_dev_on_the_same_folder_fails_at_once_and_leaves_everything_alone(
    supervised: Supervised,
) -> None:
    before = (supervised.data / "cluster.json").read_bytes()
    other_base = layout.free_base_port(1)
    second = raftlog(
        "dev", "--nodes", "1", "--data-dir", str(supervised.data), "--base-port", str(other_base)
    )
    assert second.returncode == 1
    refusal = second.stderr.strip()
    assert refusal.startswith(
        f"raftlog dev: data directory {supervised.data} is in use by raftlog dev "
        f"(pid {supervised.process.pid}, since "
    ) and refusal.endswith("; nothing was started"), refusal
    assert (supervised.data / "cluster.json").read_bytes() == before
    assert layout.busy_ports(layout.plan(1, other_base)[0]) == []  # it started nothing
    entry = node_entry(supervised.data, "n1")
    assert ready_pid(entry["http"]) == entry["pid"]  # and the first cluster serves on


def test_a_node_that_dies_is_reported_and_the_supervisor_can_start_it_again(supervised: Supervised) -> None:
    pid = node_entry(supervised.data, "n1")["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: node_entry(supervised.data, "n1")["state"] == "exited", "the death recorded", every_s=0.1
    )
    entry = node_entry(supervised.data, "n1")
    assert entry["pid"] is None and entry["exit_code"] == -signal.SIGKILL
    wait_for(lambda: "n1 exited with signal SIGKILL" in supervised.text(), "the death reported", every_s=0.1)
    assert supervised.process.poll() is None
    started = raftlog("dev", "start", "n1", "--data-dir", str(supervised.data))
    assert started.returncode == 0, started.stderr
    assert ready_pid(entry["http"]) == node_entry(supervised.data, "n1")["pid"]


def test_a_port_held_by_another_process_is_named_and_nothing_is_started(tmp_path: pathlib.Path) -> None:
    base = layout.free_base_port(1)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + layout.RAFT_PORT_OFFSET))
        squatter.listen()
        result = raftlog("dev", "--nodes", "1", "--data-dir", str(tmp_path), "--base-port", str(base))
    assert result.returncode == 1
    assert f"port {base + layout.RAFT_PORT_OFFSET} (n1's Raft) held by another process" in result.stderr
    assert not (tmp_path / "cluster.json").exists() and not (tmp_path / "n1").exists()


def test_a_refused_run_leaves_no_folder_it_made(tmp_path: pathlib.Path) -> None:
    base = layout.free_base_port(1)
    data = tmp_path / "new-data"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base))
        squatter.listen()
        result = raftlog("dev", "--nodes", "1", "--data-dir", str(data), "--base-port", str(base))
    assert result.returncode == 1 and "held by another process" in result.stderr
    assert not data.exists()  # not even an empty folder holding the lock


def test_a_serve_option_every_node_would_refuse_is_refused_once_and_nothing_is_started(
    tmp_path: pathlib.Path,
) -> None:
    data = tmp_path / "new-data"
    result = raftlog("dev", "--nodes", "1", "--data-dir", str(data), "--serve-arg=--retention-chek-ms=200")
    assert result.returncode == 2, result.stderr
    assert "--serve-arg: no such option: --retention-chek-ms=200" in result.stderr
    assert not data.exists()


def test_a_dead_node_is_reported_with_its_last_error_not_its_last_line() -> None:
    lines = [
        "2026-11-25 10:00:00,000 INFO raftlog_node.serve: serving",
        "2026-11-25 10:00:01,000 ERROR raftlog_node.serve: data directory data/n1 is full",
        "2026-11-25 10:00:02,000 INFO partitions.peers.client: closed connection from n4",
    ]
    assert supervisor.last_error(lines) == lines[1]
    traceback = [*lines[:1], "Traceback (most recent call last):", '  File "x.py", line 1']
    traceback.append("OSError: [Errno 5]")
    assert supervisor.last_error(traceback) == "OSError: [Errno 5]"
    assert (
        supervisor.last_error(lines[:1] + lines[2:]) is None
    )  # no error: the report says so, not the last line


STUB = textwrap.dedent(
    """
    import http.server, json, sys
    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"status": "ready", "node_id": "n1", "pid": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ready).serve_forever()
    """
)


def test_a_node_answered_for_by_another_process_is_an_error_naming_the_port(tmp_path: pathlib.Path) -> None:
    """Readiness counts only the process started here: an answer from another pid is never "up"."""
    node = layout.plan(1, layout.free_base_port(1))[0]
    running = supervisor.Supervisor(str(tmp_path), [node], str(tmp_path / "secret"))
    child = running.children["n1"]
    child.argv = [sys.executable, "-c", STUB, str(node.http_port)]  # answers as pid 1, not as itself
    running.start(child)
    try:
        problem = running.wait_ready([child])
    finally:
        running.stop_all()
    assert problem is not None and problem.startswith(
        f"port {node.http_port} (n1's HTTP) is answered by another process (n1, pid 1), not by n1 (pid "
    )


def test_without_a_running_raftlog_dev_a_restart_says_so(tmp_path: pathlib.Path) -> None:
    result = raftlog("dev", "restart", "n3", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith(f"raftlog dev: no raftlog dev is running on {tmp_path}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"not json\n", "not a line of JSON"),
        (b"[]\n", "expected a JSON object"),
        (b'{"action": "reboot", "node": "n1"}\n', "action 'reboot'"),
        (b'{"action": "stop", "node": ""}\n', "node ''"),
        (b'{"action": "start", "node": null}\n', "start needs a node id"),
        (b'{"action": "start", "node": "n1", "kill": true}\n', "kill applies to stop and restart"),
        (b'{"action": "stop", "node": "n1", "extra": 1}\n', "unknown fields ['extra']"),
        (b'{"action": "stop", "node": "n1", "python": "/usr/bin/python3"}\n', "with start or restart"),
        (b'{"action": "restart", "node": "n1", "python": 3}\n', "python 3: an interpreter's path"),
        (b'{"action": "stop", "node": "n1", "wait": false}\n', "wait False: true or false, with start"),
        (b'{"action": "start", "node": "n1", "wait": 0}\n', "wait 0: true or false"),
    ],
)
def test_a_malformed_control_request_is_refused_saying_why(line: bytes, words: str) -> None:
    with pytest.raises(ControlError, match=words.replace("[", r"\[").replace("]", r"\]")):
        Request.decode(line)


def test_requests_and_answers_round_trip() -> None:
    for request in (
        Request("restart", "n3", kill=True),
        Request("stop", None),
        Request("restart", "n2", python="/srv/raftlog-0.1.0/.venv/bin/python"),
        Request("start", "n1", wait=False),
    ):
        assert Request.decode(request.encode()) == request
    assert Answer.decode(Answer(False, "n3 is not running").encode()) == Answer(False, "n3 is not running")


def test_a_data_folder_too_deep_for_a_unix_socket_path_still_takes_control_requests(
    tmp_path: pathlib.Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    assert len(str(deep / control.SOCKET_NAME)) > 107
    listener = control.listen(str(deep))
    try:
        assert (deep / control.SOCKET_NAME).is_socket()
        asked = threading.Thread(
            target=lambda: answers.append(control.ask(str(deep), Request("stop", "n1"))), daemon=True
        )
        answers: list[Answer] = []
        asked.start()
        select.select([listener], [], [], 10)
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(10)
            assert Request.decode(control.read_line(connection)) == Request("stop", "n1")
            connection.sendall(Answer(True, "stopped").encode())
        asked.join(10)
        assert answers == [Answer(True, "stopped")]
    finally:
        listener.close()


def test_a_node_restarted_on_another_interpreter_is_refused_when_it_is_none(tmp_path: pathlib.Path) -> None:
    """``--python`` names an executable interpreter (checked before the node is stopped); a cluster is not
    started on one that is not."""
    assert "not an executable file" in (layout.interpreter_problem(str(tmp_path / "nothing")) or "")
    assert layout.interpreter_problem(sys.executable) is None
    started = raftlog("dev", "--data-dir", str(tmp_path / "data"), "--python", str(tmp_path / "nothing"))
    assert started.returncode == 2 and "not an executable file" in started.stderr, started.stderr
    assert not (tmp_path / "data").exists()
