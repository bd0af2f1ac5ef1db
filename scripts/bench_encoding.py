"""What encoding a Kafka answer costs the node: kio's ``entity_writer`` (what the door used before) against
``kafka_api.encoding`` (the function made from the schema), on four answers, each checked to be the same
bytes both ways (docs/performance.md, "Kafka answers encoded from their schema"):

    .venv/bin/python scripts/bench_encoding.py
"""

from __future__ import annotations

import io
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kafka_api import encoding, wire


def kio_encode(correlation_id: int, answer: Any) -> list[bytes]:
    header_class = answer.__header_schema__
    body = io.BytesIO()
    entity_writer(header_class)(body, header_class(correlation_id=correlation_id))
    entity_writer(type(answer))(body, answer)
    return [len(body.getvalue()).to_bytes(4, "big"), body.getvalue()]


def per_call_us(encode: Callable[[int, Any], Any], answer: Any, seconds: float) -> float:
    calls, began = 0, time.process_time()
    while True:
        encode(7, answer)
        calls += 1
        spent = time.process_time() - began
        if spent >= seconds:
            return spent / calls * 1e6


def answers() -> dict[str, Any]:
    produce = wire.response_class(0, 11)
    partition = wire.build(
        wire.sibling(produce, "PartitionProduceResponse"),
        index=0,
        error_code=ErrorCode.none,
        base_offset=5,
        log_append_time=None,
        log_start_offset=0,
        record_errors=(),
        error_message=None,
    )
    topic = wire.build(
        wire.sibling(produce, "TopicProduceResponse"), name="t", partition_responses=(partition,)
    )
    fetch = wire.response_class(1, 12)
    data = wire.build(
        wire.sibling(fetch, "PartitionData"),
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=0,
        aborted_transactions=(),
        preferred_read_replica=-1,
        records=b"x" * 1100,
    )
    fetched = wire.build(wire.sibling(fetch, "FetchableTopicResponse"), topic="t", partitions=(data,))
    metadata = wire.response_class(3, 12)
    broker = wire.sibling(metadata, "MetadataResponseBroker")
    part = wire.sibling(metadata, "MetadataResponsePartition")
    brokers = tuple(
        wire.build(broker, node_id=i, host="127.0.0.1", port=19092 + i, rack=None) for i in range(3)
    )
    partitions = tuple(
        wire.build(
            part,
            error_code=ErrorCode.none,
            partition_index=i,
            leader_id=i % 3,
            leader_epoch=4,
            replica_nodes=(0, 1, 2),
            isr_nodes=(0, 1, 2),
            offline_replicas=(),
        )
        for i in range(12)
    )
    described = wire.build(
        wire.sibling(metadata, "MetadataResponseTopic"),
        error_code=ErrorCode.none,
        name="t",
        topic_id=None,
        is_internal=False,
        partitions=partitions,
        topic_authorized_operations=-2147483648,
    )
    offsets = wire.response_class(2, 6)
    listed = tuple(
        wire.build(
            wire.sibling(offsets, "ListOffsetsPartitionResponse"),
            partition_index=i % 4,
            error_code=ErrorCode.none,
            timestamp=-1,
            offset=0,
            leader_epoch=0,
        )
        for i in range(100_000)
    )
    return {
        "Produce v11, 1 partition": wire.build(produce, responses=(topic,), throttle_time=wire.NO_THROTTLE),
        "Fetch v12, 1 partition of 1.1 KiB": wire.build(
            fetch,
            throttle_time=wire.NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=0,
            responses=(fetched,),
        ),
        "Metadata v12, 3 brokers, 12 partitions": wire.build(
            metadata,
            throttle_time=wire.NO_THROTTLE,
            brokers=brokers,
            cluster_id="c",
            controller_id=0,
            topics=(described,),
        ),
        "ListOffsets v6, 100,000 partitions": wire.build(
            offsets,
            throttle_time=wire.NO_THROTTLE,
            topics=(
                wire.build(wire.sibling(offsets, "ListOffsetsTopicResponse"), name="t", partitions=listed),
            ),
        ),
    }


def main() -> None:
    print(f"{'answer':42} {'kio µs':>12} {'made µs':>12} {'ratio':>6}")
    for name, answer in answers().items():
        assert b"".join(kio_encode(7, answer)) == b"".join(encoding.encode(7, answer)), name
        seconds = 2.0 if "100,000" not in name else 6.0
        before = per_call_us(kio_encode, answer, seconds)
        after = per_call_us(encoding.encode, answer, seconds)
        print(f"{name:42} {before:12,.1f} {after:12,.1f} {before / after:5.1f}x")


if __name__ == "__main__":
    main()
