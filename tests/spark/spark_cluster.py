"""A real 3-node raftlog cluster (node processes on 127.0.0.1) and small HTTP helpers for the Spark
tests. Retention runs every 200 ms so that a test can make the log start move, and the cleaner every
200 ms so that a compacted topic is compacted while a test waits."""

from __future__ import annotations

import base64
import http.server
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from raftlog_client.blocking import BlockingClient
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster

RETENTION_CHECK_MS = 200
CLEANER_INTERVAL_MS = 200
REQUEST_TIMEOUT_MS = 30_000


@dataclass
class SparkTestCluster:
    """``raftlog dev`` through the launcher every benchmark uses, nodes checking retention often."""

    root: str
    local: LocalCluster | None = None

    @property
    def urls(self) -> list[str]:
        return [] if self.local is None else self.local.servers

    @property
    def servers(self) -> str:
        return ",".join(self.urls)

    def start(self) -> None:
        self.local = LocalCluster(
            self.root,
            serve_args=[
                f"--retention-check-ms={RETENTION_CHECK_MS}",
                f"--cleaner-interval-ms={CLEANER_INTERVAL_MS}",
            ],
        )
        self.local.start()

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()

    def client(self, url: str | None = None) -> BlockingClient:
        """A client of one node (``url``) or of the cluster; 503s are retried for REQUEST_TIMEOUT_MS."""
        return BlockingClient(self.urls if url is None else [url], REQUEST_TIMEOUT_MS)

    # -- topics and records --------------------------------------------------------------------------

    def create_topic(self, partitions: int, **configs: Any) -> str:
        name = f"t{uuid.uuid4().hex[:10]}"
        with self.client(self.urls[0]) as client:
            client.create_topic(name, partitions, 3, configs)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # every node knows it and every partition has a leader
            try:
                for url in self.urls:
                    with self.client(url) as client:
                        for p in range(partitions):
                            client.offsets(name, p)
                return name
            except RequestFailed:
                time.sleep(0.1)
        raise RuntimeError(f"topic {name} not served within 20 s")

    def produce(
        self, topic: str, partition: int, values: list[str], key: str | None = None, chunk: int = 5000
    ) -> None:
        """Values in requests of ``chunk`` records (each request is one batch on disk)."""

        def b64(text: str) -> str:
            return base64.b64encode(text.encode()).decode()

        for first in range(0, len(values), chunk):
            records = [
                {"value": b64(v), **({"key": b64(key)} if key is not None else {})}
                for v in values[first : first + chunk]
            ]
            with self.client(self.urls[0]) as client:
                client.produce(topic, records, partition=partition)

    def produce_records(self, topic: str, partition: int, records: list[dict[str, Any]]) -> None:
        """One request of records in the binary flavour's shape with raw bytes: ``key``/``value`` bytes
        or None (a tombstone), ``headers`` [(name, bytes or None)], ``timestamp`` ms (CreateTime)."""

        def b64(data: bytes | None) -> str | None:
            return None if data is None else base64.b64encode(data).decode()

        encoded = []
        for record in records:
            out: dict[str, Any] = {"key": b64(record.get("key")), "value": b64(record.get("value"))}
            if "headers" in record:
                out["headers"] = [{"key": name, "value": b64(data)} for name, data in record["headers"]]
            if "timestamp" in record:
                out["timestamp"] = record["timestamp"]
            encoded.append(out)
        with self.client(self.urls[0]) as client:
            client.produce(topic, encoded, partition=partition)

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        with self.client(self.urls[0]) as client:
            return client.offsets(topic, partition)

    def wait_for_log_start(self, topic: str, partition: int, timeout_s: float = 30.0) -> None:
        """Until retention has deleted the partition's first segments and stopped: the log start is above
        0 and has not moved for five retention checks (they run every RETENTION_CHECK_MS here)."""
        deadline = time.monotonic() + timeout_s
        settle_s = 5 * RETENTION_CHECK_MS / 1000
        seen, since = 0, time.monotonic()
        while True:
            log_start = self.bounds(topic, partition)[0]
            now = time.monotonic()
            if log_start != seen:
                seen, since = log_start, now
            elif log_start > 0 and now - since >= settle_s:
                return
            if now > deadline:
                raise RuntimeError(f"{topic}-{partition}: retention did not settle within {timeout_s} s")
            time.sleep(0.1)

    def end_offsets(self, topic: str) -> list[int]:
        with self.client(self.urls[0]) as client:
            count = client.partition_count(topic)
        return [self.bounds(topic, p)[1] for p in range(count)]


class FailingProxy:
    """An HTTP proxy in front of one node that passes the ``fail_at``-th POST on to the cluster (so it
    is applied) and then answers it with a 500, once: the client sees a write fail whose records were in
    fact appended, as when a connection drops after the server acted. A sink task fails on it, and its
    retry must not append those records again."""

    def __init__(self, target: str, fail_at: int) -> None:
        self.target = target
        self.fail_at = fail_at
        self.posts = 0
        self.failed = False
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k in ("Content-Type", "Accept")}
                request = urllib.request.Request(
                    proxy.target + self.path, data=body, method=self.command, headers=headers
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, kind, data = answer.status, answer.headers["Content-Type"], answer.read()
                except urllib.error.HTTPError as exc:
                    status, kind, data = exc.code, exc.headers["Content-Type"], exc.read()
                if self.command == "POST":
                    with proxy._lock:
                        proxy.posts += 1
                        if proxy.posts == proxy.fail_at and not proxy.failed:
                            proxy.failed = True
                            status, kind = 500, "application/json"
                            data = b'{"error_code": 50000, "message": "injected: answer lost"}'
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _forward
            do_POST = _forward

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FailingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
