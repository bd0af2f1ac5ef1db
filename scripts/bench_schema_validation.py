"""What checking records against their schema costs a partition leader (docs/performance.md, "Schema
validation"): a 1-node cluster, two topics alike but for ``confluent.value.schema.validation``, the same
records written by confluent-kafka's AvroSerializer (a record of five fields) produced into each by one
confluent-kafka producer; printed per topic: records/s, and the node's CPU seconds per record (its
/proc/PID/stat utime + stime over the run), and the difference per record, which is what the check costs.

    .venv/bin/python scripts/bench_schema_validation.py [--records 200000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from raftlog_client.local_cluster import LocalCluster

SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "at_ms", "type": "long"},
        {"name": "duration_ms", "type": "int"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
    ],
}
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _run(cluster: LocalCluster, topic: str, values: list[bytes]) -> tuple[float, float]:
    """(records/s, node CPU seconds per record) of producing ``values`` into ``topic``."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 262144, "acks": "all"}
    )
    pid = cluster.pids["n1"]
    cpu_before, started = _cpu_seconds(pid), time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0, "records left unsent"
    elapsed, cpu = time.perf_counter() - started, _cpu_seconds(pid) - cpu_before
    return len(values) / elapsed, cpu / len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory, LocalCluster(directory, nodes=1) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topics = {"checked": {"confluent.value.schema.validation": "true"}, "unchecked": {}}
        created = admin.create_topics([NewTopic(name, 1, 1, config=c) for name, c in topics.items()])
        for future in created.values():
            future.result(30)
        registry = SchemaRegistryClient({"url": cluster.urls["n1"]})
        serializer = AvroSerializer(registry, json.dumps(SCHEMA))
        for name in topics:  # the same schema under each topic's subject: the same id
            serializer(_click(0), SerializationContext(name, MessageField.VALUE))
        values = [
            serializer(_click(i), SerializationContext("checked", MessageField.VALUE)) for i in range(1000)
        ]
        values = [values[i % len(values)] for i in range(args.records)]
        for round_number in range(1, args.rounds + 1):
            results = {name: _run(cluster, name, values) for name in ("unchecked", "checked")}
            for name, (rate, cpu) in results.items():
                per_record_us = cpu * 1e6
                print(
                    f"round {round_number} {name:9}: {rate:10,.0f} records/s, "
                    f"{per_record_us:6.2f} us node CPU/record"
                )
            extra = results["checked"][1] - results["unchecked"][1]
            print(f"round {round_number} the check: {extra * 1e6:+.2f} us node CPU per record")


def _click(i: int) -> dict[str, object]:
    return {
        "user": f"user-{i % 97}",
        "page": f"/catalog/item/{i}",
        "at_ms": 1_790_000_000_000 + i,
        "duration_ms": i % 5000,
        "referrer": None if i % 3 else "https://example.com/",
    }


if __name__ == "__main__":
    main()
