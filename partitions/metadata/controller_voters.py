"""The controller group's members, changed one at a time on the controller leader: add a voter (a
learner first, which the ``Operator`` promotes once it caught up), remove one (the leader hands over first
when it is the one to go). The rules of who may join or leave now are ``controller_members``'s; the seat
each node holds (join, leave, watch) is the ``MetadataFrontend``'s."""

from __future__ import annotations

import logging

from partitions.controller import members as controller_members
from partitions.controller.members import ControllerMembers
from partitions.controller.state import CONTROLLER_GROUP
from partitions.errors import ControllerChangeRefused
from partitions.features import CONTROLLER_MEMBER_TIMES, Features
from partitions.metadata.frontend import ADMIN_TIMEOUT_MS, MetadataFrontend
from raftlog.consensus.errors import NotLeader
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.node")


class ControllerVoters:
    def __init__(self, frontend: MetadataFrontend, features: Features | None = None) -> None:
        """``features``: the gate of the members' times (None: never given)."""
        self._frontend = frontend
        self._features = features

    def controller_members(self) -> ControllerMembers:
        """The controller group as this node, its leader, sees it (NotLeader elsewhere); with each member's
        times once the cluster's level allows them (a node of 0.1.0 may be the one asking)."""
        group = self._frontend.leader_group()
        status = group.status()
        timed = self._features is not None and self._features.allows(CONTROLLER_MEMBER_TIMES)
        return ControllerMembers(
            self._frontend.node_id,
            status.term,
            tuple(sorted(status.voters)),
            tuple(sorted(status.learners)),
            status.commit_index,
            dict(status.match_index),
            group.membership_pending(),
            tuple(sorted(status.heard_at_ms.items())) if timed else (),
            tuple(sorted(status.caught_up_at_ms.items())) if timed else (),
        )

    async def add_controller_voter(self, node_id: str) -> ControllerMembers:
        """Start adding ``node_id`` to the controller group: it is a learner once this returns, and the
        ``Operator`` has it open its replica and promotes it once caught up. ControllerChangeRefused
        when it may not join now (``controller_members.add_refusal``); nothing changes then."""
        self._frontend.known_node(node_id)
        group = self._frontend.leader_group()
        members = self.controller_members()
        refusal = controller_members.add_refusal(
            members,
            node_id,
            self._frontend.members().alive_nodes(),
            self._frontend.metadata().node_flags["decommissioning"],
        )
        if refusal is not None:
            raise ControllerChangeRefused(node_id, refusal)
        await group.add_learner(node_id, ADMIN_TIMEOUT_MS)
        log.info("node %s: %s joins the controller group as a learner", self._frontend.node_id, node_id)
        return self.controller_members()

    async def promote_controller_learner(self, node_id: str) -> None:
        await self._frontend.leader_group().promote_learner(node_id, ADMIN_TIMEOUT_MS)
        log.info("node %s: %s is a controller voter", self._frontend.node_id, node_id)

    async def remove_controller_voter(self, node_id: str) -> ControllerMembers:
        """Remove ``node_id`` from the controller group (a learner: its add is cancelled). This leader
        hands its leadership over first when it is the one to go, and raises NotLeader naming the new
        leader, so the call runs again there. ControllerChangeRefused when it may not leave now
        (``controller_members.remove_refusal``); nothing changes then."""
        self._frontend.known_node(node_id)
        group = self._frontend.leader_group()
        members = self.controller_members()
        alive = self._frontend.members().alive_nodes()
        refusal = controller_members.remove_refusal(members, node_id, [*alive, self._frontend.node_id])
        if refusal is not None:
            raise ControllerChangeRefused(node_id, refusal)
        if node_id == self._frontend.node_id:
            successor = controller_members.best_successor(members, node_id, alive)
            if successor is None:
                raise ControllerChangeRefused(node_id, "no live voter to hand the controller's leadership to")
            await group.transfer_leadership(successor, ADMIN_TIMEOUT_MS)
            raise NotLeader(CONTROLLER_GROUP, successor)
        await group.remove_replica(node_id, ADMIN_TIMEOUT_MS)
        log.info("node %s: %s left the controller group", self._frontend.node_id, node_id)
        if node_id in alive:
            try:
                await self._frontend.tell_leave(
                    node_id, f"removed from the controller group by {self._frontend.node_id}"
                )
            except (RaftlogError, OSError) as error:  # it finds out by itself (_watch)
                log.info(
                    "node %s: %s not told to leave the controller: %s", self._frontend.node_id, node_id, error
                )
        return self.controller_members()
