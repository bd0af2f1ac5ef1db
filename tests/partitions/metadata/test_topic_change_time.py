"""How long a topic change waits for the controller (``topic_changes.ChangeTime``): as long as its request's
``timeout_ms`` allows, as Kafka's controller does for CreateTopics, CreatePartitions and DeleteTopics (up
to ``TOPIC_CHANGE_WAIT_MAX_MS``), then REQUEST_TIMED_OUT; 10 s for a request without one (the HTTP door, a
node of 0.1.0 forwarding the change). The node's own frontend, topic changes and admin service run here on
a controller group whose writes take as long as the test says (no node processes)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api.errors import code_of
from partitions.broker.local import LocalAdmin
from partitions.controller.state import CONTROLLER_GROUP, TopicMetadata
from partitions.metadata.frontend import ADMIN_TIMEOUT_MS, MetadataFrontend
from partitions.metadata.service import TOPIC_CHANGE_WAIT_MAX_MS
from partitions.metadata.topic_changes import CREATE_WAIT_S, ChangeTime, TopicChanges
from raftlog.consensus.errors import OutcomeUnknown
from raftlog.consensus.failures import timeout_error
from raftlog.consensus.interface import GroupStatus, Role

NODES = ["n1", "n2", "n3"]


class SlowControllerGroup:
    """The controller group as its leader's frontend proposes to it: every write commits ``write_ms`` after
    it is proposed and is then applied to the frontend's own state machine. A proposal given less time is
    answered as ``ReplicaGroup.propose`` answers one not applied in time (``timeout_error``)."""

    def __init__(self, frontend: MetadataFrontend, write_ms: int) -> None:
        self.machine = frontend._machine
        self.write_ms = write_ms
        self.given: list[int] = []  # the time each proposal was given

    async def propose(self, command: bytes, timeout_ms: int) -> object:
        self.given.append(timeout_ms)
        if self.write_ms > timeout_ms:
            raise timeout_error(CONTROLLER_GROUP, timeout_ms)
        index = self.machine.applied_index + 1
        return self.machine.apply(index, 1, command)

    def role_and_leader(self) -> tuple[Role, str | None]:
        return Role.LEADER, "n1"

    def leader_ready(self) -> bool:
        return True

    def leader_and_term(self) -> tuple[str | None, int]:
        return "n1", 1

    def status(self) -> GroupStatus:
        index = self.machine.applied_index
        return GroupStatus(
            CONTROLLER_GROUP, "n1", Role.LEADER, 1, "n1", index, index, index, index, leader_ready=True
        )


class Members:
    """Three live nodes; ``led``: whether new partitions are seen with a leader."""

    def __init__(self) -> None:
        self.led = True

    def known_nodes(self) -> set[str]:
        return set(NODES)

    def alive_nodes(self) -> list[str]:
        return list(NODES)

    def placeable(self) -> list[str]:
        return list(NODES)

    def standby(self) -> list[str]:
        return []

    def has_leader(self, metadata: TopicMetadata, partition: int) -> bool:
        return self.led


def controller(write_ms: int) -> tuple[TopicChanges, SlowControllerGroup, Members]:
    """The topic changes of n1, leading a controller group whose writes take ``write_ms``."""
    frontend = MetadataFrontend("n1", NODES, False, None)  # type: ignore[arg-type]  # no replica opened
    group = SlowControllerGroup(frontend, write_ms)
    members = Members()
    frontend._group = group  # type: ignore[assignment]
    frontend._members = members  # type: ignore[assignment]
    return TopicChanges(frontend, 100), group, members


async def test_a_create_whose_write_takes_longer_than_10_s_succeeds_when_the_request_allows_30_s() -> None:
    topics, group, _ = controller(write_ms=12_000)
    created = await topics.create_topic("slow", 3, 3, {}, timeout_ms=30_000)
    assert created.name == "slow" and created.partitions == 3
    assert group.given == [30_000]


async def test_a_create_given_less_than_its_write_takes_answers_request_timed_out() -> None:
    topics, group, _ = controller(write_ms=12_000)
    for timeout_ms in (5_000, 11_999):
        with pytest.raises(OutcomeUnknown) as timed_out:
            await topics.create_topic("slow", 3, 3, {}, timeout_ms=timeout_ms)
        assert code_of(timed_out.value) is ErrorCode.request_timed_out  # what the Kafka door answers
    # without a time (the HTTP door, a node of 0.1.0 forwarding it): 10 s, as before
    with pytest.raises(OutcomeUnknown):
        await topics.create_topic("slow", 3, 3, {})
    assert group.given == [5_000, 11_999, ADMIN_TIMEOUT_MS]
    assert topics._frontend.topics() == []


async def test_a_request_may_not_hold_the_controller_past_the_cap() -> None:
    topics, group, _ = controller(write_ms=12_000)
    await topics.create_topic("patient", 1, 3, {}, timeout_ms=2**31 - 1)
    assert group.given == [TOPIC_CHANGE_WAIT_MAX_MS]


async def test_no_time_asks_for_no_wait_on_the_leaders_but_the_write_is_still_waited_for() -> None:
    """``timeout_ms`` <= 0: answered as soon as the controller committed the topic, its partitions' leaders
    not waited for (Kafka's "answer at once"); the write itself is given the default 10 s."""
    topics, group, members = controller(write_ms=1)
    members.led = False  # the new partitions' leaders are not seen: a wait would last CREATE_WAIT_S
    started = time.monotonic()
    await topics.create_topic("now", 1, 3, {}, timeout_ms=0)
    await topics.add_partitions("now", 2, timeout_ms=-1)
    assert time.monotonic() - started < CREATE_WAIT_S / 2
    assert group.given == [ADMIN_TIMEOUT_MS, ADMIN_TIMEOUT_MS]
    assert topics._frontend.topic("now").partitions == 2


async def test_added_partitions_and_a_delete_wait_as_long_as_their_request_allows() -> None:
    topics, group, _ = controller(write_ms=0)
    await topics.create_topic("grown", 1, 3, {})
    group.write_ms = 15_000
    with pytest.raises(OutcomeUnknown):
        await topics.add_partitions("grown", 2, timeout_ms=10_000)
    await topics.add_partitions("grown", 2, timeout_ms=20_000)
    with pytest.raises(OutcomeUnknown):
        await topics.delete_topic("grown")
    await topics.delete_topic("grown", timeout_ms=60_000)
    assert group.given == [ADMIN_TIMEOUT_MS, 10_000, 20_000, ADMIN_TIMEOUT_MS, 60_000]
    assert topics._frontend.topics() == []


async def test_a_change_forwarded_by_a_node_of_0_1_0_is_served_with_the_default_time() -> None:
    """A node of 0.1.0 forwards create_topic, add_partitions and delete_topic without ``timeout_ms``: the
    controller leader's admin service takes the call as it comes (``api/internal.py`` binds the arguments
    to it) and waits the default."""
    topics, group, _ = controller(write_ms=0)
    admin = LocalAdmin(topics._frontend, topics, None, None, None)  # type: ignore[arg-type]
    released: dict[str, dict[str, Any]] = {
        "create_topic": {"name": "old", "partitions": 1, "replication_factor": 3, "configs": {}},
        "add_partitions": {"name": "old", "count": 2, "validate_only": False},
        "delete_topic": {"name": "old"},
    }
    for method, arguments in released.items():
        await getattr(admin, method)(**arguments)
    assert group.given == [ADMIN_TIMEOUT_MS] * 3 and topics._frontend.topics() == []


def test_the_time_left_after_the_write_bounds_the_wait_for_leaders() -> None:
    assert ChangeTime.of(None, 100.0) == ChangeTime(ADMIN_TIMEOUT_MS, CREATE_WAIT_S, None)
    assert ChangeTime.of(None, 100.0).leaders_wait_s(150.0) == CREATE_WAIT_S
    assert ChangeTime.of(0, 100.0).leaders_wait_s(100.0) == 0
    asked = ChangeTime.of(30_000, 100.0)
    assert asked.write_ms == 30_000
    assert asked.leaders_wait_s(100.5) == CREATE_WAIT_S
    assert asked.leaders_wait_s(125.0) == pytest.approx(5.0)
    assert asked.leaders_wait_s(131.0) == 0
