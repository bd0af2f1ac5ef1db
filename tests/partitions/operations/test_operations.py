"""The controller leader's ``Operator`` over an in-memory node: each tick advances moves through the
partition leader and the controller, starts decommission moves a few at a time, drains maintenance
nodes, and recommissioning turns moves around. The fake is all three small protocols the operator
depends on (``Controller``, ``Nodes``, ``PartitionLeaders``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from partitions.controller import decommission, elections
from partitions.controller.commands import (
    CancelMove,
    ControllerCommand,
    CreateTopic,
    MoveReplicas,
    SetNodeFlag,
    encode,
)
from partitions.controller.members import ControllerMembers
from partitions.controller.reconfigure import MemberView, ReplicaLog
from partitions.controller.state import ControllerMetadata, ControllerStateMachine
from partitions.errors import PeerUnreachable
from partitions.features import SUPPORTED
from partitions.operations.operator import Operator


@dataclass
class Group:
    leader: str
    voters: set[str]
    commit: int = 100
    learners: set[str] = field(default_factory=set)


@dataclass
class FakeNode:
    """What the operator asks of the node's parts; every partition is led by a node of this fake."""

    alive: list[str]
    node_id: str = "n1"
    machine: ControllerStateMachine = field(default_factory=ControllerStateMachine)
    groups: dict[tuple[str, int], Group] = field(default_factory=dict)
    changes: list[tuple[str, int, str, str]] = field(default_factory=list)
    controller: Group = field(default_factory=lambda: Group("n1", {"n1", "n2", "n3"}))
    controller_match: dict[str, int] = field(default_factory=dict)  # of the controller's learners
    joins: list[tuple[str, list[str]]] = field(default_factory=list)
    formations_asked: int = 0  # the operator asked the controller to record a new cluster's levels
    # node -> the feature levels its code supports as gossiped ({}: release 0.1.0); absent: this release's
    supported: dict[str, Mapping[str, int] | None] = field(default_factory=dict)
    # (node, topic, partition) -> the records its replica's log still lacks (absent: none), or None: the
    # node does not answer for its log
    copying: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    without_kafka: set[str] = field(default_factory=set)  # nodes started without a Kafka listener

    def metadata(self) -> ControllerMetadata:
        return self.machine.metadata

    def leads(self) -> bool:
        return True

    async def form_if_new(self) -> None:
        self.formations_asked += 1

    async def propose(self, command: ControllerCommand) -> object:
        result = self.machine.apply(self.machine.applied_index + 1, 1, encode(command))
        if isinstance(result, Exception):
            raise result
        if isinstance(command, CreateTopic):
            for partition, replicas in enumerate(command.replicas):
                self.groups[(command.name, partition)] = Group(replicas[0], set(replicas))
        return result

    def alive_nodes(self) -> list[str]:
        return self.alive

    def known_nodes(self) -> set[str]:
        return set(self.alive)

    def supported_features(self, node_id: str) -> Mapping[str, int] | None:
        return self.supported.get(node_id, SUPPORTED)

    def controller_members(self) -> ControllerMembers:
        group = self.controller
        match = {n: group.commit for n in group.voters if n != group.leader}
        match.update({n: self.controller_match.get(n, 0) for n in group.learners})
        return ControllerMembers(
            group.leader,
            1,
            tuple(sorted(group.voters)),
            tuple(sorted(group.learners)),
            group.commit,
            match,
        )

    async def promote_controller_learner(self, node_id: str) -> None:
        self.controller.learners.remove(node_id)
        self.controller.voters.add(node_id)

    async def join_controller(self, node_id: str, voters: list[str]) -> None:
        self.joins.append((node_id, voters))

    async def call(self, method: Any, /, *args: Any, **kwargs: Any) -> Any:
        """A partition leader's ``PeerService`` call (``cluster.Routed``): played here."""
        return await getattr(self, method.__name__)(*args, **kwargs)

    async def member_view(self, topic: str, partition: int) -> MemberView:
        group = self.groups[(topic, partition)]
        match = {n: group.commit for n in group.voters | group.learners if n != group.leader}
        return MemberView(
            group.leader, frozenset(group.voters), group.commit, match, frozenset(group.learners)
        )

    async def replica_log(self, node_id: str, topic: str, partition: int) -> ReplicaLog:
        group = self.groups[(topic, partition)]
        lacking = self.copying.get((node_id, topic, partition), 0)
        if lacking is None:
            raise PeerUnreachable(node_id, "no answer")
        return ReplicaLog(group.commit, 5000 - lacking, 5000)

    async def change_membership(
        self, topic: str, partition: int, change: str, node: str, timeout_ms: int
    ) -> None:
        self.changes.append((topic, partition, change, node))
        group = self.groups[(topic, partition)]
        if change == "learner":
            group.learners.add(node)
        elif change == "promote":
            group.learners.discard(node)
            group.voters.add(node)
        elif change == "remove":
            group.voters.discard(node)
            group.learners.discard(node)
        else:
            group.leader = node

    def known_leader(self, topic: str, partition: int) -> str | None:
        return self.groups[(topic, partition)].leader

    def may_lead(self, node_id: str) -> str | None:
        return elections.unfit_to_lead(node_id, ("kafka",) if node_id in self.without_kafka else ())

    async def recommission(self, node_id: str) -> None:
        """What the metadata frontend does when a decommission is cleared."""
        for topic, partition in decommission.moves_off(node_id, self.machine.metadata.reassignments):
            await self.propose(CancelMove(topic, partition))


async def ticks(operator: Operator, count: int) -> None:
    for _ in range(count):
        await operator._tick()


async def test_a_move_runs_to_its_end_one_change_at_a_time() -> None:
    node = FakeNode(alive=["n1", "n2", "n3", "n4"])
    await node.propose(CreateTopic("t", [["n1", "n2", "n3"]]))
    await node.propose(MoveReplicas("t", 0, ["n2", "n3", "n4"]))
    operator = Operator(node, node, node, node)
    await ticks(operator, 10)
    assert node.machine.metadata.reassignments == {}
    assert node.machine.metadata.topics["t"].replicas == (("n2", "n3", "n4"),)
    assert [c[2:] for c in node.changes] == [
        ("learner", "n4"),
        ("promote", "n4"),
        ("transfer", "n2"),
        ("remove", "n1"),
    ]  # n2: the preferred leader


async def test_a_move_stays_in_progress_with_its_old_replica_while_the_joiner_copies_its_log() -> None:
    """The joiner's Raft match index is caught up (it installed the leader's snapshot), its partition log
    is not: it stays a learner, the move stays recorded (what ListPartitionReassignments and the admin
    API report) and the old replica a voter; a joiner that cannot answer for its log waits the same."""
    node = FakeNode(alive=["n1", "n2", "n3", "n4"])
    await node.propose(CreateTopic("t", [["n1", "n2", "n3"]]))
    await node.propose(MoveReplicas("t", 0, ["n2", "n3", "n4"]))
    node.copying[("n4", "t", 0)] = 4000
    operator = Operator(node, node, node, node)
    await ticks(operator, 10)
    assert [c[2:] for c in node.changes] == [("learner", "n4")]
    assert ("t", 0) in node.machine.metadata.reassignments
    assert node.groups[("t", 0)].voters == {"n1", "n2", "n3"}
    assert node.machine.metadata.topics["t"].replicas == (("n1", "n2", "n3"),)
    node.copying[("n4", "t", 0)] = None
    await ticks(operator, 5)
    assert [c[2:] for c in node.changes] == [("learner", "n4")], "no answer: not known to be complete"
    del node.copying[("n4", "t", 0)]
    await ticks(operator, 10)
    assert node.machine.metadata.reassignments == {}
    assert node.machine.metadata.topics["t"].replicas == (("n2", "n3", "n4"),)


async def test_decommission_moves_replicas_off_a_few_at_a_time_and_recommission_turns_them_around() -> None:
    node = FakeNode(alive=["n1", "n2", "n3", "n4"])
    await node.propose(CreateTopic("t", [["n1", "n3"]] * 6))
    await node.propose(SetNodeFlag("n3", "decommissioning", True))
    operator = Operator(node, node, node, node)
    await ticks(operator, 1)
    moving = node.machine.metadata.reassignments
    assert len(moving) == 4, "at most 4 moves at once"
    assert all(set(m.target) == {"n1", "n2"} or set(m.target) == {"n1", "n4"} for m in moving.values())
    await node.recommission("n3")
    assert all(m.cancelled and m.target == ("n1", "n3") for m in node.machine.metadata.reassignments.values())
    await node.propose(SetNodeFlag("n3", "decommissioning", False))
    await ticks(operator, 20)
    assert node.machine.metadata.reassignments == {}
    assert all(set(r) == {"n1", "n3"} for r in node.machine.metadata.topics["t"].replicas)


async def test_a_decommission_ends_with_nothing_on_the_node() -> None:
    node = FakeNode(alive=["n1", "n2", "n3", "n4"])
    await node.propose(CreateTopic("t", [["n1", "n3"], ["n3", "n2"], ["n2", "n4"]] * 3))
    await node.propose(SetNodeFlag("n3", "decommissioning", True))
    operator = Operator(node, node, node, node)
    await ticks(operator, 60)
    assert node.machine.metadata.reassignments == {}
    assert all("n3" not in r and len(r) == 2 for r in node.machine.metadata.topics["t"].replicas)


async def test_maintenance_drains_leadership_and_nothing_goes_back() -> None:
    node = FakeNode(alive=["n1", "n2", "n3"])
    await node.propose(CreateTopic("t", [["n2", "n1", "n3"]] * 4))
    await node.propose(SetNodeFlag("n2", "maintenance", True))
    operator = Operator(node, node, node, node)
    await ticks(operator, 8)  # draining ignores the balance interval: one transfer per tick
    leaders: dict[str, Any] = {}
    for group in node.groups.values():
        leaders[group.leader] = leaders.get(group.leader, 0) + 1
    assert "n2" not in leaders and sum(leaders.values()) == 4


async def test_a_node_without_the_kafka_door_is_drained_of_leadership_at_once_and_given_none() -> None:
    """The operator tour's added node (docs/operations.md) started without ``--kafka`` and made a
    partition's preferred leader: Kafka clients would get LEADER_NOT_AVAILABLE for what it leads, so it
    leads nothing, whatever the balance."""
    node = FakeNode(alive=["n1", "n2", "n3", "n4"], without_kafka={"n4"})
    await node.propose(CreateTopic("t", [["n4", "n1", "n2"]] * 4 + [["n1", "n2", "n3"]] * 4))
    operator = Operator(node, node, node, node)
    await ticks(operator, 6)  # a drain ignores the balance interval: one transfer per tick
    leaders = {group.leader for group in node.groups.values()}
    assert "n4" not in leaders and len(node.changes) == 4, node.changes
    node.without_kafka.clear()  # started again with --kafka: it may lead, the balancer evens out later
    assert node.may_lead("n4") is None


async def test_a_controller_learner_is_asked_to_join_then_promoted_once_caught_up() -> None:
    node = FakeNode(alive=["n1", "n2", "n3", "n4"])
    node.controller.learners.add("n4")
    operator = Operator(node, node, node, node)
    await ticks(operator, 2)
    assert node.joins == [("n4", ["n1", "n2", "n3"])] * 2, "asked to open its replica until it answers"
    node.controller_match["n4"] = 40  # answering, behind the commit index (100) seen when first met
    node.controller.commit = 130
    await ticks(operator, 3)
    assert node.controller.learners == {"n4"} and len(node.joins) == 2
    node.controller_match["n4"] = 100
    await ticks(operator, 1)
    assert node.controller.voters == {"n1", "n2", "n3", "n4"} and not node.controller.learners


async def test_the_balancer_evens_out_only_a_lasting_imbalance_and_never_a_leader_that_just_changed() -> None:
    node = FakeNode(alive=["n1", "n2", "n3"])
    await node.propose(CreateTopic("t", [["n1", "n2", "n3"]] * 6))  # all six led by n1
    now = [1000.0]
    operator = Operator(node, node, node, node, lambda: now[0])

    async def balance_round() -> list[tuple[str, int, str, str]]:
        now[0] += 3.0  # BALANCE_INTERVAL_S
        before = len(node.changes)
        await operator._tick()
        return node.changes[before:]

    # the leaders are new to the balancer: nothing moves while they settle and the skew has not lasted
    for _ in range(4):
        assert await balance_round() == []
    moved: dict[tuple[str, int], float] = {}
    for _ in range(40):
        for topic, partition, change, _target in await balance_round():
            assert change == "transfer"
            assert now[0] - moved.get((topic, partition), -1e9) >= 10.0, "moved a leader that just changed"
            moved[(topic, partition)] = now[0]
    times = sorted(moved.values())
    assert len(times) == 4, "not evened out to 2 leaders per node"
    assert times[0] >= 1000.0 + 10.0 + 2 * 3.0, "a transfer before the leaders settled and the skew lasted"
    leaders: dict[str, int] = {}
    for group in node.groups.values():
        leaders[group.leader] = leaders.get(group.leader, 0) + 1
    assert leaders == {"n1": 2, "n2": 2, "n3": 2}
    for _ in range(10):  # balanced: it stays put
        assert await balance_round() == []


async def test_a_passing_imbalance_moves_nothing() -> None:
    node = FakeNode(alive=["n1", "n2", "n3"])
    await node.propose(CreateTopic("t", [["n1", "n2", "n3"], ["n2", "n3", "n1"], ["n3", "n1", "n2"]] * 2))
    now = [1000.0]
    operator = Operator(node, node, node, node, lambda: now[0])
    for round_number in range(30):
        now[0] += 3.0
        # an election on a loaded machine hands n1 two more leaderships for two rounds, every fifth round
        skewed = round_number % 5 in (3, 4)
        node.groups[("t", 1)].leader = "n1" if skewed else "n2"
        node.groups[("t", 2)].leader = "n1" if skewed else "n3"
        await operator._tick()
    assert node.changes == []


async def test_the_operator_asks_the_controller_to_record_a_new_clusters_levels_at_every_tick() -> None:
    """A new cluster's levels are the controller frontend's to propose, and only while its log holds no
    command (``MetadataFrontend.form_if_new``; tests/partitions/metadata/test_formation.py): the operator
    only asks it, as one of the leader's duties, whatever the nodes gossip."""
    node = FakeNode(alive=["n1", "n2", "n3"], supported={"n2": {}, "n3": None})
    operator = Operator(node, node, node, node)
    await ticks(operator, 3)
    assert node.formations_asked == 3
    assert node.machine.metadata.features == {}  # the operator itself finalizes nothing


async def test_an_upgraded_cluster_stays_at_its_level_until_the_operator_raises_it() -> None:
    """As Kafka's ``metadata.version`` after a rolling upgrade: every node runs this code, but the leader
    restarted on its data (no new cluster), so level 1 stays until ``raftlog cluster features upgrade``."""
    node = FakeNode(alive=["n1", "n2", "n3"], supported={})  # every node gossips this release's levels
    operator = Operator(node, node, node, node)
    await ticks(operator, 3)
    assert node.machine.metadata.features == {}
