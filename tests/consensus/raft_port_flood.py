"""An outsider flooding a Raft port: holds connections from many 127.0.0.x source addresses that never
send a valid HELLO, and opens a new one the moment the node closes one. Run as a process:

    python raft_port_flood.py HOST PORT SOURCES PER_SOURCE SECONDS ATTEMPTS_MAX

It stops after SECONDS or ATTEMPTS_MAX connection attempts, whichever comes first, and prints
``attempts=N held_max=M`` (M: the most connections the node had accepted and not yet closed at once).
"""

from __future__ import annotations

import errno
import selectors
import socket
import sys
import time


def flood(host: str, port: int, sources: int, per_source: int, seconds: float, attempts_max: int) -> None:
    selector = selectors.DefaultSelector()
    addresses = [f"127.0.0.{2 + i}" for i in range(sources)]
    attempts = held = held_max = 0
    deadline = time.monotonic() + seconds

    def open_one(source: str) -> None:
        nonlocal attempts
        attempts += 1
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.bind((source, 0))
        error = sock.connect_ex((host, port))
        if error not in (0, errno.EINPROGRESS):
            sock.close()
            return
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, [source, False])

    wanted = {source: per_source for source in addresses}
    while time.monotonic() < deadline and attempts < attempts_max:
        for source, missing in wanted.items():
            for _ in range(missing):
                open_one(source)
            wanted[source] = 0
        for key, mask in selector.select(0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            state = key.data
            if mask & selectors.EVENT_WRITE and not state[1]:
                state[1] = True
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    held += 1
                    held_max = max(held_max, held)
                selector.modify(sock, selectors.EVENT_READ, state)
                continue
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if data:
                continue  # never answered: we send no HELLO
            if state[1]:
                held -= 1
            selector.unregister(sock)
            sock.close()
            wanted[state[0]] += 1  # reconnect at once
    print(f"attempts={attempts} held_max={held_max}", flush=True)


if __name__ == "__main__":
    host, port, sources, per_source, seconds, attempts_max = sys.argv[1:7]
    flood(host, int(port), int(sources), int(per_source), float(seconds), int(attempts_max))
