"""What a logged-in user can hold of a node's Kafka listener, tried against a real node process
(``raftlog serve --require-auth``) with small limits: hundreds of idle logged-in connections from several
addresses keep neither the admin (a super user) nor another user out; a user at its cap keeping its
connections alive with a request now and then loses them once they idle past the at-cap timeout; and six
connections of one user each sending a large request slowly do not take the node's memory with them, nor
keep another user's requests out."""

from __future__ import annotations

import contextlib
import pathlib
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kafka_fixtures import RawKafka
from test_connection_limits import RunningNode, _kafka_cuts, closed_by_server, log_in, one_node

from kafka_api import wire
from tests.waiting import wait_for

MiB = 1024 * 1024
ADMIN = ("admin", "the admin's password")
MALLORY = ("mallory", "mallory's password")
EVE = ("eve", "eve's password")
TRUDY = ("trudy", "trudy's password")
BOB = ("bob", "bob's password")
USERS = (ADMIN, MALLORY, EVE, TRUDY, BOB)
CONNECTIONS_MAX = 60
PER_USER = 20
RESERVE = 5
ADDRESSES = tuple(f"127.0.0.{n}" for n in range(2, 10))  # eight client addresses
SLACK_S = 15.0  # on top of a deadline, for a busy machine


def limits(*more: str) -> tuple[str, ...]:
    return (
        "--super-user", ADMIN[0],
        "--kafka-connections-max", str(CONNECTIONS_MAX),
        "--kafka-connections-per-address-max", str(CONNECTIONS_MAX),
        "--kafka-connections-per-user-max", str(PER_USER),
        "--kafka-super-user-reserve", str(RESERVE),
        *more,
    )  # fmt: skip


@contextlib.contextmanager
def node_with(root: pathlib.Path, *more: str) -> Iterator[RunningNode]:
    with one_node(root, False, limits(*more), USERS) as node:
        yield node


def served_as(node: RunningNode, user: tuple[str, str]) -> bool:
    """Whether a new confluent-kafka client logging in as ``user`` is answered its Metadata."""
    settings = {**node.client_settings(), "sasl.username": user[0], "sasl.password": user[1]}
    try:
        AdminClient(settings).list_topics(timeout=10)
    except KafkaException:
        return False
    return True


def open_logged_in(
    node: RunningNode, user: tuple[str, str], attempts: int
) -> tuple[list[RawKafka], list[str]]:
    """``attempts`` logins of ``user`` from the addresses in turn: the connections kept, and the refusals'
    messages (each refused connection closed by the node). The node closes a refused connection 100 ms
    after its answer (Kafka's failed-authentication delay): the closes of one round of the addresses are
    awaited together, so that at most one refused connection per address lingers at a time."""
    kept, refusals, lingering = [], [], []
    for i in range(attempts):
        raw, answer = log_in(node, user[0], user[1], ADDRESSES[i % len(ADDRESSES)])
        if answer.error_code == 0:
            kept.append(raw)
        else:
            refusals.append(answer.error_message)
            lingering.append(raw)
        if len(lingering) == len(ADDRESSES) or (i == attempts - 1 and lingering):
            assert all(closed_by_server(each.sock, 10) for each in lingering), "a refused login is closed"
            for each in lingering:
                each.close()
            lingering.clear()
    return kept, refusals


def test_idle_logged_in_connections_lock_out_neither_the_admin_nor_another_user(
    tmp_path: pathlib.Path,
) -> None:
    with node_with(tmp_path, "--kafka-idle-at-cap-timeout-ms", "600000") as node:
        mallory, refused = open_logged_in(node, MALLORY, 300)
        assert len(mallory) == PER_USER, "one user holds at most its cap"
        assert refused and all(f"at most {PER_USER} per user" in message for message in refused), refused[:3]
        others = [raw for user in (EVE, TRUDY) for raw in open_logged_in(node, user, PER_USER)[0]]
        open_now = [raw for raw in mallory + others if not closed_by_server(raw.sock, 0.01)]
        assert len(open_now) == CONNECTIONS_MAX - RESERVE, "ordinary users leave the reserve to super users"
        assert served_as(node, ADMIN), "the admin logs in past every idle connection"
        bob, answer = log_in(node, *BOB)
        assert answer.error_code == 0, answer
        assert served_as(node, BOB), "another user too"
        cut = [raw for raw in open_now if closed_by_server(raw.sock, 0.01)]
        assert cut, "room was made by closing idle connections of the users holding most"
        counts = _kafka_cuts(node)
        assert counts.get("refused_per_user", 0) >= len(refused), counts
        assert counts.get("cut_for_login", 0) >= 1, counts
        for raw in (*mallory, *others, bob):
            raw.close()


def _keep_alive(connections: list[RawKafka], every_s: float, stop: threading.Event, closed: set[int]) -> None:
    """One ApiVersions on each connection every ``every_s``; ``closed``: those the node closed."""
    versions = wire.build(wire.request_class(18, 3), client_software_name="k", client_software_version="1")
    while not stop.wait(every_s):
        for index, raw in enumerate(connections):
            if index in closed:
                continue
            try:
                raw.call(18, 3, versions)
            except (OSError, struct.error):
                closed.add(index)


def test_a_hold_kept_alive_by_a_request_now_and_then_ends(tmp_path: pathlib.Path) -> None:
    at_cap_s, every_s = 2.0, 4.0  # a request every 4 s: never idle for the listener's 600 s
    with node_with(tmp_path, "--kafka-idle-at-cap-timeout-ms", str(int(at_cap_s * 1000))) as node:
        mallory, _ = open_logged_in(node, MALLORY, PER_USER)
        bob, _ = open_logged_in(node, BOB, 2)  # below its cap: kept
        connections = mallory + bob
        stop, closed = threading.Event(), set[int]()
        keeper = threading.Thread(target=_keep_alive, args=(connections, every_s, stop, closed))
        keeper.start()
        try:
            what = "the connections of a user at its cap are closed once idle past the at-cap timeout"
            wait_for(lambda: set(range(PER_USER)) <= closed, what, at_cap_s + every_s + SLACK_S, every_s=0.05)
            assert not closed & {PER_USER, PER_USER + 1}, "a user below its cap keeps its connections"
        finally:
            stop.set()
            keeper.join()
        assert _kafka_cuts(node).get("cut_idle_at_cap", 0) >= PER_USER
        for raw in connections:
            raw.close()


FRAME_BYTES = 24 * MiB
PINNERS = 6
PIN_RATE_BYTES_PER_S = 8 * MiB  # each: a frame takes 3 s


def _pin(node: RunningNode, index: int, stop: threading.Event, sent: dict[int, int]) -> None:
    """Log in as mallory and send one Produce frame of ``FRAME_BYTES`` slowly, until done or stopped."""
    raw, answer = log_in(node, *MALLORY, source=ADDRESSES[index % len(ADDRESSES)])
    assert answer.error_code == 0, answer
    header = struct.pack(">hhi", 0, 9, 99) + struct.pack(">h", 1) + b"p" + b"\0"  # Produce v9, client "p"
    raw.sock.settimeout(0.5)
    payload = memoryview(struct.pack(">i", FRAME_BYTES) + header + bytes(FRAME_BYTES - len(header)))
    chunk = PIN_RATE_BYTES_PER_S // 10
    offset = 0
    try:
        while offset < len(payload) and not stop.is_set():
            began = time.monotonic()
            with contextlib.suppress(TimeoutError, socket.timeout):  # the node stopped reading: wait
                offset += raw.sock.send(payload[offset : offset + chunk])
            time.sleep(max(0.0, 0.1 - (time.monotonic() - began)))
    except OSError:
        pass
    sent[index] = offset
    stop.wait()
    raw.close()


def test_six_slow_large_requests_of_one_user_neither_take_the_memory_nor_keep_others_out(
    tmp_path: pathlib.Path,
) -> None:
    budget = ("--kafka-request-bytes-max", str(2 * FRAME_BYTES + 2 * MiB),  # two frames, and the reserves
              "--kafka-request-bytes-per-user-max", str(FRAME_BYTES),
              "--kafka-request-bytes-super-user-reserve", str(MiB),
              "--kafka-request-bytes-before-login-reserve", str(MiB))  # fmt: skip
    with node_with(tmp_path, "--kafka-frame-timeout-ms", "60000", *budget) as node:
        before = node.rss_bytes()
        stop, sent = threading.Event(), dict[int, int]()
        pinners = [threading.Thread(target=_pin, args=(node, i, stop, sent)) for i in range(PINNERS)]
        for thread in pinners:
            thread.start()
        peak, began = before, time.monotonic()
        served = False
        try:
            while time.monotonic() - began < 2.5 * FRAME_BYTES / PIN_RATE_BYTES_PER_S:
                peak = max(peak, node.rss_bytes())
                if not served and time.monotonic() - began > 2:
                    served = served_as(node, BOB)  # while mallory's requests hold her share
                time.sleep(0.05)
        finally:
            stop.set()
            for thread in pinners:
                thread.join()
        grown_mib = (peak - before) / MiB
        pinned_mib = PINNERS * FRAME_BYTES / MiB
        assert served, "another user is served while one user's large requests come in"
        assert grown_mib < pinned_mib / 2, f"the node grew {grown_mib:.0f} MiB with {pinned_mib:.0f} MiB sent"
        assert sum(sent.values()) >= FRAME_BYTES, f"the node read mallory's requests one at a time: {sent}"


@pytest.fixture(autouse=True)
def _many_files() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
