"""Does a TLS client socket read by one thread while another writes it ever see an end the server never
sent? The shape of a Kafka-door test that failed about once in 14 runs under load (docs/testing.md): a
thread per connection blocked in ``SSLSocket.recv`` while the main thread ``sendall``s a large request on
the same sockets. OpenSSL forbids using one connection from two threads at once (python/cpython#143756);
Python 3.11's ``ssl`` does not serialise the calls.

    python scripts/tls_duplex_race.py shared|separate [ROUNDS]

Each round opens two TLS connections to an asyncio TLS server in this process (as the node's listener),
sends a 400 kB frame on each and reads a 600 kB answer. ``shared``: one reader thread per connection, the
main thread writing (the old test); ``separate``: one thread per connection writes and then reads (the
test now). Prints each round whose read failed, what the server saw of that connection, and the count.
Run it with the cores loaded (two CPU-bound loops beside it): the race is rare on an idle machine.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REQUEST_BYTES = 400_000
ANSWER_BYTES = 600_000
ROUND_TIMEOUT_S = 120


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class Server:
    """A TLS server on its own event loop thread: reads a frame, answers one, until the client's end."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.seen: list[str] = []  # how each connection ended, as the server saw it
        self.port = 0
        self._ready = threading.Event()
        threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True).start()
        self._ready.wait(30)

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0, ssl=self.context)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await server.serve_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.read(4)
                if not head:
                    self.seen.append("the client's end")
                    return
                head += await reader.readexactly(4 - len(head))
                await reader.readexactly(struct.unpack(">i", head)[0])
                answer = b"a" * ANSWER_BYTES
                writer.write(struct.pack(">i", len(answer)) + answer)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError) as exc:
            self.seen.append(repr(exc))
        finally:
            writer.close()


def _read(sock: ssl.SSLSocket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")  # what the test's reader says
        data += chunk
    return data


def _answer(sock: ssl.SSLSocket) -> None:
    _read(sock, struct.unpack(">i", _read(sock, 4))[0])


def one_round(server: Server, context: ssl.SSLContext, shared: bool) -> list[str]:
    """The errors of one round's reads (none: both answers read whole)."""
    socks = []
    for _ in range(2):
        sock = context.wrap_socket(
            socket.create_connection(("127.0.0.1", server.port)), server_hostname="127.0.0.1"
        )
        sock.sendall(struct.pack(">i", 10) + b"x" * 10)  # a first exchange, as the test's login
        _answer(sock)
        sock.settimeout(ROUND_TIMEOUT_S)
        socks.append(sock)
    errors: list[str] = []
    frame = struct.pack(">i", REQUEST_BYTES) + b"r" * REQUEST_BYTES

    def read(sock: ssl.SSLSocket) -> None:
        try:
            _answer(sock)
        except (OSError, ConnectionError) as exc:
            errors.append(repr(exc))

    def ask(sock: ssl.SSLSocket) -> None:
        sock.sendall(frame)
        read(sock)

    threads = [threading.Thread(target=read if shared else ask, args=(sock,)) for sock in socks]
    for thread in threads:
        thread.start()
    if shared:
        for sock in socks:
            sock.sendall(frame)
    for thread in threads:
        thread.join(ROUND_TIMEOUT_S)
    for sock in socks:
        sock.close()
    return errors


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("shared", "separate"):
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    shared, rounds = sys.argv[1] == "shared", int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    with tempfile.TemporaryDirectory() as directory:
        cert, key = _certificate(Path(directory))
        server = Server(cert, key)
        context = ssl.create_default_context(cafile=cert)
        failed = 0
        for number in range(rounds):
            seen_before = len(server.seen)
            errors = one_round(server, context, shared)
            if errors:
                failed += 1
                print(f"round {number}: client {errors}; server saw {server.seen[seen_before:]}", flush=True)
    print(f"{sys.argv[1]}: {rounds} rounds, {failed} with a failed read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
