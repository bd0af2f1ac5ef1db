"""How often the members of a new consumer group, started together, share its first generation: N times,
three confluent-kafka consumers of a new group on threads of this process subscribe to one topic and read
it to the end (nothing committed, as ``raftlog bench perf``'s group phase); each start prints when the
first assignment came, how many members it held, and the data read over the records delivered (above 1: a
member joined after the first generation formed, and the partitions it took were read again from their
start by their new owner).

    .venv/bin/python scripts/group_starts.py [--system raftlog|kafka] [--starts 10] [--records 3000000]
    .venv/bin/python scripts/group_starts.py --bootstrap HOST:PORT,...   # a running cluster

Without ``--bootstrap`` it starts a raftlog dev cluster (``--system raftlog``; its first rebalance waits
0 ms, as ``raftlog dev``'s) or a 3-broker Apache Kafka (``--system kafka``, ``group.initial.rebalance.
delay.ms=0``, as in ``raftlog bench perf``) in a temporary directory and stops it at the end. Prints
numbers; every start is bounded by ``--seconds``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftlog_bench.kafka_peer import KafkaCluster
from raftlog_client.local_cluster import LocalCluster

PARTITIONS = 3


@dataclass
class Start:
    first_assignment_s: float  # from the subscribes until the first member had partitions
    first_generation: int  # members holding partitions in the first assignment
    distinct: int  # records delivered (each counted once)
    read: int  # records read, a re-read counted again
    seconds: float


def produce(bootstrap: str, topic: str, records: int, record_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while not all(
        p.leader >= 0 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic}: no leader for every partition within 30 s")
        time.sleep(0.1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    value = b"x" * record_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise SystemExit(f"{topic}: records left undelivered after 120 s")


def one_start(bootstrap: str, topic: str, records: int, members: int, seconds: float) -> Start:
    group = f"group-starts-{time.monotonic_ns()}"
    lock = threading.Lock()
    ends: dict[int, int] = {}
    counts = {"read": 0}
    assigned: list[tuple[float, int]] = []  # (when, how many partitions) per assignment
    begin = time.perf_counter()
    deadline = begin + seconds

    def member() -> None:
        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            with lock:
                assigned.append((time.perf_counter() - begin, len(partitions)))

        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10,
        })  # fmt: skip
        consumer.subscribe([topic], on_assign=on_assign)
        try:
            while time.perf_counter() < deadline:
                with lock:
                    if sum(ends.values()) >= records:
                        return
                reached: dict[int, int] = {}
                read = 0
                for message in consumer.consume(1000, 0.2):
                    if message.error() is None:
                        read += 1
                        partition, offset = message.partition(), message.offset()
                        if partition is not None and offset is not None:
                            reached[partition] = offset + 1
                with lock:
                    counts["read"] += read
                    for partition, end in reached.items():
                        ends[partition] = max(ends.get(partition, 0), end)
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, daemon=True) for _ in range(members)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - begin
    first_at = min((when for when, _ in assigned), default=float("nan"))
    # the first generation: the assignments made within 0.1 s of the first one that held partitions
    first = [count for when, count in assigned if when - first_at < 0.1 and count > 0]
    return Start(first_at, len(first), sum(ends.values()), counts["read"], elapsed)


@contextlib.contextmanager
def cluster(system: str, parent: str) -> Iterator[str]:
    if system == "kafka":
        kafka = KafkaCluster(parent)
        kafka.start()
        try:
            yield kafka.bootstrap_servers
        finally:
            kafka.stop()
    else:
        with LocalCluster(parent) as local:
            yield local.bootstrap_servers


def measure(bootstrap: str, args: argparse.Namespace) -> None:
    topic = f"group-starts-{time.time_ns()}"
    print(f"{args.system}: {bootstrap}; {args.records:,} records of {args.record_size} B", flush=True)
    try:
        produce(bootstrap, topic, args.records, args.record_size)
    except KafkaException as exc:
        raise SystemExit(f"{topic}: {exc}") from None
    split = 0
    for n in range(1, args.starts + 1):
        s = one_start(bootstrap, topic, args.records, args.members, args.seconds)
        split += s.first_generation < args.members
        read = s.read / max(s.distinct, 1)
        print(
            f"start {n:2d}: first assignment after {s.first_assignment_s:6.3f} s to {s.first_generation} of"
            f" {args.members} members; read {read:.2f}x the {s.distinct:,} records delivered;"
            f" {s.distinct / s.seconds:,.0f} records/s",
            flush=True,
        )
    print(f"{args.system}: the first generation missed a member in {split} of {args.starts} starts")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", help="a running cluster's Kafka listeners (default: start one)")
    parser.add_argument("--system", choices=("raftlog", "kafka"), default="raftlog")
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0, help="bound of each start")
    args = parser.parse_args()
    if min(args.starts, args.members, args.records, args.record_size) < 1 or args.seconds <= 0:
        parser.error("--starts, --members, --records, --record-size and --seconds must be positive")
    if args.bootstrap:
        measure(args.bootstrap, args)
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="group-starts-") as parent,
        cluster(args.system, parent) as bootstrap,
    ):
        measure(bootstrap, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
