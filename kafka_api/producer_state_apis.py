"""What an operator needs to find and abort a hanging transaction, as Kafka's ``kafka-transactions.sh``
asks for it: DescribeProducers (KIP-664) and WriteTxnMarkers.

DescribeProducers answers from this node's replica of each partition, leader or follower (as Kafka's
brokers do: the tool's ``--broker-id`` asks one broker about its replicas): every producer the partition
remembers, its epoch, last sequence, the coordinator epoch of its last marker here and the first offset of
its open transaction; ``last_timestamp`` is the timestamp of that transaction's first batch (-1 without an
open transaction), so that ``find-hanging`` measures a transaction's age from its start. It needs READ on
the topic (TOPIC_AUTHORIZATION_FAILED), as Kafka's.

WriteTxnMarkers is the brokers' own in Kafka (a coordinator ending a transaction in a partition), and the
abort path of ``kafka-transactions.sh abort`` (``Admin.abortTransaction``): each marker ends the producer's
transaction in each partition named, on its leader (NOT_LEADER_OR_FOLLOWER elsewhere), with a control
batch, exactly as a coordinator's marker (``DataService.write_txn_marker``; an older producer epoch is
INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED). As Kafka's
``KafkaApis.handleWriteTxnMarkersRequest`` authorizes it: ALTER on the cluster, else CLUSTER_ACTION on the
cluster (CLUSTER_AUTHORIZATION_FAILED for every partition, nothing written). Version 1 only: Kafka 4.0
removed v0 (KIP-896), v2 carries KIP-890's transaction version, which raftlog does not advertise.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from kafka_api.pacing import Pacer
from partitions.data.service import ProducerState
from partitions.security.acls import AclOperation, ResourceType
from partitions.transactions.service import Marker
from raftlog.errors import RaftlogError

MARKER_TIMEOUT_MS = 30_000  # how long a marker may wait for its commit (Kafka's request.timeout.ms)
NO_TRANSACTION = -1  # a marker an operator writes names no transaction of a coordinator's


async def describe_producers(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "TopicResponse")
    partition_cls = wire.sibling(cls, "PartitionResponse")
    state_cls = wire.sibling(cls, "ProducerState")
    data = door.node.local.data
    pacer = Pacer()
    topics = []
    for topic in request.body.topics:
        denied = not door.allows(AclOperation.READ, ResourceType.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            code, message = ErrorCode.none, None
            states: tuple[ProducerState, ...] = ()
            if denied:
                code = ErrorCode.topic_authorization_failed
            else:
                try:
                    states = await data.producers(topic.name, index)
                except RaftlogError as exc:
                    code, message = code_of(exc), str(exc)
            partitions.append(
                wire.build(
                    partition_cls,
                    partition_index=index,
                    error_code=code,
                    error_message=message,
                    active_producers=tuple(_state(state_cls, s) for s in states),
                )
            )
            await pacer.step()
        topics.append(wire.build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(topics))


def _state(cls: type, state: ProducerState) -> Any:
    return wire.build(
        cls,
        producer_id=state.producer_id,
        producer_epoch=state.producer_epoch,
        last_sequence=state.last_sequence,
        last_timestamp=state.last_timestamp_ms,
        coordinator_epoch=state.coordinator_epoch,
        current_txn_start_offset=state.transaction_start_offset,
    )


async def write_txn_markers(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    marker_cls = wire.sibling(cls, "WritableTxnMarkerResult")
    topic_cls = wire.sibling(cls, "WritableTxnMarkerTopicResult")
    partition_cls = wire.sibling(cls, "WritableTxnMarkerPartitionResult")
    allowed = door.allows(AclOperation.ALTER, ResourceType.CLUSTER) or door.allows(
        AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER
    )
    data = door.node.local.data
    pacer = Pacer()
    calls: list[tuple[Any, str, int, asyncio.Future[int] | None]] = []
    for marker in request.body.markers:
        ends = Marker(
            marker.producer_id,
            marker.producer_epoch,
            marker.transaction_result,
            marker.coordinator_epoch,
            write_control=True,
            transaction=NO_TRANSACTION,
        )
        for topic in marker.topics:
            for index in topic.partition_indexes:
                writing: asyncio.Future[int] | None = None
                if allowed:
                    writing = asyncio.ensure_future(
                        data.write_txn_marker(topic.name, index, ends, MARKER_TIMEOUT_MS)
                    )
                calls.append((marker, topic.name, index, writing))
                await pacer.step()
    pending = [writing for _, _, _, writing in calls if writing is not None]
    if pending:
        await asyncio.wait(pending)
    results: dict[int, dict[str, list[Any]]] = {}
    for marker, name, index, writing in calls:
        if writing is None:
            code = ErrorCode.cluster_authorization_failed
        else:
            error = writing.exception()
            code = ErrorCode.none if error is None else code_of(error)
        by_topic = results.setdefault(id(marker), {})
        by_topic.setdefault(name, []).append(
            wire.build(partition_cls, partition_index=index, error_code=code)
        )
    markers = tuple(
        wire.build(
            marker_cls,
            producer_id=marker.producer_id,
            topics=tuple(
                wire.build(topic_cls, name=name, partitions=tuple(parts))
                for name, parts in results.get(id(marker), {}).items()
            ),
        )
        for marker in request.body.markers
    )
    return wire.build(cls, markers=markers)
