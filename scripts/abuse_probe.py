"""What an abusive client costs a node: starts a one-node cluster (``raftlog dev``'s, in a temporary
folder), plays one abuse against it and prints what it measured (the numbers of docs/security.md).

    .venv/bin/python scripts/abuse_probe.py bombs [--rounds 2]
    .venv/bin/python scripts/abuse_probe.py json-bodies [--clients 3] [--bodies 3]
    .venv/bin/python scripts/abuse_probe.py list-offsets [--entries 100000]

- ``bombs``: one decompression bomb of each codec at a time through the Kafka door (the bombs of
  ``tests/bombs.py``), and the node's peak resident memory growth (VmHWM, reset before each).
- ``json-bodies``: clients sending 8.8 MiB JSON produces of 300,000 headers and 8 MiB JSON arrays of
  numbers, while the node's liveness is asked every 0.2 s: its median and longest wait.
- ``list-offsets``: one ListOffsets naming ``--entries`` topics of one partition each, then one naming as
  many partitions of one topic, while another connection's ApiVersions is asked again and again: each
  request's time and the longest ApiVersions wait.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "kafka_api")]

from bombs import MiB, bomb_batch, streamed_zstd_bomb  # noqa: E402
from kafka_fixtures import RawKafka, http_client  # noqa: E402
from test_decompression_bombs import (  # noqa: E402
    MAX_MESSAGE_BYTES,
    TOPIC,
    _kafka_produce,
    _memory_bytes,
    _reset_peak,
)

from kafka_api import wire  # noqa: E402
from raftlog.storage.batch import Compression  # noqa: E402
from raftlog_client.local_cluster import LocalCluster  # noqa: E402
from raftlog_contract import JSON_V2, LIVE_PATH, PLAIN_JSON, group_offsets_path, partition_path  # noqa: E402


def _now_ms() -> int:
    return int(time.time() * 1000)


BOMBS: dict[str, Callable[[], bytes]] = {
    "gzip 1 MiB -> 1 GiB": lambda: bomb_batch(Compression.GZIP, 1024 * MiB, _now_ms()),
    "snappy 7.5 MiB -> 160 MiB": lambda: bomb_batch(Compression.SNAPPY, 160 * MiB, _now_ms()),
    "lz4 4.3 MiB -> 1 GiB": lambda: bomb_batch(Compression.LZ4, 1024 * MiB, _now_ms()),
    "zstd 33 KiB -> 1 GiB": lambda: bomb_batch(Compression.ZSTD, 1024 * MiB, _now_ms()),
    "zstd 8 KiB -> 256 MiB, streamed, 2 MiB window": lambda: streamed_zstd_bomb(256 * MiB, 21, _now_ms()),
    "zstd 8 KiB -> 256 MiB, streamed, 128 MiB window": lambda: streamed_zstd_bomb(256 * MiB, 27, _now_ms()),
}


def bombs(cluster: LocalCluster, rounds: int) -> None:
    with http_client(cluster) as client:
        client.create_topic(TOPIC, 1, 1, {"max.message.bytes": MAX_MESSAGE_BYTES})
    pid = cluster.pids["n1"]
    for round_number in range(rounds):
        for name, make in BOMBS.items():
            batch = make()
            _reset_peak(pid)
            before = _memory_bytes(pid, "VmRSS")
            started = time.monotonic()
            code, _ = _kafka_produce(cluster, batch)
            took = time.monotonic() - started
            growth = (_memory_bytes(pid, "VmHWM") - before) / MiB
            print(f"round {round_number + 1}  {name:<48} {code.name:<20} {took:5.2f} s  +{growth:.0f} MiB")


def _post(url: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(url, body, {"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as refused:
        refused.read()
        return refused.code


def json_bodies(cluster: LocalCluster, clients: int, bodies: int) -> None:
    with http_client(cluster) as client:
        client.create_topic("bodies", 1, 1)
    url = cluster.servers[0]
    headers = [{"key": f"h{j}", "value": "x"} for j in range(1000)]
    shapes = [
        (url + partition_path("bodies", 0), JSON_V2,
         json.dumps({"records": [{"value": "v", "headers": headers}] * 300}).encode()),
        (url + group_offsets_path("g"), PLAIN_JSON, b"[" + b"0," * (4 * MiB) + b"0]"),
    ]  # fmt: skip
    waits: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            started = time.monotonic()
            with urllib.request.urlopen(url + LIVE_PATH, timeout=300) as answer:
                answer.read()
            waits.append(time.monotonic() - started)
            done.wait(0.2)

    def abuse(index: int) -> list[int]:
        return [_post(shapes[(index + n) % 2][0], shapes[(index + n) % 2][2], shapes[(index + n) % 2][1])
                for n in range(bodies)]  # fmt: skip

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        statuses = [status for each in pool.map(abuse, range(clients)) for status in each]
    took = time.monotonic() - started
    done.set()
    prober.join()
    print(f"{clients} clients x {bodies} bodies in {took:.1f} s, answered {sorted(set(statuses))}")
    print(f"liveness: {len(waits)} probes, median {statistics.median(waits) * 1000:.0f} ms, "
          f"longest {max(waits) * 1000:.0f} ms")  # fmt: skip


def _list_offsets(names: list[str], partitions: int) -> Any:
    cls = wire.request_class(2, 6)
    part_cls = wire.sibling(cls, "ListOffsetsPartition")
    topic_cls = wire.sibling(cls, "ListOffsetsTopic")
    parts = tuple(
        wire.build(part_cls, partition_index=i, current_leader_epoch=-1, timestamp=-1)
        for i in range(partitions)
    )
    topics = tuple(wire.build(topic_cls, name=name, partitions=parts) for name in names)
    return wire.build(cls, replica_id=-1, isolation_level=0, topics=topics)


def list_offsets(cluster: LocalCluster, entries: int) -> None:
    address = cluster.kafka["n1"]
    versions_cls = wire.request_class(18, 3)
    versions = wire.build(versions_cls, client_software_name="probe", client_software_version="1")
    for shape, request in (
        (f"{entries} topics of one partition", _list_offsets([f"t{i}" for i in range(entries)], 1)),
        (f"{entries} partitions of one topic", _list_offsets(["t"], entries)),
    ):
        probe = RawKafka(address)
        probe.call(18, 3, versions)
        longest = 0.0
        done = threading.Event()

        def probing(probe: RawKafka = probe, done: threading.Event = done) -> None:
            nonlocal longest
            while not done.is_set():
                started = time.monotonic()
                probe.call(18, 3, versions)
                longest = max(longest, time.monotonic() - started)

        prober = threading.Thread(target=probing, daemon=True)
        prober.start()
        raw = RawKafka(address)
        raw.sock.settimeout(600)
        started = time.monotonic()
        raw.call(2, 6, request)
        took = time.monotonic() - started
        done.set()
        prober.join()
        raw.close()
        probe.close()
        print(
            f"ListOffsets of {shape}: {took:.2f} s; "
            f"another client's ApiVersions waited {longest:.2f} s at most"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="abuse", required=True)
    sub.add_parser("bombs").add_argument("--rounds", type=int, default=2)
    bodies = sub.add_parser("json-bodies")
    bodies.add_argument("--clients", type=int, default=3)
    bodies.add_argument("--bodies", type=int, default=3)
    sub.add_parser("list-offsets").add_argument("--entries", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory, LocalCluster(directory, nodes=1) as cluster:
        if args.abuse == "bombs":
            bombs(cluster, args.rounds)
        elif args.abuse == "json-bodies":
            json_bodies(cluster, args.clients, args.bodies)
        else:
            list_offsets(cluster, args.entries)


if __name__ == "__main__":
    main()
