"""A consume-transform-produce loop with exactly-once semantics on confluent-kafka's transactional producer.

    .venv/bin/python examples/transactional_loop.py --broker 127.0.0.1:9092 --source orders \\
        --sink orders-enriched --group enricher --transactional-id enricher-1

It reads ``--source`` as a member of ``--group`` (read_committed) and, for each batch it reads, opens a
transaction, writes one record to ``--sink`` per record read (same key, same partition number; the value is
JSON ``{"partition", "offset", "value"}`` naming the record it came from) and commits the consumed offsets in
the same transaction (``send_offsets_to_transaction`` with the consumer's group metadata, KIP-447). Either
the outputs and the offsets both commit, or neither does: read with ``isolation.level=read_committed``, the
sink holds one record per source record, whatever the loop's crashes.

``--transactional-id`` names this instance: started again after a crash, it fences its old self, and the
transaction that one left open is aborted. A commit that fails with a retriable error is asked again; an error
that asks for an abort (``txn_requires_abort``) aborts the batch's transaction and reads the batch again; a
fatal one (fenced by a newer instance) ends the loop.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

TIMEOUT_S = 60.0


def transform(message: Message) -> bytes:
    value = message.value()
    return json.dumps(
        {
            "partition": message.partition(),
            "offset": message.offset(),
            "value": value.decode() if value else None,
        }
    ).encode()


def rewind(consumer: Consumer, batch: list[Message]) -> None:
    """Back to the batch's first record in each partition, to read it again after an abort."""
    first: dict[tuple[str, int], int] = {}
    for message in batch:
        key = (message.topic(), message.partition())
        first[key] = min(first.get(key, message.offset()), message.offset())
    for (topic, partition), offset in first.items():
        consumer.seek(TopicPartition(topic, partition, offset))


def process(consumer: Consumer, producer: Producer, sink: str, batch: list[Message]) -> None:
    """One transaction: the batch's outputs and the offsets after it."""
    producer.begin_transaction()
    for message in batch:
        if message.error():
            raise KafkaException(message.error())
        producer.produce(sink, key=message.key(), value=transform(message), partition=message.partition())
    after: dict[tuple[str, int], int] = {}
    for message in batch:
        key = (message.topic(), message.partition())
        after[key] = max(after.get(key, 0), message.offset() + 1)
    offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in after.items()]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # a commit that timed out is asked again (its outcome is the coordinator's to tell)
        try:
            producer.commit_transaction(TIMEOUT_S)
            return
        except KafkaException as error:
            if not error.args[0].retriable() or time.monotonic() > deadline:
                raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True, help="bootstrap servers, HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True, help="as many partitions as --source")
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True, help="this instance's, the same across restarts")
    parser.add_argument("--batch", type=int, default=100, help="records read per transaction, at most")
    parser.add_argument("--session-timeout-ms", type=int, default=45000)
    parser.add_argument("--transaction-timeout-ms", type=int, default=60000)
    args = parser.parse_args()

    consumer = Consumer(
        {
            "bootstrap.servers": args.broker,
            "group.id": args.group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.broker,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
        }
    )
    producer.init_transactions(TIMEOUT_S)
    stopping: dict[str, Any] = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    consumer.subscribe([args.source])
    try:
        while not stopping["now"]:
            batch = consumer.consume(args.batch, 1.0)
            if not batch:
                continue
            try:
                process(consumer, producer, args.sink, batch)
            except KafkaException as error:
                if not error.args[0].txn_requires_abort():
                    raise  # fatal (fenced, say): this instance stops
                producer.abort_transaction(TIMEOUT_S)
                rewind(consumer, batch)
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
