"""How much of a node's memory one logged-in user pins with large Kafka requests sent slowly.

    python scripts/request_pin_probe.py [--code DIR] [--connections 6] [--frame-mib 100]
                                        [--rate-mib-per-s 4] [--seconds 40] [-- SERVE_OPTION ...]

Starts one node (``raftlog serve --require-auth``, plain, its code from ``--code``: this checkout by
default, another one to measure a release before a change), makes a user, and opens ``--connections``
connections as that user, each logging in with SASL/PLAIN and then sending one Produce frame of
``--frame-mib`` MiB at ``--rate-mib-per-s`` (the frame's body is zeros: the node refuses it once whole).
It samples the node's resident memory every 0.1 s for ``--seconds`` and prints it before, at its peak,
and what each connection got the node to take. Options after ``--`` go to the node (``--kafka-request-
bytes-max``, ...). Numbers, not a test: docs/security.md quotes them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafka_api import wire  # noqa: E402
from raftlog_contract import USERS_PATH  # noqa: E402
from raftlog_dev import layout  # noqa: E402
from raftlog_node.options import TOKEN_ENV  # noqa: E402

MiB = 1024 * 1024
TOKEN = "request-pin-probe-admin-token"
USER, PASSWORD = "mallory", "mallory's password"


def frame(api_key: int, version: int, body: object, correlation_id: int) -> bytes:
    import io

    from kio.serial import entity_writer

    cls = wire.request_class(api_key, version)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    header = header_cls(request_api_key=api_key, request_api_version=version,
                        correlation_id=correlation_id, client_id="probe")  # fmt: skip
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, body)
    return struct.pack(">i", len(buffer.getvalue())) + buffer.getvalue()


def answer(sock: socket.socket) -> bytes:
    """The next response's bytes after its size prefix (header and body)."""

    def read(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the node")
            data += chunk
        return data

    return read(struct.unpack(">i", read(4))[0])


def answer_error(sock: socket.socket, api_key: int, version: int) -> int:
    from kio.serial import entity_reader

    payload = answer(sock)
    cls = wire.response_class(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, _ = entity_reader(cls)(payload, used)
    return int(body.error_code.value)


def log_in(kafka: str, source: str) -> socket.socket:
    host, _, port = kafka.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=30, source_address=(source, 0))
    sock.sendall(frame(17, 1, wire.build(wire.request_class(17, 1), mechanism="PLAIN"), 1))
    assert answer_error(sock, 17, 1) == 0
    token = f"\0{USER}\0{PASSWORD}".encode()
    sock.sendall(frame(36, 2, wire.build(wire.request_class(36, 2), auth_bytes=token), 2))
    error = answer_error(sock, 36, 2)
    if error:
        raise RuntimeError(f"login refused: error {error}")
    return sock


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def push(
    kafka: str, index: int, frame_bytes: int, rate: int, stop: threading.Event, sent: dict[int, int]
) -> None:
    sock = log_in(kafka, f"127.0.0.{2 + index}")
    header = struct.pack(">hhih", 0, 9, 99, 1) + b"p" + b"\0"  # a Produce v9 request header, client "p"
    payload = memoryview(struct.pack(">i", frame_bytes) + header + bytes(frame_bytes - len(header)))
    sock.settimeout(0.5)
    chunk, offset = rate // 10, 0
    try:
        while offset < len(payload) and not stop.is_set():
            began = time.monotonic()
            with contextlib.suppress(TimeoutError):
                offset += sock.send(payload[offset : offset + chunk])
            time.sleep(max(0.0, 0.1 - (time.monotonic() - began)))
    except OSError:
        pass
    sent[index] = offset
    stop.wait()
    sock.close()


def http(url: str, body: object, token: str = TOKEN) -> int:
    """The status of a JSON POST with the admin ``token`` (0: no answer)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


@contextlib.contextmanager
def one_node(
    root: str, code: str, name: str, token: str, options: Sequence[str]
) -> Iterator[tuple[subprocess.Popen[bytes], layout.DevNode]]:
    """A node of the checkout ``code`` alone, its directory and log (n1.log) in ``root``, logins required,
    ``token`` its admin token, started with ``options`` too; terminated on leaving."""
    secret = pathlib.Path(root) / "cluster.secret"
    secret.write_text(f"{name}-cluster-secret-0123456789\n")
    nodes = layout.plan(1, layout.free_base_port(1), False)
    argv = [*layout.node_argv(nodes[0], nodes, root, str(secret), None), "--require-auth", *options]
    env = {**os.environ, TOKEN_ENV: token, "PYTHONPATH": code}
    with open(pathlib.Path(root) / "n1.log", "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=code)
    try:
        yield process, nodes[0]
    finally:
        process.terminate()
        process.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose node runs")
    parser.add_argument("--connections", type=int, default=6)
    parser.add_argument("--frame-mib", type=float, default=100.0)
    parser.add_argument("--rate-mib-per-s", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("serve", nargs="*", help="options for the node, after --")
    args = parser.parse_args()
    frame_bytes = min(int(args.frame_mib * MiB), 100 * MiB) - 64  # within Kafka's socket.request.max.bytes
    options = ["--kafka-frame-timeout-ms", "600000", *args.serve]
    with (
        tempfile.TemporaryDirectory(prefix="request-pin-") as root,
        one_node(root, args.code, "request-pin-probe", TOKEN, options) as (process, node),
    ):
        deadline = time.monotonic() + 60
        while http(node.http + USERS_PATH, {"name": USER, "password": PASSWORD}) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                print((pathlib.Path(root) / "n1.log").read_text()[-3000:])
                return 1
            time.sleep(0.2)
        while True:
            try:
                log_in(node.kafka, "127.0.0.1").close()
                break
            except (OSError, AssertionError):
                if time.monotonic() > deadline:
                    return 1
                time.sleep(0.2)
        time.sleep(1.0)
        before = rss_bytes(process.pid)
        stop, sent = threading.Event(), dict[int, int]()
        rate = int(args.rate_mib_per_s * MiB)
        threads = [threading.Thread(target=push, args=(node.kafka, i, frame_bytes, rate, stop, sent))
                   for i in range(args.connections)]  # fmt: skip
        for thread in threads:
            thread.start()
        peak, began = before, time.monotonic()
        while time.monotonic() - began < args.seconds:
            peak = max(peak, rss_bytes(process.pid))
            time.sleep(0.1)
        stop.set()
        for thread in threads:
            thread.join()
        print(f"code: {args.code}  node options: {' '.join(args.serve) or '(defaults)'}")
        print(f"{args.connections} connections of one user, each a {frame_bytes / MiB:.0f} MiB request "
              f"at {args.rate_mib_per_s:g} MiB/s, {args.seconds:g} s")  # fmt: skip
        print(f"node RSS before {before / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB, "
              f"grown {(peak - before) / MiB:.0f} MiB")  # fmt: skip
        print("sent per connection (MiB, the kernel's socket buffers included): "
              + ", ".join(f"{sent.get(i, 0) / MiB:.0f}" for i in range(args.connections)))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
