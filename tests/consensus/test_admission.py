"""Who may start a handshake on the Raft port (raftlog.admission), and the hub applying it:
one outsider's address gets at most its share, outsiders together at most the pool, a known peer's host
always gets in, and a connection that sends no HELLO is closed within hello_timeout_s."""

from __future__ import annotations

import socket
import time

from raftlog.addresses import normalize_host
from raftlog.admission import Admission, admit
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.hub_config import HubConfig

SECRET = b"admission-test-secret-0123456789"


def test_outsiders_are_bounded_per_address_and_together() -> None:
    known = {"10.0.0.1": 1}
    assert admit("10.9.9.9", {"10.9.9.9": 3}, 3, known, 4, 64) is Admission.ADMIT
    assert admit("10.9.9.9", {"10.9.9.9": 4}, 4, known, 4, 64) is Admission.REFUSE_ADDRESS_FULL
    assert admit("10.9.9.8", {"10.9.9.9": 4}, 64, known, 4, 64) is Admission.REFUSE_POOL_FULL


def test_a_known_peers_host_gets_in_whatever_outsiders_hold() -> None:
    known = {"10.0.0.1": 1, "10.0.0.2": 3}  # three nodes on one machine
    assert admit("10.0.0.1", {"10.9.9.9": 64}, 64, known, 4, 64) is Admission.ADMIT
    assert admit("10.0.0.1", {"10.0.0.1": 4}, 64, known, 4, 64) is Admission.ADMIT
    assert admit("10.0.0.1", {"10.0.0.1": 5}, 64, known, 4, 64) is Admission.ADMIT_EVICTING_OLDEST
    assert admit("10.0.0.2", {"10.0.0.2": 6}, 64, known, 4, 64) is Admission.ADMIT
    assert admit("10.0.0.2", {"10.0.0.2": 7}, 64, known, 4, 64) is Admission.ADMIT_EVICTING_OLDEST


def test_one_spelling_per_address() -> None:
    assert normalize_host("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_host("127.0.0.1") == "127.0.0.1"
    assert normalize_host("raft-1.example") == "raft-1.example"


def closed_within(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_hub_refuses_a_fifth_pending_connection_from_one_address_and_drops_silent_ones() -> None:
    config = HubConfig(pending_handshakes_per_address_max=4, hello_timeout_s=0.5, handshake_timeout_s=5)
    hub = MuxHub("n0", "127.0.0.1:0", SECRET, config=config)
    hub.start()
    host, port = hub.address.rsplit(":", 1)
    sockets: list[socket.socket] = []

    def connect_from(source: str) -> socket.socket:
        sock = socket.socket()
        sock.bind((source, 0))
        sock.connect((host, int(port)))
        sockets.append(sock)
        return sock

    try:
        held = [connect_from("127.0.0.2") for _ in range(4)]
        fifth = connect_from("127.0.0.2")
        assert closed_within(fifth, 0.4)  # refused at once, before any hello deadline
        assert hub.stats()["rejected_address_handshakes"] == 1
        other = connect_from("127.0.0.3")  # another address still gets in
        started = time.monotonic()
        assert closed_within(other, 5)  # ... and is closed for sending no HELLO
        assert time.monotonic() - started < 4  # hello_timeout_s (0.5 s), not handshake_timeout_s (5 s)
        assert all(closed_within(sock, 5) for sock in held)
        assert hub.stats()["handshake_timeouts"] >= 5
    finally:
        for sock in sockets:
            sock.close()
        hub.close()
