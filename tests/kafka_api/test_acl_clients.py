"""ACLs on a real 3-node ``raftlog dev --secure`` cluster (TLS, SASL, ``--enforce-acls``), tried where users
meet them, with clients of other authors: confluent-kafka's Producer, Consumer and AdminClient, kafka-python,
curl with HTTP Basic and the ``raftlog`` command. A user without an ACL is refused produce and fetch over
both doors and nothing is written; granted WRITE and READ it works; a prefixed ACL; a DENY over an ALLOW;
an ACL revoked (through AdminClient.delete_acls, and through ``raftlog acl delete``) refuses again on a
connection that was let in before, at its next request; a consumer group needs READ on its group; creating
a topic needs CREATE, with AdminClient or by producing to it; Metadata hides what the user may not
describe; a super user passes; ACLs made with AdminClient are the ones ``GET /v1/acls`` shows, and only who
may ALTER the cluster makes them; the schema registry asks a user's subject ACLs, which Kafka's ACL APIs
neither show nor delete."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaPythonResourceType
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from test_sasl_clients import (
    PATIENCE_S,
    _authenticate,
    _handshake,
    admin_client,
    as_admin,
    curl,
    grant,
    make_user,
    new_topic,
    sasl,
)
from topic_id_scenarios import NOWHERE, commit_v10, delete_v6, fetch_offsets, metadata_v12, produce_v13

from kafka_api import wire
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("acls")
    with LocalCluster(str(directory), nodes=3, dev_args=["--secure"]) as running:
        yield running


def user(cluster: LocalCluster) -> tuple[str, dict[str, Any]]:
    """A new user without ACLs, and its confluent-kafka settings (SASL_SSL, SCRAM-SHA-256)."""
    name = f"u{uuid.uuid4().hex[:8]}"
    make_user(cluster, name, f"{name}'s password")
    return name, sasl(cluster, name, f"{name}'s password")


def topic_acl(name: str, topic: str, operation: str, **more: str) -> dict[str, Any]:
    return {
        "resource_type": "topic",
        "name": topic,
        "principal": f"User:{name}",
        "operation": operation,
        **more,
    }


def acls_everywhere(cluster: LocalCluster, principal: str) -> list[list[dict[str, Any]]]:
    """Each node's ``GET /v1/acls?principal=``."""
    token = ("-H", f"Authorization: Bearer {cluster.security['admin_token']}")
    answers = []
    for url in cluster.servers:
        status, body = curl(cluster, f"{url}/v1/acls?principal={principal}", *token)
        assert status == 200, body
        answers.append(json.loads(body)["acls"])
    return answers


def produce(settings: dict[str, Any], topic: str, producer: Producer | None = None) -> KafkaError | int:
    """One record, the JSON string "v", through a producer (a new one unless given): its offset, or the
    error it failed with."""
    producer = producer or Producer({**settings, "enable.idempotence": False, "message.timeout.ms": 10_000})
    outcome: list[KafkaError | int] = []
    producer.produce(
        topic, b'"v"', on_delivery=lambda error, message: outcome.append(error or message.offset())
    )
    producer.flush(30)
    assert len(outcome) == 1
    return outcome[0]


def read(settings: dict[str, Any], topic: str, consumer: Consumer | None = None) -> list[bytes] | KafkaError:
    """The records of partition 0 (by assignment), or the first error the consumer reports."""
    consumer = consumer or Consumer({**settings, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            if values:
                return values
            continue
        if message.error() is not None:
            if message.error().code() == KafkaError._PARTITION_EOF:
                return values
            if message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                continue  # librdkafka looks up the (unused) group's coordinator even when assigned
            return message.error()  # type: ignore[no-any-return]
        values.append(message.value())
    return values


def http(cluster: LocalCluster, name: str, method: str, path: str, body: object = None) -> tuple[int, Any]:
    argv = ["-X", method, cluster.servers[1] + path, "-u", f"{name}:{name}'s password"]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    status, text = curl(cluster, *argv)
    return status, json.loads(text) if text else None


def http_produce(cluster: LocalCluster, name: str, topic: str) -> tuple[int, Any]:
    return http(cluster, name, "POST", f"/topics/{topic}/partitions/0", {"records": [{"value": "h"}]})


def records_as_admin(cluster: LocalCluster, topic: str) -> list[Any]:
    status, body = as_admin(cluster, "GET", f"/topics/{topic}/partitions/0/records?offset=0")
    assert status == 200, body
    return [r["value"] for r in json.loads(body)]


def code(error: KafkaError | int | list[bytes]) -> int | None:
    return error.code() if isinstance(error, KafkaError) else None


# -- refused, then allowed -------------------------------------------------------------------------------


@contextlib.contextmanager
def kafka_python_admin(cluster: LocalCluster, name: str, password: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(
        bootstrap_servers=cluster.bootstrap_servers.split(","), security_protocol="SASL_SSL",
        ssl_cafile=cluster.security["ca"], sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=name,
        sasl_plain_password=password,
    )  # fmt: skip
    try:
        yield client
    finally:
        client.close()


def kafka_python_read(cluster: LocalCluster, name: str, topic: str) -> list[bytes]:
    """Partition 0 from its beginning through kafka-python's consumer (by assignment, no group)."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers.split(","), security_protocol="SASL_SSL",
        ssl_cafile=cluster.security["ca"], sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=name,
        sasl_plain_password=f"{name}'s password", consumer_timeout_ms=5_000,
    )  # fmt: skip
    try:
        consumer.assign([KafkaPythonPartition(topic, 0)])
        consumer.seek_to_beginning()
        return [message.value for message in consumer]
    finally:
        consumer.close()


def test_without_an_acl_produce_and_fetch_are_refused_on_both_doors_and_nothing_is_written(
    cluster: LocalCluster,
) -> None:
    name, settings = user(cluster)
    topic = new_topic(cluster)
    assert code(produce(settings, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    status, body = http_produce(cluster, name, topic)
    assert status == 403 and body["error_code"] == 40301 and body["operation"] == "write", body
    status, body = http(cluster, name, "GET", f"/topics/{topic}/partitions/0/records?offset=0")
    assert status == 403 and body["operation"] == "read", body
    assert records_as_admin(cluster, topic) == [], "a refused produce writes nothing"

    # DESCRIBE lets a client find the partition's leader; its Fetch is still refused
    grant(cluster, topic_acl(name, topic, "describe"))
    fetched = read(settings, topic)
    assert code(fetched) == KafkaError.TOPIC_AUTHORIZATION_FAILED and "Fetch" in str(fetched), fetched
    with pytest.raises(TopicAuthorizationFailedError):
        kafka_python_read(cluster, name, topic)

    grant(cluster, topic_acl(name, topic, "write"), topic_acl(name, topic, "read"))
    idempotent = Producer({**settings, "enable.idempotence": True})  # InitProducerId: WRITE on a topic
    assert produce(settings, topic, idempotent) == 0
    assert http_produce(cluster, name, topic)[0] == 200
    assert read(settings, topic) == [b'"v"', b'"h"']
    assert kafka_python_read(cluster, name, topic) == [b'"v"', b'"h"']
    status, body = http(cluster, name, "GET", f"/topics/{topic}/partitions/0/records?offset=0")
    assert status == 200 and [r["value"] for r in body] == ["v", "h"]


def test_a_prefixed_acl_and_a_deny_over_an_allow(cluster: LocalCluster) -> None:
    name, settings = user(cluster)
    prefix = f"p{uuid.uuid4().hex[:6]}-"
    status, body = as_admin(cluster, "POST", "/v1/topics", {"name": f"{prefix}a", "partitions": 1})
    assert status == 201, body
    other = new_topic(cluster)
    grant(cluster, topic_acl(name, prefix, "write", pattern_type="prefixed"), topic_acl(name, other, "all"))
    assert produce(settings, f"{prefix}a") == 0
    assert (
        code(produce(settings, f"{prefix[:-1]}")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )  # not the prefix
    assert produce(settings, other) == 0
    grant(cluster, topic_acl(name, other, "write", permission="deny"))
    assert code(produce(settings, other)) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # the DENY wins
    assert http_produce(cluster, name, other)[0] == 403
    assert read(settings, other) == [b'"v"'], "the DENY is of WRITE only"


def test_a_revoked_acl_refuses_again_on_connections_let_in_before(cluster: LocalCluster) -> None:
    name, settings = user(cluster)
    topic = new_topic(cluster)
    write = topic_acl(name, topic, "write")
    grant(cluster, write, topic_acl(name, topic, "read"))
    producer = Producer({**settings, "enable.idempotence": False, "message.timeout.ms": 10_000})
    consumer = Consumer({**settings, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert produce(settings, topic, producer) == 0
        assert read(settings, topic, consumer) == [b'"v"']

        admin = admin_client(cluster)  # the super user revokes it through Kafka's DeleteAcls
        revoke = AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{name}",
            None,
            AclOperation.WRITE,
            AclPermissionType.ANY,
        )
        deleted = admin.delete_acls([revoke])[revoke].result(30)
        assert [(b.name, b.operation) for b in deleted] == [(topic, AclOperation.WRITE)]
        wait_for(
            lambda: all(len(acls) == 1 for acls in acls_everywhere(cluster, f"User:{name}")),
            "the WRITE ACL revoked on every node",
            PATIENCE_S,
        )
        assert code(produce(settings, topic, producer)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert http_produce(cluster, name, topic)[0] == 403
        assert records_as_admin(cluster, topic) == ["v"]

        # READ revoked through the raftlog command: the consumer's next fetch is refused
        env = {**os.environ, "RAFTLOG_ADMIN_TOKEN": cluster.security["admin_token"]}
        done = subprocess.run(
            [sys.executable, "-m", "raftlog_cli", "acl", "delete", "--principal", name, "--topic", topic,
             "--operation", "read", "--server", cluster.servers[2], "--ca", cluster.security["ca"]],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout.startswith("deleted 1 ACL(s)"), done.stdout + done.stderr
        wait_for(
            lambda: all(acls == [] for acls in acls_everywhere(cluster, f"User:{name}")),
            "the READ ACL revoked on every node",
            PATIENCE_S,
        )
        producer_as_admin = Producer({**sasl(cluster, "admin", cluster.security["password"])})
        assert produce({}, topic, producer_as_admin) == 1  # a record for the consumer to be refused
        assert code(read(settings, topic, consumer)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_a_consumer_group_needs_read_on_its_group(cluster: LocalCluster) -> None:
    name, settings = user(cluster)
    topic = new_topic(cluster)
    grant(cluster, topic_acl(name, topic, "read"))
    assert produce(sasl(cluster, "admin", cluster.security["password"]), topic) == 0
    group = f"g-{topic}"

    def consume() -> list[bytes] | KafkaError:
        consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                if message.error() is not None:
                    return message.error()  # type: ignore[no-any-return]
                consumer.commit(message, asynchronous=False)
                return [message.value()]
            return []
        finally:
            consumer.close()

    assert code(consume()) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(
        cluster, {"resource_type": "group", "name": group, "principal": f"User:{name}", "operation": "read"}
    )
    assert consume() == [b'"v"']
    status, body = as_admin(cluster, "GET", f"/consumers/{group}/offsets?topic={topic}")
    committed = [{"topic": topic, "partition": 0, "offset": 1, "metadata": ""}]  # librdkafka commits none
    assert status == 200 and json.loads(body)["offsets"] == committed


def test_a_transactional_producer_needs_write_on_its_transactional_id(cluster: LocalCluster) -> None:
    name, settings = user(cluster)
    topic = new_topic(cluster)
    grant(cluster, topic_acl(name, topic, "write"))
    tid = f"tx-{topic}"
    with pytest.raises(KafkaException) as refused:
        Producer({**settings, "transactional.id": tid}).init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    binding = AclBinding(
        ResourceType.TRANSACTIONAL_ID, "tx-", ResourcePatternType.PREFIXED, f"User:{name}", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin_kafka = admin_client(cluster)  # held while its futures resolve
    for made in admin_kafka.create_acls([binding]).values():  # Kafka's CreateAcls, resource type 5
        made.result(30)
    wait_for(
        lambda: all(
            any(a["resource_type"] == "transactional_id" and a["name"] == "tx-" for a in acls)
            for acls in acls_everywhere(cluster, f"User:{name}")
        ),
        "every node to hold the transactional id's ACL",
        PATIENCE_S,
    )
    producer = Producer({**settings, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b'"in a transaction"')
    producer.commit_transaction(30)
    admin = sasl(cluster, "admin", cluster.security["password"])
    assert read({**admin, "isolation.level": "read_committed"}, topic) == [b'"in a transaction"']
    # a DENY now: the partition joined the transaction before it, so the next record goes straight to
    # Produce, which checks WRITE on the transactional id as Kafka's does
    producer.begin_transaction()
    producer.produce(topic, b'"allowed"')
    producer.flush(30)
    grant(cluster, {"resource_type": "transactional_id", "name": tid, "principal": f"User:{name}",
                    "operation": "write", "permission": "deny"})  # fmt: skip
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b'"denied"', on_delivery=lambda error, _: outcome.append(error))
    producer.flush(30)
    assert [code(error) for error in outcome] == [KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]


def test_creating_a_topic_needs_create(cluster: LocalCluster) -> None:
    name, settings = user(cluster)
    admin = AdminClient(settings)
    wanted = f"ct-{uuid.uuid4().hex[:8]}"
    refused = admin.create_topics([NewTopic(wanted, 1, 1)])[wanted]
    with pytest.raises(KafkaException) as error:
        refused.result(30)
    assert error.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert as_admin(cluster, "GET", f"/topics/{wanted}")[0] == 404, "nothing was created"
    grant(cluster, topic_acl(name, "ct-", "create", pattern_type="prefixed"))
    assert admin.create_topics([NewTopic(wanted, 1, 1)])[wanted].result(30) is None
    assert as_admin(cluster, "GET", f"/topics/{wanted}")[0] == 200


def test_a_producer_creates_its_topic_only_with_create_on_it(cluster: LocalCluster) -> None:
    """raftlog dev creates topics Kafka clients name; under ACLs, as Kafka, only for a user allowed
    CREATE on the cluster or on the topic: others are TOPIC_AUTHORIZATION_FAILED and nothing appears."""
    name, settings = user(cluster)
    prefix = f"auto-{uuid.uuid4().hex[:6]}-"
    wanted = f"{prefix}orders"
    grant(cluster, topic_acl(name, prefix, "write", pattern_type="prefixed"))  # WRITE implies DESCRIBE
    assert code(produce(settings, wanted)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert as_admin(cluster, "GET", f"/topics/{wanted}")[0] == 404, "nothing was created"
    grant(cluster, topic_acl(name, prefix, "create", pattern_type="prefixed"))
    assert produce(settings, wanted) == 0
    status, body = as_admin(cluster, "GET", f"/topics/{wanted}")
    assert status == 200, body
    made = json.loads(body)
    assert (len(made["partitions"]), made["replication_factor"]) == (1, 3), "num.partitions, 3 replicas"
    other = f"{prefix}payments"  # a super user may create anything
    assert produce(sasl(cluster, "admin", cluster.security["password"]), other) == 0
    assert as_admin(cluster, "GET", f"/topics/{other}")[0] == 200


def test_metadata_and_the_topic_list_show_only_what_the_user_may_describe(cluster: LocalCluster) -> None:
    name, settings = user(cluster)
    visible, hidden = new_topic(cluster), new_topic(cluster)
    grant(cluster, topic_acl(name, visible, "describe"))
    admin = AdminClient(settings)
    listed = admin.list_topics(timeout=10).topics
    assert visible in listed and hidden not in listed
    named = admin.list_topics(topic=hidden, timeout=10).topics[hidden]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert http(cluster, name, "GET", "/topics") == (200, [visible])
    assert http(cluster, name, "GET", f"/topics/{hidden}/partitions")[0] == 403
    assert http(cluster, name, "GET", f"/topics/{visible}/partitions")[0] == 200


def test_a_super_user_needs_no_acl(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    admin = sasl(cluster, "admin", cluster.security["password"])
    assert produce(admin, topic, Producer({**admin, "enable.idempotence": True})) == 0
    assert read(admin, topic) == [b'"v"']
    assert acls_everywhere(cluster, "User:admin") == [[], [], []]


# -- managing ACLs through Kafka's admin clients -------------------------------------------------------------


def test_acls_made_with_admin_clients_are_those_of_the_admin_api_and_only_alter_makes_them(
    cluster: LocalCluster,
) -> None:
    name, settings = user(cluster)
    admin = admin_client(cluster)
    principal = f"User:{name}"
    read_, allow, deny = AclOperation.READ, AclPermissionType.ALLOW, AclPermissionType.DENY
    made = [
        AclBinding(ResourceType.TOPIC, "audit-", ResourcePatternType.PREFIXED, principal, "*", read_, allow),
        AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, principal, "10.1.2.3", read_, deny),
    ]
    for future in admin.create_acls(made).values():
        assert future.result(30) is None
    mine = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        principal,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    described = admin.describe_acls(mine).result(30)
    assert sorted(described, key=str) == sorted(made, key=str)
    as_json = [  # sorted by Kafka's codes: topic (2) before group (3)
        {"resource_type": "topic", "name": "audit-", "pattern_type": "prefixed", "principal": principal,
         "host": "*", "operation": "read", "permission": "allow"},
        {"resource_type": "group", "name": "*", "pattern_type": "literal", "principal": principal,
         "host": "10.1.2.3", "operation": "read", "permission": "deny"},
    ]  # fmt: skip
    wait_for(
        lambda: acls_everywhere(cluster, principal) == [as_json] * 3,
        "the same ACLs over HTTP on every node",
        PATIENCE_S,
    )
    match = AclBindingFilter(ResourceType.TOPIC, "audit-eu", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    assert [b.name for b in admin.describe_acls(match).result(30)] == ["audit-"]

    # kafka-python's admin client sees the same; its describe_acls raises a refusal (confluent-kafka 2.16
    # drops DescribeAcls' error and answers no ACLs: nothing is shown either way)
    topics_of_mine = ACLFilter(
        principal, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(KafkaPythonResourceType.TOPIC, None, ACLResourcePatternType.ANY),
    )  # fmt: skip
    with kafka_python_admin(cluster, "admin", cluster.security["password"]) as python_admin:
        found, _ = python_admin.describe_acls(topics_of_mine)
        assert [(acl.resource_pattern.resource_name, acl.host) for acl in found] == [("audit-", "*")]
    with (
        kafka_python_admin(cluster, name, f"{name}'s password") as python_admin,
        pytest.raises(ClusterAuthorizationFailedError),
    ):
        python_admin.describe_acls(topics_of_mine)

    # a user who may not ALTER the cluster makes and deletes none
    theirs = AdminClient(settings)
    everything = AclBinding(
        ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, principal, "*", AclOperation.ALL, allow
    )
    denied = theirs.create_acls([everything])
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        next(iter(denied.values())).result(30)
    assert theirs.describe_acls(mine).result(30) == []
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        next(iter(theirs.delete_acls([mine]).values())).result(30)
    assert len(acls_everywhere(cluster, principal)[0]) == 2, "a refused call changed nothing"

    gone = admin.delete_acls([mine])[mine].result(30)
    assert sorted(gone, key=str) == sorted(made, key=str)
    wait_for(
        lambda: acls_everywhere(cluster, principal) == [[], [], []],
        "the ACLs deleted on every node",
        PATIENCE_S,
    )


# The attack as it was made (issue: one ListOffsets of a logged-in user naming 100,000 topics it may not
# describe held a secure node's Kafka door for 12.7 s): topics of one partition each, named in one request
# while another request names ``NEIGHBOUR_FACTOR`` times as many partitions of one topic on the same node
WIDE_REQUEST_TOPICS = 5_000
NEIGHBOUR_FACTOR = 4


def _list_offsets_request(topics: dict[str, int]) -> Any:
    """A ListOffsets (v6) of ``topics``, each with that many partitions."""
    cls = wire.request_class(2, 6)
    part_cls = wire.sibling(cls, "ListOffsetsPartition")
    topic_cls = wire.sibling(cls, "ListOffsetsTopic")
    return wire.build(cls, replica_id=-1, isolation_level=0, topics=tuple(
        wire.build(topic_cls, name=topic, partitions=tuple(
            wire.build(part_cls, partition_index=i, current_leader_epoch=-1, timestamp=-1)
            for i in range(partitions)))
        for topic, partitions in topics.items()))  # fmt: skip


def _logged_in(cluster: LocalCluster, name: str, address: str | None = None) -> RawKafka:
    """``name``'s connection to n1's Kafka listener (or the one at ``address``), authenticated over
    SASL_SSL (PLAIN)."""
    context = ssl.create_default_context(cafile=cluster.security["ca"])
    raw = RawKafka(address or cluster.kafka["n1"], context)
    assert _handshake(raw, "PLAIN").error_code is ErrorCode.none
    assert _authenticate(raw, f"\0{name}\0{name}'s password".encode()).error_code is ErrorCode.none
    raw.sock.settimeout(600)
    return raw


def test_a_list_offsets_naming_many_topics_is_not_held_behind_other_work_on_a_secure_node(
    cluster: LocalCluster,
) -> None:
    """A user with WRITE on one topic names thousands of topics it may not describe (each refused by an
    ACL check), while another request of hers names four times as many partitions of one topic. The node
    serves both 500 entries a turn of its event loop, so the smaller request is answered first. A handler
    that took a turn per topic gave it one entry for every 500 of the other's (on a busy cluster, every
    Raft group and connection with work ready takes its share of each turn likewise: 154 s for 100,000
    topics on a secure 3-node cluster), and answered it last. Both answers are whole, every entry refused
    TOPIC_AUTHORIZATION_FAILED. An order of answers, not a time: it holds on a loaded machine."""
    name, _ = user(cluster)
    grant(cluster, topic_acl(name, new_topic(cluster), "write"))
    wide = _list_offsets_request({f"hidden-{i}": 1 for i in range(WIDE_REQUEST_TOPICS)})
    neighbour = _list_offsets_request({"hidden": WIDE_REQUEST_TOPICS * NEIGHBOUR_FACTOR})
    connections = {"neighbour": _logged_in(cluster, name), "wide": _logged_in(cluster, name)}
    answered: dict[str, tuple[float, bytes]] = {}
    sent = {which: threading.Event() for which in connections}

    def ask(which: str, frame: bytes) -> None:
        # one thread per connection sends and then reads: a TLS socket written by one thread while
        # another reads it can corrupt its OpenSSL state (python/cpython#143756), which the node sees as
        # a broken record and closes the connection
        raw = connections[which]
        raw.send_raw(frame)
        sent[which].set()
        size = struct.unpack(">i", raw._read(4))[0]
        answer = raw._read(size)
        answered[which] = (time.monotonic(), answer)

    try:
        frames = {"neighbour": connections["neighbour"].frame(2, 6, neighbour),
                  "wide": connections["wide"].frame(2, 6, wide)}  # fmt: skip
        askers = []
        for which in ("neighbour", "wide"):  # the bigger one first: it has the head start
            askers.append(threading.Thread(target=ask, args=(which, frames[which]), daemon=True))
            askers[-1].start()
            sent[which].wait(timeout=600)
        for asker in askers:
            asker.join(timeout=600)
    finally:
        for raw in connections.values():
            raw.close()
    assert set(answered) == {"neighbour", "wide"}, "both requests answered"
    cls = wire.response_class(2, 6)
    for which, entries in (
        ("wide", WIDE_REQUEST_TOPICS),
        ("neighbour", WIDE_REQUEST_TOPICS * NEIGHBOUR_FACTOR),
    ):
        frame = answered[which][1]
        _, used = entity_reader(cls.__header_schema__)(frame, 0)
        answer = entity_reader(cls)(frame, used)[0]
        codes = [p.error_code for t in answer.topics for p in t.partitions]
        assert len(codes) == entries and set(codes) == {ErrorCode.topic_authorization_failed}, which
    assert answered["wide"][0] < answered["neighbour"][0], "the request naming many topics was held behind"


def test_the_schema_registry_asks_subject_acls_of_a_scram_user_which_kafka_s_acl_apis_do_not_show(
    cluster: LocalCluster,
) -> None:
    """confluent-kafka's SchemaRegistryClient with the user's SCRAM password over HTTP Basic: refused, and
    nothing registered, until READ and WRITE on its subjects' prefix are granted; the subject ACLs are in
    ``/v1/acls`` but not in Kafka's DescribeAcls, and Kafka's DeleteAcls of any type leaves them."""
    name, _ = user(cluster)
    subject = f"{name}-value"

    def registry(login: str, password: str) -> SchemaRegistryClient:
        return SchemaRegistryClient(
            {
                "url": cluster.servers[0],
                "basic.auth.user.info": f"{login}:{password}",
                "ssl.ca.location": cluster.security["ca"],
            }
        )

    client = registry(name, f"{name}'s password")
    root = registry(cluster.security["user"], cluster.security["password"])  # the super user
    schema = Schema(
        '{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}', "AVRO"
    )  # canonical
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, schema)
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    assert f"write subject '{subject}'" in refused.value.error_message
    assert subject not in root.get_subjects()

    prefix = {"resource_type": "subject", "name": f"{name}-", "pattern_type": "prefixed"}
    grant(
        cluster,
        *({**prefix, "principal": f"User:{name}", "operation": operation} for operation in ("read", "write")),
        topic_acl(name, f"{name}-topic", "read"),
    )
    schema_id = client.register_schema(subject, schema)
    assert client.get_schema(schema_id).schema_str == schema.schema_str
    assert client.get_latest_version(subject).schema_id == schema_id
    assert client.get_subjects() == [subject]  # only those it may describe

    mine = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{name}", None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    admin = admin_client(cluster)
    shown = admin.describe_acls(mine).result(timeout=30)
    assert [(acl.restype, acl.name) for acl in shown] == [(ResourceType.TOPIC, f"{name}-topic")]
    deleted = admin.delete_acls([mine])[mine].result(timeout=30)
    assert [acl.name for acl in deleted] == [f"{name}-topic"]
    kept = acls_everywhere(cluster, f"User:{name}")
    assert all(sorted(a["operation"] for a in acls) == ["read", "write"] for acls in kept)
    assert all(a["resource_type"] == "subject" for acls in kept for a in acls)
    assert client.get_latest_version(subject).schema_id == schema_id


def test_a_topic_named_by_id_is_refused_as_by_name_and_deletes_say_its_name_only_to_who_may_describe_it(
    cluster: LocalCluster,
) -> None:
    """Produce v13, OffsetCommit v10 and DeleteTopics v6 check the ACLs of the topic an id names: without
    WRITE, READ or DELETE on it, TOPIC_AUTHORIZATION_FAILED and nothing written, committed or deleted. As
    Kafka's ``ControllerApis.deleteTopics``, a refused deletion by id names the topic only to a user who may
    DESCRIBE it; an id no topic has is UNKNOWN_TOPIC_ID whatever the ACLs (Kafka looks ids up first)."""
    describer, _ = user(cluster)
    stranger, _ = user(cluster)
    topic = new_topic(cluster)
    group = f"g-{topic}"
    grant(
        cluster,
        topic_acl(describer, topic, "describe"),
        {"resource_type": "group", "name": group, "principal": f"User:{describer}", "operation": "read"},
    )
    raw = _logged_in(cluster, describer)
    try:

        def led() -> Any:
            (found,) = metadata_v12(raw, topic).topics
            return found if found.partitions and found.partitions[0].leader_id >= 0 else None

        named = wait_for(led, f"a leader of {topic}", PATIENCE_S)
        topic_id, leader = named.topic_id, cluster.kafka[f"n{named.partitions[0].leader_id}"]
        request = wire.build(wire.request_class(10, 4), key_type=0, coordinator_keys=(group,))
        (found,) = wait_for(
            lambda: [c for c in raw.call(10, 4, request).coordinators if c.error_code is ErrorCode.none],
            f"a coordinator of {group}",
            PATIENCE_S,
        )
        deleted = delete_v6(raw, [(None, topic_id), (None, NOWHERE)])
    finally:
        raw.close()
    refused, unknown = ErrorCode.topic_authorization_failed, ErrorCode.unknown_topic_id
    assert {(n, i, c) for n, i, c, _ in deleted} == {(topic, topic_id, refused), (None, NOWHERE, unknown)}
    producer = _logged_in(cluster, describer, leader)
    try:
        answer = produce_v13(producer, [(topic_id, [0]), (NOWHERE, [0])])
        assert {t.topic_id: [p.error_code for p in t.partition_responses] for t in answer.responses} == {
            topic_id: [refused],
            NOWHERE: [unknown],
        }
    finally:
        producer.close()
    coordinator = _logged_in(cluster, describer, f"{found.host}:{found.port}")
    try:
        committed = commit_v10(coordinator, group, [(topic_id, {0: 1}), (NOWHERE, {0: 1})])
        assert {t.topic_id: [p.error_code for p in t.partitions] for t in committed.topics} == {
            topic_id: [refused],
            NOWHERE: [unknown],
        }
        nothing = [(0, -1, -1, "", ErrorCode.none)]  # nothing committed
        assert fetch_offsets(coordinator, 9, group, [(topic, [0])]) == {topic: nothing}
        assert metadata_v12(coordinator, topic).topics[0].error_code is ErrorCode.none  # nothing deleted
    finally:
        coordinator.close()
    outsider = _logged_in(cluster, stranger)
    try:  # may not DESCRIBE it: refused without its name
        assert [(n, i, c) for n, i, c, _ in delete_v6(outsider, [(None, topic_id)])] == [
            (None, topic_id, refused)
        ]
    finally:
        outsider.close()
    assert records_as_admin(cluster, topic) == []  # nothing written
