"""OffsetCommit's metadata string, the same scenario against raftlog's Kafka listeners and Apache Kafka
itself (``test_differential.py``'s clusters and rules): what Kafka keeps and refuses, raftlog does."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from test_differential import SYSTEMS, _create, _differs, _topic

pytestmark = pytest.mark.slow


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_commits_metadata_is_kept_with_its_offset_and_one_too_long_refuses_that_partition_alone(
    servers: dict[str, str], system: str
) -> None:
    """OffsetCommit's metadata string (Kafka Streams keeps a partition's stream time there) is read back by
    OffsetFetch with its offset, replaced by a commit of the same offset, kept as sent (not ASCII too);
    one longer than ``offset.metadata.max.bytes`` (4,096) is OFFSET_METADATA_TOO_LARGE for its partition
    alone (librdkafka raises it for the whole call; the partitions read back show which went in), and the
    request's other partition is committed."""
    _differs(system, "offset-metadata")
    bootstrap = servers[system]
    topic = _topic("offset-metadata")
    _create(bootstrap, topic, partitions=2)
    group = f"metadata-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def committed() -> list[tuple[int, str | None]]:
        found = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        return [(tp.offset, tp.metadata) for tp in found]

    def commit(*offsets: TopicPartition) -> list[int]:
        """Each partition's error code (0: committed)."""
        try:
            answered = consumer.commit(offsets=list(offsets), asynchronous=False)
        except KafkaException as failed:
            return [failed.args[0].code()]
        return [0 if tp.error is None else tp.error.code() for tp in answered or ()]

    try:
        stream_time = "é🙂 partition time 1764480000000"
        assert commit(TopicPartition(topic, 0, 1, metadata=stream_time), TopicPartition(topic, 1, 2)) == [
            0,
            0,
        ]
        assert committed() == [(1, stream_time), (2, None)]  # none: librdkafka's empty metadata
        assert commit(TopicPartition(topic, 0, 1, metadata="replaced")) == [0]
        assert committed() == [(1, "replaced"), (2, None)]
        # through librdkafka, 4,095 characters are the most either system takes (Kafka's own answer)
        assert commit(TopicPartition(topic, 0, 3, metadata="m" * 4095)) == [0]
        assert committed() == [(3, "m" * 4095), (2, None)]
        codes = commit(
            TopicPartition(topic, 0, 5, metadata="m" * 4096), TopicPartition(topic, 1, 4, metadata="kept")
        )
        assert KafkaError.OFFSET_METADATA_TOO_LARGE in codes, codes
        assert committed() == [(3, "m" * 4095), (4, "kept")]
    finally:
        consumer.close()
