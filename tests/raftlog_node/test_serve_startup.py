"""How a ``raftlog serve`` process starts, run as an operator runs it: the admin token never on its command
line (``--admin-token-file`` or ``$RAFTLOG_ADMIN_TOKEN``; ``--admin-token T`` is refused), what it writes
its owner's alone (directories 0700, files 0600), every address it cannot serve on refused in one line on
stderr with exit code 2 before anything is made (no traceback), and ``--require-auth`` beyond loopback
refused without TLS unless ``--allow-plaintext-auth`` says the network is closed, which it then warns of."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from serve_args import args_for, token_file
from waiting import wait_for

from raftlog_contract import ADMIN_TOPICS_PATH, READY_PATH, partition_path
from raftlog_dev import layout
from raftlog_dev.certificates import dev_certificates
from raftlog_node.launch import launch
from raftlog_node.options import SECRET_ENV, TOKEN_ENV, ServeConfigError
from raftlog_node.settings import node_config

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
    secret.chmod(0o600)
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
    return ["--http", f"127.0.0.1:{layout.free_port()}", "--raft", f"127.0.0.1:{port}"]


def test_an_admin_token_on_the_command_line_is_refused(tmp_path: pathlib.Path) -> None:
    done = serve(tmp_path, *loopback_addresses(layout.free_port()), "--admin-token", TOKEN)
    told = assert_refused(done, tmp_path, "--admin-token-file FILE", f"${TOKEN_ENV}", "ps")
    assert TOKEN not in told


@contextlib.contextmanager
def held(port: int, udp: bool = False) -> Iterator[None]:
    """Another process's socket on 127.0.0.1:``port`` (a listener, or a bound UDP socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", port))
        if not udp:
            other.listen()
        yield


@pytest.mark.parametrize(
    ("option", "udp"),
    [("--http", False), ("--raft", False), ("--gossip", False), ("--gossip", True), ("--kafka", False)],
)
def test_a_port_in_use_is_one_line_naming_its_option(tmp_path: pathlib.Path, option: str, udp: bool) -> None:
    ports = {name: layout.free_port() for name in ("--http", "--raft", "--gossip", "--kafka")}
    argv = [part for name, port in ports.items() for part in (name, f"127.0.0.1:{port}")]
    with held(ports[option], udp):
        done = serve(tmp_path, *argv)
    assert_refused(done, tmp_path, f"{option} 127.0.0.1:{ports[option]}: cannot listen there", "in use")


def test_an_address_it_cannot_serve_on_is_one_line_naming_its_option(tmp_path: pathlib.Path) -> None:
    port = layout.free_port()
    closed_network = ["--allow-unauthenticated"]
    cases = [
        (["--http", f"127.0.0.1:{port}", "--raft", f"0.0.0.0:{port + 1}"], f"--raft 0.0.0.0:{port + 1}",
         "wildcard"),
        (["--http", f"0.0.0.0:{port}", "--raft", f"127.0.0.1:{port + 1}", *closed_network],
         f"--gossip 0.0.0.0:{port + 200} (default: the --http host, port + 200)", "wildcard"),
        (["--http", f"127.0.0.1:{port}", "--raft", f"no-such-host.invalid:{port + 1}"],
         f"--raft no-such-host.invalid:{port + 1}: 'no-such-host.invalid' does not resolve", ""),
        (["--http", f"192.0.2.77:{port}", "--raft", f"127.0.0.1:{port + 1}", *closed_network],
         f"--http 192.0.2.77:{port}: cannot listen there", "assign"),
        (["--http", "127.0.0.1:70000", "--raft", f"127.0.0.1:{port + 1}"], "--http '127.0.0.1:70000'",
         "HOST:PORT"),
    ]  # fmt: skip
    for argv, named, why in cases:
        assert_refused(serve(tmp_path, *argv, env={TOKEN_ENV: TOKEN}), tmp_path, named, why)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + READY_PATH, timeout=5) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def node_process(root: pathlib.Path, *serve_args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """One real node process under ``root`` (its output in ``root/n1.out``), ready; (process, HTTP URL)."""
    secret = root / "cluster.secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    secret.chmod(0o600)
    node = layout.plan(1, layout.free_base_port(1))[0]
    argv = [*layout.node_argv(node, [node], str(root), str(secret)), *serve_args]
    with open(root / "n1.out", "wb") as out:
        process = launch(argv, stdout=out, stderr=subprocess.STDOUT, env=ENV)
    try:
        wait_for(
            lambda: _ready(node.http) or process.poll() is not None, f"ready; see {root}/n1.out", READY_S
        )
        assert process.poll() is None, (root / "n1.out").read_text()
        yield process, node.http
    finally:
        process.terminate()
        process.wait(30)


def call(method: str, url: str, body: object, token: str | None = None) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


def test_a_node_takes_its_token_from_a_file_and_keeps_what_it_writes_to_its_owner(
    tmp_path: pathlib.Path,
) -> None:
    data = tmp_path / "n1"
    data.mkdir(mode=0o755)  # as an older version, or an operator, made it
    with node_process(tmp_path, *token_file(tmp_path, TOKEN)) as (process, url):
        assert TOKEN not in pathlib.Path(f"/proc/{process.pid}/cmdline").read_text()
        topic = {"name": "private", "partitions": 1, "replication_factor": 1}
        assert call("POST", url + ADMIN_TOPICS_PATH, topic) == 401
        assert call("POST", url + ADMIN_TOPICS_PATH, topic, TOKEN) == 201
        records = {"records": [{"key": "k", "value": {"secret": "value"}}]}
        deadline = time.monotonic() + READY_S
        while (status := call("POST", url + partition_path("private", 0), records)) != 200:
            assert status == 503 and time.monotonic() < deadline, status  # its leader is elected meanwhile
            time.sleep(0.2)
    written = [path for path in data.rglob("*") if path.is_file()]
    assert any(path.suffix == ".log" and path.stat().st_size > 0 for path in written), written  # a segment
    exposed = [f"{path} {stat.S_IMODE(path.lstat().st_mode):o}" for path in [data, *data.rglob("*")]
               if stat.S_IMODE(path.lstat().st_mode) != (0o700 if path.is_dir() else 0o600)]  # fmt: skip
    assert not exposed, exposed


def test_require_auth_beyond_loopback_needs_tls_or_a_closed_network(tmp_path: pathlib.Path) -> None:
    token = token_file(tmp_path)
    exposed = ["--http", "10.1.2.3:9001", "--gossip", "10.1.2.3:9201", "--require-auth", *token]
    peer_exposed = ["--http", "127.0.0.1:9001", "--peer", "n2,10.1.2.4:9001,10.1.2.4:9101", "--require-auth"]
    for argv in (exposed, [*peer_exposed, *token]):
        with pytest.raises(ServeConfigError) as refused:
            node_config(args_for(tmp_path, *argv))
        told = str(refused.value)
        assert (
            "10.1.2." in told
            and "--tls-cert FILE --tls-key FILE" in told
            and "--allow-plaintext-auth" in told
        )
        node_config(args_for(tmp_path, *argv, "--allow-plaintext-auth"))
    certificates = dev_certificates(str(tmp_path / "tls"))
    tls = [
        "--tls-cert",
        certificates.node_cert,
        "--tls-key",
        certificates.node_key,
        "--tls-ca",
        certificates.ca,
    ]
    node_config(args_for(tmp_path, *exposed, *tls))
    for pointless in ([*exposed, *tls], ["--http", "127.0.0.1:9001"]):
        with pytest.raises(
            ServeConfigError, match="--allow-plaintext-auth goes with --require-auth without TLS"
        ):
            node_config(args_for(tmp_path, *pointless, "--allow-plaintext-auth"))
    node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", "--require-auth", *token))  # loopback only


def test_a_node_refuses_plaintext_auth_beyond_loopback_and_warns_when_allowed(tmp_path: pathlib.Path) -> None:
    peer = ["--peer", "n2,192.0.2.77:9001,192.0.2.77:9101"]  # a peer it calls over the network, in clear
    argv = [*loopback_addresses(layout.free_port()), *peer, "--require-auth", *token_file(tmp_path)]
    done = serve(tmp_path, *argv)
    assert_refused(
        done, tmp_path, "refusing --require-auth without TLS beyond loopback", "--allow-plaintext-auth"
    )
    secret = tmp_path / "cluster.secret"
    command = [sys.executable, "-m", "raftlog_node", "--node-id", "n1", "--data-dir", str(tmp_path / "n1"),
               "--secret-file", str(secret), *argv, "--allow-plaintext-auth"]  # fmt: skip
    output = tmp_path / "n1.out"
    with open(output, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=ENV)
    try:  # the warning comes before the node starts; its peer never answers, so it is never ready
        deadline = time.monotonic() + READY_S
        while not (warned := [line for line in output.read_text().splitlines() if " WARNING " in line]):
            assert process.poll() is None, output.read_text()
            assert time.monotonic() < deadline, f"no warning within {READY_S} s: {output.read_text()}"
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(30)
    assert "--allow-plaintext-auth" in warned[0] and "in clear" in warned[0], warned


def test_a_secrets_file_others_may_read_is_warned_of(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    private = token_file(tmp_path)  # 0600
    _, _, token = node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", *private))
    assert token == "t0k" and not caplog.records
    os.chmod(private[1], 0o644)
    _, _, token = node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", *private))
    assert token == "t0k" and [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"--admin-token-file {private[1]} is readable by others than its owner: chmod 600 it")
    ]
    caplog.clear()
    os.chmod(private[1], 0o600)
    args = args_for(tmp_path, "--http", "127.0.0.1:9001", *private)
    (tmp_path / "secret").chmod(0o640)  # args_for's cluster secret
    node_config(args)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"--secret-file {tmp_path / 'secret'} is readable by others than its owner: chmod 600 it")
    ]


def test_a_node_whose_data_keeps_levels_above_its_code_refuses_to_run(tmp_path: pathlib.Path) -> None:
    """A data directory that has seen a feature finalized above what this code supports (a newer release
    ran here, then this one was started on it): the node exits 1 saying why, before it serves anything."""
    from partitions.features import SUPPORTED
    from partitions.metadata.local_levels import FINALIZED_FILE

    secret = tmp_path / "cluster.secret"
    secret.write_text("a-cluster-secret-of-enough-bytes\n")
    secret.chmod(0o600)
    node = layout.plan(1, layout.free_base_port(1))[0]
    data = tmp_path / node.node_id
    data.mkdir(mode=0o700)
    feature, level = next(iter(sorted(SUPPORTED.items())))
    (data / FINALIZED_FILE).write_text(json.dumps({feature: level + 1}) + "\n")
    argv = layout.node_argv(node, [node], str(tmp_path), str(secret))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=READY_S, env=ENV)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refuses to run" in done.stdout + done.stderr and feature in done.stderr, done.stderr
    assert not _ready(node.http)
