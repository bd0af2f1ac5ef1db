"""Calls from this node to another: the one home of node-to-node requests (the Raft transport aside).

Every call is one of ``PEER_OPS``: a method of one of the node's local services (``partitions.services``),
run on the node named, answered with its typed result or its typed error (``peer_codec``). The server side
(``api/internal.py``) serves exactly this table under ``INTERNAL_PREFIX`` and answers only a caller that
presents the cluster credential (``internal_credential``).

A call that could not be sent raises ``PeerUnreachable`` (safe to retry); a call that was sent but whose
answer never came raises ``PeerOutcomeUnknown`` when it writes, ``PeerUnreachable`` when it only reads.
``RemoteData``, ``RemoteAdmin``, ``RemoteGroups`` and ``RemotePeer`` are the local service protocols
spoken to one other node.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from partitions.controller import TopicMetadata
from partitions.errors import PeerOutcomeUnknown, PeerProtocolError, PeerUnreachable
from partitions.groups.assignors import TopicPartition
from partitions.groups.state import REQUEST_TIMEOUT_MS_MAX, ReadConfig
from partitions.peer_codec import ErrorTypes, Registry, pack, unpack
from partitions.reconfigure import MemberView, MoveProgress
from partitions.services import (
    RESULT_TYPES,
    AclBinding,
    AclFilter,
    ApiToken,
    Assignment,
    Claims,
    CommittedOffset,
    ConsumerCreated,
    ControllerMembers,
    ControllerSnapshot,
    Failures,
    FetchedBatches,
    GroupDeleted,
    GroupDescription,
    GroupSummary,
    MoveState,
    PartitionOffsets,
    PartitionState,
    ProduceResult,
    ReadEnd,
    ReadPlan,
    TimestampOffset,
)
from partitions.users import ScramCredential
from raftlog.errors import RaftlogError
from raftlog.storage.batch import ProducerRecord, encode_batch

log = logging.getLogger("raftlog.peer")

INTERNAL_PREFIX = "/internal/v1/"  # every node-to-node HTTP endpoint lives under it
MEDIA_TYPE = "application/vnd.raftlog.peer.v1+msgpack"
CALL_TIMEOUT_S_DEFAULT = 15.0
INTERNAL_CREDENTIAL_CONTEXT = b"raftlog internal admin v1"
T = TypeVar("T")

REGISTRY = Registry()
REGISTRY.extend(RESULT_TYPES)
ERRORS = ErrorTypes()


def internal_credential(cluster_secret: bytes) -> str:
    """The bearer token nodes present to each other's internal endpoints."""
    return hmac.new(cluster_secret, INTERNAL_CREDENTIAL_CONTEXT, hashlib.sha256).hexdigest()


def credential_matches(expected: str, presented: str) -> bool:
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class PeerOp:
    service: str  # "data" | "admin" | "groups" | "peer": the attribute of ``LocalServices``
    method: str  # the service's method, called with the arguments by name
    summary: str
    write: bool = False  # a lost answer is "outcome unknown"
    wait_arg: str | None = None  # an argument (ms) the callee may wait for: it extends the call's timeout
    wait_unset_ms: int = 0  # how long the callee may wait when that argument is None

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method}"

    @property
    def path(self) -> str:
        return f"{INTERNAL_PREFIX}{self.service}/{self.method}"


PEER_OPS: tuple[PeerOp, ...] = (
    PeerOp("data", "produce_batch", "Append a record batch on the partition's leader", write=True,
           wait_arg="timeout_ms"),
    PeerOp("data", "fetch_batches", "Committed batches from an offset (long poll) on the leader",
           wait_arg="timeout_ms"),
    PeerOp("data", "offsets", "A partition's log start offset and high watermark, from its leader"),
    PeerOp("data", "offset_for_timestamp", "The first offset at or after a timestamp, from the leader"),
    PeerOp("data", "commit_offset", "Store a consumer group's offset on the partition's leader", write=True,
           wait_arg="timeout_ms"),
    PeerOp("data", "committed_offset", "A consumer group's committed offset, from the partition's leader"),
    PeerOp("data", "delete_offset", "Delete a consumer group's offset on the partition's leader", write=True,
           wait_arg="timeout_ms"),
    PeerOp("admin", "topic", "A topic's metadata, from the controller leader"),
    PeerOp("admin", "create_topic", "Create a topic on the controller leader", write=True),
    PeerOp("admin", "delete_topic", "Delete a topic on the controller leader", write=True),
    PeerOp("admin", "alter_configs", "Change a topic's configs on the controller leader", write=True),
    PeerOp("admin", "move_replicas", "Start a replica move on the controller leader", write=True),
    PeerOp("admin", "move_state", "A partition's replicas and move in progress, from the controller leader"),
    PeerOp("admin", "cancel_move", "Cancel a replica move on the controller leader", write=True),
    PeerOp("admin", "set_node_flag", "Mark a node decommissioning or in maintenance", write=True),
    PeerOp("admin", "decommission_status", "A decommission's progress, from the controller leader"),
    PeerOp("admin", "controller_members", "The controller group's members, from its leader"),
    PeerOp("admin", "add_controller_voter", "Add a node to the controller group, on its leader", write=True),
    PeerOp("admin", "remove_controller_voter", "Remove a node from the controller group, on its leader",
           write=True),
    PeerOp("admin", "set_user", "Create a user or set its credentials on the controller leader", write=True),
    PeerOp("admin", "delete_user", "Delete a user on the controller leader", write=True),
    PeerOp("admin", "alter_user", "Change some of a user's credentials on the controller leader", write=True),
    PeerOp("admin", "create_acls", "Add ACLs on the controller leader", write=True),
    PeerOp("admin", "delete_acls", "Remove the ACLs filters match on the controller leader", write=True),
    PeerOp("admin", "create_token", "Add a user's API token on the controller leader", write=True),
    PeerOp("admin", "delete_token", "Revoke a user's API token on the controller leader", write=True),
    PeerOp("admin", "partition_state", "A partition's state as its leader sees it"),
    PeerOp("admin", "transfer_leadership", "Move a partition's leadership, on its leader", write=True,
           wait_arg="timeout_ms"),
    PeerOp("groups", "create_instance", "Create a consumer instance on the group's coordinator", write=True),
    PeerOp("groups", "delete_instance", "Remove a consumer instance on the group's coordinator", write=True),
    PeerOp("groups", "subscribe", "Subscribe a consumer instance (rebalances)", write=True),
    PeerOp("groups", "subscription", "A consumer instance's topics"),
    PeerOp("groups", "assignment", "A consumer instance's partitions and the group's generation"),
    PeerOp("groups", "seek", "Set a consumer instance's positions"),
    PeerOp("groups", "seek_to", "Set a consumer instance's positions to its partitions' ends"),
    PeerOp("groups", "seek_to_times", "Set a consumer instance's positions by record timestamps"),
    PeerOp(
        "groups", "begin_read", "Grant a consumer instance's read (waits for an assignment)",
        wait_arg="timeout_ms", wait_unset_ms=REQUEST_TIMEOUT_MS_MAX,  # None: consumer.request.timeout.ms
    ),
    PeerOp("groups", "end_read", "A consumer instance's read ended: move its positions"),
    PeerOp("groups", "commit", "Commit a consumer instance's offsets (fenced)", write=True),
    PeerOp("groups", "committed", "A consumer instance's committed offsets"),
    PeerOp("groups", "describe", "A consumer group's members, offsets and lag"),
    PeerOp("groups", "list_groups", "The groups of one coordinator partition"),
    PeerOp("groups", "delete_group", "Delete an empty consumer group and its offsets", write=True),
    PeerOp("groups", "note_commit", "Record a group-level commit's topics (a reset waits for no member)",
           write=True),
    PeerOp("groups", "coordinator_partitions", "How many coordinator partitions there are"),
    PeerOp("peer", "read_batches", "Committed raw batches of this node's replica, for catch-up"),
    PeerOp("peer", "leadership", "This node's leadership claims (Raft group -> term)"),
    PeerOp("peer", "replica_failures", "This node's replicas that cannot open or replay"),
    PeerOp("peer", "controller_snapshot", "The controller's applied metadata"),
    PeerOp("peer", "member_view", "The partition leader's Raft voters and progress"),
    PeerOp("peer", "change_membership", "Add a learner, promote it, remove a member, or transfer leadership",
           write=True, wait_arg="timeout_ms"),
    PeerOp("peer", "join_controller", "Open this node's replica of the controller group (a learner)",
           write=True),
    PeerOp("peer", "leave_controller", "Close this node's replica of the controller group, which removed it",
           write=True),
)  # fmt: skip
OPS = {op.name: op for op in PEER_OPS}


def encode_answer(value: object) -> bytes:
    """The callee's answer: ``{"ok": result}`` or ``{"error": typed error}``."""
    if isinstance(value, RaftlogError):
        return pack({"error": value}, REGISTRY)
    return pack({"ok": value}, REGISTRY)


def decode_arguments(body: bytes) -> dict[str, Any]:
    arguments = unpack(body, REGISTRY, ERRORS)
    if not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments):
        raise PeerProtocolError("a peer call's body must be a map of argument names to values")
    return arguments


class PeerClient:
    """Create on the node, use on its event loop, ``await close()``. ``address(node_id)`` is the node's
    HTTP base URL (None when unknown)."""

    def __init__(
        self,
        credential: str,
        address: Callable[[str], str | None],
        timeout_s: float = CALL_TIMEOUT_S_DEFAULT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._ssl = ssl_context  # for https URLs: the certificates trusted, and the one presented
        self._headers = {"Authorization": f"Bearer {credential}", "Content-Type": MEDIA_TYPE}
        self._address = address
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(auto_decompress=False, connector=connector)
        return self._session

    async def call(self, node_id: str, op: PeerOp, arguments: dict[str, Any]) -> object:
        """Run ``op`` on ``node_id``; its result, or its typed error raised here."""
        base = self._address(node_id)
        if not base:
            raise PeerUnreachable(node_id, "no address known")
        timeout_s = self._timeout_s
        if op.wait_arg is not None:
            wait_ms = arguments.get(op.wait_arg)
            timeout_s += max(0, op.wait_unset_ms if wait_ms is None else int(wait_ms)) / 1000
        body = pack(arguments, REGISTRY)
        try:
            async with self._client().post(
                base.rstrip("/") + op.path,
                data=body,
                headers=self._headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                payload = await response.read()
                status = response.status
        except aiohttp.ClientConnectorError as exc:
            raise PeerUnreachable(node_id, f"{op.name}: {exc}") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            reason = f"{op.name}: {exc!r}"
            if op.write:
                raise PeerOutcomeUnknown(node_id, reason) from None
            raise PeerUnreachable(node_id, reason) from None
        if status != 200:
            raise PeerProtocolError(f"node {node_id} answered {op.name} with {status}: {payload[:200]!r}")
        answer = unpack(payload, REGISTRY, ERRORS)
        if not isinstance(answer, dict) or len(answer) != 1:
            raise PeerProtocolError(f"node {node_id} answered {op.name} with {str(answer)[:200]}")
        if "error" in answer:
            error = answer["error"]
            if not isinstance(error, RaftlogError):
                raise PeerProtocolError(f"node {node_id} answered {op.name} with error {error!r:.200}")
            raise error
        return answer["ok"]

    async def expect(self, node_id: str, name: str, expected: type[T], /, **arguments: Any) -> T:
        """``call`` of the op named ``name``, whose result must be an ``expected``."""
        value = await self.call(node_id, OPS[name], arguments)
        if not isinstance(value, expected):
            raise PeerProtocolError(f"node {node_id} answered {name} with {value!r:.200}")
        return value

    async def expect_optional(
        self, node_id: str, name: str, expected: type[T], /, **arguments: Any
    ) -> T | None:
        value = await self.call(node_id, OPS[name], arguments)
        if value is not None and not isinstance(value, expected):
            raise PeerProtocolError(f"node {node_id} answered {name} with {value!r:.200}")
        return value

    async def expect_none(self, node_id: str, name: str, /, **arguments: Any) -> None:
        value = await self.call(node_id, OPS[name], arguments)
        if value is not None:
            raise PeerProtocolError(f"node {node_id} answered {name} with {value!r:.200}")


class RemoteData:
    """``DataService`` of another node. ``produce`` encodes the batch here and sends the bytes: a record
    is encoded once, where it enters, and never re-serialised on the way to the leader."""

    def __init__(self, client: PeerClient, node_id: str, clock: Callable[[], int]) -> None:
        self._client = client
        self._node = node_id
        self._clock = clock

    async def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[ProducerRecord],
        producer_id: int | None,
        sequence: int | None,
        timeout_ms: int,
    ) -> ProduceResult:
        batch = encode_batch(0, records, 0, self._clock(), producer_id, sequence)
        return await self.produce_batch(topic, partition, batch, timeout_ms)

    async def produce_batch(self, topic: str, partition: int, batch: bytes, timeout_ms: int) -> ProduceResult:
        return await self._client.expect(
            self._node, "data.produce_batch", ProduceResult,
            topic=topic, partition=partition, batch=batch, timeout_ms=timeout_ms,
        )  # fmt: skip

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        return await self._client.expect(
            self._node, "data.fetch_batches", FetchedBatches,
            topic=topic, partition=partition, offset=offset, max_bytes=max_bytes, timeout_ms=timeout_ms,
        )  # fmt: skip

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return await self._client.expect(
            self._node, "data.offsets", PartitionOffsets, topic=topic, partition=partition
        )

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        return await self._client.expect_optional(
            self._node, "data.offset_for_timestamp", TimestampOffset,
            topic=topic, partition=partition, timestamp_ms=timestamp_ms,
        )  # fmt: skip

    async def commit_offset(
        self, group: str, topic: str, partition: int, offset: int, reset: bool, timeout_ms: int
    ) -> int:
        return await self._client.expect(
            self._node, "data.commit_offset", int,
            group=group, topic=topic, partition=partition, offset=offset, reset=reset, timeout_ms=timeout_ms,
        )  # fmt: skip

    async def committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        return await self._client.expect_optional(
            self._node, "data.committed_offset", int, group=group, topic=topic, partition=partition
        )

    async def delete_offset(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        return await self._client.expect(
            self._node, "data.delete_offset", bool,
            group=group, topic=topic, partition=partition, timeout_ms=timeout_ms,
        )  # fmt: skip


class RemoteAdmin:
    """``AdminService`` of another node."""

    def __init__(self, client: PeerClient, node_id: str) -> None:
        self._client = client
        self._node = node_id

    async def topic(self, name: str) -> TopicMetadata:
        return await self._client.expect(self._node, "admin.topic", TopicMetadata, name=name)

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, Any]
    ) -> TopicMetadata:
        return await self._client.expect(
            self._node, "admin.create_topic", TopicMetadata,
            name=name, partitions=partitions, replication_factor=replication_factor, configs=configs,
        )  # fmt: skip

    async def delete_topic(self, name: str) -> None:
        await self._client.expect_none(self._node, "admin.delete_topic", name=name)

    async def alter_configs(self, name: str, configs: dict[str, Any]) -> TopicMetadata:
        return await self._client.expect(
            self._node, "admin.alter_configs", TopicMetadata, name=name, configs=configs
        )

    async def move_replicas(self, topic: str, partition: int, replicas: object) -> MoveProgress:
        return await self._client.expect(
            self._node,
            "admin.move_replicas",
            MoveProgress,
            topic=topic,
            partition=partition,
            replicas=replicas,
        )

    async def move_state(self, topic: str, partition: int) -> MoveState:
        return await self._client.expect(
            self._node, "admin.move_state", MoveState, topic=topic, partition=partition
        )

    async def cancel_move(self, topic: str, partition: int) -> MoveProgress:
        return await self._client.expect(
            self._node, "admin.cancel_move", MoveProgress, topic=topic, partition=partition
        )

    async def set_node_flag(self, node_id: str, flag: str, on: bool) -> None:
        await self._client.expect_none(self._node, "admin.set_node_flag", node_id=node_id, flag=flag, on=on)

    async def decommission_status(self, node_id: str) -> dict[str, Any]:
        return await self._client.expect(self._node, "admin.decommission_status", dict, node_id=node_id)

    async def controller_members(self) -> ControllerMembers:
        return await self._client.expect(self._node, "admin.controller_members", ControllerMembers)

    async def add_controller_voter(self, node_id: str) -> ControllerMembers:
        return await self._client.expect(
            self._node, "admin.add_controller_voter", ControllerMembers, node_id=node_id
        )

    async def remove_controller_voter(self, node_id: str) -> ControllerMembers:
        return await self._client.expect(
            self._node, "admin.remove_controller_voter", ControllerMembers, node_id=node_id
        )

    async def set_user(self, name: str, credentials: list[ScramCredential]) -> list[str]:
        return await self._client.expect(
            self._node, "admin.set_user", list, name=name, credentials=credentials
        )

    async def delete_user(self, name: str) -> None:
        await self._client.expect_none(self._node, "admin.delete_user", name=name)

    async def alter_user(
        self, name: str, upsertions: list[ScramCredential], deletions: list[str]
    ) -> list[str]:
        return await self._client.expect(
            self._node, "admin.alter_user", list, name=name, upsertions=upsertions, deletions=deletions
        )

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclBinding]:
        return await self._client.expect(self._node, "admin.create_acls", list, bindings=bindings)

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        return await self._client.expect(self._node, "admin.delete_acls", list, filters=filters)

    async def create_token(self, token: ApiToken) -> ApiToken:
        return await self._client.expect(self._node, "admin.create_token", ApiToken, token=token)

    async def delete_token(self, user: str, token_id: str) -> ApiToken:
        return await self._client.expect(
            self._node, "admin.delete_token", ApiToken, user=user, token_id=token_id
        )

    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        return await self._client.expect(
            self._node, "admin.partition_state", PartitionState, topic=topic, partition=partition
        )

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None, timeout_ms: int
    ) -> str | None:
        return await self._client.expect_optional(
            self._node, "admin.transfer_leadership", str,
            topic=topic, partition=partition, target=target, timeout_ms=timeout_ms,
        )  # fmt: skip


class RemoteGroups:
    """``GroupService`` of another node (the group's coordinator)."""

    def __init__(self, client: PeerClient, node_id: str) -> None:
        self._client = client
        self._node = node_id

    async def create_instance(
        self,
        group: str,
        name: str | None,
        format: str,
        offset_reset: str,
        session_timeout_ms: int,
        assignor: str,
        reads: ReadConfig,
        client_host: str = "",
    ) -> ConsumerCreated:
        return await self._client.expect(
            self._node, "groups.create_instance", ConsumerCreated,
            group=group, name=name, format=format, offset_reset=offset_reset,
            session_timeout_ms=session_timeout_ms, assignor=assignor, reads=reads, client_host=client_host,
        )  # fmt: skip

    async def delete_instance(self, group: str, instance: str) -> None:
        await self._client.expect_none(self._node, "groups.delete_instance", group=group, instance=instance)

    async def subscribe(self, group: str, instance: str, topics: list[str]) -> None:
        await self._client.expect_none(
            self._node, "groups.subscribe", group=group, instance=instance, topics=topics
        )

    async def subscription(self, group: str, instance: str) -> list[str]:
        return await self._client.expect(
            self._node, "groups.subscription", list, group=group, instance=instance
        )

    async def assignment(self, group: str, instance: str) -> Assignment:
        return await self._client.expect(
            self._node, "groups.assignment", Assignment, group=group, instance=instance
        )

    async def seek(self, group: str, instance: str, offsets: dict[TopicPartition, int]) -> None:
        await self._client.expect_none(
            self._node, "groups.seek", group=group, instance=instance, offsets=offsets
        )

    async def seek_to(self, group: str, instance: str, partitions: list[TopicPartition], end: bool) -> None:
        await self._client.expect_none(
            self._node, "groups.seek_to", group=group, instance=instance, partitions=partitions, end=end
        )

    async def seek_to_times(self, group: str, instance: str, times: dict[TopicPartition, int]) -> None:
        await self._client.expect_none(
            self._node, "groups.seek_to_times", group=group, instance=instance, times=times
        )

    async def begin_read(
        self,
        group: str,
        instance: str,
        timeout_ms: int | None,
        generation: int | None,
        format: str | None,
    ) -> ReadPlan:
        return await self._client.expect(
            self._node, "groups.begin_read", ReadPlan,
            group=group, instance=instance, timeout_ms=timeout_ms, generation=generation, format=format,
        )  # fmt: skip

    async def end_read(
        self,
        group: str,
        instance: str,
        read_id: int,
        positions: dict[TopicPartition, int],
        end_offsets: dict[TopicPartition, int],
    ) -> ReadEnd:
        return await self._client.expect(
            self._node, "groups.end_read", ReadEnd,
            group=group, instance=instance, read_id=read_id, positions=positions, end_offsets=end_offsets,
        )  # fmt: skip

    async def commit(
        self,
        group: str,
        instance: str,
        offsets: dict[TopicPartition, int] | None,
        generation: int | None,
    ) -> None:
        await self._client.expect_none(
            self._node,
            "groups.commit",
            group=group,
            instance=instance,
            offsets=offsets,
            generation=generation,
        )

    async def committed(
        self, group: str, instance: str, partitions: list[TopicPartition] | None
    ) -> list[CommittedOffset]:
        return await self._client.expect(
            self._node, "groups.committed", list, group=group, instance=instance, partitions=partitions
        )

    async def describe(self, group: str) -> GroupDescription:
        return await self._client.expect(self._node, "groups.describe", GroupDescription, group=group)

    async def delete_group(self, group: str) -> GroupDeleted:
        return await self._client.expect(self._node, "groups.delete_group", GroupDeleted, group=group)

    async def note_commit(self, group: str, topics: list[str], reset: bool, force: bool) -> None:
        await self._client.expect_none(
            self._node, "groups.note_commit", group=group, topics=topics, reset=reset, force=force
        )

    async def list_groups(self, coordinator_partition: int) -> list[GroupSummary]:
        return await self._client.expect(
            self._node, "groups.list_groups", list, coordinator_partition=coordinator_partition
        )

    async def coordinator_partitions(self) -> int:
        return await self._client.expect(self._node, "groups.coordinator_partitions", int)


class RemotePeer:
    """``PeerService`` of another node."""

    def __init__(self, client: PeerClient, node_id: str) -> None:
        self._client = client
        self._node = node_id

    async def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedBatches:
        return await self._client.expect(
            self._node, "peer.read_batches", FetchedBatches,
            topic=topic, partition=partition, offset=offset, max_bytes=max_bytes,
        )  # fmt: skip

    async def leadership(self) -> Claims:
        return await self._client.expect(self._node, "peer.leadership", Claims)

    async def replica_failures(self) -> Failures:
        return await self._client.expect(self._node, "peer.replica_failures", Failures)

    async def controller_snapshot(self, known_index: int | None) -> ControllerSnapshot:
        return await self._client.expect(
            self._node, "peer.controller_snapshot", ControllerSnapshot, known_index=known_index
        )

    async def member_view(self, topic: str, partition: int) -> MemberView:
        return await self._client.expect(
            self._node, "peer.member_view", MemberView, topic=topic, partition=partition
        )

    async def change_membership(
        self, topic: str, partition: int, change: str, node_id: str, timeout_ms: int
    ) -> None:
        await self._client.expect_none(
            self._node, "peer.change_membership",
            topic=topic, partition=partition, change=change, node_id=node_id, timeout_ms=timeout_ms,
        )  # fmt: skip

    async def join_controller(self, voters: list[str]) -> None:
        await self._client.expect_none(self._node, "peer.join_controller", voters=voters)

    async def leave_controller(self, why: str) -> None:
        await self._client.expect_none(self._node, "peer.leave_controller", why=why)
