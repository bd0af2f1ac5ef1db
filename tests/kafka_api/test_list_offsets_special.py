"""ListOffsets' special timestamps of Kafka 4 (-3 max timestamp, -4 earliest local, -5 latest tiered, -6
earliest pending upload) at
the door, against a stand-in data service (no processes), and each refused below the version that brought
it, as Kafka's ReplicaManager refuses it. Against Apache Kafka itself: ``kafka-get-offsets`` in
``tests/kafka_reference/test_differential_tools.py``."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.list_offsets import list_offsets
from partitions.data.service import PartitionOffsets, TimestampOffset


class Data:
    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return PartitionOffsets(log_start_offset=2, high_watermark=9, leader_epoch=4, log_start_epoch=3)

    async def max_timestamp_offset(self, topic: str, partition: int) -> TimestampOffset | None:
        return TimestampOffset(offset=5, timestamp_ms=7000, leader_epoch=4)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        raise AssertionError("a special timestamp is no time to look up")


class Door:
    node = SimpleNamespace(local=SimpleNamespace(data=Data()))

    def allows(self, *_: object) -> bool:
        return True


async def _asked(version: int, timestamp: int) -> tuple[ErrorCode, int, int, int]:
    cls = wire.request_class(2, version)
    part = wire.build(wire.sibling(cls, "ListOffsetsPartition"), partition_index=0, current_leader_epoch=-1,
                      timestamp=timestamp)  # fmt: skip
    topic = wire.build(wire.sibling(cls, "ListOffsetsTopic"), name="t", partitions=(part,))
    body = wire.build(
        cls, replica_id=-1, isolation_level=0, topics=(topic,), timeout=datetime.timedelta(seconds=1)
    )
    answer: Any = await list_offsets(Door(), wire.Request(2, version, 1, "test", body))  # type: ignore[arg-type]
    (found,) = answer.topics[0].partitions
    return found.error_code, found.offset, found.timestamp, found.leader_epoch


async def test_the_special_timestamps_of_kafka_4() -> None:
    assert await _asked(10, -3) == (ErrorCode.none, 5, 7000, 4)  # the record with the largest timestamp
    assert await _asked(10, -4) == (ErrorCode.none, 2, -1, 3)  # every record is local: the earliest
    assert await _asked(10, -5) == (ErrorCode.none, -1, -1, -1)  # nothing tiered, as Kafka answers it
    assert await _asked(11, -6) == (ErrorCode.none, -1, -1, -1)  # nothing pending upload, as Kafka 4.4


@pytest.mark.parametrize(("timestamp", "since"), [(-3, 7), (-4, 8), (-5, 9), (-6, 11)])
async def test_a_special_timestamp_below_its_version_is_unsupported(timestamp: int, since: int) -> None:
    assert (await _asked(since - 1, timestamp))[0] == ErrorCode.unsupported_version
    assert (await _asked(since, timestamp))[0] == ErrorCode.none
    assert (await _asked(11, -7))[0] == ErrorCode.invalid_request
