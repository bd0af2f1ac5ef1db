"""What a client that never logs in can hold of a node's Kafka listener, tried against a real node process
(``raftlog serve --require-auth``, plain and TLS) with small limits: silent sockets from a few addresses
neither keep a new client (confluent-kafka) out nor stay past the login deadline; a TLS handshake never
begun is cut; a frame dribbled a byte at a time is cut at the frame deadline, an idle connection at the
idle deadline; a frame announcing 100 MiB before login is refused on its size prefix, and the node's own
memory (its RSS) stays flat while several such clients push."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka_fixtures import RawKafka

from kafka_api import wire
from raftlog_dev import layout
from raftlog_dev.certificates import dev_certificates
from raftlog_node.launch import launch
from raftlog_node.options import TOKEN_ENV
from tests.waiting import wait_for

TOKEN = "admin-token-for-the-kafka-limits-test"
USER, PASSWORD = "alice", "alice's password"
LOGIN_TIMEOUT_S = 3.0
FRAME_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 3.0
HANDSHAKE_TIMEOUT_S = 2.0
PER_ADDRESS = 6
UNAUTHENTICATED = 10
LIMITS = (
    "--kafka-connections-max", "16",
    "--kafka-super-user-reserve", "2",
    "--kafka-connections-per-address-max", str(PER_ADDRESS),
    "--kafka-unauthenticated-connections-max", str(UNAUTHENTICATED),
    "--kafka-login-timeout-ms", str(int(LOGIN_TIMEOUT_S * 1000)),
    "--kafka-frame-timeout-ms", str(int(FRAME_TIMEOUT_S * 1000)),
    "--kafka-idle-timeout-ms", str(int(IDLE_TIMEOUT_S * 1000)),
    "--kafka-tls-handshake-timeout-ms", str(int(HANDSHAKE_TIMEOUT_S * 1000)),
)  # fmt: skip
SLACK_S = 10.0  # on top of a deadline, for a busy machine


@dataclass(frozen=True)
class RunningNode:
    process: subprocess.Popen[bytes]
    kafka: str  # host:port
    http: str
    ca: str | None  # the CA of a TLS listener
    log: pathlib.Path

    def rss_bytes(self) -> int:
        status = pathlib.Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def context(self) -> ssl.SSLContext | None:
        return None if self.ca is None else ssl.create_default_context(cafile=self.ca)

    def connect(self, source: str = "127.0.0.1", handshake: bool = True) -> socket.socket:
        """A socket to the Kafka listener from ``source`` (a loopback address), through TLS on a TLS
        listener unless ``handshake`` is False."""
        host, _, port = self.kafka.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
        context = self.context()
        if context is None or not handshake:
            return sock
        return context.wrap_socket(sock, server_hostname=host)

    def client_settings(self) -> dict[str, object]:
        settings: dict[str, object] = {
            "bootstrap.servers": self.kafka,
            "security.protocol": "sasl_plaintext" if self.ca is None else "sasl_ssl",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
        if self.ca is not None:
            settings["ssl.ca.location"] = self.ca
        return settings


def _http(node_http: str, ca: str | None, method: str, path: str, body: object = None) -> int:
    context = None if ca is None else ssl.create_default_context(cafile=ca)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(node_http + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


@contextlib.contextmanager
def one_node(
    root: pathlib.Path,
    tls: bool,
    limits: tuple[str, ...] = LIMITS,
    users: tuple[tuple[str, str], ...] = ((USER, PASSWORD),),
) -> Iterator[RunningNode]:
    """A node requiring SASL with ``limits`` (``raftlog serve`` options) and ``users`` made."""
    secret = root / "cluster.secret"
    secret.write_text(f"{root.name}-test-cluster-secret-0123456789\n")
    nodes = layout.plan(1, layout.free_base_port(1), tls)
    certificates = dev_certificates(str(root)) if tls else None
    argv = [
        *layout.node_argv(nodes[0], nodes, str(root), str(secret), certificates),
        "--require-auth",
        *limits,
    ]
    log_path = root / "n1.log"
    with open(log_path, "wb") as log:  # the admin token from the environment: never in argv
        environment = {**os.environ, TOKEN_ENV: TOKEN}
        process = launch(argv, stdout=log, stderr=subprocess.STDOUT, env=environment)
    ca = None if certificates is None else certificates.ca
    node = RunningNode(process, nodes[0].kafka, nodes[0].http, ca, log_path)
    try:
        deadline = time.monotonic() + 60
        for name, password in users:
            while _http(node.http, ca, "POST", "/v1/users", {"name": name, "password": password}) != 200:
                assert process.poll() is None, f"the node exited; see {log_path}"
                assert time.monotonic() < deadline, f"the node made no user; see {log_path}"
                time.sleep(0.2)
        host, port = node.kafka.rsplit(":", 1)
        while not _listening(host, int(port)):  # the Kafka listener opens once the metadata caught up
            assert process.poll() is None, f"the node exited; see {log_path}"
            assert time.monotonic() < deadline, f"the node's Kafka listener never opened; see {log_path}"
            time.sleep(0.2)
        yield node
    finally:
        process.terminate()
        process.wait(30)


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module", params=["plain", "tls"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    root = tmp_path_factory.mktemp(f"kafka-limits-{request.param}")
    with one_node(root, request.param == "tls") as running:
        yield running


def closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    """Whether the server closes the socket within ``wait_s`` (EOF or reset)."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except (TimeoutError, ssl.SSLWantReadError):
        return False
    except (ConnectionError, ssl.SSLError):
        return True


def served(node: RunningNode) -> bool:
    """Whether a new confluent-kafka client logs in and is answered its Metadata."""
    try:
        AdminClient(node.client_settings()).list_topics(timeout=5)
    except KafkaException:
        return False
    return True


def logged_in(node: RunningNode) -> RawKafka:
    """A raw connection authenticated with SASL/PLAIN."""
    raw, answer = log_in(node, USER, PASSWORD)
    assert answer.error_code == 0, answer
    return raw


def log_in(node: RunningNode, user: str, password: str, source: str = "127.0.0.1") -> tuple[RawKafka, Any]:
    """A raw connection from ``source`` and the answer to its SASL/PLAIN login."""
    raw = RawKafka(node.kafka, node.context(), source)
    handshake = wire.request_class(17, 1)
    assert raw.call(17, 1, wire.build(handshake, mechanism="PLAIN")).error_code == 0
    authenticate = wire.request_class(36, 2)
    token = f"\0{user}\0{password}".encode()
    return raw, raw.call(36, 2, wire.build(authenticate, auth_bytes=token))


def test_silent_sockets_neither_keep_a_new_client_out_nor_stay(node: RunningNode) -> None:
    silent = []
    for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):  # more than the node-wide cap of 16, together
        silent += [node.connect(source) for _ in range(PER_ADDRESS + 2)]
    held = [sock for sock in silent if not closed_by_server(sock, 0.5)]
    assert len(held) <= UNAUTHENTICATED, "the listener holds at most its unauthenticated slots"
    assert served(node), "a new client logs in while the silent sockets are held"
    wait_for(
        lambda: all(closed_by_server(sock, 0.1) for sock in held),
        "every silent socket is closed at the login deadline",
        LOGIN_TIMEOUT_S + SLACK_S,
        every_s=0.05,
    )
    for sock in silent:
        sock.close()
    counts = _kafka_cuts(node)  # what an operator's alert sees
    assert counts.get("cut_login_timeout", 0) >= 1 and counts.get("refused_per_address", 0) >= 1, counts


def _kafka_cuts(node: RunningNode) -> dict[str, float]:
    """``raftlog_kafka_connections_cut_total`` by reason, from the node's /metrics (the admin token)."""
    context = None if node.ca is None else ssl.create_default_context(cafile=node.ca)
    request = urllib.request.Request(node.http + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        text = answer.read().decode()
    found = re.findall(r'^raftlog_kafka_connections_cut_total\{reason="(\w+)"\} (\S+)$', text, re.M)
    return {reason: float(value) for reason, value in found}


def test_a_tls_handshake_never_begun_is_cut(node: RunningNode) -> None:
    if node.ca is None:
        pytest.skip("a plain listener has no handshake")
    bare = [node.connect("127.0.0.5", handshake=False) for _ in range(4)]
    wait_for(
        lambda: all(closed_by_server(sock, 0.1) for sock in bare),
        "a socket that never begins its TLS handshake is closed at the handshake deadline",
        HANDSHAKE_TIMEOUT_S + SLACK_S,
        every_s=0.05,
    )
    for sock in bare:
        sock.close()


def test_a_dribbled_frame_is_cut_at_the_frame_deadline(node: RunningNode) -> None:
    raw = logged_in(node)
    metadata = wire.request_class(3, 12)
    frame = raw.frame(3, 12, wire.build(metadata, topics=None, allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))  # fmt: skip
    sent = 0
    started = time.monotonic()
    while sent < len(frame) - 1:  # a byte every quarter second: the whole frame would take seconds more
        raw.send_raw(frame[sent : sent + 1])
        sent += 1
        if closed_by_server(raw.sock, 0.25):
            break
    else:
        pytest.fail(f"a frame dribbled for {time.monotonic() - started:.1f} s was not cut")
    assert sent < len(frame) - 1
    raw.close()


def test_a_large_frame_whose_bytes_never_come_loses_its_room_at_the_frame_timeout(node: RunningNode) -> None:
    raw = logged_in(node)
    announced = 64 * 1024 * 1024  # within a user's share; the old deadline gave it 1 s + 64 s
    raw.send_raw(struct.pack(">i", announced))
    wait_for(
        lambda: closed_by_server(raw.sock, 0.2),
        "a frame whose bytes never come is cut once the frame timeout passed, whatever its size",
        FRAME_TIMEOUT_S + SLACK_S,
        every_s=0.05,
    )
    raw.close()


def test_an_idle_connection_is_closed_at_the_idle_deadline(node: RunningNode) -> None:
    raw = logged_in(node)
    wait_for(
        lambda: closed_by_server(raw.sock, 0.2),
        "an authenticated connection sending nothing is closed at the idle deadline",
        IDLE_TIMEOUT_S + SLACK_S,
        every_s=0.05,
    )
    raw.close()


def test_a_huge_frame_before_login_is_refused_on_its_size_and_memory_stays_flat(node: RunningNode) -> None:
    pushers = 8
    push_bytes = 32 * 1024 * 1024
    before = node.rss_bytes()
    peak = [before]
    outcome: dict[int, int] = {}

    def push(index: int) -> None:
        sock = node.connect(f"127.0.0.{20 + index}")
        sock.settimeout(30)
        sent = 0
        chunk = b"x" * (256 * 1024)
        try:
            sock.sendall(struct.pack(">i", 100 * 1024 * 1024))  # 100 MiB announced, the frame bound
            while sent < push_bytes:
                sock.sendall(chunk)
                sent += len(chunk)
        except (ConnectionError, ssl.SSLError, TimeoutError):
            pass
        outcome[index] = sent
        if sent >= push_bytes:  # held by the node: keep it open while the memory is read
            time.sleep(2)
        sock.close()

    threads = [threading.Thread(target=push, args=(i,)) for i in range(pushers)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        peak.append(node.rss_bytes())
        time.sleep(0.1)
    grown_mib = (max(peak) - before) / (1024 * 1024)
    refused = [i for i, sent in outcome.items() if sent < push_bytes]
    assert len(refused) == pushers, f"pushed {outcome} bytes; the node's RSS grew {grown_mib:.0f} MiB"
    assert grown_mib < 48, f"the node's RSS grew {grown_mib:.0f} MiB"
    assert served(node), "and a client logs in after"
