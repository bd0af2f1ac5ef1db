"""A node forked by the fork server (``raftlog_node/forkserver.py``, the test suite's way of starting nodes)
is the node an exec makes: the same command line in ``/proc``, the same answers and exit codes, its output
in the file it was given, its own session, its exit reported; a launcher that dies takes a
``die_with_launcher`` node with it; a server that cannot serve a launch makes ``launch`` exec instead."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from waiting import wait_for

from raftlog_client.probe import ready
from raftlog_contract import READY_PATH
from raftlog_dev import layout
from raftlog_node import forkserver, launch

READY_S = 60.0
ANSWER_S = 30.0


@pytest.fixture
def server(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[bytes]]:
    """A fork server of its own, named by the environment as the suite's is."""
    process = _fork_server(tmp_path, monkeypatch)
    yield process
    process.terminate()
    process.wait(ANSWER_S)


def _fork_server(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> subprocess.Popen[bytes]:
    path = str(tmp_path / "forks.sock")
    with open(tmp_path / "forkserver.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "raftlog_node.forkserver", path, "--room", forkserver.room(), *extra],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    monkeypatch.setenv(launch.SOCKET_ENV, path)
    wait_for(lambda: os.path.exists(path) or process.poll() is not None, "the fork server's socket", ANSWER_S)
    return process


def _node_argv(root: pathlib.Path, *extra: str) -> tuple[list[str], str]:
    secret = root / "cluster.secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    secret.chmod(0o600)
    node = layout.plan(1, layout.free_base_port(1))[0]
    return [*layout.node_argv(node, [node], str(root), str(secret)), *extra], node.http


def _command_line(pid: int) -> list[str]:
    return [arg for arg in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") if arg]


@contextlib.contextmanager
def _running(process: launch.NodeProcess) -> Iterator[None]:
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(ANSWER_S)


@contextlib.contextmanager
def _serving(
    tmp_path: pathlib.Path, new_session: bool = False, die_with_launcher: bool = False
) -> Iterator[tuple[launch.ForkedNode, list[str], str]]:
    """A node forked as ``launch`` is asked, once it answers: its handle, argv and URL."""
    argv, url = _node_argv(tmp_path)
    with open(tmp_path / "n1.out", "wb") as out:
        node = launch.launch(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=new_session,
            die_with_launcher=die_with_launcher,
        )  # fmt: skip
    assert isinstance(node, launch.ForkedNode), "the fork server started it"
    with _running(node):
        wait_for(lambda: ready(url) or node.poll() is not None, f"ready; see {tmp_path}/n1.out", READY_S)
        yield node, argv, url


def test_a_forked_node_is_the_node_an_exec_makes(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path
) -> None:
    with _serving(tmp_path, new_session=True) as (node, argv, url):
        assert node.poll() is None, (tmp_path / "n1.out").read_text()
        assert _command_line(node.pid) == argv  # ps, and whoever finds a node by its command line
        assert os.getsid(node.pid) == node.pid  # its own session, as start_new_session asked
        assert os.readlink(f"/proc/{node.pid}/fd/1") == str(tmp_path / "n1.out")
        assert not {os.readlink(f"/proc/{node.pid}/fd/{fd}") for fd in (0, 1, 2)} & {"socket"}
        with urllib.request.urlopen(url + READY_PATH, timeout=5) as answer:
            assert json.loads(answer.read())["pid"] == node.pid  # the node answers as itself
        node.terminate()
        assert node.wait(ANSWER_S) == 0, (tmp_path / "n1.out").read_text()
    assert "stopping" in (tmp_path / "n1.out").read_text()


@pytest.mark.parametrize("bad", [["--http", "not-an-address"], ["--no-such-option"]])
def test_a_refused_start_answers_as_an_exec_would(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, bad: list[str]
) -> None:
    argv, _ = _node_argv(tmp_path, *bad)
    told = {}
    for how in ("forked", "exec'd"):
        if how == "exec'd":
            monkeypatch.delenv(launch.SOCKET_ENV)
        out_path = tmp_path / f"{how}.out"
        with open(out_path, "wb") as out:
            node = launch.launch(argv, stdout=out, stderr=subprocess.STDOUT)
        assert isinstance(node, launch.ForkedNode) == (how == "forked")
        with _running(node):
            code = node.wait(ANSWER_S)
        told[how] = (code, out_path.read_text().replace(str(tmp_path), "ROOT"))
    assert told["forked"] == told["exec'd"]
    assert told["forked"][0] == 2, told


def test_a_node_dies_with_its_launcher(server: subprocess.Popen[bytes], tmp_path: pathlib.Path) -> None:
    """A launcher (here a child Python) that is SIGKILLed: its node gets SIGTERM, as raftlog dev's nodes
    get the parent-death signal when an exec'd node's supervisor dies."""
    argv, url = _node_argv(tmp_path)
    script = (
        "import subprocess, sys; from raftlog_node import launch\n"
        f"node = launch.launch({argv!r}, stdout=open({str(tmp_path / 'n1.out')!r}, 'wb'), "
        "stderr=subprocess.STDOUT, start_new_session=True, die_with_launcher=True)\n"
        "print(type(node).__name__, node.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    kind, pid = launcher.stdout.readline().split()
    assert kind == "ForkedNode"
    try:
        wait_for(lambda: ready(url), f"ready; see {tmp_path}/n1.out", READY_S)
        launcher.kill()
        launcher.wait(ANSWER_S)
        wait_for(
            lambda: not pathlib.Path(f"/proc/{pid}").exists(), "the node gone with its launcher", ANSWER_S
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    assert "stopping" in (tmp_path / "n1.out").read_text(), "it was asked to stop (SIGTERM), not killed"


def test_a_request_the_server_cannot_serve_is_refused_and_it_goes_on(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path
) -> None:
    path = os.environ[launch.SOCKET_ENV]
    asks: list[dict[str, object]] = [
        {"version": 99},
        {"version": launch.PROTOCOL_VERSION, "argv": ["/bin/sh", "-c", "true"], "env": {}, "cwd": "/"},
        {"version": launch.PROTOCOL_VERSION, "argv": [sys.executable, "-m", "raftlog_node"], "cwd": "/"},
    ]
    for ask in asks:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(ANSWER_S)
            connection.connect(path)
            launch.send_message(connection, ask, [0, 1, 2])
            answer, fds = launch.receive_message(connection, fds_max=1)
        assert answer is not None and "error" in answer and not fds, answer
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:  # bytes that are no message
        connection.settimeout(ANSWER_S)
        connection.connect(path)
        connection.sendall(b"\xff\xff\xff\xffgarbage")
        assert b"error" in connection.recv(4096)
    argv, _ = _node_argv(tmp_path, "--no-such-option")
    node = launch.launch(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert isinstance(node, launch.ForkedNode) and node.wait(ANSWER_S) == 2, "it still forks nodes"
    assert server.poll() is None


def test_without_a_server_a_node_is_execd(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(launch.SOCKET_ENV, str(tmp_path / "no-server.sock"))
    argv, _ = _node_argv(tmp_path, "--no-such-option")
    node = launch.launch(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert isinstance(node, subprocess.Popen) and node.wait(ANSWER_S) == 2


def test_a_changed_source_file_makes_the_server_stale(tmp_path: pathlib.Path) -> None:
    """What the server checks before each fork: the imports it holds are the files on disk."""
    source = tmp_path / "module.py"
    source.write_text("X = 1\n")
    times = {str(source): source.stat().st_mtime_ns}
    assert not forkserver._stale(times)
    later = time.time_ns() + 1_000_000_000
    os.utime(source, ns=(later, later))
    assert forkserver._stale(times)
    source.unlink()
    assert forkserver._stale({str(source): later})
    watched = forkserver._source_times()
    assert any(path.endswith(os.path.join("raftlog_node", "forkserver.py")) for path in watched)
    assert not any(os.sep + ".venv" + os.sep in path for path in watched)


def test_a_request_trickled_in_holds_the_server_no_longer_than_its_bound(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path
) -> None:
    """A launcher that sends a byte at a time is answered with an error once REQUEST_TIMEOUT_S has passed
    since it connected, however long it goes on sending; the server then forks the next node."""
    path = os.environ[launch.SOCKET_ENV]
    claimed = 1000
    sent = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        connection.sendall(launch.HEADER.pack(claimed))
        started = time.monotonic()
        connection.settimeout(0.5)  # the pace of the trickle: a byte each half second, until answered
        answer = b""
        while not answer and sent < claimed and time.monotonic() - started < ANSWER_S:
            connection.sendall(b" ")
            sent += 1
            with contextlib.suppress(TimeoutError):
                answer = connection.recv(4096)
    assert b"error" in answer, answer
    assert sent < claimed, "the server waited for the whole trickle"
    argv, _ = _node_argv(tmp_path, "--no-such-option")
    node = launch.launch(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert isinstance(node, launch.ForkedNode) and node.wait(ANSWER_S) == 2


def test_a_stale_server_keeps_serving_the_nodes_it_forked_until_the_last_has_ended(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source file changed while a run's clusters are up: the server forks no more (the next launch is
    exec'd) but stays until its nodes end, since a ``die_with_launcher`` node dies with it (parent-death
    signal). Ending at once stopped every node of the run's still-running clusters."""
    watched = tmp_path / "watched.py"
    watched.write_text("X = 1\n")
    server = _fork_server(tmp_path, monkeypatch, "--watch", str(watched))
    try:
        with _serving(tmp_path, die_with_launcher=True) as (node, _, url):
            later = time.time_ns() + 1_000_000_000
            os.utime(watched, ns=(later, later))
            (tmp_path / "other").mkdir()
            refused, _ = _node_argv(tmp_path / "other", "--no-such-option")
            execd = launch.launch(refused, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert isinstance(execd, subprocess.Popen) and execd.wait(ANSWER_S) == 2, "stale: exec'd"
            assert "refused a launch: stale" in (tmp_path / "forkserver.log").read_text()
            assert server.poll() is None and node.poll() is None and ready(url), "its node still serves"
            node.terminate()
            assert node.wait(ANSWER_S) == 0, "its exit reported by the server, as before it was stale"
        assert server.wait(ANSWER_S) == 0, "and, its last node gone, the server ends"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(ANSWER_S)


def test_a_node_outlives_a_killed_server_and_its_handle_still_follows_it(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path
) -> None:
    """The server killed (not the launcher): a node launched without die_with_launcher goes on serving, its
    handle says it runs instead of failing, and signals and waits go through the node's pidfd."""
    with _serving(tmp_path, new_session=True) as (node, _, url):
        server.kill()
        server.wait(ANSWER_S)
        assert node.poll() is None and ready(url)
        node.terminate()
        assert node.wait(ANSWER_S) == launch.UNKNOWN_EXIT
    assert (
        not os.path.exists(f"/proc/{node.pid}")
        or "zombie" in pathlib.Path(f"/proc/{node.pid}/status").read_text()
    )


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid``'s network namespace listens on (``/proc/PID/net/tcp`` is its view)."""
    ports = set()
    for line in pathlib.Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A":  # LISTEN
            ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.needs("netns")
def test_the_fault_harness_shim_forks_into_its_network_namespace(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path
) -> None:
    """The fault harness's node (``ip netns exec NS python -m jepsen.nodeshim TRACE CLOCK ...``) is forked
    too: inside the namespace (it listens there, not here), with the command line the exec would give, and
    with the shim's hooks installed although the node's modules were imported before them (the fsync
    trace has the node's syncs)."""
    namespace = f"rlfork-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"], check=True)
        node_argv, url = _node_argv(tmp_path)
        trace, clock = tmp_path / "n1.fsync", tmp_path / "n1.clock"
        shim = [sys.executable, "-m", "jepsen.nodeshim", str(trace), str(clock), *node_argv[3:]]
        with open(tmp_path / "n1.out", "wb") as out:
            node = launch.launch(
                ["ip", "netns", "exec", namespace, *shim], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        assert isinstance(node, launch.ForkedNode), "the fork server started it"
        port = int(url.rsplit(":", 1)[1])
        with _running(node):
            wait_for(
                lambda: node.poll() is not None or port in _listening_ports(node.pid),
                f"listening in {namespace}; see {tmp_path}/n1.out", READY_S,
            )  # fmt: skip
            assert node.poll() is None, (tmp_path / "n1.out").read_text()
            assert os.stat(f"/proc/{node.pid}/ns/net").st_ino == os.stat(f"/run/netns/{namespace}").st_ino
            assert os.stat(f"/proc/{node.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
            assert port not in _listening_ports(os.getpid())
            assert _command_line(node.pid) == shim
            wait_for(
                lambda: trace.exists() and "sync\t" in trace.read_text(), "the node's fsyncs traced", READY_S
            )
            node.terminate()
            assert node.wait(ANSWER_S) == 0, (tmp_path / "n1.out").read_text()
    finally:
        subprocess.run(["ip", "netns", "del", namespace], check=False)


def test_a_launch_into_a_namespace_that_is_not_there_is_refused(
    server: subprocess.Popen[bytes], tmp_path: pathlib.Path
) -> None:
    """A namespace name that is no ``ip netns`` name, or names none: refused before any fork (no node
    starts in this process's namespace instead), and ``launch`` execs, which fails as ``ip`` does."""
    path = os.environ[launch.SOCKET_ENV]
    node_argv, _ = _node_argv(tmp_path)
    for name in ("../../proc/1/ns/net", f"rlfork-absent-{os.getpid()}"):
        ask = {
            "version": launch.PROTOCOL_VERSION, "argv": node_argv, "netns": name, "env": dict(os.environ),
            "cwd": str(tmp_path), "new_session": True, "die_with_launcher": False,
        }  # fmt: skip
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(ANSWER_S)
            connection.connect(path)
            launch.send_message(connection, ask, [0, 1, 2])
            answer, fds = launch.receive_message(connection, fds_max=1)
        assert answer is not None and "no network namespace" in str(answer.get("error")) and not fds, answer
    shim = [sys.executable, "-m", "jepsen.nodeshim", "trace", "clock"]
    assert launch.forkable(["ip", "netns", "exec", "x", *shim]) == ("x", shim)
    assert launch.forkable([sys.executable, "-m", "jepsen.runner"]) is None
    assert launch.forkable(["/other/python", "-m", "raftlog_node"]) is None
    assert server.poll() is None
