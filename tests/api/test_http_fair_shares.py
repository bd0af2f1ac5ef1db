"""The HTTP door's budget of request bodies against callers who announce bodies and send none, on a real
node process (``raftlog serve --require-auth``, small bounds; issue 72, item 3): four users' 1 MiB bodies
announced and never sent fill what ordinary callers may hold, and a super user's and the admin token's
writes are answered from their reserve, another user's by cutting a body of a caller above its fair share,
the node staying live."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from waiting import wait_for

from raftlog_dev import layout
from raftlog_node.launch import launch

TOKEN = "admin-token-for-the-http-fair-shares-test"
MiB = 1024 * 1024
BUDGET = 8 * MiB
PER_CALLER = 2 * MiB
RESERVE = 1 * MiB  # the super users' (and the admin token's)
ORDINARY = BUDGET - RESERVE  # 7 MiB: four users announcing two 1 MiB bodies each fill it
ANNOUNCED = 1 * MiB
STALL_S = 120.0  # body grace and timeout: the announced bodies keep their room for the whole test
LIVE_WITHIN_S = 1.0  # the proof: the node's liveness answered within a second
ATTACKERS = ("mallory", "eve", "trudy", "oscar")
SUPER, USER = "root", "bob"
TOPIC = "fair-shares"


@pytest.fixture
def url(tmp_path: pathlib.Path) -> Iterator[str]:
    secret = tmp_path / "cluster.secret"
    secret.write_text("http-fair-shares-test-cluster-secret-0123456789\n")
    nodes = layout.plan(1, layout.free_base_port(1))
    argv = [
        *layout.node_argv(nodes[0], nodes, str(tmp_path), str(secret)),
        "--require-auth", "--super-user", SUPER,
        "--http-request-bytes-max", str(BUDGET),
        "--http-request-bytes-per-user-max", str(PER_CALLER),
        "--http-request-bytes-super-user-reserve", str(RESERVE),
        "--http-body-timeout-ms", str(int(STALL_S * 1000)),
        "--http-body-grace-ms", str(int(STALL_S * 1000)),
    ]  # fmt: skip
    log_path = tmp_path / "n1.log"
    with open(log_path, "wb") as log:
        process = launch(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RAFTLOG_ADMIN_TOKEN": TOKEN}
        )
    try:
        http = nodes[0].http
        wait_for(lambda: _live(http) or process.poll() is not None, f"live; see {log_path}")
        assert process.poll() is None, f"the node exited; see {log_path}"
        for name in (*ATTACKERS, SUPER, USER):
            wait_for(lambda name=name: _admin(http, "/v1/users", {"name": name, "password": name}) == 200,
                     f"user {name} made; see {log_path}")  # fmt: skip
        made = {"name": TOPIC, "partitions": 1, "replication_factor": 1}
        wait_for(lambda: _admin(http, "/v1/topics", made) in (201, 409), f"topic made; see {log_path}")
        yield http
    finally:
        process.terminate()
        process.wait(30)


def _live(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/status/live", timeout=10) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _admin(url: str, path: str, document: object) -> int:
    request = urllib.request.Request(url + path, method="POST", data=json.dumps(document).encode(), headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def _basic(name: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{name}".encode()).decode()


def _produce(url: str, name: str) -> int:
    body = json.dumps({"records": [{"value": {"from": name}}]}).encode()
    request = urllib.request.Request(url + f"/topics/{TOPIC}", method="POST", data=body, headers={
        "Authorization": _basic(name), "Content-Type": "application/vnd.kafka.json.v2+json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def _announce(url: str, name: str) -> socket.socket:
    """A connection that sent a produce's head announcing ``ANNOUNCED`` body bytes, and none of them."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(
        f"POST /topics/{TOPIC} HTTP/1.1\r\nHost: n1\r\nAuthorization: {_basic(name)}\r\n"
        f"Content-Type: application/vnd.kafka.json.v2+json\r\nContent-Length: {ANNOUNCED}\r\n\r\n".encode()
    )
    return sock


def _metrics(url: str) -> str:
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(answer.read().decode())


def _held(url: str) -> float:
    found = re.search(r'^raftlog_request_bytes_held\{door="http"\} (\S+)$', _metrics(url), re.M)
    assert found is not None
    return float(found.group(1))


def _cut_over_share(url: str) -> float:
    found = re.search(
        r'^raftlog_http_connections_cut_total\{reason="over_share"\} (\S+)$', _metrics(url), re.M
    )
    return 0.0 if found is None else float(found.group(1))


def test_four_users_bodies_announced_and_never_sent_keep_no_other_write_waiting(url: str) -> None:
    held = [_announce(url, name) for name in ATTACKERS for _ in range(2)]
    try:
        filled = "the announced bodies fill what ordinary callers may hold"
        wait_for(lambda: _held(url) >= ORDINARY, filled, 60, every_s=0.05)
        assert _produce(url, SUPER) == 200, "a super user's write is served from its reserve"
        made = {"name": f"{TOPIC}-2", "partitions": 1, "replication_factor": 1}
        assert _admin(url, "/v1/topics", made) == 201, "so is the admin token's"
        assert _cut_over_share(url) == 0, "no one was cut for them"
        began = time.monotonic()
        assert _live(url) and time.monotonic() - began < LIVE_WITHIN_S
        assert _produce(url, USER) == 200, "another user's write is served, below its share"
        assert _cut_over_share(url) >= 1, "by cutting a body of a caller above its share"
    finally:
        for sock in held:
            sock.close()
