"""How long the admin and another user wait while three users hold a node's Kafka request bytes with size
prefixes of large requests whose bytes never come (issue 72, item 3).

    python scripts/fair_share_probe.py [--code DIR] [--per-user 1] [--prefix-mib 100,100,56]
                                       [--settle-s 20] [--wait-s 120] [--http] [-- SERVE_OPTION ...]

Starts one node (``raftlog serve --require-auth --super-user admin``, plain, its code from ``--code``: this
checkout by default, another one to measure before a change) with its default bounds, makes the users
admin, mallory, eve, trudy and bob, and has mallory, eve and trudy each open ``--per-user`` connections
that log in (SASL/PLAIN) and send only the 4-byte size prefix of a request (``--prefix-mib``: by default
100, 100 and 56 MiB, which fill the default 256 MiB to the byte), and do so again whenever the node
closes one. After ``--settle-s`` it times, each on a new connection: the admin's login and Metadata,
bob's login and Metadata, and the node's liveness, each waited at most ``--wait-s``, and prints
them with the node's resident memory. With ``--http``, the HTTP door instead: mallory, eve, trudy and
oscar each keep four connections that sent a produce's head announcing a 16 MiB body and none of it (their
shares of the default 256 MiB), and it times the admin token's topic creation and bob's produce. Numbers,
not a test: docs/security.md quotes them.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import pathlib
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import request_pin_probe  # noqa: E402  (a script beside this one: a frame, a node's RSS, an admin POST)
from request_pin_probe import answer, frame, one_node, rss_bytes  # noqa: E402

from kafka_api import wire  # noqa: E402
from raftlog_contract import ADMIN_TOPICS_PATH, LIVE_PATH, METRICS_PATH, TOPICS_PATH, USERS_PATH  # noqa: E402

MiB = 1024 * 1024
TOKEN = "fair-share-probe-admin-token"
USERS = ("admin", "mallory", "eve", "trudy", "oscar", "bob")
TOPIC = "fair-share-probe"


def log_in(kafka: str, user: str, source: str, wait_s: float) -> socket.socket:
    host, _, port = kafka.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=wait_s, source_address=(source, 0))
    sock.sendall(frame(17, 1, wire.build(wire.request_class(17, 1), mechanism="PLAIN"), 1))
    answer(sock)
    token = f"\0{user}\0{user}".encode()
    sock.sendall(frame(36, 2, wire.build(wire.request_class(36, 2), auth_bytes=token), 2))
    answer(sock)
    return sock


def served_s(kafka: str, user: str, wait_s: float) -> str:
    """How long a new connection of ``user`` took to log in and be answered a Metadata."""
    began = time.monotonic()
    try:
        sock = log_in(kafka, user, "127.0.0.1", wait_s)
        metadata = wire.build(wire.request_class(3, 12), topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)  # fmt: skip
        sock.sendall(frame(3, 12, metadata, 3))
        answer(sock)
        sock.close()
    except (OSError, ConnectionError) as exc:
        return f"not served ({type(exc).__name__} after {time.monotonic() - began:.1f} s)"
    return f"{time.monotonic() - began:.3f} s"


def live_s(url: str, wait_s: float) -> str:
    began = time.monotonic()
    try:
        with urllib.request.urlopen(url + LIVE_PATH, timeout=wait_s):
            pass
    except OSError as exc:
        return f"not answered ({type(exc).__name__})"
    return f"{time.monotonic() - began:.3f} s"


def _until_closed(sock: socket.socket, stop: threading.Event) -> None:
    """Drop what the node sends on ``sock`` (whose reads time out) until it closes the connection or
    ``stop``."""
    while not stop.is_set():
        try:
            if not sock.recv(65536):
                return
        except TimeoutError:
            continue


def attack(kafka: str, user: str, source: str, size: int, stop: threading.Event) -> None:
    """Log in as ``user`` and send the size prefix of a ``size`` byte request, again whenever the node
    closes the connection, until ``stop``."""
    while not stop.is_set():
        try:
            sock = log_in(kafka, user, source, 10)
            sock.sendall(struct.pack(">i", size))
            sock.settimeout(0.5)
            _until_closed(sock, stop)
            sock.close()
        except OSError:
            stop.wait(0.1)


def announce(url: str, user: str, size: int, stop: threading.Event) -> None:
    """Send the head of a produce announcing a ``size`` byte body as ``user`` and none of the body, again
    whenever the node closes the connection, until ``stop``."""
    host, port = url.removeprefix("http://").split(":")
    basic = base64.b64encode(f"{user}:{user}".encode()).decode()
    head = (f"POST {TOPICS_PATH}/{TOPIC} HTTP/1.1\r\nHost: n1\r\nAuthorization: Basic {basic}\r\n"
            f"Content-Type: application/vnd.kafka.json.v2+json\r\n"
            f"Content-Length: {size}\r\n\r\n").encode()  # fmt: skip
    while not stop.is_set():
        try:
            with socket.create_connection((host, int(port)), timeout=0.5) as sock:
                sock.sendall(head)
                _until_closed(sock, stop)
        except OSError:
            stop.wait(0.1)


def written_s(url: str, user: str | None, wait_s: float) -> str:
    """How long a small write took: ``user``'s produce, or (None) the admin token's topic creation."""
    began = time.monotonic()
    if user is None:
        body, path = {"name": f"{TOPIC}-2", "partitions": 1, "replication_factor": 1}, ADMIN_TOPICS_PATH
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    else:
        body, path = {"records": [{"value": {"from": user}}]}, f"{TOPICS_PATH}/{TOPIC}"
        basic = base64.b64encode(f"{user}:{user}".encode()).decode()
        headers = {"Authorization": f"Basic {basic}", "Content-Type": "application/vnd.kafka.json.v2+json"}
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=wait_s) as got:
            status = got.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError as exc:
        return f"not answered ({type(exc).__name__} after {time.monotonic() - began:.1f} s)"
    return f"{status} in {time.monotonic() - began:.3f} s"


def held_bytes(url: str, door: str = "kafka") -> float:
    request = urllib.request.Request(url + METRICS_PATH, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as got:
        for line in got.read().decode().splitlines():
            if line.startswith(f'raftlog_request_bytes_held{{door="{door}"}}'):
                return float(line.split()[1])
    return 0.0


def cuts(url: str) -> str:
    """The Kafka listener's cuts and refusals so far, from its /metrics (those not 0)."""
    request = urllib.request.Request(url + METRICS_PATH, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as got:
        lines = got.read().decode().splitlines()
    prefix = 'raftlog_kafka_connections_cut_total{reason="'
    found = [line.removeprefix(prefix).replace('"}', "") for line in lines if line.startswith(prefix)]
    return ", ".join(f for f in found if float(f.split()[1]) > 0) or "none"


def http(url: str, body: object) -> int:
    return request_pin_probe.http(url, body, TOKEN)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose node runs")
    parser.add_argument("--per-user", type=int, default=1)
    parser.add_argument(
        "--prefix-mib",
        default="100,100,56",
        help="mallory's, eve's and trudy's prefixes in MiB (one for all, or three)",
    )
    parser.add_argument("--wait-s", type=float, default=120.0)
    parser.add_argument("--settle-s", type=float, default=20.0, help="attack this long before timing")
    parser.add_argument("--http", action="store_true", help="the HTTP door: 16 MiB bodies announced")
    parser.add_argument("serve", nargs="*", help="options for the node, after --")
    args = parser.parse_args()
    sizes = [min(int(float(mib) * MiB), 100 * MiB) for mib in args.prefix_mib.split(",")]
    prefix_of = dict(zip(("mallory", "eve", "trudy"), sizes * 3 if len(sizes) == 1 else sizes, strict=False))
    options = ["--super-user", "admin", *args.serve]
    with (
        tempfile.TemporaryDirectory(prefix="fair-share-") as root,
        one_node(root, args.code, "fair-share-probe", TOKEN, options) as (process, node),
    ):
        url, kafka = node.http, node.kafka
        deadline = time.monotonic() + 60
        for user in USERS:
            while http(url + USERS_PATH, {"name": user, "password": user}) != 200:
                if process.poll() is not None or time.monotonic() > deadline:
                    print((pathlib.Path(root) / "n1.log").read_text()[-3000:])
                    return 1
                time.sleep(0.2)
        while "s" not in served_s(kafka, "bob", 5)[-2:]:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.2)
        if args.http:
            return http_attack(args, url, process.pid)
        before = rss_bytes(process.pid)
        stop = threading.Event()
        users = [u for u in ("mallory", "eve", "trudy") for _ in range(args.per_user)]
        attackers = [
            threading.Thread(target=attack, args=(kafka, user, f"127.0.0.{2 + i % 200}", prefix_of[user],
                                                  stop))
            for i, user in enumerate(users)
        ]  # fmt: skip
        with _attacking(attackers, stop, args):
            print(f"three users, {len(attackers)} connections, each logging in and sending the size prefix "
                  f"of a request of {args.prefix_mib} MiB (again once closed); the node holds "
                  f"{held_bytes(url) / MiB:.0f} MiB")  # fmt: skip
            print(f"the admin's login and Metadata: {served_s(kafka, 'admin', args.wait_s)}")
            print(f"bob's login and Metadata: {served_s(kafka, 'bob', args.wait_s)}")
            print(f"liveness: {live_s(url, args.wait_s)}")
            print(f"node RSS before {before / MiB:.0f} MiB, now {rss_bytes(process.pid) / MiB:.0f} MiB")
            print(f"the node's cuts: {cuts(url)}")
    return 0


@contextlib.contextmanager
def _attacking(
    attackers: list[threading.Thread], stop: threading.Event, args: argparse.Namespace
) -> Iterator[None]:
    """Start the ``attackers``, let them settle ``--settle-s`` seconds and say what runs, before anything is
    timed; on leaving, ``stop`` them and wait for them."""
    for thread in attackers:
        thread.start()
    try:
        settled_until = time.monotonic() + args.settle_s
        while time.monotonic() < settled_until:
            time.sleep(0.1)
        print(f"code: {args.code}  node options: {' '.join(args.serve) or '(defaults)'}")
        yield
    finally:
        stop.set()
        for thread in attackers:
            thread.join()


def http_attack(args: argparse.Namespace, url: str, pid: int) -> int:
    """Four users each announce four 16 MiB bodies (their share of the default 256 MiB) and send none."""
    made = {"name": TOPIC, "partitions": 1, "replication_factor": 1}
    if http(url + ADMIN_TOPICS_PATH, made) != 201:
        return 1
    before = rss_bytes(pid)
    stop = threading.Event()
    attackers = [
        threading.Thread(target=announce, args=(url, user, 16 * MiB, stop))
        for user in ("mallory", "eve", "trudy", "oscar") for _ in range(4)
    ]  # fmt: skip
    with _attacking(attackers, stop, args):
        print(f"four users, {len(attackers)} HTTP connections each announcing a 16 MiB body and sending none "
              f"(again once closed); the node holds {held_bytes(url, 'http') / MiB:.0f} MiB")  # fmt: skip
        print(f"the admin token's topic creation: {written_s(url, None, args.wait_s)}")
        print(f"bob's produce: {written_s(url, 'bob', args.wait_s)}")
        print(f"liveness: {live_s(url, args.wait_s)}")
        print(f"node RSS before {before / MiB:.0f} MiB, now {rss_bytes(pid) / MiB:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
