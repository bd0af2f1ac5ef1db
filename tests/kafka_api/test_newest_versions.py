"""The versions Kafka 4.4 added that kio 0.6.5 lacks (built from Kafka's own schema files by
kafka_api/message_classes.py), on a real cluster: ApiVersions v5's cluster and node check (KIP-1242),
TxnOffsetCommit v6's topics by id. (DeleteGroups v3's message: test_delete_groups.py; Kafka's Java
client 4.4 negotiates all three: test_exactly_once.py's consume-transform-produce commits with
TxnOffsetCommit v6.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.apis import APIS
from raftlog_client.local_cluster import LocalCluster

TOPIC = "newest-versions"


@pytest.fixture(scope="module")
def raw(kafka_cluster: LocalCluster) -> Iterator[RawKafka]:
    connection = RawKafka(kafka_cluster.kafka["n1"])  # broker 1
    yield connection
    connection.close()


def _versions(raw: RawKafka, cluster_id: str | None, node_id: int = -1) -> Any:
    cls = wire.request_class(18, 5)
    body = wire.build(cls, client_software_name="raftlog-test", client_software_version="1",
                      cluster_id=cluster_id, node_id=node_id)  # fmt: skip
    return raw.call(18, 5, body)


def test_api_versions_v5_tells_a_client_that_names_another_cluster_or_node_to_bootstrap_again(
    kafka_cluster: LocalCluster, raw: RawKafka
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    cluster_id = admin.list_topics(timeout=30).cluster_id
    tops = {api.key: api.max_version for api in APIS.values()}
    for named, node in ((None, -1), (cluster_id, 1)):  # none named, or this cluster and this node
        answer = _versions(raw, named, node)
        assert answer.error_code == ErrorCode.none
        served = {key.api_key: key.max_version for key in answer.api_keys}
        assert served == tops and (served[18], served[28], served[42]) == (5, 6, 3)
    for named, node in ((cluster_id, 2), (cluster_id, -1), ("another-cluster", 1)):
        answer = _versions(raw, named, node)
        assert answer.error_code == ErrorCode.rebootstrap_required, (named, node)
        assert answer.api_keys == ()  # as Kafka's broker: no API listed with the error
    assert _versions(raw, None).error_code == ErrorCode.none  # the connection goes on


def test_txn_offset_commit_v6_finds_each_topic_by_its_id(kafka_cluster: LocalCluster, raw: RawKafka) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
    described = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(timeout=30)
    high, low = (
        described.topic_id.get_most_significant_bits(),
        described.topic_id.get_least_significant_bits(),
    )
    known = uuid.UUID(bytes=high.to_bytes(8, "big", signed=True) + low.to_bytes(8, "big", signed=True))
    unknown = uuid.uuid4()
    cls = wire.request_class(28, 6)
    topic_cls, partition_cls = (
        wire.sibling(cls, "TxnOffsetCommitRequestTopic"),
        wire.sibling(cls, "TxnOffsetCommitRequestPartition"),
    )
    partition = wire.build(partition_cls, partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                           committed_metadata=None)  # fmt: skip
    body = wire.build(
        cls, transactional_id="newest-txn", group_id="newest-group", producer_id=999_999, producer_epoch=0,
        generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=tuple(wire.build(topic_cls, topic_id=t, partitions=(partition,)) for t in (known, unknown)),
    )  # fmt: skip
    answer = raw.call(28, 6, body)
    by_id = {t.topic_id: t.partitions[0].error_code for t in answer.topics}
    assert by_id[unknown] == ErrorCode.unknown_topic_id
    # the known topic is found by its id and goes on to the transaction's checks: a producer id no
    # transaction has is refused as Kafka refuses it, not as a topic unknown
    assert by_id[known] not in (ErrorCode.unknown_topic_id, ErrorCode.none), by_id[known]
