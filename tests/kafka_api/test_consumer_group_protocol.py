"""The consumer group protocol (KIP-848) with real clients and real nodes: Kafka's Java consumer 4.x and
librdkafka with ``group.protocol=consumer`` share topics in groups their coordinator assigns (server
assignors ``uniform`` and ``range``), rebalance as members come and go without a record read twice,
commit and fetch offsets with their member epoch; a classic group with members becomes a consumer
protocol group when a consumer protocol member joins it, and a classic member joins a consumer protocol
group (Kafka's online migration). The coordinator's kill -9 is in
``test_group_coordinator_kill.py``; the state machine's rules in ``tests/partitions/groups``."""

from __future__ import annotations

import datetime
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_fixtures import RawKafka, http_client, set_group_configs
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest as DescribeV1Request
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v0.request import TopicPartitions as HeartbeatTopicPartitions
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from kafka_api.apis import APIS
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

LIMIT_S = 120.0  # for each phase on a loaded machine
UNCHANGED_MS = datetime.timedelta(milliseconds=-1)  # a heartbeat field left as it was
PARTITIONS = 4


def test_api_versions_advertise_the_consumer_group_apis() -> None:
    assert (APIS[68].name, APIS[68].min_version, APIS[68].max_version) == ("ConsumerGroupHeartbeat", 0, 1)
    assert (APIS[69].name, APIS[69].min_version, APIS[69].max_version) == ("ConsumerGroupDescribe", 0, 1)
    # commits and fetches with member epochs (v9 on), naming topics by id (v10, what Java's consumer sends)
    assert APIS[8].max_version == APIS[9].max_version == 10


@pytest.mark.timeout(600)
@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_java_consumers_of_the_consumer_protocol_read_once_across_rebalances(
    kafka_cluster: LocalCluster, java_client: Any, assignor: str
) -> None:
    """Three Java consumers, then two once one left: each record read once, offsets committed (v10: by
    topic id, with the member epoch) to the end, the group Empty once they all left
    (ConsumerGroupDescribe)."""
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    observed = java_client("group", settings, f"java-848-{assignor}-{uuid.uuid4().hex[:6]}", assignor)
    assert observed == {
        "first_600_read": True,
        "shares_of_three": [2, 2, 2],
        "after_a_leave_660_read": True,
        "two_hold_all_six": True,
        "read_twice": 0,
        "member_failures": [],
        "committed": [110] * 6,
        "group_state": "Empty",
    }


class Member(threading.Thread):
    """A librdkafka consumer of the consumer group protocol: commits what it read before giving a
    partition up, and after each batch."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        self.topic = topic
        self.lock = threading.Lock()
        self.seen: list[tuple[int, int]] = []
        self.assigned: set[int] = set()
        self.failures: list[str] = []
        self.stop = threading.Event()

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._commit()
        with self.lock:
            self.assigned -= {p.partition for p in partitions}

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.assigned |= {p.partition for p in partitions}

    def _commit(self) -> None:
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if "NO_OFFSET" not in str(exc):
                with self.lock:
                    self.failures.append(str(exc))

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        while not self.stop.is_set():
            batch = [m for m in self.consumer.consume(100, 0.2) if m.error() is None]
            with self.lock:
                self.seen.extend((m.partition(), m.offset()) for m in batch)
            if batch:
                self._commit()
        self._commit()
        self.consumer.close()

    def holds(self) -> set[int]:
        with self.lock:
            return set(self.assigned)


def _produce(cluster: LocalCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(LIMIT_S) == 0


def _seen(members: list[Member]) -> list[tuple[int, int]]:
    found = []
    for m in members:
        with m.lock:
            found.extend(m.seen)
    return found


@pytest.mark.timeout(600)
def test_librdkafka_consumers_share_a_topic_and_read_each_record_once(kafka_cluster: LocalCluster) -> None:
    topic = group = f"rdkafka-848-{uuid.uuid4().hex[:6]}"
    with http_client(kafka_cluster) as client:
        client.create_topic(topic, PARTITIONS, 3)
    _produce(kafka_cluster, topic, 200)
    first = Member(kafka_cluster, group, topic)
    first.start()
    second = Member(kafka_cluster, group, topic)
    try:
        wait_for(lambda: first.holds() == set(range(PARTITIONS)), "the first member holds all", LIMIT_S)
        second.start()
        wait_for(
            lambda: (
                len(first.holds()) == len(second.holds()) == PARTITIONS // 2
                and not first.holds() & second.holds()
            ),
            "the partitions split between two members",
            LIMIT_S,
        )
        _produce(kafka_cluster, topic, 200)
        wait_for(lambda: len(_seen([first, second])) >= 400, "every record read", LIMIT_S)
        first.stop.set()
        first.join(60)
        wait_for(lambda: second.holds() == set(range(PARTITIONS)), "the second takes over all", LIMIT_S)
        _produce(kafka_cluster, topic, 100)
        wait_for(lambda: len(_seen([first, second])) >= 500, "the last records read", LIMIT_S)
        seen = _seen([first, second])
        assert len(seen) == len(set(seen)) == 500, "each record read once, by one member"
        assert first.failures == second.failures == []
    finally:
        for member in (first, second):
            member.stop.set()
        for member in (first, second):
            if member.is_alive():
                member.join(60)


def _coordinator(cluster: LocalCluster, group: str) -> RawKafka:
    """A raw connection to the node coordinating ``group`` (the one not answering NOT_COORDINATOR)."""

    def found() -> RawKafka | None:
        for address in cluster.bootstrap_servers.split(","):
            connection = RawKafka(address)
            answer = connection.call(
                69, 0, ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
            )
            if answer.groups[0].error_code != ErrorCode.not_coordinator:
                return connection
            connection.close()
        return None

    connection: RawKafka = wait_for(found, f"the coordinator of {group}", LIMIT_S)
    return connection


def test_a_consumer_protocol_member_converts_a_live_classic_group_and_a_classic_member_joins_it_later(
    kafka_cluster: LocalCluster,
) -> None:
    """A classic member (librdkafka) holds both partitions of a classic group; a consumer protocol member
    joining converts the group (Kafka's online upgrade): the classic member is told to rejoin, gives one
    partition up, and each then holds one, shown as a classic member (type 0) beside the consumer
    protocol one (type 1). The classic member leaves: the consumer protocol member gets both, the group
    Stable with it alone. A classic member joining it then is taken in (Kafka's online migration): the
    consumer protocol member is asked to give one partition up, and once it confirms, the classic member
    gets it."""
    topic = group = f"migrate-848-{uuid.uuid4().hex[:6]}"
    with http_client(kafka_cluster) as client:
        client.create_topic(topic, 2, 3)
    classic = Consumer({
        "bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": group,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
    })  # fmt: skip
    classic.subscribe([topic])
    wait_for(
        lambda: classic.poll(0.2) is None and len(classic.assignment()) == 2, "classic assigned", LIMIT_S
    )
    connection = _coordinator(kafka_cluster, group)
    body = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="", member_epoch=0, subscribed_topic_names=(topic,),
        rebalance_timeout=datetime.timedelta(seconds=30), topic_partitions=(),
    )  # fmt: skip
    classic_members = [classic]

    def describe(version: int) -> Any:
        request = DescribeV1Request if version else ConsumerGroupDescribeRequest
        (only,) = connection.call(
            69, version, request(group_ids=(group,), include_authorized_operations=False)
        ).groups
        return only

    try:
        answer = connection.call(68, 0, body)
        assert answer.error_code == ErrorCode.none, answer  # converted, not GROUP_ID_NOT_FOUND
        member_id, epoch = answer.member_id, answer.member_epoch
        owned = () if answer.assignment is None else answer.assignment.topic_partitions

        def beat(mine_wanted: int) -> bool:
            """The consumer protocol member heartbeats what it owns and the classic members poll; True once
            it holds ``mine_wanted`` partitions and each classic member the rest, one each."""
            nonlocal epoch, owned
            request = ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout=UNCHANGED_MS,
                topic_partitions=tuple(
                    HeartbeatTopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions) for tp in owned
                ),
            )  # fmt: skip
            beaten = connection.call(68, 0, request)
            assert beaten.error_code == ErrorCode.none, beaten
            epoch = beaten.member_epoch
            if beaten.assignment is not None:
                owned = beaten.assignment.topic_partitions
            for consumer in classic_members:
                consumer.poll(0.2)
            mine = sum(len(tp.partitions) for tp in owned)
            return mine == mine_wanted and all(len(c.assignment()) == 1 for c in classic_members)

        wait_for(lambda: beat(1), "the converted classic member giving one partition up", LIMIT_S)
        by_type = {m.member_id: m.member_type for m in describe(1).members}
        assert by_type[member_id] == 1 and sorted(by_type.values()) == [0, 1], by_type  # 0: classic
        classic.close()  # a LeaveGroup to the consumer protocol group
        classic_members.clear()
        wait_for(lambda: beat(2), "both partitions with the consumer protocol member", LIMIT_S)
        only = describe(0)
        assert (only.error_code, only.group_state, only.assignor_name) == (
            ErrorCode.none,
            "Stable",
            "uniform",
        )
        assert [m.member_id for m in only.members] == [member_id]
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
        listed = admin.list_consumer_groups().result(timeout=30)  # ListGroups: its state and members' count
        (row,) = [g for g in listed.valid if g.group_id == group]
        assert row.state == ConsumerGroupState.STABLE, row
        late = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": group})
        late.subscribe([topic])
        classic_members.append(late)
        try:
            wait_for(lambda: beat(1), "the classic member taken in, one partition each", LIMIT_S)
            assert {tp.partition for tp in late.assignment()} | {
                p for tp in owned for p in tp.partitions
            } == {0, 1}
            by_type = {m.member_id: m.member_type for m in describe(1).members}
            assert by_type[member_id] == 1 and sorted(by_type.values()) == [0, 1], by_type
        finally:
            late.close()
    finally:
        connection.close()


def test_a_groups_own_heartbeat_interval_is_answered_from_its_next_heartbeat(
    kafka_cluster: LocalCluster,
) -> None:
    """``consumer.heartbeat.interval.ms`` set on the group (``kafka-configs --entity-type groups``) is the
    interval its coordinator answers from the next ConsumerGroupHeartbeat on (the node's 5 s before); its
    ``consumer.session.timeout.ms`` is applied alike (``tests/partitions/groups``)."""
    topic = group = f"config-848-{uuid.uuid4().hex[:6]}"
    with http_client(kafka_cluster) as client:
        client.create_topic(topic, 1, 3)

    def beat(connection: RawKafka, member_id: str, epoch: int) -> Any:
        body = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=(topic,),
            rebalance_timeout=datetime.timedelta(seconds=30), topic_partitions=None if epoch else (),
        )  # fmt: skip
        return connection.call(68, 0, body)

    def joined_somewhere() -> tuple[RawKafka, Any] | None:
        for address in kafka_cluster.bootstrap_servers.split(","):
            connection = RawKafka(address)
            connection.call(10, 4, FindCoordinatorRequest(coordinator_keys=(group,)))  # as clients do first
            answer = beat(connection, "", 0)
            if answer.error_code == ErrorCode.none:
                return connection, answer
            connection.close()  # not its coordinator (or none yet)
        return None

    connection, joined = wait_for(joined_somewhere, f"{group} joined at its coordinator", LIMIT_S)
    try:
        assert joined.heartbeat_interval == datetime.timedelta(seconds=5)
        set_group_configs(kafka_cluster, group, {"consumer.heartbeat.interval.ms": "7000"})

        def answered() -> datetime.timedelta:
            answer = beat(connection, joined.member_id, joined.member_epoch)
            assert answer.error_code == ErrorCode.none, answer
            return answer.heartbeat_interval

        wait_for(lambda: answered() == datetime.timedelta(seconds=7), "the group's own interval", LIMIT_S)
        beat(connection, joined.member_id, -1)  # leaves
    finally:
        connection.close()
