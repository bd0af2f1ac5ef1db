"""``raftlog serve --require-auth`` on a real 3-node cluster (node processes; SASL on their Kafka
listeners is ``tests/kafka_api/test_sasl_clients.py``'s): users made through ``/v1/users`` on one node are
replicated by the controller and let in by every node over HTTP Basic, tried with curl and with the
``raftlog`` command; no credentials, a wrong password, a replaced password and a deleted user are refused
with 401 and change nothing; probes and scrapers stay open."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from serve_args import args_for, token_file
from waiting import wait_for

from raftlog_dev import layout
from raftlog_node.launch import launch
from raftlog_node.options import ServeConfigError
from raftlog_node.settings import node_config

TOKEN = "admin-token-for-the-auth-test"


@contextlib.contextmanager
def node_processes(root: pathlib.Path, *serve_args: str) -> Iterator[list[str]]:
    """Three real node processes under ``root`` serving with ``serve_args`` (their logs in ``root``),
    ready; their HTTP base URLs. Terminated when the block ends."""
    secret = root / "cluster.secret"
    secret.write_text(f"{root.name}-test-cluster-secret-0123456789\n")
    nodes = layout.plan(3, layout.free_base_port(3))
    processes = []
    for node in nodes:
        argv = [*layout.node_argv(node, nodes, str(root), str(secret)), *serve_args]
        log = open(root / f"{node.node_id}.log", "wb")  # noqa: SIM115 - closed with the process
        processes.append((launch(argv, stdout=log, stderr=subprocess.STDOUT), log))
    urls = [node.http for node in nodes]
    try:
        wait_for(lambda: all(_ready(url) for url in urls), f"every node ready; see {root}/n*.log")
        yield urls
    finally:
        for process, _log in processes:
            process.terminate()
        for process, log in processes:
            process.wait(30)
            log.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    root = tmp_path_factory.mktemp("auth")
    with node_processes(root, "--require-auth", *token_file(root, TOKEN)) as urls:
        yield urls


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/status/ready", timeout=1) as answer:  # open without credentials
            return bool(answer.status == 200)
    except OSError:
        return False


def curl(*argv: str) -> tuple[int, object, str]:
    """HTTP status, body (parsed when JSON) and headers of one curl call."""
    done = subprocess.run(
        ["curl", "-sS", "-D", "-", "-o", "/dev/stdout", "--max-time", "20", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    head, _, body = done.stdout.partition("\n\n")  # text mode: curl's CRLFs read as newlines
    status = int(head.split()[1])
    typed = any(line.lower().startswith("content-type:") and "json" in line for line in head.splitlines())
    return status, json.loads(body) if typed else body, head


def produce(url: str, *auth: str) -> tuple[int, object]:
    status, body, _ = curl(
        "-XPOST", f"{url}/topics/secured/partitions/0", "-H", "Content-Type: application/json",
        "-d", '{"records": [{"value": "v"}]}', *auth,
    )  # fmt: skip
    return status, body


def test_users_are_replicated_and_every_node_checks_them(servers: list[str]) -> None:
    first, second, third = servers
    admin = ("-H", f"Authorization: Bearer {TOKEN}")
    status, body, _ = curl(
        "-XPOST", f"{first}/v1/topics", "-H", "Content-Type: application/json", *admin,
        "-d", '{"name": "secured", "partitions": 1, "replication_factor": 3}',
    )  # fmt: skip
    assert status == 201, body

    status, body, head = curl(f"{second}/topics/secured/partitions/0/records?offset=0")
    assert status == 401 and 'WWW-Authenticate: Basic realm="raftlog"' in head, (body, head)
    assert produce(second)[0] == 401
    assert (
        curl("-XPOST", f"{second}/consumers/g", "-H", "Content-Type: application/json", "-d", "{}")[0] == 401
    )
    assert curl(f"{second}/status/ready")[0] == 200  # open: liveness, no names of data
    assert curl(f"{second}/metrics")[0] == 401  # names every topic and group: the admin's (or a scraper's)
    assert curl(f"{second}/metrics", *admin)[0] == 200

    status, body, _ = curl(
        "-XPOST", f"{first}/v1/users", "-H", "Content-Type: application/json", *admin,
        "-d", '{"name": "alice", "password": "first password"}',
    )  # fmt: skip
    assert (status, body) == (
        200,
        {"name": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"], "created": True},
    )
    status, body, _ = curl(f"{third}/v1/users", *admin)
    assert status == 200 and body == {
        "users": [{"name": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}]
    }
    assert "password" not in json.dumps(body)

    wait_for(  # replicated to every node by the controller
        lambda: produce(third, "-u", "alice:first password")[0] == 200, "alice let in on n3", 10, every_s=0.1
    )
    assert produce(second, "-u", "alice:wrong")[0] == 401
    assert produce(second, "-u", "mallory:first password")[0] == 401
    assert produce(second, *admin)[0] == 200  # the admin token is let in too
    status, records, _ = curl(
        f"{second}/topics/secured/partitions/0/records?offset=0", "-u", "alice:first password"
    )
    assert status == 200 and isinstance(records, list) and len(records) == 2  # the refused wrote nothing

    status, body, _ = curl(
        "-XPOST", f"{second}/v1/users", "-H", "Content-Type: application/json", *admin,
        "-d", '{"name": "alice", "password": "second password", "mechanisms": ["SCRAM-SHA-512"]}',
    )  # fmt: skip
    assert (status, body) == (200, {"name": "alice", "mechanisms": ["SCRAM-SHA-512"], "created": False})
    wait_for(  # the old password stops at once
        lambda: produce(first, "-u", "alice:first password")[0] == 401,
        "the old password refused on n1",
        10,
        every_s=0.1,
    )
    assert produce(first, "-u", "alice:second password")[0] == 200

    status, _, _ = curl("-XDELETE", f"{third}/v1/users/alice", *admin)
    assert status == 204
    wait_for(
        lambda: produce(second, "-u", "alice:second password")[0] == 401,
        "the deleted user refused on n2",
        10,
        every_s=0.1,
    )
    assert curl("-XDELETE", f"{third}/v1/users/alice", *admin)[0] == 404


def test_the_command_line_manages_users_and_logs_in_as_one(servers: list[str]) -> None:
    env = {**os.environ, "RAFTLOG_SERVER": servers[1], "RAFTLOG_ADMIN_TOKEN": TOKEN}
    env.pop("RAFTLOG_USER", None)
    raftlog = [sys.executable, "-m", "raftlog_cli"]
    created = subprocess.run(
        [*raftlog, "user", "create", "bob", "--password-stdin"], input="bob's password\n",
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert created.returncode == 0 and "user bob" in created.stdout, created.stderr
    listed = subprocess.run([*raftlog, "user", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert "bob  (SCRAM-SHA-256, SCRAM-SHA-512)" in listed.stdout, listed.stdout + listed.stderr
    env_user = {**env, "RAFTLOG_USER": "bob", "RAFTLOG_PASSWORD": "bob's password"}
    env_user.pop("RAFTLOG_ADMIN_TOKEN")
    deadline = time.monotonic() + 10
    while True:
        produced = subprocess.run(
            [*raftlog, "produce", "secured-cli", "--value", "x"],
            capture_output=True, text=True, env=env_user, timeout=60,
        )  # fmt: skip
        if "40401" in produced.stderr or produced.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "40401" in produced.stderr, produced.stderr  # let in: the topic does not exist, says the node
    wrong = subprocess.run(
        [*raftlog, "produce", "secured-cli", "--value", "x"], capture_output=True, text=True,
        env={**env_user, "RAFTLOG_PASSWORD": "not it"}, timeout=60,
    )  # fmt: skip
    assert wrong.returncode == 1 and "40101" in wrong.stderr, wrong.stderr


def test_serve_refuses_require_auth_without_a_token_and_takes_it_with_a_kafka_listener(
    tmp_path: pathlib.Path,
) -> None:
    with pytest.raises(ServeConfigError, match="needs an admin token"):
        node_config(args_for(tmp_path, "--http", "127.0.0.1:9001", "--require-auth"))
    kafka = ["--kafka", "127.0.0.1:9092"]
    config, _, token = node_config(
        args_for(tmp_path, "--http", "127.0.0.1:9001", "--require-auth", *token_file(tmp_path, "t"), *kafka)
    )
    assert token == "t" and config.kafka_address == "127.0.0.1:9092"
