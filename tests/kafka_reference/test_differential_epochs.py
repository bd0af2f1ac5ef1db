"""Leader epochs against Apache Kafka (KIP-101, KIP-320): Kafka's Java client validating its position
after a SIGKILL of the partition's leader, and the answers of OffsetForLeaderEpoch and Metadata to the
same questions on both systems. Epochs and ids differ between the systems (a Raft term; Kafka's own
counter), so what is compared is each system's answers to its own epochs: their shapes and errors."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from conftest import Systems
from java_client import JavaClient
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode

from kafka_api import wire

pytestmark = pytest.mark.slow

SYSTEMS = ("raftlog", "kafka")
METADATA, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 3, 2, 23
LATEST = -1


def metadata(raw: RawKafka, topic: str) -> Any:
    cls = wire.request_class(METADATA, 12)
    entry = wire.build(wire.sibling(cls, "MetadataRequestTopic"), name=topic, topic_id=None)
    body = wire.build(cls, topics=(entry,), allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)  # fmt: skip
    answer = raw.call(METADATA, 12, body)
    return answer.topics[0], {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}


def offset_for_leader_epoch(raw: RawKafka, topic: str, epoch: int, current: int) -> tuple[Any, ...]:
    cls = wire.request_class(OFFSET_FOR_LEADER_EPOCH, 4)
    partition = wire.build(wire.sibling(cls, "OffsetForLeaderPartition"), partition=0,
                           current_leader_epoch=current, leader_epoch=epoch)  # fmt: skip
    entry = wire.build(wire.sibling(cls, "OffsetForLeaderTopic"), topic=topic, partitions=(partition,))
    answer = raw.call(OFFSET_FOR_LEADER_EPOCH, 4, wire.build(cls, replica_id=-1, topics=(entry,)))
    found = answer.topics[0].partitions[0]
    return found.error_code, found.leader_epoch, found.end_offset


def log_end(raw: RawKafka, topic: str) -> int:
    cls = wire.request_class(LIST_OFFSETS, 6)
    partition = wire.build(wire.sibling(cls, "ListOffsetsPartition"), partition_index=0,
                           current_leader_epoch=-1, timestamp=LATEST)  # fmt: skip
    entry = wire.build(wire.sibling(cls, "ListOffsetsTopic"), name=topic, partitions=(partition,))
    body = wire.build(cls, replica_id=-1, isolation_level=0, topics=(entry,))
    found = raw.call(LIST_OFFSETS, 6, body).topics[0].partitions[0]
    assert found.error_code == ErrorCode.none
    return int(found.offset)


def leader_other_than(bootstrap: str, topic: str, gone: int) -> tuple[int, int, dict[int, str]] | None:
    """(leader, its epoch, the brokers) once a live broker names a leader other than ``gone``."""
    for address in bootstrap.split(","):
        try:
            raw = RawKafka(address)
        except OSError:
            continue  # the killed one
        try:
            topic_answer, brokers = metadata(raw, topic)
        finally:
            raw.close()
        partition = topic_answer.partitions[0] if topic_answer.partitions else None
        if partition is not None and partition.leader_id not in (-1, gone):
            return partition.leader_id, partition.leader_epoch, brokers
    return None


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_java_consumer_validates_its_position_after_a_leader_kill_and_both_answer_epochs_alike(
    systems: Systems, java_client: JavaClient, system: str
) -> None:
    bootstrap = systems.servers()[system]
    topic = f"java-epochs-{uuid.uuid4().hex[:8]}"
    killed = None
    try:
        with java_client.start("epoch-validation", {"bootstrap.servers": bootstrap}, topic) as run:
            positioned = json.loads(run.line("POSITIONED "))
            killed, first_epoch = int(positioned["leader"]), int(positioned["epoch"])
            systems.kill(system, killed)
            deadline = time.monotonic() + 120
            moved = None
            while moved is None:
                assert time.monotonic() < deadline, f"no leader other than {killed} after 120 s"
                moved = leader_other_than(bootstrap, topic, killed)
                if moved is None:
                    time.sleep(0.2)  # polling Metadata until the election shows
            run.send("GO")
            observed = run.result()
        # the consumer read every record once, in order, across the leader change; its position carried
        # the first epoch and validated against the new leader; a seek claiming the first epoch past its
        # end is found diverging where that epoch ended
        assert observed == {
            "read": 400,
            "dense_once_in_order": True,
            "epoch_rose": True,
            "position_after": 400,
            "stale_epoch_seek": {"offset": 200, "epoch_is_first": True},
        }

        leader, epoch, brokers = moved
        assert epoch > first_epoch
        raw = RawKafka(brokers[leader])
        try:
            end = log_end(raw, topic)
            assert end == 400
            # the current epoch ends at the log end; the first where the second began; an epoch above
            # every epoch: -1 and -1; a current epoch below the leader's is fenced, above it unknown
            assert offset_for_leader_epoch(raw, topic, epoch, epoch) == (ErrorCode.none, epoch, end)
            assert offset_for_leader_epoch(raw, topic, first_epoch, epoch) == (
                ErrorCode.none,
                first_epoch,
                200,
            )
            assert offset_for_leader_epoch(raw, topic, epoch + 5, -1) == (ErrorCode.none, -1, -1)
            assert offset_for_leader_epoch(raw, topic, epoch, first_epoch)[0] == ErrorCode.fenced_leader_epoch
            assert offset_for_leader_epoch(raw, topic, epoch, epoch + 1)[0] == ErrorCode.unknown_leader_epoch
        finally:
            raw.close()
        # Metadata: every live broker names the leader and its epoch, and the topic by one id
        ids = set()
        for broker, address in sorted(brokers.items()):
            if broker == killed:
                continue
            raw = RawKafka(address)
            try:
                topic_answer, _ = metadata(raw, topic)
                partition = topic_answer.partitions[0]
                assert (partition.leader_id, partition.leader_epoch) == (leader, epoch)
                ids.add(topic_answer.topic_id)
                if broker != leader:  # a follower sends a consumer to the leader, whatever the epoch
                    answer = offset_for_leader_epoch(raw, topic, epoch, epoch)
                    assert answer[0] == ErrorCode.not_leader_or_follower
            finally:
                raw.close()
        assert len(ids) == 1 and None not in ids and uuid.UUID(int=0) not in ids
    finally:
        if killed is not None:
            systems.restart(system, killed)
