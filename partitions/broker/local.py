"""This node's own ``AdminService`` and ``PeerService``: thin compositions of the parts that do the work
(the metadata frontend, partition admin, the data plane, presence). Each raises ``NotLeader`` for what
another node must serve, so that the same call can be run there (``partitions.peers.cluster``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from partitions.controller.delegation_tokens import DelegationTokenCommand
from partitions.controller.members import ControllerMembers
from partitions.controller.quotas import QuotaChange
from partitions.controller.reconfigure import MemberView, MoveProgress, ReplicaLog
from partitions.controller.state import CONTROLLER_GROUP, TopicMetadata
from partitions.data.partition_admin import PartitionAdmin
from partitions.data.plane import DataPlane
from partitions.data.service import FetchedBatches
from partitions.errors import NoControllerLeader
from partitions.metadata.controller_voters import ControllerVoters
from partitions.metadata.frontend import MetadataFrontend
from partitions.metadata.security_records import SecurityRecords
from partitions.metadata.service import ControllerSnapshot, MoveState, PartitionState
from partitions.metadata.topic_changes import TopicChanges
from partitions.peers.presence import Presence
from partitions.peers.service import Claims, Failures
from partitions.security.acls import AclBinding, AclFilter
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential
from raftlog.consensus.errors import NotLeader


@dataclass(eq=False)
class LocalAdmin:
    """Implements ``AdminService``: controller operations on the controller leader, partition operations
    on the partition's leader."""

    _frontend: MetadataFrontend
    _topics: TopicChanges
    _security: SecurityRecords
    _voters: ControllerVoters
    _partitions: PartitionAdmin

    def _on_controller(self) -> None:
        """Writes, and reads of move and decommission progress, are answered by the controller leader,
        which has applied every committed step (a follower of the controller group may be a heartbeat
        behind)."""
        controller = self._frontend.controller()
        if controller is None:
            raise NoControllerLeader(CONTROLLER_GROUP)
        if controller != self._frontend.node_id:
            raise NotLeader(CONTROLLER_GROUP, controller)

    async def topic(self, name: str, fresh: bool = False) -> TopicMetadata:
        if fresh:
            self._on_controller()
        return self._frontend.topic(name)

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, Any],
        timeout_ms: int | None = None,
        assignment: list[list[str]] | None = None,
    ) -> TopicMetadata:
        self._on_controller()
        return await self._topics.create_topic(
            name, partitions, replication_factor, configs, timeout_ms, assignment
        )

    async def add_partitions(
        self,
        name: str,
        count: int,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        assignment: list[list[str]] | None = None,
    ) -> TopicMetadata:
        self._on_controller()
        return await self._topics.add_partitions(name, count, validate_only, timeout_ms, assignment)

    async def delete_topic(
        self, name: str, timeout_ms: int | None = None, topic_id: int | None = None
    ) -> None:
        self._on_controller()
        await self._topics.delete_topic(name, timeout_ms, topic_id)

    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        self._on_controller()
        return await self._topics.alter_configs(name, configs)

    async def resource_configs(self, kind: str) -> dict[str, dict[str, str]]:
        self._on_controller()
        resources = self._frontend.metadata().resource_configs
        return {name: dict(values) for (of, name), values in resources.items() if of == kind}

    async def alter_resource_configs(
        self, kind: str, name: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        self._on_controller()
        await self._topics.alter_resource_configs(kind, name, changes, validate_only)

    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        self._on_controller()
        return await self._topics.move_replicas(topic, partition, replicas)

    async def move_state(self, topic: str, partition: int) -> MoveState:
        self._on_controller()
        return self._topics.move_state(topic, partition)

    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        self._on_controller()
        return await self._topics.cancel_move(topic, partition)

    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        self._on_controller()
        await self._topics.set_node_flag(node_id, flag, on)

    async def update_feature(self, feature: str, level: int) -> dict[str, int]:
        self._topics.check_feature(feature, level)  # here first: the leader may be of the previous release
        self._on_controller()
        return await self._topics.update_feature(feature, level)

    async def decommission_status(self, node_id: str) -> dict[str, Any]:
        self._on_controller()
        return self._topics.decommission_status(node_id)

    async def controller_members(self) -> ControllerMembers:
        self._on_controller()
        return self._voters.controller_members()

    async def add_controller_voter(self, node_id: str) -> ControllerMembers:
        self._on_controller()
        return await self._voters.add_controller_voter(node_id)

    async def remove_controller_voter(self, node_id: str) -> ControllerMembers:
        self._on_controller()
        return await self._voters.remove_controller_voter(node_id)

    async def set_user(self, name: str, credentials: list[ScramCredential]) -> list[str]:
        self._on_controller()
        return await self._security.set_user(name, credentials)

    async def delete_user(self, name: str) -> None:
        self._on_controller()
        await self._security.delete_user(name)

    async def alter_user(
        self, name: str, upsertions: list[ScramCredential], deletions: list[str]
    ) -> list[str]:
        self._on_controller()
        return await self._security.alter_user(name, upsertions, deletions)

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclBinding]:
        self._on_controller()
        return await self._security.create_acls(bindings)

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        self._on_controller()
        return await self._security.delete_acls(filters)

    async def create_token(self, token: ApiToken) -> ApiToken:
        self._on_controller()
        return await self._security.create_token(token)

    async def delete_token(self, user: str, token_id: str) -> ApiToken:
        self._on_controller()
        return await self._security.delete_token(user, token_id)

    async def change_delegation_token(self, command: DelegationTokenCommand) -> DelegationToken:
        self._on_controller()
        return await self._security.change_delegation_token(command)

    async def alter_client_quotas(self, changes: list[QuotaChange], validate_only: bool) -> None:
        self._on_controller()
        await self._security.alter_client_quotas(changes, validate_only)

    async def register_producer_owner(self, principal: str) -> int:
        self._on_controller()
        return await self._security.register_producer_owner(principal)

    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        """The leader's view; this node's when it leads or no leader is known, else NotLeader naming the
        leader (only it knows every replica's match offset and lag)."""
        state = self._partitions.partition_state(topic, partition)
        if state.leader is not None and state.leader != self._partitions.node_id:
            raise NotLeader(self._frontend.topic(topic).group_id(partition), state.leader)
        return state

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> str | None:
        return await self._partitions.transfer_leadership(topic, partition, target, timeout_ms)


@dataclass(eq=False)
class PeerServer:
    """Implements ``PeerService``: what other nodes ask of this one."""

    _data: DataPlane
    _presence: Presence
    _frontend: MetadataFrontend
    _partitions: PartitionAdmin

    async def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedBatches:
        return await self._data.read_batches(topic, partition, offset, max_bytes)

    async def leadership(self) -> Claims:
        return self._presence.leadership()

    async def replica_failures(self) -> Failures:
        return self._presence.replica_failures()

    async def controller_snapshot(self, known_index: int | None) -> ControllerSnapshot:
        return await self._frontend.snapshot(known_index)

    async def member_view(self, topic: str, partition: int) -> MemberView:
        return self._partitions.member_view(topic, partition)

    async def replica_log(self, topic: str, partition: int) -> ReplicaLog:
        return await self._partitions.replica_log(topic, partition)

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        await self._partitions.change_membership(topic, partition, change, node_id, timeout_ms)

    async def join_controller(self, voters: list[str]) -> None:
        await self._frontend.join_controller(voters)

    async def leave_controller(self, why: str) -> None:
        await self._frontend.leave_controller(why)
