"""AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders translated onto raftlog's moves
and leadership transfers, against a stand-in node (no processes): broker ids to node ids and back, a
move in progress and one walking back listed as Kafka lists them, what is done at once and what is
refused before anything is asked of the controller. The same APIs against Apache Kafka itself:
``tests/kafka_reference/test_differential_tools.py``."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.replica_apis import alter_partition_reassignments, elect_leaders, list_partition_reassignments
from partitions.controller.reconfigure import MoveProgress
from partitions.errors import NoReassignment
from partitions.metadata.service import AdminService, MoveState, NodeInfo


class Admin:
    """The cluster-wide admin calls a handler makes, recorded; ``move_state`` and refusals given."""

    def __init__(
        self,
        states: dict[tuple[str, int], MoveState],
        refusals: dict[str, Exception],
        leaders: dict[int, str | None] | None = None,
    ) -> None:
        self.states = states
        self.refusals = refusals
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.leaders = leaders or {}  # each partition's leader as its leader answers (None: unknown)

    async def call(self, method: Any, *args: Any) -> Any:
        name = method.__name__
        if name == AdminService.move_state.__name__:
            return self.states[(args[0], args[1])]
        if name == AdminService.partition_state.__name__:
            return SimpleNamespace(leader=self.leaders.get(args[1]))
        self.calls.append((name, args))
        if name in self.refusals:
            raise self.refusals[name]
        return None


class StandInDoor:
    def __init__(
        self, admin: Admin, moves: tuple[MoveState, ...] = (), leaders: dict[int, str | None] | None = None
    ) -> None:
        leaders = leaders or {}
        nodes = [NodeInfo(f"n{i}", f"http://n{i}", "alive") for i in (1, 2, 3, 4)]
        topic = SimpleNamespace(partitions=2, replicas=[["n1", "n2", "n3"], ["n2", "n3", "n1"]])
        metadata = SimpleNamespace(
            nodes=lambda: nodes,
            moves=lambda: list(moves),
            topics=lambda: ["t"],
            topic=lambda name: topic,
            known_leader=lambda name, partition: leaders.get(partition),
        )
        self.node = SimpleNamespace(metadata=metadata, cluster=SimpleNamespace(admin=admin))

    def allows(self, *_: object) -> bool:
        return True

    nodes_by_broker = Door.nodes_by_broker  # over the stand-in's metadata, as the door's own


def door(
    admin: Admin, moves: tuple[MoveState, ...] = (), leaders: dict[int, str | None] | None = None
) -> Any:
    """The stand-in as the handlers' ``Door``."""
    return StandInDoor(admin, moves, leaders)


def _request(api_key: int, version: int, **body: Any) -> wire.Request:
    return wire.Request(api_key, version, 1, "test", wire.build(wire.request_class(api_key, version), **body))


def _reassign(
    partitions: dict[int, tuple[int, ...] | None], allow_factor_change: bool = True
) -> wire.Request:
    cls = wire.request_class(45, 1)
    topic_cls, partition_cls = (
        wire.sibling(cls, "ReassignableTopic"),
        wire.sibling(cls, "ReassignablePartition"),
    )
    parts = tuple(wire.build(partition_cls, partition_index=p, replicas=r) for p, r in partitions.items())
    return _request(
        45,
        1,
        timeout=datetime.timedelta(seconds=30),
        allow_replication_factor_change=allow_factor_change,
        topics=(wire.build(topic_cls, name="t", partitions=parts),),
    )


def _codes(answer: Any) -> dict[int, ErrorCode]:
    (topic,) = answer.responses
    return {p.partition_index: p.error_code for p in topic.partitions}


STILL = MoveState("t", 0, ["n1", "n2", "n3"], None)


async def test_a_reassignment_starts_a_move_to_the_nodes_of_the_broker_ids() -> None:
    admin = Admin({("t", 0): STILL, ("t", 1): MoveState("t", 1, ["n2", "n3", "n1"], None)}, {})
    answer = await alter_partition_reassignments(door(admin), _reassign({0: (4, 2, 3), 1: (2, 3)}))
    assert _codes(answer) == {0: ErrorCode.none, 1: ErrorCode.none}
    assert sorted(admin.calls) == [
        ("move_replicas", ("t", 0, ["n4", "n2", "n3"])),
        ("move_replicas", ("t", 1, ["n2", "n3"])),  # a change of replication factor: a smaller set
    ]


async def test_null_replicas_cancel_and_the_replicas_it_has_are_done_at_once() -> None:
    admin = Admin({("t", 0): STILL}, {"cancel_move": NoReassignment("t", 1)})
    answer = await alter_partition_reassignments(door(admin), _reassign({0: (1, 2, 3), 1: None}))
    assert _codes(answer) == {0: ErrorCode.none, 1: ErrorCode.no_reassignment_in_progress}
    assert admin.calls == [("cancel_move", ("t", 1))]  # nothing asked to move for partition 0


async def test_what_kafka_refuses_is_refused_before_the_controller_is_asked() -> None:
    admin = Admin({("t", 0): STILL, ("t", 1): MoveState("t", 1, ["n2", "n3", "n1"], None)}, {})
    answer = await alter_partition_reassignments(door(admin), _reassign({0: (1, 99, 3), 1: ()}))
    assert _codes(answer) == {
        0: ErrorCode.invalid_replica_assignment,
        1: ErrorCode.invalid_replica_assignment,
    }
    grown = await alter_partition_reassignments(door(admin), _reassign({0: (1, 2, 3, 4)}, False))
    assert _codes(grown) == {0: ErrorCode.invalid_replication_factor}
    assert admin.calls == []


async def test_moves_under_way_are_listed_as_kafka_lists_them() -> None:
    original, target = ["n1", "n2", "n3"], ["n4", "n2", "n3"]
    joining = MoveState("t", 0, original, MoveProgress(original, target, original, "n4", False))
    # cancelled after n4 joined: walking back to the original, n4 leaving again
    back_to, now = ["n2", "n3", "n1"], ["n2", "n3", "n1", "n4"]
    back = MoveState("t", 1, now, MoveProgress(back_to, back_to, now, None, True))
    listing = door(Admin({}, {}), (back, joining))
    answer = await list_partition_reassignments(
        listing, _request(46, 0, timeout=datetime.timedelta(seconds=30), topics=None)
    )
    (topic,) = answer.topics
    listed = {
        p.partition_index: (p.replicas, p.adding_replicas, p.removing_replicas) for p in topic.partitions
    }
    assert listed == {0: ((4, 2, 3, 1), (4,), (1,)), 1: ((2, 3, 1, 4), (), (4,))}


def _elect(election: int, partitions: tuple[int, ...] | None) -> wire.Request:
    cls = wire.request_class(43, 2)
    asked = (
        None
        if partitions is None
        else (wire.build(wire.sibling(cls, "TopicPartitions"), topic="t", partitions=partitions),)
    )
    return _request(
        43, 2, election_type=election, topic_partitions=asked, timeout=datetime.timedelta(seconds=30)
    )


async def test_a_preferred_election_transfers_leadership_to_the_first_replica() -> None:
    admin = Admin({}, {})
    led = door(admin, leaders={0: "n3", 1: "n2"})
    answer = await elect_leaders(led, _elect(0, (0, 1)))
    (result,) = answer.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, ErrorCode.none),
        (1, ErrorCode.election_not_needed),
    ]
    assert admin.calls == [("transfer_leadership", ("t", 0, "n1", 30_000))]
    every = await elect_leaders(door(Admin({}, {}), leaders={0: "n1", 1: "n2"}), _elect(0, None))
    assert [r.partition_result for r in every.replica_election_results] == [()]  # none needed: left out


async def test_the_partitions_leader_decides_when_this_nodes_view_is_behind() -> None:
    """This node still sees n3 lead partition 0 (a transfer a moment ago it has not heard of); its leader
    answers n1, the preferred replica: ELECTION_NOT_NEEDED, as Kafka's controller answers, nothing moved."""
    admin = Admin({}, {}, leaders={0: "n1"})
    answer = await elect_leaders(door(admin, leaders={0: "n3", 1: "n2"}), _elect(0, (0, 1)))
    (result,) = answer.replica_election_results
    assert [p.error_code for p in result.partition_result] == [ErrorCode.election_not_needed] * 2
    assert admin.calls == []


async def test_the_partitions_leader_decides_when_this_node_knows_no_leader_yet() -> None:
    """This node has not learned the leader a transfer a moment ago gave partition 0 (the whole run's
    second preferred election found none and refused it, where Kafka answers ELECTION_NOT_NEEDED): its
    leader's answer, n1, decides. With no leader anywhere, the refusals stand."""
    admin = Admin({}, {}, leaders={0: "n1", 1: "n2"})
    unknown = {0: None, 1: None}
    preferred = await elect_leaders(door(admin, leaders=unknown), _elect(0, (0, 1)))
    (result,) = preferred.replica_election_results
    assert [p.error_code for p in result.partition_result] == [ErrorCode.election_not_needed] * 2
    unclean = await elect_leaders(door(admin, leaders=unknown), _elect(1, (0, 1)))
    (result,) = unclean.replica_election_results
    assert [p.error_code for p in result.partition_result] == [ErrorCode.election_not_needed] * 2
    leaderless = await elect_leaders(door(Admin({}, {}), leaders=unknown), _elect(0, (0,)))
    (result,) = leaderless.replica_election_results
    assert [p.error_code for p in result.partition_result] == [ErrorCode.preferred_leader_not_available]
    assert admin.calls == []


async def test_an_unclean_election_never_elects_without_a_majority() -> None:
    admin = Admin({}, {})
    answer = await elect_leaders(door(admin, leaders={0: None, 1: "n2"}), _elect(1, (0, 1)))
    (result,) = answer.replica_election_results
    assert [p.error_code for p in result.partition_result] == [
        ErrorCode.eligible_leaders_not_available,
        ErrorCode.election_not_needed,
    ]
    assert admin.calls == []
