"""DeleteGroups answers what a Kafka client can act on when a group's offsets cannot be deleted yet."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.group_apis import delete_groups
from partitions.errors import OffsetsUnavailable, ReplicaRecovering
from partitions.groups.errors import GroupNotEmpty, UnknownGroup
from raftlog.consensus.errors import NoLeader


class Groups:
    def __init__(self, failure: BaseException | None) -> None:
        self.failure = failure
        self.asked: list[str] = []

    async def delete_group(self, name: str) -> None:
        self.asked.append(name)
        if self.failure is not None:
            raise self.failure


class NoShareGroups:
    """The share coordinator of a node where "g" is no share group: its records' state stays untouched."""

    def describe(self, name: str) -> None:
        raise UnknownGroup(name)


class Door:
    """What DeleteGroups asks of its door: the ACLs, the group's coordinator, the node's groups and its
    share groups (none: "g" is a consumer group)."""

    def __init__(self, groups: Groups) -> None:
        self.node = SimpleNamespace(
            node_id="n1", local=SimpleNamespace(groups=groups), cluster=SimpleNamespace(data=None)
        )
        self.coordinator = SimpleNamespace(share=NoShareGroups())

    def allows(self, *_: object) -> bool:
        return True

    def coordinator_of(self, topic: str, key: str) -> str:
        return "n1"


async def _answer(failure: BaseException | None, version: int = 2) -> Any:
    groups = Groups(failure)
    request = wire.Request(42, version, 1, "test", SimpleNamespace(groups_names=("g",)))
    answer = await delete_groups(Door(groups), request)  # type: ignore[arg-type]
    assert groups.asked == ["g"]
    (result,) = answer.results
    return result.error_code if version < 3 else (result.error_code, result.error_message)


@pytest.mark.parametrize(
    "failure",
    [
        NoLeader("t-0"),
        ReplicaRecovering("t-0", 5, 9),
        OffsetsUnavailable("g", "t", 0, "no leader answered within 8000 ms"),
    ],
    ids=["electing", "recovering", "offsets-out-of-reach"],
)
async def test_a_partition_of_its_offsets_without_a_leader_is_a_coordinator_still_loading(
    failure: BaseException,
) -> None:
    """Kafka's clients ask again on COORDINATOR_LOAD_IN_PROGRESS; LEADER_NOT_AVAILABLE means nothing to a
    group API, and the group, still listed, is deleted by the next ask. The offsets' partitions are waited
    for (``GroupOffsets``: OffsetsUnavailable once the time is spent); the group's own partition electing
    is answered alike."""
    assert await _answer(failure) == ErrorCode.coordinator_load_in_progress


async def test_a_group_with_members_is_refused_and_a_deleted_one_is_done() -> None:
    assert await _answer(GroupNotEmpty("g", 1, "the Kafka protocol")) == ErrorCode.non_empty_group
    assert await _answer(None) == ErrorCode.none


async def test_v3_gives_kafkas_message_where_the_coordinator_could_not_answer_and_none_for_the_group() -> (
    None
):
    """As Kafka 4.4's coordinator: a message only where it could not answer for the group (its exception's
    words), none for what the group decided (read from kafka-group-coordinator 4.4.0's
    ``GroupCoordinatorService.deleteGroups``: its shard answers a code alone)."""
    assert await _answer(NoLeader("t-0"), 3) == (
        ErrorCode.coordinator_load_in_progress,
        "The coordinator is loading and hence can't process requests.",
    )
    assert await _answer(GroupNotEmpty("g", 1, "the Kafka protocol"), 3) == (ErrorCode.non_empty_group, None)
    assert await _answer(None, 3) == (ErrorCode.none, None)
