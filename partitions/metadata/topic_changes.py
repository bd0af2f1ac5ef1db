"""Topics, replica moves and node flags on the controller leader: the proposals that change them
(create, delete, alter configs, move, cancel, decommission, maintenance) and the progress of moves and
decommissions. Placement and every check against liveness happen here, before proposing, so the apply
stays deterministic; nothing changes when a check refuses. Proposals go through the node's
``MetadataFrontend`` (NotLeader off the controller leader)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from partitions import features
from partitions.controller import decommission, reconfigure
from partitions.controller import resource_configs as controller_configs
from partitions.controller.commands import (
    AddPartitions,
    AlterConfigs,
    CancelMove,
    CreateTopic,
    DeleteTopic,
    MoveReplicas,
    SetFeatureLevel,
    SetNodeFlag,
    validate_topic,
)
from partitions.controller.defaults import PARTITIONS_MAX
from partitions.controller.placement import TopicsLoad, check_assignment, check_capacity, place
from partitions.controller.reconfigure import MoveProgress
from partitions.controller.state import Reassignment, TopicMetadata, merge_configs
from partitions.errors import (
    DecommissionImpossible,
    FeatureNotFinalized,
    InvalidReassignment,
    InvalidTopic,
    ReassignmentInProgress,
    TopicIdGone,
    UnknownPartition,
    UnknownTopic,
)
from partitions.metadata.frontend import ADMIN_TIMEOUT_MS, Members, MetadataFrontend
from partitions.metadata.service import TOPIC_CHANGE_WAIT_MAX_MS, MoveState
from partitions.names import is_reserved_topic
from partitions.topic_configs import alterable, creation_configs, settable
from raftlog.errors import check
from raftlog.storage.config import SCHEMA_VALIDATION_PROPERTIES, LogConfig

log = logging.getLogger("raftlog.node")

CREATE_WAIT_S = 10.0  # how long a topic creation waits for its partitions' leaders, at most


@dataclass(frozen=True, slots=True)
class ChangeTime:
    """How long a topic change (create, add partitions, delete) waits, by its request's ``timeout_ms`` as
    Kafka's CreateTopics, CreatePartitions and DeleteTopics give it (Kafka's controller answers
    REQUEST_TIMED_OUT once it passed): the controller's write may take all of it, up to
    ``TOPIC_CHANGE_WAIT_MAX_MS``, and the new partitions' leaders are waited for in what is left (at most
    ``CREATE_WAIT_S``). ``timeout_ms`` <= 0 asks for no wait (Kafka's "answer at once"): the write is
    waited for as a request without a time is (``ADMIN_TIMEOUT_MS``: nothing is said before it is
    committed), the leaders not. None (the HTTP door; a node of 0.1.0 forwarding the change): the write
    ``ADMIN_TIMEOUT_MS``, the leaders ``CREATE_WAIT_S`` after it."""

    write_ms: int
    leaders_s: float  # at most, once written
    deadline: float | None  # monotonic, the leaders' wait ends by it (None: ``leaders_s`` after the write)

    @classmethod
    def of(cls, timeout_ms: int | None, now: float) -> ChangeTime:
        if timeout_ms is None:
            return cls(ADMIN_TIMEOUT_MS, CREATE_WAIT_S, None)
        if timeout_ms <= 0:
            return cls(ADMIN_TIMEOUT_MS, 0.0, None)
        bounded = min(int(timeout_ms), TOPIC_CHANGE_WAIT_MAX_MS)
        return cls(bounded, CREATE_WAIT_S, now + bounded / 1000)

    def leaders_wait_s(self, now: float) -> float:
        """How long the leaders are waited for, the write done at ``now``."""
        if self.deadline is None:
            return self.leaders_s
        return max(0.0, min(self.leaders_s, self.deadline - now))


class TopicChanges:
    """Create with the node's ``MetadataFrontend`` and its replicas cap (``serve --replicas-max``)."""

    def __init__(self, frontend: MetadataFrontend, replicas_max: int) -> None:
        self._frontend = frontend
        self._replicas_max = replicas_max
        self._load = TopicsLoad()  # the placed load, counted again from each change's difference only

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, Any],
        timeout_ms: int | None = None,
        assignment: list[list[str]] | None = None,
    ) -> TopicMetadata:
        """Place and create a topic; ``timeout_ms``: the request's (``ChangeTime``): past it, the write not
        committed, OutcomeUnknown (Kafka's REQUEST_TIMED_OUT; the topic may still be created).
        ``assignment``: its replicas placed by hand, each partition's node ids, the first its preferred
        leader (``placement.check_assignment``); ``partitions`` and ``replication_factor`` must then be
        its own."""
        waits = ChangeTime.of(timeout_ms, time.monotonic())
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise InvalidTopic(f"partitions {partitions!r} must be an integer >= 1")
        if not isinstance(replication_factor, int) or isinstance(replication_factor, bool):
            raise InvalidTopic(f"replication_factor {replication_factor!r} must be an integer")
        if partitions > PARTITIONS_MAX:
            raise InvalidTopic(f"partitions {partitions} must be between 1 and {PARTITIONS_MAX}")
        configs = creation_configs(settable(configs), replication_factor)  # what both doors' creators send
        members = self._frontend.members()
        metadata = self._frontend.metadata()
        existing = self._load.of(metadata.topics)
        if assignment is not None:
            if (len(assignment), len(assignment[0]) if assignment else 0) != (partitions, replication_factor):
                raise InvalidTopic(
                    f"an assignment of {len(assignment)} partition(s) given with {partitions} partitions and "
                    f"replication factor {replication_factor}"
                )
            placed = check_assignment(
                assignment, members.placeable(), existing, self._replicas_max, members.standby()
            )
        else:
            placed = place(
                members.placeable(),
                partitions,
                replication_factor,
                existing,
                self._replicas_max,
                members.standby(),
            )
        validate_topic(name, placed, configs)
        self._check_schema_validation_allowed(configs)
        result = await self._frontend.propose(CreateTopic(name, placed, dict(configs)), waits.write_ms)
        check(isinstance(result, TopicMetadata), f"controller returned {result!r}")
        assert isinstance(result, TopicMetadata)  # narrowed for the type checker; checked above
        await self._wait_for_leaders(result, members, waits.leaders_wait_s(time.monotonic()))
        return result

    async def add_partitions(
        self,
        name: str,
        count: int,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        assignment: list[list[str]] | None = None,
    ) -> TopicMetadata:
        """Grow a topic to ``count`` partitions (Kafka's CreatePartitions), its replication factor that of
        its first partition, the new ones placed as a new topic's are, or by hand (``assignment``: one
        replica set per new partition, checked as Kafka's controller checks them, then as
        ``create_topic``'s). Records keep their partitions; keys hash over the new count from now on.
        ``validate_only``: check and place, change nothing; ``timeout_ms`` as ``create_topic``'s."""
        waits = ChangeTime.of(timeout_ms, time.monotonic())
        topic = self._frontend.topic(name)
        if is_reserved_topic(name):  # __consumer_groups: a group's partition is its id's hash over the count
            raise InvalidTopic(f"topic {name!r} is the cluster's own; its partitions cannot be added to")
        if not isinstance(count, int) or isinstance(count, bool):
            raise InvalidTopic(f"partitions {count!r} must be an integer")
        if count == topic.partitions:  # Kafka 4.4's words (ReplicationControlManager.createPartitions)
            raise InvalidTopic(f"Topic already has {count} partition(s).")
        if count < topic.partitions:
            raise InvalidTopic(
                f"The topic {name} currently has {topic.partitions} partition(s); {count} would not be an "
                "increase."
            )
        if count > PARTITIONS_MAX:
            raise InvalidTopic(f"partitions {count} must be between 1 and {PARTITIONS_MAX}")
        members = self._frontend.members()
        metadata = self._frontend.metadata()
        existing = self._load.of(metadata.topics)
        factor = len(topic.replicas[0])
        if assignment is not None:
            added = _check_added(assignment, count - topic.partitions, factor)
            added = check_assignment(
                added, members.placeable(), existing, self._replicas_max, members.standby()
            )
        else:
            added = place(
                members.placeable(),
                count - topic.partitions,
                factor,
                existing,
                self._replicas_max,
                members.standby(),
            )
        if validate_only:
            grown = topic.replicas + tuple(map(tuple, added))
            return TopicMetadata(name, topic.topic_id, grown, topic.configs)
        result = await self._frontend.propose(AddPartitions(name, count, added), waits.write_ms)
        check(isinstance(result, TopicMetadata), f"controller returned {result!r}")
        assert isinstance(result, TopicMetadata)  # narrowed for the type checker; checked above
        wait_s = waits.leaders_wait_s(time.monotonic())
        await self._wait_for_leaders(result, members, wait_s, first=topic.partitions)
        return result

    async def _wait_for_leaders(
        self, metadata: TopicMetadata, members: Members, wait_s: float, first: int = 0
    ) -> None:
        """Return once every partition of a new topic has a leader, as seen from here, so a produce right
        after the create succeeds; bounded (``wait_s``), like Redpanda's create-topic wait. A timeout is
        not an error: the topic exists and leaders follow."""
        if wait_s <= 0:
            return
        deadline = time.monotonic() + wait_s
        waiting = list(range(first, metadata.partitions))
        while time.monotonic() < deadline:
            waiting = [
                p for p in waiting if not members.has_leader(metadata, p)
            ]  # each led one looked at once
            if not waiting:
                return
            await asyncio.sleep(0.02)
        log.warning(
            "node %s: topic %s created or grown; some partitions still have no leader",
            self._frontend.node_id,
            metadata.name,
        )

    async def delete_topic(
        self, name: str, timeout_ms: int | None = None, topic_id: int | None = None
    ) -> None:
        """``timeout_ms`` as ``create_topic``'s. ``topic_id``: the topic's creation index, when the caller
        named the topic by its id: TopicIdGone, nothing deleted, when the name's topic is another one
        (checked again where the deletion applies, once ``features.TOPIC_DELETE_BY_ID`` is finalized;
        before, a node of the previous release could not read the command)."""
        waits = ChangeTime.of(timeout_ms, time.monotonic())
        topic = self._frontend.topic(name)
        if topic_id is not None and topic.topic_id != topic_id:
            raise TopicIdGone(name, topic_id)
        gate = features.TOPIC_DELETE_BY_ID
        by_id = features.Features(lambda: self._frontend.metadata().features).allows(gate)
        await self._frontend.propose(DeleteTopic(name, topic_id if by_id else None), waits.write_ms)

    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        """Change a topic's configs (a None value removes a property: back to its default); every replica
        applies them live (``Log.reconfigure``)."""
        metadata = self._frontend.topic(name)
        configs = alterable(configs)  # a read-only one refused by name, whichever door asked
        LogConfig.from_properties(merge_configs(metadata.configs, configs))  # InvalidConfig before proposing
        self._check_schema_validation_allowed(configs)
        result = await self._frontend.propose(AlterConfigs(name, dict(configs)))
        check(isinstance(result, TopicMetadata), f"alter configs returned {result!r}")
        assert isinstance(result, TopicMetadata)  # narrowed for the type checker; checked above
        return result

    def _check_schema_validation_allowed(self, configs: Mapping[str, Any]) -> None:
        """FeatureNotFinalized for a schema validation config while a node of the previous release, which
        refuses a topic config it does not know, could apply the change."""
        gate = features.SCHEMA_VALIDATION
        named = [key for key in SCHEMA_VALIDATION_PROPERTIES if key in configs]
        if named and not features.Features(lambda: self._frontend.metadata().features).allows(gate):
            raise FeatureNotFinalized(f"topic config {named[0]}", gate.feature, gate.level)

    async def alter_resource_configs(
        self, kind: str, name: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        """Set (a None value: remove) configs of a client metrics subscription, a group, a broker or a
        topic's throttled replicas (``partitions.resource_configs``), checked against the configs as they
        are (InvalidConfigRequest, InvalidResourceConfig, UnknownTopic: nothing changes), then proposed
        unless ``validate_only``; FeatureNotFinalized while a node of the previous release could not apply
        it."""
        gate = features.RESOURCE_CONFIGS
        if not features.Features(lambda: self._frontend.metadata().features).allows(gate):
            raise FeatureNotFinalized(f"a change of {kind} configs", gate.feature, gate.level)
        if kind == "topic":
            self._frontend.topic(name)
        command = controller_configs.AlterResourceConfigs(kind, name, tuple(changes.items()))
        controller_configs.apply(self._frontend.metadata().resource_configs, command)
        if not validate_only:
            await self._frontend.propose(command)

    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        """Start moving a partition to ``replicas`` (validated against gossip liveness: nothing changes
        when it is refused). The controller leader's ``Operator`` then drives it. Asking again for the
        move under way answers its progress, so a request whose answer was lost may be sent again."""
        metadata = self._frontend.metadata()
        topic_metadata = self._frontend.topic(topic)
        if not isinstance(partition, int) or not 0 <= partition < topic_metadata.partitions:
            raise UnknownPartition(topic, partition)
        self._frontend.leader_group()
        moving = metadata.reassignments.get((topic, partition))
        if moving is not None and replicas == list(moving.target):
            # the same move again (a client retrying a request that had no answer): where it is
            return MoveProgress.of(moving, topic_metadata.replicas[partition])
        if moving is not None:
            raise ReassignmentInProgress(topic, partition, moving.target)
        members = self._frontend.members()
        target = reconfigure.validate_move(
            topic_metadata.replicas[partition],
            replicas,
            members.known_nodes(),
            members.alive_nodes(),
            metadata.node_flags["decommissioning"],
        )
        added = {node: 1 for node in target if node not in topic_metadata.replicas[partition]}
        load = self._load.of(metadata.topics)
        held = {node: load.replicas.get(node, 0) for node in added}
        check_capacity(f"moving {topic}/{partition} to {target}", held, added, self._replicas_max)
        result = await self._frontend.propose(MoveReplicas(topic, partition, target))
        check(isinstance(result, Reassignment), f"move returned {result!r}")
        assert isinstance(result, Reassignment)  # narrowed for the type checker; checked above
        return MoveProgress.of(result, topic_metadata.replicas[partition])

    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        self._frontend.topic(topic)
        result = await self._frontend.propose(CancelMove(topic, partition))
        check(isinstance(result, Reassignment), f"cancel returned {result!r}")
        assert isinstance(result, Reassignment)  # narrowed for the type checker; checked above
        return MoveProgress.of(result, self._frontend.topic(topic).replicas[partition])

    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        """Mark a node decommissioning / in maintenance, or clear it. Recommissioning also turns around the
        moves still taking replicas off the node. A decommission that could never finish (a replica with no
        node to go to) is refused: DecommissionImpossible, nothing changes."""
        self._frontend.known_node(node_id)
        if flag == "decommissioning" and on and node_id not in self._frontend.metadata().node_flags[flag]:
            self._frontend.leader_group()  # judged on the metadata every committed move is applied to
            self._refuse_impossible_decommission(node_id)
        await self._frontend.propose(SetNodeFlag(node_id, flag, on))
        if flag == "decommissioning" and not on:
            await self.cancel_moves_off(node_id)

    async def update_feature(self, feature: str, level: int) -> dict[str, int]:
        """Finalize ``feature`` at ``level`` once every node (``known_nodes`` but those that left) runs code
        that supports it; FeatureUpdateRefused naming those that do not, or for a downgrade. The cluster's
        finalized levels after it; judged on the metadata every committed level is applied to."""
        self._frontend.leader_group()
        if self.check_feature(feature, level):
            await self._frontend.propose(SetFeatureLevel(feature, level))
            log.info("node %s: feature %s finalized at level %d", self._frontend.node_id, feature, level)
        return features.Features(lambda: self._frontend.metadata().features).levels()

    def check_feature(self, feature: str, level: int) -> bool:
        """``features.check_upgrade`` on this node's view: whether raising ``feature`` to ``level`` changes
        anything; FeatureUpdateRefused as ``update_feature``. Asked on the node that took the request before
        it goes to the controller leader, which in a cluster of two releases may be a node of the previous
        one (it serves no ``update_feature``): while such a node runs, the refusal names it."""
        return features.check_upgrade(feature, level, self._frontend.metadata().features, self._nodes())

    def _nodes(self) -> dict[str, Mapping[str, int] | None]:
        """Each node (but those decommissioned and gone) with the levels its code supports, as gossiped."""
        members = self._frontend.members()
        return {
            node: members.supported_features(node)
            for node in members.known_nodes()
            if node not in self._frontend.metadata().node_flags["decommissioning"]
            or members.supported_features(node) is not None
        }

    async def cancel_moves_off(self, node_id: str) -> None:
        """Recommission: turn around every move that takes a replica off ``node_id``."""
        for topic, partition in decommission.moves_off(node_id, self._frontend.metadata().reassignments):
            await self._frontend.propose(CancelMove(topic, partition))

    def _decommission_blockers(self, node_id: str) -> list[decommission.Blocked]:
        metadata = self._frontend.metadata()
        return decommission.blockers(
            node_id,
            {m.name: m.replicas for m in metadata.topics.values()},
            dict(metadata.reassignments),
            self._frontend.members().alive_nodes(),
            {*metadata.node_flags["decommissioning"], node_id},
        )

    def _refuse_impossible_decommission(self, node_id: str) -> None:
        stuck = [b for b in self._decommission_blockers(node_id) if b.kind == "no_target"]
        if stuck:
            leaving = {*self._frontend.metadata().node_flags["decommissioning"], node_id}
            message = decommission.refusal(node_id, stuck, self._frontend.members().alive_nodes(), leaving)
            raise DecommissionImpossible(
                node_id, message, tuple((b.topic, b.partition, b.reason) for b in stuck)
            )

    def decommission_status(self, node_id: str) -> dict[str, Any]:
        self._frontend.known_node(node_id)
        metadata = self._frontend.metadata()
        holding = [
            {"topic": m.name, "partition": p}
            for m in sorted(metadata.topics.values(), key=lambda m: m.name)
            for p, replicas in enumerate(m.replicas)
            if node_id in replicas
        ]
        moving = [
            {"topic": t, "partition": p, "target": list(move.target)}
            for (t, p), move in sorted(metadata.reassignments.items())
            if node_id in move.original and node_id not in move.target
        ]
        decommissioning = node_id in metadata.node_flags["decommissioning"]
        return {
            "node_id": node_id,
            "decommissioning": decommissioning,
            "replicas_remaining": len(holding),
            "partitions": holding,
            "moving": moving,
            "done": decommission.finished(
                node_id,
                metadata.node_flags["decommissioning"],
                {m.name: m.replicas for m in metadata.topics.values()},
            ),
            # partitions that cannot move off the node now, and why
            "blocked": [
                {"topic": b.topic, "partition": b.partition, "reason": b.reason}
                for b in (self._decommission_blockers(node_id) if decommissioning else [])
            ],
            # a decommission leaves the controller group alone: remove a voter with
            # DELETE /v1/controller/voters/{node}
            "controller_voter": node_id in self._frontend.leader_group().status().voters,
        }

    # -- progress ------------------------------------------------------------------------------------

    def move_progress(self, topic: str, partition: int) -> MoveProgress | None:
        return self.move_state(topic, partition).move

    def move_state(self, topic: str, partition: int) -> MoveState:
        metadata = self._frontend.metadata()
        topic_metadata = metadata.topics.get(topic)
        if topic_metadata is None:
            raise UnknownTopic(topic)
        if not isinstance(partition, int) or not 0 <= partition < topic_metadata.partitions:
            raise UnknownPartition(topic, partition)
        replicas = topic_metadata.replicas[partition]
        move = metadata.reassignments.get((topic, partition))
        progress = None if move is None else MoveProgress.of(move, replicas)
        return MoveState(topic, partition, list(replicas), progress)

    def moves(self) -> list[MoveState]:
        metadata = self._frontend.metadata()
        return [
            self.move_state(topic, partition)
            for topic, partition in sorted(metadata.reassignments)
            if topic in metadata.topics
        ]


def _check_added(assignment: list[list[str]], additional: int, factor: int) -> list[list[str]]:
    """The new partitions' replica sets given by hand, as many as the partitions added and each of the
    topic's replication factor (Kafka 4.4's ``ReplicationControlManager.createPartitions``, its words)."""
    if len(assignment) != additional:
        raise InvalidReassignment(
            f"Attempted to add {additional} additional partition(s), but only {len(assignment)} "
            "assignment(s) were specified."
        )
    for replica_set in assignment:
        if replica_set and len(replica_set) != factor:
            raise InvalidReassignment(
                f"The manual partition assignment includes a partition with {len(replica_set)} replica(s), "
                f"but this is not consistent with previous partitions, which have {factor} replica(s)."
            )
    return assignment
