"""Streams groups (KIP-1071) through the Kafka door of a real cluster, with a raw StreamsGroupHeartbeat (no
JVM: Kafka Streams itself runs in ``tests/kafka_reference/test_streams_groups.py``): a member joining with
a topology is told which internal topics are missing, the node creates them with the topology's configs,
the member gets every task once they exist; StreamsGroupDescribe, ListGroups (type ``streams``) and the
HTTP admin view show the group and what its member reads; a consumer protocol member may not take the
group, even once it is empty."""

from __future__ import annotations

import datetime
import json
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka_fixtures import RawKafka, http_client
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from leadership import hand_leadership

from kafka_api import wire
from partitions.groups.coordinator import GROUP_PARTITIONS_DEFAULT
from partitions.names import GROUPS_TOPIC
from raftlog.storage.partitioner import partition_for_key
from raftlog_client.local_cluster import LocalCluster
from raftlog_contract import consumer_group_path
from tests.waiting import wait_for

LIMIT_S = 120.0  # each phase, on a loaded machine
HEARTBEAT, DESCRIBE, CONSUMER_HEARTBEAT = 88, 89, 68
MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED = 3, 5


def _heartbeat(group: str, member: str, epoch: int, source: str, joining: bool, owned: Any = None) -> Any:
    cls = wire.request_class(HEARTBEAT, 1)
    sub = wire.sibling(cls, "Subtopology")
    info, kv = wire.sibling(cls, "TopicInfo"), wire.sibling(cls, "KeyValue")
    topology = wire.build(
        wire.sibling(cls, "Topology"),
        epoch=0,
        subtopologies=(
            wire.build(
                sub, subtopology_id="0", source_topics=(source,), source_topic_regex=(),
                state_changelog_topics=(
                    wire.build(
                        info, name=f"{group}-store-changelog", partitions=0, replication_factor=0,
                        topic_configs=(wire.build(kv, key="cleanup.policy", value="compact"),),
                    ),
                ),
                repartition_sink_topics=(), repartition_source_topics=(), copartition_groups=(),
            ),
        ),
    )  # fmt: skip
    return wire.build(
        cls, group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
        instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30 if joining else -0.001),
        topology=topology if joining else None, active_tasks=owned, standby_tasks=owned and (),
        warmup_tasks=owned and (), process_id="process-1" if joining else None,
        user_endpoint=wire.build(wire.sibling(cls, "Endpoint"), host="app-1", port=8080) if joining else None,
        client_tags=None, task_offsets=None, task_end_offsets=None, shutdown_application=False,
    )  # fmt: skip


MOVED = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available)


def _error_code(answer: Any) -> Any:
    return answer.error_code


class _Coordinator:
    """The member's connection to its group's coordinator, found as Kafka's Streams client finds it
    (FindCoordinator, then the node it names) and found again whenever an answer says the node is not
    or no longer the coordinator (its ``StreamsGroupHeartbeatRequestManager`` on NOT_COORDINATOR and
    COORDINATOR_NOT_AVAILABLE): under load a group's partition may change leader during the test."""

    def __init__(self, cluster: LocalCluster, group: str) -> None:
        self.addresses = cluster.bootstrap_servers.split(",")
        self.group = group
        self.connection: RawKafka | None = None
        self.node: str | None = None  # the node last found coordinating the group
        self.moves = 0  # the answers that sent the member looking again, for a failure's message

    def call(self, api_key: int, version: int, body: Any, code: Callable[[Any], Any] = _error_code) -> Any:
        """The coordinator's answer to ``body`` (``code``: where the answer says whether it moved)."""

        def answered() -> Any:
            if self.connection is None:
                self.connection = self._found()
                if self.connection is None:
                    return None
            answer = self.connection.call(api_key, version, body)
            if code(answer) in MOVED:
                self.moves += 1
                self.close()
                return None
            return answer

        return wait_for(answered, f"an answer from the coordinator of {self.group}", LIMIT_S)

    def _found(self) -> RawKafka | None:
        for address in self.addresses:
            finder = RawKafka(address)  # as a client asks first: the groups' topic made if need be
            try:
                request = FindCoordinatorRequest(key_type=0, coordinator_keys=(self.group,))
                (found,) = finder.call(10, 4, request).coordinators
            finally:
                finder.close()
            if found.error_code == ErrorCode.none:
                self.node = f"n{found.node_id}"
                return RawKafka(f"{found.host}:{found.port}")
        return None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def test_a_streams_member_gets_its_internal_topics_made_then_every_task_and_the_doors_show_it(
    kafka_cluster: LocalCluster,
) -> None:
    run = uuid.uuid4().hex[:6]
    group, source = f"sg-{run}", f"sg-in-{run}"
    changelog = f"{group}-store-changelog"
    with http_client(kafka_cluster) as client:
        client.create_topic(source, 3, 3)
    coordinator = _Coordinator(kafka_cluster, group)
    first = coordinator.call(HEARTBEAT, 1, _heartbeat(group, "m1", 0, source, joining=True, owned=()))
    try:
        assert first.error_code == ErrorCode.none, first
        # Kafka's order: the initial rebalance delay (3 s: the group was empty), then what is missing
        assert [s.status_code for s in first.status] == [ASSIGNMENT_DELAYED, MISSING_INTERNAL_TOPICS]
        # nothing until its topics exist and the delay ended; its epoch the group's, as Kafka 4.4 answers
        assert first.active_tasks == () and first.member_epoch == 1
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})

        def made() -> Any:
            topic = admin.list_topics(timeout=10).topics.get(changelog)
            return topic is not None and len(topic.partitions) == 3 and topic

        wait_for(made, f"{changelog} created with the source's 3 partitions", LIMIT_S)
        configs = admin.describe_configs([_topic_resource(changelog)])
        (described,) = configs.values()
        assert described.result(timeout=30)["cleanup.policy"].value == "compact"

        # the group's partition handed to another node, as the leader balancer may hand it over at any
        # time: the member's next heartbeat is told NOT_COORDINATOR and finds the new coordinator
        mover = next(node for node in kafka_cluster.urls if node != coordinator.node)
        hand_leadership(
            kafka_cluster,
            GROUPS_TOPIC,
            partition_for_key(group.encode(), GROUP_PARTITIONS_DEFAULT),
            mover,
            LIMIT_S,
        )
        epoch = first.member_epoch
        answers: Counter[tuple[Any, int, tuple[int, ...]]] = Counter()

        def tasks() -> Any:
            """A heartbeat: while at epoch 0 (the delay), the whole request again, as Kafka requires."""
            nonlocal epoch
            joining = epoch == 0
            answer = coordinator.call(HEARTBEAT, 1, _heartbeat(group, "m1", epoch, source, joining, owned=()))
            statuses = tuple(s.status_code for s in answer.status)
            answers[(answer.error_code, answer.member_epoch, statuses)] += 1
            if answer.error_code == ErrorCode.coordinator_load_in_progress:
                return None  # a new coordinator loading the group: a streams client asks again
            assert answer.error_code == ErrorCode.none, answer
            epoch = answer.member_epoch
            return answer if answer.active_tasks else None

        try:
            given = wait_for(tasks, "the member's tasks", LIMIT_S)
        except AssertionError as exc:  # what the coordinator answered meanwhile, and how often it moved
            raise AssertionError(f"{exc}; answers {dict(answers)}, moves {coordinator.moves}") from exc
        print(f"{group}: tasks from {coordinator.node}, {coordinator.moves} answers sent the member looking")
        assert [(t.subtopology_id, tuple(t.partitions)) for t in given.active_tasks] == [("0", (0, 1, 2))]
        # Interactive Queries: where each partition's task runs, by the member's endpoint
        (where,) = given.partitions_by_user_endpoint
        assert (where.user_endpoint.host, where.user_endpoint.port) == ("app-1", 8080)
        assert [(tp.topic, tuple(tp.partitions)) for tp in where.active_partitions] == [(source, (0, 1, 2))]
        cls = wire.request_class(DESCRIBE, 1)
        (shown,) = coordinator.call(
            DESCRIBE,
            1,
            wire.build(cls, group_ids=(group,), include_authorized_operations=False),
            lambda answer: answer.groups[0].error_code,
        ).groups
        assert (shown.error_code, shown.group_state, [m.member_id for m in shown.members]) == (
            ErrorCode.none, "Stable", ["m1"],
        )  # fmt: skip
        listed = coordinator.call(  # a node lists the groups it coordinates: one without it has moved
            16,
            5,
            wire.build(wire.request_class(16, 5), states_filter=(), types_filter=()),
            lambda answer: answer.error_code if any(g.group_id == group for g in answer.groups) else MOVED[0],
        )
        assert [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group] == [
            ("streams", "Stable")
        ], listed  # ListGroups v5 (KIP-1043), as Kafka's Admin.listGroups asks it
        with http_client(kafka_cluster) as client:  # the HTTP door's admin view of the group
            view = json.loads(client.request("GET", consumer_group_path(group)).body)
        (member,) = view["members"]
        assert (member["instance_id"], view["group_type"], view["state"]) == ("m1", "streams", "Stable")
        assert sorted((p["topic"], p["partition"]) for p in member["partitions"]) == [
            (source, p) for p in range(3)
        ]

        left = coordinator.call(HEARTBEAT, 1, _heartbeat(group, "m1", -1, source, False))
        assert left.error_code == ErrorCode.none, left
        consumer = wire.request_class(CONSUMER_HEARTBEAT, 0)
        refused = coordinator.call(
            CONSUMER_HEARTBEAT, 0,
            wire.build(
                consumer, group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
                rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=(source,), server_assignor=None, topic_partitions=(),
            ),
        )  # fmt: skip
        assert refused.error_code == ErrorCode.group_id_not_found, refused  # an empty streams group is one
    finally:
        coordinator.close()


def _topic_resource(name: str) -> ConfigResource:
    return ConfigResource(ResourceType.TOPIC, name)
