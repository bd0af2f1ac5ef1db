"""A static leader back from a restart into a Stable classic group (KIP-345, KIP-814), on both systems with
the same assertions: its new incarnation takes the old one's place without a rebalance; from JoinGroup v9 it
is told the members and that it must skip the assignment (which stands), and a client of an older version
is answered as a follower of the member id it replaced, with no members, so that it assigns nothing
(Kafka 4.4's ``GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin``). The generation does
not move and the leader's assignment is its own again."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire

pytestmark = [pytest.mark.slow, pytest.mark.kafka_answer]

SYSTEMS = ("raftlog", "kafka")
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP = 10, 11, 14
COORDINATOR_WITHIN_S = 60.0
PROTOCOL_TYPE, PROTOCOL = "raftlog-tests", "only"  # opaque to both coordinators, as any classic protocol


class RetriableJoin(Exception):
    """The coordinator asked is not (yet) the group's: find it again."""


def _coordinator(bootstrap: str, group: str) -> str:
    """The group's coordinator, once there is one (a cluster just started may not have made its groups'
    topic yet: COORDINATOR_NOT_AVAILABLE, which clients retry)."""

    def found() -> Any:
        raw = RawKafka(bootstrap.split(",")[0])
        try:
            body = wire.build(wire.request_class(FIND_COORDINATOR, 4), key_type=0, coordinator_keys=(group,))
            (coordinator,) = raw.call(FIND_COORDINATOR, 4, body).coordinators
        finally:
            raw.close()
        return coordinator if coordinator.error_code is ErrorCode.none else None

    coordinator = wait_for(found, f"a coordinator of {group}", COORDINATOR_WITHIN_S)
    return f"{coordinator.host}:{coordinator.port}"


def _join(raw: RawKafka, version: int, group: str, member_id: str = "") -> Any:
    cls = wire.request_class(JOIN_GROUP, version)
    protocol = wire.build(wire.sibling(cls, "JoinGroupRequestProtocol"), name=PROTOCOL, metadata=b"meta")
    body = wire.build(
        cls, group_id=group, session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id, group_instance_id="a",
        protocol_type=PROTOCOL_TYPE, protocols=(protocol,), reason="back from a restart",
    )  # fmt: skip
    answer = raw.call(JOIN_GROUP, version, body)
    if answer.error_code in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
        raise RetriableJoin(answer.error_code.name)
    assert answer.error_code is ErrorCode.none, answer
    return answer


def _sync(raw: RawKafka, group: str, joined: Any, assignment: bytes | None) -> bytes:
    cls = wire.request_class(SYNC_GROUP, 5)
    assignments = () if assignment is None else (
        wire.build(wire.sibling(cls, "SyncGroupRequestAssignment"), member_id=joined.member_id,
                   assignment=assignment),
    )  # fmt: skip
    body = wire.build(
        cls, group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        group_instance_id="a", protocol_type=PROTOCOL_TYPE, protocol_name=PROTOCOL, assignments=assignments,
    )  # fmt: skip
    answer = raw.call(SYNC_GROUP, 5, body)
    assert answer.error_code is ErrorCode.none, answer
    return bytes(answer.assignment)


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_static_leader_back_from_a_restart_is_told_to_skip_the_assignment_from_join_group_v9(
    servers: Mapping[str, str], system: str
) -> None:
    group = f"static-leader-{uuid.uuid4().hex[:8]}"

    def joined() -> tuple[RawKafka, Any] | None:
        """The first join, once the coordinator found takes it (a cluster just started may still move
        or load its groups' partitions: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, which clients
        retry)."""
        raw = RawKafka(_coordinator(servers[system], group))
        try:
            return raw, _join(raw, 9, group)
        except RetriableJoin:
            raw.close()
            return None

    raw, first = wait_for(joined, f"{group}'s first join", COORDINATOR_WITHIN_S)
    try:  # a static member gets its id at once; alone, it leads
        assert first.leader == first.member_id and not first.skip_assignment
        assert _sync(raw, group, first, b"all of it") == b"all of it"

        back = _join(raw, 9, group)  # the same instance, no member id: a restart
        assert back.member_id != first.member_id and back.generation_id == first.generation_id
        assert back.leader == back.member_id and back.skip_assignment
        assert [(m.member_id, m.group_instance_id, m.metadata) for m in back.members] == [
            (back.member_id, "a", b"meta")
        ]
        assert _sync(raw, group, back, None) == b"all of it"  # the assignment stands

        older = _join(raw, 7, group)  # a client that cannot be told to skip: a follower, no members
        assert older.member_id != back.member_id and older.generation_id == first.generation_id
        assert older.leader == back.member_id and older.members == ()
        assert _sync(raw, group, older, None) == b"all of it"
    finally:
        raw.close()
