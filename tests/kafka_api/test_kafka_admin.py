"""Topic administration through confluent-kafka's AdminClient: create (with configs, defaults, refusals),
describe and change configs (AlterConfigs and IncrementalAlterConfigs), add partitions (a group reads the
new ones), delete, describe the cluster. SCRAM credentials through it, on a listener that does not require
authentication (anyone may; SASL is still offered)."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode
from test_sasl_clients import authentication_errors, refused

from kafka_api import wire
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster


def _error(future: object) -> str:
    with pytest.raises(KafkaException) as raised:
        future.result(30)  # type: ignore[attr-defined]
    return str(raised.value)


def test_topics_are_created_configured_and_deleted_through_the_admin_client(
    kafka_cluster: LocalCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    created = admin.create_topics([
        NewTopic("adm-a", 3, 3, config={"retention.ms": "3600000"}),
        NewTopic("adm-b", -1, -1),  # the defaults: 1 partition, 3 replicas here
        NewTopic("__consumer_groups", 1, 1),
        NewTopic("adm-bad", 1, 1, config={"no.such.property": "1"}),
        NewTopic("adm-isr", 1, 3, config={"min.insync.replicas": "2", "preallocate": "false"}),
        NewTopic("adm-isr-3", 1, 3, config={"min.insync.replicas": "3"}),  # more than Raft's majority
    ])  # fmt: skip
    assert created["adm-a"].result(30) is None and created["adm-b"].result(30) is None
    assert created["adm-isr"].result(30) is None, "what raftlog already honours is accepted at creation"
    assert "INVALID_CONFIG" in _error(created["adm-isr-3"]) and "at most 2" in _error(created["adm-isr-3"])
    assert "reserved" in _error(created["__consumer_groups"])
    assert "INVALID_CONFIG" in _error(created["adm-bad"])
    assert "TOPIC_ALREADY_EXISTS" in _error(admin.create_topics([NewTopic("adm-a", 1, 1)])["adm-a"])
    with http_client(kafka_cluster) as client:
        assert client.partition_count("adm-a") == 3 and client.partition_count("adm-b") == 1

    resource = ConfigResource("topic", "adm-a")
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["retention.ms"].value == "3600000" and not described["retention.ms"].is_default
    assert described["segment.bytes"].is_default and described["compression.type"].value == "producer"

    changes = ConfigResource("topic", "adm-a", incremental_configs=[
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])  # fmt: skip
    assert admin.incremental_alter_configs([changes])[changes].result(30) is None
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["segment.bytes"].value == "1048576" and described["retention.ms"].value == "604800000"
    assert described["retention.ms"].is_default, "DELETE removes the property: its default applies again"
    assert not described["segment.bytes"].is_default
    bad = ConfigResource("topic", "adm-a", set_config={"segment.bytes": "12"})
    with pytest.warns(DeprecationWarning):  # AlterConfigs, the whole set at once: still served
        refused = admin.alter_configs([bad])[bad]
    assert "INVALID_CONFIG" in _error(refused)
    with http_client(kafka_cluster) as client:
        configs = json.loads(client.request("GET", "/topics/adm-a").body)["configs"]
    assert configs == {"segment.bytes": 1048576}, "the HTTP API shows the same configs, typed"
    whole = ConfigResource("topic", "adm-a", set_config={"retention.ms": "7200000"})
    with pytest.warns(DeprecationWarning):  # AlterConfigs replaces: what it leaves out goes
        assert admin.alter_configs([whole])[whole].result(30) is None
    with http_client(kafka_cluster) as client:
        configs = json.loads(client.request("GET", "/topics/adm-a").body)["configs"]
    assert configs == {"retention.ms": 7200000}
    # a config raftlog describes read-only is refused by name through either door: one rule, below both
    isr = ConfigResource("topic", "adm-a", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET),
    ])  # fmt: skip
    refused_here = _error(admin.incremental_alter_configs([isr])[isr])
    assert "INVALID_CONFIG" in refused_here and "read-only under raftlog" in refused_here, refused_here
    with http_client(kafka_cluster) as client, pytest.raises(RequestFailed) as refused_there:
        body = json.dumps({"configs": {"min.insync.replicas": 2}}).encode()
        client.request("PATCH", "/v1/topics/adm-a/configs", body, {"Content-Type": "application/json"})
    assert refused_there.value.status == 400 and "read-only under raftlog" in refused_there.value.message
    with http_client(kafka_cluster) as client:
        configs = json.loads(client.request("GET", "/topics/adm-a").body)["configs"]
    assert configs == {"retention.ms": 7200000}, "nothing was changed"

    cluster = admin.describe_cluster().result(30)
    assert sorted(node.id for node in cluster.nodes) == [1, 2, 3] and cluster.controller is not None

    deleted = admin.delete_topics(["adm-b", "adm-nosuch"])
    assert deleted["adm-b"].result(30) is None
    assert "UNKNOWN_TOPIC" in _error(deleted["adm-nosuch"])
    assert "adm-b" not in admin.list_topics(timeout=30).topics


def test_configs_changed_through_one_node_are_described_by_every_node_at_once(
    kafka_cluster: LocalCluster,
) -> None:
    """A client that changes a topic's configs and then describes them, through whichever nodes, reads its
    change: a node describes a topic's configs as the controller leader has them, not as far as its own
    replica of the controller has applied (a follower may apply a committed change a moment later)."""
    nodes = kafka_cluster.bootstrap_servers.split(",")
    admins = [AdminClient({"bootstrap.servers": node}) for node in nodes]
    admins[0].create_topics([NewTopic("adm-fresh", 1, 3)])["adm-fresh"].result(30)
    resource = ConfigResource("topic", "adm-fresh")
    for round_ in range(12):
        value = str(3_600_000 + round_)
        change = ConfigResource("topic", "adm-fresh", incremental_configs=[
            ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET),
        ])  # fmt: skip
        assert admins[round_ % 3].incremental_alter_configs([change])[change].result(30) is None
        for reader, admin in enumerate(admins):
            described = admin.describe_configs([resource])[resource].result(30)
            assert described["retention.ms"].value == value, (round_, nodes[reader])
        with http_client(kafka_cluster) as client:  # the HTTP door's view of the topic too
            configs = json.loads(client.request("GET", "/v1/topics/adm-fresh/configs").body)["configs"]
        assert configs == {"retention.ms": int(value)}


def test_create_partitions_grows_a_topic_and_a_subscribed_group_reads_the_new_partitions(
    kafka_cluster: LocalCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("adm-grow", 2, 3)])["adm-grow"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for partition in (0, 1):
        producer.produce("adm-grow", b"before-%d" % partition, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "adm-grow-readers", "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 500,
    })  # fmt: skip
    consumer.subscribe(["adm-grow"])
    try:
        read = _poll_values(consumer, {b"before-0", b"before-1"})
        assert read == {b"before-0", b"before-1"}

        checked = admin.create_partitions([NewPartitions("adm-grow", 6)], validate_only=True)
        assert checked["adm-grow"].result(30) is None
        assert len(admin.list_topics("adm-grow", timeout=10).topics["adm-grow"].partitions) == 2
        grown = admin.create_partitions([NewPartitions("adm-grow", 4)])["adm-grow"]
        assert grown.result(60) is None
        assert "INVALID_PARTITIONS" in _error(
            admin.create_partitions([NewPartitions("adm-grow", 4)])["adm-grow"]
        )
        assert "INVALID_PARTITIONS" in _error(
            admin.create_partitions([NewPartitions("adm-grow", 3)])["adm-grow"]
        )
        internal = admin.create_partitions([NewPartitions("__consumer_groups", 99)])["__consumer_groups"]
        assert "reserved" in _error(internal)
        topic = admin.list_topics("adm-grow", timeout=10).topics["adm-grow"]
        assert sorted(topic.partitions) == [0, 1, 2, 3]

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})  # sees the new count at once
        for partition in (2, 3):  # the new partitions take records, and the group is given them
            producer.produce("adm-grow", b"after-%d" % partition, partition=partition)
        assert producer.flush(60) == 0
        assert _poll_values(consumer, {b"after-2", b"after-3"}) == {b"after-2", b"after-3"}
    finally:
        consumer.close()
    with http_client(kafka_cluster) as client:
        assert client.partition_count("adm-grow") == 4
        assert [client.offsets("adm-grow", p) for p in range(4)] == [(0, 1)] * 4, "old records stay put"

    # by hand (kafka-topics --alter --replica-assignment): Kafka's refusals, then the new partition placed
    # on the brokers given, the first its preferred leader
    def grown_by_hand(count: int, brokers: list[list[int]]) -> Any:
        return admin.create_partitions([NewPartitions("adm-grow", count, replica_assignment=brokers)])

    too_few = _error(grown_by_hand(6, [[3, 1, 2]])["adm-grow"])
    assert "INVALID_REPLICA_ASSIGNMENT" in too_few and "Attempted to add 2 additional partition(s)" in too_few
    narrower = _error(grown_by_hand(5, [[3, 1]])["adm-grow"])
    assert "INVALID_REPLICA_ASSIGNMENT" in narrower and "which have 3 replica(s)" in narrower, narrower
    unknown = _error(grown_by_hand(5, [[3, 1, 9]])["adm-grow"])
    assert "INVALID_REPLICA_ASSIGNMENT" in unknown and "broker 9, but no such broker" in unknown, unknown
    assert grown_by_hand(5, [[3, 1, 2]])["adm-grow"].result(60) is None
    placed = admin.list_topics("adm-grow", timeout=10).topics["adm-grow"].partitions
    assert sorted(placed) == [0, 1, 2, 3, 4] and placed[4].replicas == [3, 1, 2], placed[4].replicas


def _poll_values(consumer: Consumer, wanted: set[bytes]) -> set[bytes]:
    """Values the consumer reads until it has all of ``wanted`` (or 90 s pass)."""
    seen: set[bytes] = set()
    deadline = time.monotonic() + 90
    while not wanted <= seen and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value())
    return seen


def _sent_as(settings: dict[str, Any], password: str, attempts: int = 30) -> int:
    """The offset of one record kafka-python sent to adm-sasl with ``settings`` and ``password``, trying
    again while a user just made has not reached every node (the error of the last attempt else)."""
    for attempt in range(attempts):
        producer = KafkaProducer(**settings, sasl_plain_password=password, max_block_ms=10_000)
        try:
            return int(producer.send("adm-sasl", b"as open").get(30).offset)
        except KafkaError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)
        finally:
            producer.close()
    raise AssertionError("unreachable")


def test_without_require_auth_anyone_manages_scram_credentials_and_sasl_is_still_offered(
    kafka_cluster: LocalCluster,
) -> None:
    """A listener that does not require authentication (``raftlog dev``'s) serves anonymous clients as
    before, and a client configured for SASL authenticates against the same users: kafka-python over
    SASL_PLAINTEXT with SCRAM-SHA-256, as a user an anonymous AdminClient made; a wrong password is
    refused all the same (librdkafka reports the failed authentication)."""
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    made = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("open", info, b"open sesame")])
    assert made["open"].result(30) is None
    described = admin.describe_user_scram_credentials(["open"])["open"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    sasl = {
        "bootstrap_servers": kafka_cluster.bootstrap_servers.split(","),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "open",
    }
    assert admin.create_topics([NewTopic("adm-sasl", 1, 3)])["adm-sasl"].result(30) is None
    assert _sent_as(sasl, "open sesame") == 0
    wrong = {
        "bootstrap.servers": kafka_cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "open", "sasl.password": "wrong",
    }  # fmt: skip
    assert authentication_errors(refused(wrong)), "librdkafka reports the failed authentication"
    gone = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("open", ScramMechanism.SCRAM_SHA_256)]
    )
    assert gone["open"].result(30) is None
    assert "RESOURCE_NOT_FOUND" in _error(admin.describe_user_scram_credentials(["open"])["open"])


def test_a_name_given_twice_in_one_create_topics_is_refused_once_and_the_others_are_created(
    kafka_cluster: LocalCluster,
) -> None:
    """As Kafka answers: one INVALID_REQUEST for the duplicated name, nothing created under it, and the
    request's other topics created and answered as usual (one answer per name, which clients can parse)."""
    version = 5
    cls = wire.request_class(19, version)
    topic_cls = wire.sibling(cls, "CreatableTopic")

    def topic(name: str) -> Any:
        return wire.build(topic_cls, name=name, num_partitions=1, replication_factor=1, assignments=(),
                          configs=())  # fmt: skip

    request = wire.build(cls, topics=(topic("adm-twice"), topic("adm-once"), topic("adm-twice")),
                         timeout=datetime.timedelta(seconds=30), validate_only=False)  # fmt: skip
    raw = RawKafka(kafka_cluster.kafka["n1"])
    try:
        answer = raw.call(19, version, request)
    finally:
        raw.close()
    results = {result.name: result for result in answer.topics}
    assert len(answer.topics) == len(results) == 2
    assert results["adm-once"].error_code is ErrorCode.none
    assert results["adm-twice"].error_code is ErrorCode.invalid_request
    assert results["adm-twice"].error_message == "Duplicate topic name."
    with http_client(kafka_cluster) as client:
        assert client.partition_count("adm-once") == 1
        assert "adm-twice" not in json.loads(client.request("GET", "/topics").body)


def test_create_topics_v7_answers_the_new_topics_id_as_metadata_names_it(kafka_cluster: LocalCluster) -> None:
    """Kafka 4.4's CreateTopics v7 answers each created topic's id (what Metadata v10+ and Fetch v13+ name it
    by); a topic not created (here: one that exists) answers the zero id, as Kafka does."""
    cls = wire.request_class(19, 7)
    topic = wire.build(wire.sibling(cls, "CreatableTopic"), name="adm-v7", num_partitions=1,
                       replication_factor=1, assignments=(), configs=())  # fmt: skip
    request = wire.build(cls, topics=(topic,), timeout=datetime.timedelta(seconds=30), validate_only=False)
    metadata_cls = wire.request_class(3, 12)
    asked = wire.build(wire.sibling(metadata_cls, "MetadataRequestTopic"), topic_id=None, name="adm-v7")
    metadata = wire.build(metadata_cls, topics=(asked,), allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)  # fmt: skip
    raw = RawKafka(kafka_cluster.kafka["n1"])
    try:
        [created] = raw.call(19, 7, request).topics
        [again] = raw.call(19, 7, request).topics
        [described] = raw.call(3, 12, metadata).topics
    finally:
        raw.close()
    assert created.error_code is ErrorCode.none and created.topic_id.int != 0, created
    assert created.topic_id == described.topic_id, (created, described)
    assert again.error_code is ErrorCode.topic_already_exists and again.topic_id is None, again  # kio: zero


def test_topic_changes_given_a_time_are_served_through_every_node(kafka_cluster: LocalCluster) -> None:
    """CreateTopics, CreatePartitions and DeleteTopics with an operation timeout (their ``timeout_ms``, how
    long the controller may take: ``topic_changes.ChangeTime``) through each node: those that do not lead
    the controller forward the change with its time (``AdminService.create_topic``'s ``timeout_ms``)."""
    for index, node in enumerate(kafka_cluster.bootstrap_servers.split(",")):
        admin = AdminClient({"bootstrap.servers": node})
        name = f"adm-timed-{index}"
        assert admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=30)[name].result(60) is None
        grown = admin.create_partitions([NewPartitions(name, 2)], operation_timeout=30)
        assert grown[name].result(60) is None
        assert admin.delete_topics([name], operation_timeout=30)[name].result(60) is None


def test_a_segment_size_that_would_refuse_a_default_producer_is_refused_as_kafka_4_refuses_it(
    kafka_cluster: LocalCluster,
) -> None:
    # segment.bytes 65536 was accepted, and a default producer's batches (librdkafka's batch.size is 1 MB)
    # were then all refused RECORD_LIST_TOO_LARGE: 2,000 of 2,000 records
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    created = admin.create_topics([
        NewTopic("adm-seg-small", 1, 3, config={"segment.bytes": "65536"}),
        NewTopic("adm-seg", 1, 3, config={"segment.bytes": "1048576"}),
    ])  # fmt: skip
    refused = _error(created["adm-seg-small"])
    assert "INVALID_CONFIG" in refused and "at least 1048576" in refused, refused
    assert created["adm-seg"].result(30) is None
    shrink = ConfigResource("topic", "adm-seg", incremental_configs=[
        ConfigEntry("segment.bytes", "65536", incremental_operation=AlterConfigOpType.SET),
    ])  # fmt: skip
    assert "INVALID_CONFIG" in _error(admin.incremental_alter_configs([shrink])[shrink])

    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})  # librdkafka's defaults
    outcomes: list[object] = []
    for _ in range(2000):
        producer.produce("adm-seg", b"x" * 1024, on_delivery=lambda error, _message: outcomes.append(error))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(outcomes) == 2000 and all(error is None for error in outcomes), {str(e) for e in outcomes}


def test_replicas_placed_by_hand_are_kept_as_given_and_bad_ones_refused(kafka_cluster: LocalCluster) -> None:
    """CreateTopics' ``assignments`` (``NewTopic(replica_assignment=...)``, ``kafka-topics
    --replica-assignment``): each partition on the brokers given, its first one the preferred leader, as
    the controller holds it; a broker there is not, a count given with them and mixed replication factors
    refused as Kafka refuses them, nothing made (the same tool steps against Kafka:
    tests/kafka_reference/test_differential_tools.py)."""
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    created = admin.create_topics([
        # librdkafka takes the count beside the assignment and sends -1 for both, as Kafka asks
        NewTopic("adm-hand", 3, replica_assignment=[[2, 1], [3, 2], [1, 3]]),
        NewTopic("adm-hand-nowhere", 1, replica_assignment=[[1, 9]]),
        NewTopic("adm-hand-mixed", 2, replica_assignment=[[1, 2], [3]]),
    ])  # fmt: skip
    assert created["adm-hand"].result(30) is None
    nowhere = _error(created["adm-hand-nowhere"])
    assert "INVALID_REPLICA_ASSIGNMENT" in nowhere and "includes broker 9, but no such broker" in nowhere
    mixed = _error(created["adm-hand-mixed"])
    assert "INVALID_REPLICA_ASSIGNMENT" in mixed and "same replication factor" in mixed
    version = 5
    cls = wire.request_class(19, version)
    topic_cls, assignment_cls = (
        wire.sibling(cls, "CreatableTopic"),
        wire.sibling(cls, "CreatableReplicaAssignment"),
    )
    on_one = (wire.build(assignment_cls, partition_index=0, broker_ids=(1,)),)
    both = wire.build(topic_cls, name="adm-hand-both", num_partitions=1, replication_factor=-1, configs=(),
                      assignments=on_one)  # fmt: skip
    raw = RawKafka(kafka_cluster.kafka["n1"])
    try:
        answer = raw.call(19, version, wire.build(cls, topics=(both,), timeout=datetime.timedelta(seconds=30),
                                                  validate_only=False))  # fmt: skip
    finally:
        raw.close()
    [result] = answer.topics
    assert result.error_code is ErrorCode.invalid_request
    assert result.error_message == (
        "A manual partition assignment was specified, but numPartitions was not set to -1."
    )
    with http_client(kafka_cluster) as client:
        partitions = json.loads(client.request("GET", "/topics/adm-hand").body)["partitions"]
        replicas = [[r["node"] for r in p["replicas"]] for p in partitions]
        assert replicas == [["n2", "n1"], ["n3", "n2"], ["n1", "n3"]]
        topics = json.loads(client.request("GET", "/topics").body)
        assert not {"adm-hand-nowhere", "adm-hand-mixed", "adm-hand-both"} & set(topics)
