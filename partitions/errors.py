"""Typed errors of the partitions layer."""

from __future__ import annotations

from collections.abc import Mapping

from raftlog.errors import RaftlogError


class PartitionError(RaftlogError):
    """Base of every error raised by ``partitions``."""


class InvalidCommand(PartitionError):
    """Bytes that are not a replicated partition command (a bug or a version mismatch)."""


class SequenceTooOld(PartitionError):
    """A producer retried a sequence older than the deduplication window: it cannot be told apart from a
    new write, so it is refused rather than appended twice."""

    def __init__(self, producer_id: int, sequence: int, oldest_known: int) -> None:
        super().__init__(
            f"producer {producer_id}: sequence {sequence} is older than the deduplication window "
            f"(oldest remembered sequence {oldest_known})"
        )
        self.producer_id = producer_id
        self.sequence = sequence
        self.oldest_known = oldest_known


class ProducerFenced(PartitionError):
    """A batch of an older epoch than the producer's newest: the producer was replaced (a zombie), and its
    write is refused."""

    def __init__(self, producer_id: int, epoch: int, current_epoch: int) -> None:
        super().__init__(
            f"producer {producer_id}: epoch {epoch} is older than its current epoch {current_epoch}"
        )
        self.producer_id = producer_id
        self.epoch = epoch
        self.current_epoch = current_epoch


class OutOfOrderSequence(PartitionError):
    """A producer's new epoch began at a sequence other than 0: records of it are missing."""

    def __init__(self, producer_id: int, epoch: int, sequence: int) -> None:
        super().__init__(
            f"producer {producer_id}: its new epoch {epoch} must start at sequence 0, not {sequence}"
        )
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequence = sequence


class ReplicaRecovering(PartitionError):
    """This replica's log lacks committed records that it is copying from its peers (it installed a
    snapshot of its leader ahead of its log): offsets in ``[log_end_offset, high_watermark)`` cannot be
    read here yet. Retriable: recovery goes on until the log reaches the high watermark."""

    def __init__(self, group_id: str, log_end_offset: int, high_watermark: int) -> None:
        super().__init__(
            f"replica of {group_id} is recovering committed records from its peers: its log ends at "
            f"offset {log_end_offset}, the high watermark is {high_watermark}"
        )
        self.group_id = group_id
        self.log_end_offset = log_end_offset
        self.high_watermark = high_watermark


class InvalidTopic(PartitionError):
    """A topic name, partition count or replication factor that cannot be used."""


class InvalidName(PartitionError):
    """A topic, consumer group or consumer instance name that cannot be used (``partitions.names``); the
    message names the field, the name and the rule it breaks."""

    def __init__(self, field: str, name: object, reason: str) -> None:
        super().__init__(f"{field} {name!r}: {reason}")
        self.field = field
        self.name = name
        self.reason = reason


class ReservedName(InvalidName):
    """A topic name kept for the cluster's own topics (starting with ``__``): users cannot create or
    subscribe to it."""


class TopicExists(PartitionError):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic


class UnknownTopic(PartitionError):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class UnknownPartition(PartitionError):
    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"topic {topic!r} has no partition {partition}")
        self.topic = topic
        self.partition = partition


class UnknownNode(PartitionError):
    """A node id that no configured peer and no gossip member carries."""

    def __init__(self, node_id: str) -> None:
        super().__init__(f"node {node_id!r} is not a member of the cluster")
        self.node_id = node_id


class UnknownUser(PartitionError):
    def __init__(self, name: str) -> None:
        super().__init__(f"user {name!r} does not exist")
        self.name = name


class UnknownCredential(UnknownUser):
    """A user without a credential of the mechanism asked to be removed (or no such user at all)."""

    def __init__(self, name: str, mechanism: str) -> None:
        PartitionError.__init__(self, f"user {name!r} has no {mechanism} credential")
        self.name = name
        self.mechanism = mechanism


class UnknownToken(PartitionError):
    """No token of this id belongs to the user (never made, revoked, or its user deleted)."""

    def __init__(self, user: str, token_id: str) -> None:
        super().__init__(f"user {user!r} has no token {token_id!r}")
        self.user = user
        self.token_id = token_id


class TooManyTokens(PartitionError):
    """A new token would pass a limit: per user, or in the cluster (``controller_tokens``); nothing made."""

    def __init__(self, user: str, held: int, limit: int, scope: str) -> None:
        super().__init__(
            f"no token made for {user!r}: {scope} holds {held} tokens, at most {limit} (revoke some first)"
        )
        self.user = user
        self.held = held
        self.limit = limit
        self.scope = scope


class AuthorizationFailed(PartitionError):
    """The caller may not do this: no ACL allows it, or one denies it (``acls.Authorizer``); nothing was
    done. The words say what was refused, never which ACL decided it. Raised as the subclass of the
    resource's type (Kafka has an error code for each)."""

    def __init__(self, principal: str, operation: str, resource_type: str, name: str) -> None:
        super().__init__(f"{principal} is not authorized to {operation} {resource_type} {name!r}")
        self.principal = principal
        self.operation = operation  # as ACLs name it: "read", "write", "describe", ...
        self.resource_type = resource_type  # "topic", "group" or "cluster"
        self.name = name

    @classmethod
    def of(cls, principal: str, operation: str, resource_type: str, name: str) -> AuthorizationFailed:
        kinds = {"topic": TopicAuthorizationFailed, "group": GroupAuthorizationFailed}
        return kinds.get(resource_type, ClusterAuthorizationFailed)(principal, operation, resource_type, name)


class TopicAuthorizationFailed(AuthorizationFailed):
    pass


class GroupAuthorizationFailed(AuthorizationFailed):
    pass


class ClusterAuthorizationFailed(AuthorizationFailed):
    pass


class InvalidReassignment(PartitionError):
    """A replica set that cannot be used: empty, repeating a node, too small for a quorum, or naming a
    node that is down or leaving. Nothing was changed."""


class ReassignmentInProgress(PartitionError):
    """The partition is already moving to another replica set; cancel it or wait for it to end."""

    def __init__(self, topic: str, partition: int, target: tuple[str, ...]) -> None:
        super().__init__(
            f"{topic}/{partition} is already moving to {list(target)}; cancel it first or wait until it ends"
        )
        self.topic = topic
        self.partition = partition
        self.target = target


class NoReassignment(PartitionError):
    """A cancel for a partition that is not moving."""

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"{topic}/{partition} has no replica move in progress")
        self.topic = topic
        self.partition = partition


class DecommissionImpossible(PartitionError):
    """A decommission that could never finish: some replicas of the node have no node to go to. Nothing
    was changed. ``partitions``: (topic, partition, reason) of each."""

    def __init__(self, node_id: str, message: str, partitions: tuple[tuple[str, int, str], ...]) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.partitions = partitions


class ControllerChangeRefused(PartitionError):
    """A change of the controller group's members that may not be made now, and why (another change in
    progress, a node that is no member, no live majority left...). Nothing was changed."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"controller group change of {node_id} refused: {reason}")
        self.node_id = node_id
        self.reason = reason


class CapacityExceeded(PartitionError):
    """A topic or a move would put more replicas on a node than it may hold."""

    def __init__(
        self, what: str, over: Mapping[str, int], room: Mapping[str, int], replicas_max: int
    ) -> None:
        nodes = ", ".join(f"{node} would hold {held:,}" for node, held in sorted(over.items()))
        free = ", ".join(f"{node} {left:,}" for node, left in sorted(room.items()))
        super().__init__(
            f"{what} does not fit: a node holds at most {replicas_max:,} partition replicas "
            f"(raftlog serve --replicas-max) and {nodes}; room left: {free}. Use fewer partitions or a "
            "lower replication factor, delete topics, or add nodes"
        )
        self.over = dict(over)
        self.room = dict(room)
        self.replicas_max = replicas_max


class PlacementImpossible(PartitionError):
    """Not enough live nodes for the requested replication factor."""

    def __init__(self, replication_factor: int, nodes: int) -> None:
        super().__init__(
            f"replication factor {replication_factor} needs {replication_factor} live nodes, have {nodes}"
        )
        self.replication_factor = replication_factor
        self.nodes = nodes


class NoController(PartitionError):
    """This node knows no controller leader yet (right after a start, or during a controller election), so
    it cannot tell whether a topic it has not heard of exists. Safe to retry."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} is not known here and no controller is known yet to ask; retry")
        self.topic = topic


class HopLimitExceeded(PartitionError):
    """A call followed leader hints from node to node too many times: the nodes disagree about who leads
    (an election is in progress or a hint is stale). Safe to retry after a moment."""

    def __init__(self, hops: int) -> None:
        super().__init__(f"forwarded {hops} times without reaching a leader; retry later")
        self.hops = hops


class PeerError(PartitionError):
    """A call to another node that did not get a typed answer from it."""


class PeerUnreachable(PeerError):
    """The peer could not be reached before the call was sent, or the call was a read that got no answer:
    nothing was done, safe to retry."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"node {node_id} unreachable: {reason}")
        self.node_id = node_id
        self.reason = reason


class PeerOutcomeUnknown(PeerError):
    """A write was sent to a peer but its answer never came back: it may or may not have been applied.
    Retry only what is idempotent (a produce with its producer id and sequence)."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"sent to node {node_id}, no answer: {reason}; the write may or may not be applied")
        self.node_id = node_id
        self.reason = reason


class PeerProtocolError(PeerError):
    """A peer answered something that is not a peer message of this version (a bug or a version mix)."""
