"""Answers a client does not read hold no more of a node than its budget (docs/security.md, "Answers"):
tried against a real node process (``raftlog serve --require-auth`` over TLS, as a ``--secure`` node
serves) holding 16 MiB in one partition, with a user's share of the budget set to 32 MiB.

Each attack is one user's (mallory's) requests whose answers she never reads: 16 pipelined Kafka Fetches
of the whole partition on one connection; six HTTP fetches of it. While it runs, the node's RSS (from
``/proc/PID/status``) may grow by at most twice her share (her share of answer bytes held, and as much
again for what a read allocates on its way: the budget counts the answer, not the read's own buffers);
before, every one of those answers was built and held at once (16 x 16 MiB, and more in copies). Each
attack is proved to have landed (the node holds an answer of hers in its budget, its
``raftlog_request_bytes_held``), and meanwhile the node's liveness answers within a second and another
user and the admin are served the same records.
"""

from __future__ import annotations

import base64
import datetime
import json
import pathlib
import re
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from loop_held import never_held
from test_connection_limits import TOKEN, RunningNode, log_in, one_node

from kafka_api import wire
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_contract import BINARY_V2
from tests.waiting import wait_for

MiB = 1024 * 1024
ADMIN = ("admin", "the admin's password")
MALLORY = ("mallory", "mallory's password")
BOB = ("bob", "bob's password")
TOPIC = "answers"
BATCH_RECORDS, RECORD_BYTES = 8, 64 * 1024  # batches of 512 KiB
DATA_BYTES = 16 * MiB
PER_USER = 32 * MiB  # a user's share of the Kafka and HTTP budgets, answers included
GROWTH_MAX = 2 * PER_USER
FETCHES = 16
LIVE_S = 1.0  # the liveness answer's bound
ATTACK_S = 120.0  # the most the conditions below may take to come, on a loaded machine


@pytest.fixture
def node(tmp_path: pathlib.Path) -> Iterator[RunningNode]:
    """A fresh node per test: a test's RSS growth is not hidden in heap an earlier one left free."""
    limits = (
        "--super-user", ADMIN[0],
        "--kafka-request-bytes-per-user-max", str(PER_USER),
        "--http-request-bytes-per-user-max", str(PER_USER),
    )  # fmt: skip
    with one_node(tmp_path, True, limits, (ADMIN, MALLORY, BOB)) as running:
        _fill(running)
        yield running


def _fill(node: RunningNode) -> None:
    """``TOPIC`` created (one partition) and ``DATA_BYTES`` produced into it, as the admin."""
    raw, answer = log_in(node, *ADMIN)
    assert answer.error_code == 0, answer
    try:
        cls = wire.request_class(19, 4)
        creatable = wire.build(wire.sibling(cls, "CreatableTopic"), name=TOPIC, num_partitions=1,
                               replication_factor=1, assignments=(), configs=())  # fmt: skip
        created = raw.call(19, 4, wire.build(cls, topics=(creatable,), timeout=datetime.timedelta(seconds=30),
                                             validate_only=False))  # fmt: skip
        assert created.topics[0].error_code == 0, created
        cls = wire.request_class(0, 9)
        value = b"v" * RECORD_BYTES
        for _ in range(DATA_BYTES // (BATCH_RECORDS * RECORD_BYTES)):
            batch = encode_batch(
                0, [ProducerRecord(None, value, ())] * BATCH_RECORDS, 0, int(time.time() * 1000)
            )
            part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=0, records=batch)
            data = wire.build(wire.sibling(cls, "TopicProduceData"), name=TOPIC, partition_data=(part,))
            request = wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                                 topic_data=(data,))  # fmt: skip
            produced = raw.call(0, 9, request).responses[0].partition_responses[0]
            assert produced.error_code == 0, produced
    finally:
        raw.close()


def fetch_request(max_bytes: int) -> Any:
    """A Fetch (v12) of the whole partition from offset 0, at most ``max_bytes``, no session."""
    cls = wire.request_class(1, 12)
    part = wire.build(wire.sibling(cls, "FetchPartition"), partition=0, current_leader_epoch=-1,
                      fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                      partition_max_bytes=max_bytes)  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchTopic"), topic=TOPIC, partitions=(part,))
    return wire.build(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                      max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=(topic,), forgotten_topics_data=(), rack_id="")  # fmt: skip


def kafka_fetched_bytes(node: RunningNode, user: tuple[str, str], max_bytes: int) -> int:
    """The record bytes a new connection of ``user`` is answered to a Fetch of the partition."""
    raw, answer = log_in(node, *user)
    assert answer.error_code == 0, answer
    try:
        fetched = raw.call(1, 12, fetch_request(max_bytes)).responses[0].partitions[0]
        assert fetched.error_code == 0, fetched
        return len(fetched.records or b"")
    finally:
        raw.close()


def _context(node: RunningNode) -> ssl.SSLContext | None:
    return None if node.ca is None else ssl.create_default_context(cafile=node.ca)


def live_s(node: RunningNode) -> float:
    """How long the node's liveness took to answer 200."""
    began = time.monotonic()
    with urllib.request.urlopen(node.http + "/status/live", timeout=30, context=_context(node)) as answer:
        assert answer.status == 200
    return time.monotonic() - began


def kafka_bytes_held(node: RunningNode) -> float:
    """The Kafka listener's budget held now (``raftlog_request_bytes_held{door="kafka"}``)."""
    request = urllib.request.Request(node.http + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30, context=_context(node)) as answer:
        text = answer.read().decode()
    found = re.search(r'^raftlog_request_bytes_held\{door="kafka"\} (\S+)$', text, re.M)
    assert found is not None, "the node names its Kafka budget in /metrics"
    return float(found.group(1))


class Watch:
    """The node's RSS sampled every 50 ms from ``start`` until ``stop``: the test fails at once (on
    ``check``) when it grew past ``GROWTH_MAX``."""

    def __init__(self, node: RunningNode) -> None:
        self.node = node
        self.before = node.rss_bytes()
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.check()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.node.rss_bytes())

    def grown_mib(self) -> float:
        return (self.peak - self.before) / MiB

    def check(self) -> None:
        grown = self.grown_mib()
        assert grown <= GROWTH_MAX / MiB, (
            f"the node grew {grown:.0f} MiB (at most {GROWTH_MAX // MiB} MiB: twice a user's share)"
        )


def while_attacked(watch: Watch, landed: Callable[[], bool], served: Callable[[], bool]) -> None:
    """Until the attack is seen to hold the node (``landed``), others are ``served`` and the liveness
    answered five times, the node's loop never held ``LIVE_S`` of CPU meanwhile (``loop_held``: what the
    liveness waits with a CPU to spare): the RSS checked all along."""
    deadline = time.monotonic() + ATTACK_S
    seen_landed = was_served = False
    lives: list[float] = []
    node = watch.node
    with never_held(node.http, LIVE_S, TOKEN, node.context()):
        while not (seen_landed and was_served and len(lives) >= 5):
            watch.check()
            assert time.monotonic() < deadline, (
                f"within {ATTACK_S} s: landed {seen_landed}, served {was_served}"
            )
            seen_landed = seen_landed or landed()
            was_served = was_served or served()
            lives.append(live_s(node))  # answered (how long it waited is the machine's load as well)
            time.sleep(0.1)
    watch.check()


def unread_connection(node: RunningNode, user: tuple[str, str]) -> RawKafka:
    raw, answer = log_in(node, *user)
    assert answer.error_code == 0, answer
    return raw


def test_pipelined_fetches_a_client_does_not_read_hold_one_answer_of_the_node(node: RunningNode) -> None:
    raw = unread_connection(node, MALLORY)
    try:
        with Watch(node) as watch:
            raw.send_raw(b"".join(raw.frame(1, 12, fetch_request(55 * MiB)) for _ in range(FETCHES)))

            def served() -> bool:
                return all(kafka_fetched_bytes(node, user, MiB) > 0 for user in (BOB, ADMIN))

            while_attacked(watch, lambda: kafka_bytes_held(node) >= DATA_BYTES, served)
    finally:
        raw.close()
    # the attack over: once the node has let go of what the closed connection's answers held (on a busy
    # machine that can lag the close), a new connection of the same user is answered the whole partition
    wait_for(lambda: kafka_bytes_held(node) == 0, "the closed attack's answers given back", 60)
    assert kafka_fetched_bytes(node, MALLORY, 55 * MiB) >= DATA_BYTES, "the answer was the whole partition"


def _basic(user: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()


def http_call(
    node: RunningNode, method: str, path: str, authorization: str, body: bytes | None = None
) -> Any:
    """A whole HTTP answer's body (JSON, parsed) to a request of ``authorization``, asking binary records."""
    headers = {"Authorization": authorization, "Accept": BINARY_V2, "Content-Type": "application/json"}
    request = urllib.request.Request(node.http + path, data=body, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=60, context=_context(node)) as answer:
        return json.loads(answer.read())


def http_fetched(node: RunningNode, authorization: str) -> int:
    """How many records an HTTP fetch of at most 1 MiB from offset 0 is answered."""
    return len(http_call(node, "GET", f"{_PARTITION}/records?offset=0&max_bytes={MiB}", authorization))


def http_bytes_held(node: RunningNode) -> float:
    request = urllib.request.Request(node.http + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30, context=_context(node)) as answer:
        text = answer.read().decode()
    found = re.search(r'^raftlog_request_bytes_held\{door="http"\} (\S+)$', text, re.M)
    assert found is not None, "the node names its HTTP budget in /metrics"
    return float(found.group(1))


def unread_http(node: RunningNode, method: str, path: str, user: tuple[str, str]) -> socket.socket:
    """A TLS connection that sent one request of ``user`` and reads nothing of its answer."""
    host, _, port = node.http.removeprefix("https://").rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    context = _context(node)
    assert context is not None, "the node serves HTTP over TLS"
    sock = context.wrap_socket(sock, server_hostname=host)
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {_basic(user)}\r\n"
            f"Accept: {BINARY_V2}\r\nContent-Length: 0\r\n\r\n")  # fmt: skip
    sock.sendall(head.encode())
    return sock


def http_served(node: RunningNode) -> bool:
    """Whether another user and the admin are answered records over HTTP."""
    return http_fetched(node, _basic(BOB)) > 0 and http_fetched(node, f"Bearer {TOKEN}") > 0


_PARTITION = f"/topics/{TOPIC}/partitions/0"
HTTP_FETCHES = 6
SHARE_ACQUIRES = 3


def test_slowly_read_http_fetches_hold_the_callers_share_of_the_node(node: RunningNode) -> None:
    path = f"{_PARTITION}/records?offset=0&max_bytes={64 * MiB}"
    unread: list[socket.socket] = []
    try:
        with Watch(node) as watch:
            unread += [unread_http(node, "GET", path, MALLORY) for _ in range(HTTP_FETCHES)]
            while_attacked(watch, lambda: http_bytes_held(node) >= DATA_BYTES, lambda: http_served(node))
    finally:
        for sock in unread:
            sock.close()
    whole = http_call(node, "GET", path, _basic(MALLORY))
    assert len(whole) * RECORD_BYTES >= DATA_BYTES, "the answer was the whole partition"


def test_share_acquires_a_client_does_not_read_hold_the_callers_share_of_the_node(node: RunningNode) -> None:
    paths = []
    for index in range(SHARE_ACQUIRES):  # a group each: each acquires every record of the partition
        joined = http_call(
            node, "POST", f"/share-groups/g{index}", _basic(MALLORY), b'{"topics": ["answers"]}'
        )
        query = f"max_bytes={64 * MiB}&max_records=1000&share.auto.offset.reset=earliest"
        paths.append(f"{joined['base_uri']}/records?{query}")
    unread: list[socket.socket] = []
    try:
        with Watch(node) as watch:
            unread += [unread_http(node, "POST", path, MALLORY) for path in paths]
            while_attacked(watch, lambda: http_bytes_held(node) >= DATA_BYTES, lambda: http_served(node))
    finally:
        for sock in unread:
            sock.close()


@pytest.fixture(autouse=True)
def _small_client_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Raw connections with a small receive buffer, so that an unread answer stays in the node."""
    created = socket.create_connection

    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        sock = created(*args, **kwargs)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        return sock

    monkeypatch.setattr(socket, "create_connection", create_connection)
