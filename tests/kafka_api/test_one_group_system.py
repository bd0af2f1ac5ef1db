"""One consumer-group system seen through both doors, on a real 3-node cluster with real clients: a group
of Kafka consumers (confluent-kafka) in ``raftlog group`` and ``/v1/consumer-groups``, refusing a reset, an
HTTP member and a delete while it runs, listed Empty by Kafka's AdminClient after its coordinator
restarts, then reset and deleted with its offsets; a group of HTTP consumer instances in the AdminClient's
list and describe, refusing a Kafka member and a delete while it has members."""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka_fixtures import RawKafka, http_client

from kafka_api import wire
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

WAIT_S = 60
# what an ask fails with while a node restarts or a coordinator moves: not yet, asked again
ASKING_FAILS = (KafkaException, RequestFailed, OSError)


def _get(cluster: LocalCluster, path: str) -> Any:
    with http_client(cluster) as client:
        return json.loads(client.request("GET", path).body)


def _status(
    cluster: LocalCluster, method: str, path: str, body: Any = None, query: str = ""
) -> tuple[int, Any]:
    """The status and JSON body of one call, error answers included."""
    payload = None if body is None else json.dumps(body).encode()
    with http_client(cluster) as client:
        try:
            answer = client.request(
                method,
                path + query,
                payload,
                {"Content-Type": "application/json"},
                repeatable=False,
            )
        except RequestFailed as failed:
            return failed.status, failed.body
    return answer.status, json.loads(answer.body) if answer.body else None


def _listed(cluster: LocalCluster, group: str) -> dict[str, Any] | None:
    return next((g for g in _get(cluster, "/v1/consumer-groups")["groups"] if g["group"] == group), None)


def _state(cluster: LocalCluster, group: str) -> str | None:
    listed = _listed(cluster, group)
    return None if listed is None else str(listed["state"])


def _cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "raftlog_cli", *args, "--server", cluster.servers[0]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _kafka_listed(admin: AdminClient, group: str) -> Any:
    result = admin.list_consumer_groups(request_timeout=10).result()
    return next((g for g in result.valid if g.group_id == group), None)


# the coordinator moved, or a partition it needs elects (Kafka's Java admin client retries both)
MOVED = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)


def _asked(call: Callable[[], Any]) -> Any:
    """A group call's answer, asked again while the coordinator moves (as Kafka's own admin client does:
    after a start or a restart the leader balancer hands coordinator partitions to their preferred
    nodes)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return call()
        except KafkaException as exc:
            if exc.args[0].code() not in MOVED or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _delete(cluster: LocalCluster, group: str) -> None:
    """DeleteGroups, each try from a new admin client: one that was answered NOT_COORDINATOR keeps asking
    the node its coordinator cache holds (Kafka's Java admin client looks the coordinator up again,
    KAFKA-8341), and the coordinator it cached before a restart may have moved for good."""

    def delete() -> Any:
        admin = _admin(cluster)  # held until its future ends
        return admin.delete_consumer_groups([group], request_timeout=10)[group].result()

    _asked(delete)


def _describe(cluster: LocalCluster, admin: AdminClient, group: str) -> Any:
    """DescribeConsumerGroups, asked again while the coordinator moves, each time after the first from a
    new admin client (held until this returns): one answered NOT_COORDINATOR keeps asking the coordinator
    it cached, as ``_delete`` says (a whole run failed so: the leader balancer moved the group's partition
    to its preferred node after the restart, and every try went to the node before)."""
    clients = [admin]

    def describe() -> Any:
        try:
            return clients[-1].describe_consumer_groups([group], request_timeout=10)[group].result()
        except KafkaException:
            clients.append(_admin(cluster))
            raise

    return _asked(describe)


def _produce(cluster: LocalCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i)
    assert producer.flush(60) == 0


def test_a_kafka_group_is_one_group_of_both_doors_across_a_restart(kafka_cluster: LocalCluster) -> None:
    cluster = kafka_cluster
    with http_client(cluster) as client:
        client.create_topic("unified", 3, 3)
    _produce(cluster, "unified", 30)
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "kafka-readers", "client.id": "reader-1",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
    })  # fmt: skip
    consumer.subscribe(["unified"])
    read = 0
    deadline = time.monotonic() + WAIT_S
    while read < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
    assert read == 30
    consumer.commit(asynchronous=False)

    # the HTTP door and the CLI see the running Kafka member, its partitions, commits and lag
    listed = wait_for(
        lambda: _listed(cluster, "kafka-readers"),
        "the Kafka group listed over HTTP",
        WAIT_S,
        retrying=ASKING_FAILS,
    )
    assert (listed["state"], listed["door"], listed["members"], listed["protocol_type"]) == (
        "Stable", "kafka", 1, "consumer",
    )  # fmt: skip
    described = _get(cluster, "/v1/consumer-groups/kafka-readers")
    (member,) = described["members"]
    assert (member["client_id"], member["client_host"]) == ("reader-1", "/127.0.0.1")
    assert sorted(r["partition"] for r in member["partitions"]) == [0, 1, 2]
    assert sum(r["committed_offset"] for r in member["partitions"]) == 30 and described["lag"] == 0
    shown = _cli(cluster, "group", "describe", "kafka-readers")
    assert shown.returncode == 0 and "1 member(s) over Kafka" in shown.stdout and "reader-1" in shown.stdout

    admin = _admin(cluster)  # held: a client collected before its futures end never ends them
    running = _describe(cluster, admin, "kafka-readers")
    (kafka_member,) = running.members
    assert running.state is ConsumerGroupState.STABLE and running.partition_assignor == "range"
    assert (kafka_member.client_id, kafka_member.host) == ("reader-1", "/127.0.0.1")
    assert sorted(tp.partition for tp in kafka_member.assignment.topic_partitions) == [0, 1, 2]

    # while it runs: no reset (its next commit would undo it), no HTTP member, no delete
    reset = _cli(cluster, "group", "reset", "kafka-readers", "--topic", "unified", "--to-earliest")
    assert reset.returncode == 1 and "1 live member(s) (Kafka consumers)" in reset.stderr, reset.stderr
    rewind = {"offsets": [{"topic": "unified", "partition": 0, "offset": 0}], "reset": True}
    status, body = _status(cluster, "POST", "/consumers/kafka-readers/offsets", rewind)
    assert (status, body["error_code"]) == (409, 40916)
    status, body = _status(cluster, "POST", "/consumers/kafka-readers", {"name": "http-member"})
    assert (status, body["error_code"]) == (409, 40916)
    status, body = _status(cluster, "DELETE", "/v1/consumer-groups/kafka-readers")
    assert (status, body["error_code"], body["members"]) == (409, 40916, 1)

    consumer.close()  # leaves: the group is empty, its offsets stay
    wait_for(
        lambda: _state(cluster, "kafka-readers") == "Empty", "the group empty", WAIT_S, retrying=ASKING_FAILS
    )
    coordinator = _describe(cluster, admin, "kafka-readers")
    cluster.control("stop", f"n{coordinator.coordinator.id}", kill=True)
    cluster.control("start", f"n{coordinator.coordinator.id}")
    after = wait_for(
        lambda: _kafka_listed(admin, "kafka-readers"),
        "the empty group listed by Kafka's AdminClient after its coordinator's restart",
        WAIT_S,
        retrying=ASKING_FAILS,
    )
    assert after.state is ConsumerGroupState.EMPTY
    described = wait_for(
        lambda: _get(cluster, "/v1/consumer-groups/kafka-readers"),
        "the group described after the restart",
        WAIT_S,
        retrying=ASKING_FAILS,
    )
    assert described["members"] == [] and sum(r["committed_offset"] for r in described["unassigned"]) == 30

    reset = _cli(cluster, "group", "reset", "kafka-readers", "--topic", "unified", "--to-earliest")
    assert reset.returncode == 0, reset.stderr
    with http_client(cluster) as client:
        committed = json.loads(client.request("GET", "/consumers/kafka-readers/offsets?topic=unified").body)
    assert sorted(o["offset"] for o in committed["offsets"]) == [0, 0, 0]

    _delete(cluster, "kafka-readers")
    with http_client(cluster) as client:
        committed = json.loads(client.request("GET", "/consumers/kafka-readers/offsets?topic=unified").body)
    assert committed["offsets"] == []  # deleted with the group
    assert _listed(cluster, "kafka-readers") is None and _kafka_listed(admin, "kafka-readers") is None
    with pytest.raises(KafkaException) as gone:
        _delete(cluster, "kafka-readers")
    assert gone.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


def test_an_http_group_is_seen_by_kafka_tools_and_refuses_kafka_members(kafka_cluster: LocalCluster) -> None:
    cluster = kafka_cluster
    with http_client(cluster) as client:
        client.create_topic("unified-http", 2, 3)
    status, _ = _status(cluster, "POST", "/consumers/rest-readers", {"name": "c1", "format": "json"})
    assert status == 200
    status, _ = _status(
        cluster, "POST", "/consumers/rest-readers/instances/c1/subscription", {"topics": ["unified-http"]}
    )
    assert status == 204
    admin = _admin(cluster)
    listed = wait_for(
        lambda: _kafka_listed(admin, "rest-readers"),
        "the HTTP group listed by Kafka's AdminClient",
        WAIT_S,
        retrying=ASKING_FAILS,
    )
    assert listed.state is ConsumerGroupState.STABLE and not listed.is_simple_consumer_group
    group = _describe(cluster, admin, "rest-readers")
    (member,) = group.members
    assert member.member_id == "c1" and member.host == "127.0.0.1"
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
    assert {tp.topic for tp in member.assignment.topic_partitions} == {"unified-http"}

    # a Kafka member of the same group is refused, as Kafka refuses a member of another protocol
    raw = RawKafka(cluster.bootstrap_servers.split(",")[group.coordinator.id - 1])
    try:
        cls = wire.request_class(11, 5)
        protocol = wire.sibling(cls, "JoinGroupRequestProtocol")
        join = wire.build(
            cls, group_id="rest-readers", session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10), member_id="", group_instance_id=None,
            protocol_type="consumer", protocols=(wire.build(protocol, name="range", metadata=b""),),
        )  # fmt: skip
        assert raw.call(11, 5, join).error_code.name == "inconsistent_group_protocol"
        unnamed = dataclasses.replace(join, group_id="")  # no name the HTTP door would take either
        assert raw.call(11, 5, unnamed).error_code.name == "invalid_group_id"
    finally:
        raw.close()

    with pytest.raises(KafkaException) as busy:
        _delete(cluster, "rest-readers")
    assert busy.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    status, _ = _status(cluster, "DELETE", "/consumers/rest-readers/instances/c1")
    assert status == 204
    _delete(cluster, "rest-readers")
    assert _listed(cluster, "rest-readers") is None
