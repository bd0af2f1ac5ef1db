"""Automatic topic creation (Kafka's ``auto.create.topics.enable``) on real clusters, with confluent-kafka
(librdkafka) and raw Metadata requests: ``raftlog dev``'s cluster creates the topic a producer names, with
the nodes' ``--num-partitions`` and three replicas; a Metadata request not allowing creation, or naming
"every topic", creates nothing; an impossible name is INVALID_TOPIC_EXCEPTION and never created; one
request naming many new topics starts at most ``CREATIONS_PER_REQUEST_MAX``; a cluster started without
it answers a producer's new topic UNKNOWN_TOPIC_OR_PART; a creation that cannot be placed is answered
INVALID_REPLICATION_FACTOR. (Under ACLs: ``test_acl_clients``.)

raftlog alone: the differential suite's Kafka peer runs with automatic creation off, and a second
Kafka cluster with it on costs this 2-core machine three more JVMs; what Kafka answers is taken from its
source (``KafkaApis.handleTopicMetadataRequest``, ``AutoTopicCreationManager``) and said in
docs/kafka-compatibility.md."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.auto_topics import CREATIONS_PER_REQUEST_MAX
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

PARTITIONS = 2  # the cluster's --num-partitions: not Kafka's default of 1, so the test sees it applied
PATIENCE_S = 60.0
BEING_CREATED = (ErrorCode.none, ErrorCode.leader_not_available)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("auto-topics")
    with LocalCluster(str(directory), nodes=3, serve_args=[f"--num-partitions={PARTITIONS}"]) as running:
        yield running


def _name(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:8]}"


def _metadata(address: str, names: list[str] | None, allow: bool = True, version: int = 8) -> dict[str, Any]:
    """Each topic's answer to one Metadata request naming ``names`` (None: every topic)."""
    cls = wire.request_class(3, version)
    topic_cls = wire.sibling(cls, "MetadataRequestTopic")
    topics = None if names is None else tuple(wire.build(topic_cls, name=name) for name in names)
    request = wire.build(cls, topics=topics, allow_auto_topic_creation=allow,
                         include_cluster_authorized_operations=False,
                         include_topic_authorized_operations=False)  # fmt: skip
    raw = RawKafka(address)
    try:
        answer = raw.call(3, version, request)
    finally:
        raw.close()
    return {topic.name: topic for topic in answer.topics}


def _topics(cluster: LocalCluster) -> set[str]:
    with http_client(cluster) as client:
        return set(client._json("GET", "/topics"))


def _until_created(cluster: LocalCluster, names: set[str]) -> None:
    wait_for(lambda: names <= _topics(cluster), f"the topics {sorted(names)} created", PATIENCE_S)


def _produce(settings: dict[str, Any], topic: str) -> KafkaError | int:
    """One record through a new producer: its offset, or the error its delivery failed with."""
    producer = Producer({**settings, "acks": "all", "enable.idempotence": True})
    outcome: list[KafkaError | int] = []
    producer.produce(
        topic, b"first", on_delivery=lambda error, message: outcome.append(error or message.offset())
    )
    producer.flush(60)
    assert len(outcome) == 1
    return outcome[0]


def test_a_producer_naming_a_new_topic_creates_it_with_the_nodes_defaults(cluster: LocalCluster) -> None:
    topic = _name("orders")
    assert _produce({"bootstrap.servers": cluster.bootstrap_servers}, topic) == 0
    with http_client(cluster) as client:
        made = client._json("GET", f"/topics/{topic}")
    assert (len(made["partitions"]), made["replication_factor"]) == (PARTITIONS, 3)
    named = _metadata(cluster.kafka["n2"], [topic])[topic]  # every node answers it as a topic now
    assert named.error_code is ErrorCode.none and len(named.partitions) == PARTITIONS


def test_a_request_that_does_not_allow_creation_or_names_no_topic_creates_nothing(
    cluster: LocalCluster,
) -> None:
    topic = _name("asked")
    before = _topics(cluster)
    answer = _metadata(cluster.kafka["n1"], [topic], allow=False)  # Kafka's consumers may send this
    assert answer[topic].error_code is ErrorCode.unknown_topic_or_partition
    assert topic not in _metadata(cluster.kafka["n1"], None), "every topic: none created"
    assert _topics(cluster) == before, "nothing was created"
    answer = _metadata(cluster.kafka["n1"], [topic], version=3)  # before v4 a client could not say no
    assert answer[topic].error_code in BEING_CREATED
    _until_created(cluster, {topic})


def test_an_impossible_name_is_refused_and_never_created(cluster: LocalCluster) -> None:
    impossible = ["has space", "a" * 201, "..", "caf\u00e9"]  # no topic anywhere may have these names
    reserved = "__mine"  # a name of the cluster's own topics: no client creates it
    before = _topics(cluster)
    answer = _metadata(cluster.kafka["n1"], [*impossible, reserved])
    assert {name: topic.error_code for name, topic in answer.items()} == dict.fromkeys(
        [*impossible, reserved], ErrorCode.invalid_topic_exception
    )
    answer = _metadata(cluster.kafka["n1"], [*impossible, reserved], allow=False)  # as Kafka answers
    assert {name: answer[name].error_code for name in impossible} == dict.fromkeys(
        impossible, ErrorCode.invalid_topic_exception
    )
    assert answer[reserved].error_code is ErrorCode.unknown_topic_or_partition, "a name Kafka allows"
    assert _topics(cluster) == before


def test_one_request_naming_many_new_topics_creates_at_most_its_share(cluster: LocalCluster) -> None:
    names = [_name(f"flood{i}") for i in range(300)]
    answer = _metadata(cluster.kafka["n3"], names)
    started = [name for name in names if answer[name].error_code in BEING_CREATED]
    assert started == names[:CREATIONS_PER_REQUEST_MAX], "the first ten named"
    left = {answer[name].error_code for name in names[CREATIONS_PER_REQUEST_MAX:]}
    assert left == {ErrorCode.unknown_topic_or_partition}, "the others wait for a later request"
    _until_created(cluster, set(started))
    assert _topics(cluster) & set(names) == set(started), "no creation beyond the request's share"


@pytest.fixture(scope="module")
def without(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("no-auto-topics")
    with LocalCluster(str(directory), nodes=1, dev_args=["--no-auto-create-topics"]) as running:
        yield running


def test_without_it_a_producer_naming_a_new_topic_is_told_it_is_unknown(without: LocalCluster) -> None:
    topic = _name("typo")
    settings = {
        "bootstrap.servers": without.bootstrap_servers,
        "topic.metadata.propagation.max.ms": 1000,  # how long librdkafka waits for a topic to appear
        "message.timeout.ms": 20_000,
    }
    failed = _produce(settings, topic)
    assert isinstance(failed, KafkaError), failed
    assert failed.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), failed
    assert topic not in _topics(without)
    assert _metadata(without.kafka["n1"], [topic])[topic].error_code is ErrorCode.unknown_topic_or_partition


@pytest.fixture(scope="module")
def narrow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One node asked to give new topics two replicas: no creation can be placed."""
    directory = tmp_path_factory.mktemp("narrow")
    with LocalCluster(str(directory), nodes=1, serve_args=["--default-replication-factor=2"]) as running:
        yield running


def test_a_creation_that_cannot_be_placed_is_answered_with_why(narrow: LocalCluster) -> None:
    topic = _name("wide")
    answer = _metadata(narrow.kafka["n1"], [topic])
    assert answer[topic].error_code is ErrorCode.invalid_replication_factor, "not a retry until timeout"
    assert topic not in _topics(narrow)
