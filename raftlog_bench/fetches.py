"""``raftlog bench fetches``: what incremental fetch sessions (KIP-227) save a consumer of many partitions.

One node (``raftlog dev``), one topic of ``--partitions`` empty partitions, and a consumer caught up
on all of them (at offset 0), fetching over one Kafka connection with ``max_wait`` 0 (each answer at
once, no long poll), as a consumer of many idle partitions does between its records:

- without sessions: every Fetch names every partition (session epoch -1) and is answered every one;
- with sessions: one full Fetch opens a session (epoch 0), then each Fetch names none and is answered
  none (nothing changed).

For each, the request's and the answer's bytes on the wire and the median milliseconds from sending to
the whole answer read, over ``--fetches`` fetches (Fetch v12, topics by name: v13+ name them by id, the
same sizes give or take 12 bytes a topic). Numbers only, never assertions. Every size's topic stays: one
node holds their sum (3,100 partitions on a busy 2-core machine did not elect their leaders in time).

    raftlog bench fetches [--partitions 100,1000] [--fetches 50] [--dir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import io
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from raftlog_bench.arguments import add_dir_argument, add_json_argument, positive_ints, standalone_parser
from raftlog_bench.output import emit, say
from raftlog_client.blocking import BlockingClient
from raftlog_client.local_cluster import LocalCluster

DESCRIPTION = "bytes and time per Fetch of many idle partitions, with and without incremental fetch sessions"
FETCH = 1
VERSION = 12
READY_S = 300.0  # thousands of partitions elect their leaders on one node


@dataclass(frozen=True, slots=True)
class FetchCell:
    partitions: int
    sessions: bool
    request_bytes: int  # the median request, size prefix included
    response_bytes: int
    ms: float  # median, sending to the whole answer read
    partitions_answered: int


class _Connection:
    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    def fetch(self, body: FetchRequest) -> tuple[int, int, float, FetchResponse]:
        """(request bytes, response bytes, seconds, the answer)."""
        self.correlation_id += 1
        header_cls = FetchRequest.__header_schema__
        buffer = io.BytesIO()
        header = header_cls(
            request_api_key=i16(FETCH),
            request_api_version=i16(VERSION),
            correlation_id=i32(self.correlation_id),
            client_id="bench",
        )
        entity_writer(header_cls)(buffer, header)
        entity_writer(FetchRequest)(buffer, body)
        payload = buffer.getvalue()
        frame = struct.pack(">i", len(payload)) + payload
        start = time.perf_counter()
        self.sock.sendall(frame)
        size = struct.unpack(">i", self._read(4))[0]
        answer = self._read(size)
        seconds = time.perf_counter() - start
        _, used = entity_reader(FetchResponse.__header_schema__)(answer, 0)
        response, _ = entity_reader(FetchResponse)(answer, used)
        return len(frame), size + 4, seconds, response

    def _read(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(min(count, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the node")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def _request(topic: str, partitions: int, session_id: int, epoch: int) -> FetchRequest:
    parts = tuple(
        FetchPartition(partition=i32(p), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20))
        for p in range(partitions)
    )
    topics = (FetchTopic(topic=TopicName(topic), partitions=parts),) if parts else ()
    return FetchRequest(
        max_wait=i32Timedelta.parse(timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(50 << 20),
        isolation_level=i8(0),
        session_id=i32(session_id),
        session_epoch=i32(epoch),
        topics=topics,
        forgotten_topics_data=(),
        rack_id="",
    )


def _answered(response: FetchResponse) -> int:
    return sum(len(t.partitions) for t in response.responses)


def _ready(connection: _Connection, topic: str, partitions: int) -> None:
    """Until every partition answers without an error (its leader elected)."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        response = connection.fetch(_request(topic, partitions, 0, -1))[3]
        codes = [p.error_code for t in response.responses for p in t.partitions]
        if len(codes) == partitions and not any(codes):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: its partitions do not all answer after {READY_S:g} s")


def _measure(connection: _Connection, topic: str, partitions: int, fetches: int) -> list[FetchCell]:
    cells = []
    samples = [connection.fetch(_request(topic, partitions, 0, -1)) for _ in range(fetches)]
    cells.append(_cell(partitions, False, samples))
    opened = connection.fetch(_request(topic, partitions, 0, 0))[3]
    if opened.session_id == 0:
        raise RuntimeError("the node opened no fetch session")
    samples = []
    for epoch in range(1, fetches + 1):
        samples.append(connection.fetch(_request(topic, 0, opened.session_id, epoch)))
        if samples[-1][3].error_code:
            raise RuntimeError(f"incremental fetch at epoch {epoch}: error {samples[-1][3].error_code}")
    cells.append(_cell(partitions, True, samples))
    connection.fetch(_request(topic, 0, opened.session_id, -1))  # closes the session
    return cells


def _cell(partitions: int, sessions: bool, samples: list[tuple[int, int, float, FetchResponse]]) -> FetchCell:
    return FetchCell(
        partitions,
        sessions,
        int(statistics.median(s[0] for s in samples)),
        int(statistics.median(s[1] for s in samples)),
        round(statistics.median(s[2] for s in samples) * 1000, 3),
        int(statistics.median(_answered(s[3]) for s in samples)),
    )


def run(counts: Sequence[int], fetches: int, directory: str) -> list[FetchCell]:
    cells: list[FetchCell] = []
    with LocalCluster(tempfile.mkdtemp(prefix="bench-fetches-", dir=directory), nodes=1) as cluster:
        client = BlockingClient(cluster.servers, timeout_ms=60_000)
        for count in counts:
            topic = f"fetches-{count}"
            say(f"{topic}: creating {count} partitions")
            client.create_topic(topic, count, replication_factor=1)
            connection = _Connection(cluster.bootstrap_servers.split(",")[0])
            try:
                _ready(connection, topic, count)
                measured = _measure(connection, topic, count, fetches)
                cells.extend(measured)
                say(_table(measured))  # kept should a larger size fail
            finally:
                connection.close()
    return cells


def _table(cells: list[FetchCell]) -> str:
    lines = [
        f"{'partitions':>10} {'sessions':>8} {'request B':>10} {'answer B':>10} {'ms':>8} {'answered':>8}"
    ]
    for c in cells:
        lines.append(
            f"{c.partitions:>10} {'yes' if c.sessions else 'no':>8} {c.request_bytes:>10} "
            f"{c.response_bytes:>10} {c.ms:>8.3f} {c.partitions_answered:>8}"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partitions", type=positive_ints, default=[100, 1000],
        help="partition counts, comma-separated (default 100,1000; their sum on one node)",
    )  # fmt: skip
    parser.add_argument("--fetches", type=int, default=50, help="fetches measured of each kind (default 50)")
    add_dir_argument(parser, "the node's directory")
    add_json_argument(parser, "the cells")


def run_from_args(args: argparse.Namespace) -> int:
    cells = run(args.partitions, max(1, args.fetches), args.dir)
    results: list[dict[str, Any]] = [asdict(c) for c in cells]
    emit(args.json, _table(cells), results)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("fetches", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
