"""Where a record's produce-to-consume time goes, seen from one process: a producer (acks=all, linger 0)
sends one record at a time and waits for its acknowledgement, while a consumer assigned to the partition's
end polls on a thread of its own, as Kafka's ``EndToEndLatency`` tool does with one record in flight.

    python scripts/e2e_probe.py --bootstrap HOST:PORT [--topic e2e_probe] [--records 1000] [--size 1024]

For each record it takes three times (``time.perf_counter``): sent, acknowledged (the delivery report) and
received (the consumer's poll returned it), and prints p50/p90/p99 of the produce (sent to acknowledged),
the end to end (sent to received) and received minus acknowledged: how long after its producer heard of
the commit the waiting fetch brought the record (negative: it came first). The first ``--warmup`` records
are left out. Against raftlog (a node's Kafka listener, ``raftlog dev``) and Apache Kafka alike; the topic
is made (one partition, three replicas) if missing. Numbers, not a test: docs/performance.md quotes them.
"""

from __future__ import annotations

import argparse
import threading
import time

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

WAIT_S = 10.0  # a record neither acknowledged nor received within this is counted lost


def _quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def _topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=10).topics:
        return
    future = admin.create_topics([NewTopic(topic, 1, 3)])[topic]
    try:
        future.result(timeout=30)
    except KafkaException as exc:  # made meanwhile (auto-created): fine
        if "already exists" not in str(exc).lower():
            raise
    time.sleep(3)  # its leader elected and known to the clients' metadata


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="e2e_probe")
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    _topic(args.bootstrap, args.topic)
    producer = Producer(
        {"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
    )
    consumer = Consumer(
        {"bootstrap.servers": args.bootstrap, "group.id": "e2e_probe", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(args.topic, 0, OFFSET_END)])
    received: dict[int, float] = {}
    arrived = threading.Condition()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error() or message.key() is None:
                continue
            now = time.perf_counter()
            with arrived:
                received[int(message.key())] = now
                arrived.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(2)  # the consumer's first fetch in place at the partition's end
    sent: dict[int, float] = {}
    acked: dict[int, float] = {}
    value = b"x" * args.size
    for i in range(args.records):
        sent[i] = time.perf_counter()
        producer.produce(
            args.topic, value, key=str(i).encode(), partition=0,
            on_delivery=lambda error, _m, i=i: error is None and acked.__setitem__(i, time.perf_counter()),
        )  # fmt: skip
        producer.flush(WAIT_S)
        with arrived:
            arrived.wait_for(lambda i=i: i in received, WAIT_S)
    stop.set()
    reader.join()
    consumer.close()
    kept = [i for i in range(args.warmup, args.records) if i in received and i in acked]
    series = {
        "produce": [acked[i] - sent[i] for i in kept],
        "end to end": [received[i] - sent[i] for i in kept],
        "received - acked": [received[i] - acked[i] for i in kept],
    }
    for name, values in series.items():
        quantiles = "  ".join(f"p{round(q * 100)} {_quantile(values, q):6.2f}" for q in (0.5, 0.9, 0.99))
        print(f"{name:17s} {quantiles} ms")
    counted = args.records - args.warmup
    print(f"records {len(kept)} of {counted} (lost {counted - len(kept)})")


if __name__ == "__main__":
    main()
