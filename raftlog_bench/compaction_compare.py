"""A compacted topic on raftlog beside the same on Apache Kafka, through the same client (confluent-kafka),
one system after the other on this machine (``raftlog bench compaction --compare kafka``).

For each system: a 3-node cluster, a topic of one partition replicated 3 ways with ``cleanup.policy``
``compact`` and ``segment.bytes`` 1 MiB (each system's cleaner at its defaults otherwise: a look every 15 s,
``min.cleanable.dirty.ratio`` 0.5); ``records`` keyed records over ``keys`` keys produced with acks=all;
then, with nothing more produced, the partition read from its beginning every few seconds until compaction
has removed at least ``COMPACTED_SHARE`` of them. Reported: produce records/s and the servers' CPU for it,
the seconds from the last acknowledgement until compacted, and the servers' CPU meanwhile (each system's
cleaner on three replicas; the reads cost both the same). Numbers only.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from raftlog_bench.cpu import CpuMeter
from raftlog_bench.output import say

TOPIC = "keyed"
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(1024 * 1024)}
COMPACTED_SHARE = 0.8  # of the records produced, removed
POLL_S = 3.0
WAIT_S_MAX = 300.0
QUIET = 2  # librdkafka's log level: a client left over from the cluster stopped before says nothing


@dataclass(frozen=True, slots=True)
class SystemRow:
    system: str
    records: int
    produce_records_s: float
    produce_servers_cpu_s: float
    compacted_after_s: float | None  # None: not within WAIT_S_MAX
    cleaning_servers_cpu_s: float
    records_left: int


def _count(bootstrap: str) -> int:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"count-{time.monotonic_ns()}",
         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    count = 0
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(10_000, 1.0)
            for message in messages:
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    return count
    finally:
        consumer.close()
    raise RuntimeError("counting the partition's records did not reach its end in 60 s")


def _measure(system: str, bootstrap: str, pids: dict[str, int], records: int, keys: int) -> SystemRow:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": QUIET})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=CONFIGS)])[TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "log_level": QUIET})
    value = b"v" * 100
    say(f"{system}: producing {records:,} keyed records")
    meter = CpuMeter(pids)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, key=b"key-%d" % (i % keys), partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError(f"{system}: records still unacknowledged after 120 s")
    produce_s = time.perf_counter() - started
    produced = meter.stop()
    say(f"{system}: waiting for compaction")
    meter = CpuMeter(pids)
    waited = time.perf_counter()
    left = records
    compacted_after = None
    while time.perf_counter() - waited < WAIT_S_MAX:
        left = _count(bootstrap)
        if left <= records * (1 - COMPACTED_SHARE):
            compacted_after = time.perf_counter() - waited
            break
        time.sleep(POLL_S)
    cleaning = meter.stop()
    return SystemRow(
        system, records, records / produce_s, produced.nodes_total_s, compacted_after,
        cleaning.nodes_total_s, left,
    )  # fmt: skip


def run(systems: list[str], records: int, keys: int, directory: str) -> list[dict[str, Any]]:
    rows = []
    for system in systems:
        scratch = tempfile.mkdtemp(prefix=f"raftlog-bench-compaction-{system}-", dir=directory)
        if system == "raftlog":
            from raftlog_client.local_cluster import LocalCluster

            with LocalCluster(scratch, nodes=3) as cluster:
                rows.append(_measure(system, cluster.bootstrap_servers, cluster.pids, records, keys))
        else:
            from raftlog_bench.kafka_peer import KafkaCluster

            kafka = KafkaCluster(scratch)
            kafka.start()
            try:
                rows.append(_measure(system, kafka.bootstrap_servers, kafka.pids, records, keys))
            finally:
                kafka.stop()
    return [asdict(row) for row in rows]


def format_table(rows: list[dict[str, Any]], keys: int) -> str:
    lines = [
        f"one partition x 3 replicas, cleanup.policy=compact, segment.bytes 1 MiB, {keys:,} keys, 100-byte "
        "values, confluent-kafka acks=all",
        f"{'system':<10}{'records':>10}{'produce/s':>12}{'CPU s':>8}{'compacted after s':>19}{'CPU s':>8}"
        f"{'left':>9}",
    ]
    for r in rows:
        after = "-" if r["compacted_after_s"] is None else f"{r['compacted_after_s']:.1f}"
        lines.append(
            f"{r['system']:<10}{r['records']:>10,}{r['produce_records_s']:>12,.0f}"
            f"{r['produce_servers_cpu_s']:>8.1f}{after:>19}{r['cleaning_servers_cpu_s']:>8.1f}"
            f"{r['records_left']:>9,}"
        )
    return "\n".join(lines)
