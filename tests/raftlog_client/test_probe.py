"""The one readiness probe: a node that serves, one that is up but not ready, and a port where nothing
answers are told apart, and a ready node says who it is."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from raftlog_client.probe import Probe, probe, ready
from raftlog_contract import READY_PATH


class _Status(http.server.BaseHTTPRequestHandler):
    answer: tuple[int, bytes] = (200, b"{}")

    def do_GET(self) -> None:
        status, body = self.answer if self.path == READY_PATH else (404, b"{}")
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def node() -> Iterator[tuple[str, type[_Status]]]:
    handler = type("Handler", (_Status,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_ready_node_says_who_it_is(node: tuple[str, type[_Status]]) -> None:
    url, handler = node
    handler.answer = (200, json.dumps({"node_id": "n2", "pid": 4242}).encode())
    assert probe(url) == Probe(True, "n2", 4242) and ready(url)


def test_a_node_up_but_not_ready_is_not_ready(node: tuple[str, type[_Status]]) -> None:
    url, handler = node
    handler.answer = (503, b'{"error_code": 50301, "message": "starting"}')
    assert probe(url) == Probe(False, None, None) and not ready(url)


def test_nothing_listening_is_no_answer() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert probe(f"http://127.0.0.1:{port}") is None and not ready(f"http://127.0.0.1:{port}")
