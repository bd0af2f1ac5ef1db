"""Password guessing over Kafka's SASL on a real node process (``--require-auth``): past the bound of
failed logins from one address, SASL is refused unchecked (even the right password) and so is HTTP from
that address, the node's count being one for both doors; the window over, the right password logs in;
the node's log names the guesser once."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire
from raftlog_dev import layout
from raftlog_node.launch import launch

TOKEN = "admin-token-for-the-sasl-guessing-test"
FAILURES_MAX = 5
WINDOW_S = 10.0  # long enough for all the guesses of the test on a busy machine
GUESSER = "127.0.0.4"  # the guesser's own address (loopback: any 127/8 address is this host)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[layout.DevNode, pathlib.Path]]:
    root = tmp_path_factory.mktemp("sasl-guessing")
    secret = root / "cluster.secret"
    secret.write_text("sasl-guessing-test-cluster-secret-0123456789\n")
    nodes = layout.plan(1, layout.free_base_port(1))
    argv = [
        *layout.node_argv(nodes[0], nodes, str(root), str(secret)),
        "--require-auth",
        "--login-failures-per-address-max", str(FAILURES_MAX),
        "--login-bounds-on-loopback",  # the guessers here are on loopback addresses
        "--login-failure-window-ms", str(int(WINDOW_S * 1000)),
    ]  # fmt: skip
    log_path = root / "n1.log"
    with open(log_path, "wb") as log:
        process = launch(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RAFTLOG_ADMIN_TOKEN": TOKEN}
        )
        try:
            wait_for(
                lambda: (
                    _curl(nodes[0].http + "/status/ready", source="127.0.0.1") == 200
                    or process.poll() is not None
                ),
                f"ready; see {log_path}",
            )
            assert process.poll() is None, f"the node exited; see {log_path}"
            yield nodes[0], log_path
        finally:
            process.terminate()
            process.wait(30)


def _curl(url: str, *argv: str, source: str = GUESSER) -> int:
    done = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--interface", source, "--max-time", "20",
         *argv, url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return int(done.stdout or 0)


def _plain_login(address: str, user: str, password: str) -> Any:
    """One connection from the guesser's address: SaslHandshake PLAIN, then SaslAuthenticate."""
    host, _, port = address.rpartition(":")
    raw = RawKafka.__new__(RawKafka)  # RawKafka's frames over a socket bound to the guesser's address
    raw.sock = socket.create_connection((host, int(port)), timeout=10, source_address=(GUESSER, 0))
    raw.correlation_id = 0
    try:
        handshake = raw.call(17, 1, wire.build(wire.request_class(17, 1), mechanism="PLAIN"))
        assert handshake.error_code is ErrorCode.none
        token = b"\0" + user.encode() + b"\0" + password.encode()
        return raw.call(36, 2, wire.build(wire.request_class(36, 2), auth_bytes=token))
    finally:
        raw.close()


def test_sasl_guessing_is_refused_past_its_bound_on_both_doors(
    node: tuple[layout.DevNode, pathlib.Path],
) -> None:
    server, log_path = node
    status = _curl(
        server.http + "/v1/users", "-XPOST", "-H", f"Authorization: Bearer {TOKEN}",
        "-H", "Content-Type: application/json", "-d", '{"name": "target", "password": "right-password"}',
        source="127.0.0.1",
    )  # fmt: skip
    assert status == 200
    for attempt in range(FAILURES_MAX):
        answer = _plain_login(server.kafka, "target", f"guess-{attempt}")
        assert answer.error_code is ErrorCode.sasl_authentication_failed, attempt
    refused = _plain_login(server.kafka, "target", "right-password")
    assert refused.error_code is ErrorCode.sasl_authentication_failed
    assert "too many failed logins" in str(refused.error_message)
    assert _curl(server.http + "/topics", "-u", "target:right-password") == 429  # one count, both doors
    wait_for(
        lambda: _plain_login(server.kafka, "target", "right-password").error_code is ErrorCode.none,
        "let in after the window",
        WINDOW_S + 20,
    )
    assert b"Kafka: SASL PLAIN failed from 127.0.0.4" in log_path.read_bytes()
    scrape = urllib.request.Request(server.http + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    metrics = urllib.request.urlopen(scrape, timeout=10).read().decode()
    assert float(metrics.partition("\nraftlog_login_failures_total ")[2].split()[0]) >= FAILURES_MAX
