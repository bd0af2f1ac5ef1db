"""Typed errors of the partitions layer."""

from __future__ import annotations

from collections.abc import Mapping

from raftlog.consensus.errors import NoLeader
from raftlog.errors import RaftlogError, with_fields


class PartitionError(RaftlogError):
    """Base of every error raised by ``partitions``."""


class InvalidCommand(PartitionError):
    """Bytes that are not a replicated partition command (a bug or a version mismatch)."""


@with_fields
class SequenceTooOld(PartitionError):
    """A producer retried a sequence older than the deduplication window: it cannot be told apart from a
    new write, so it is refused rather than appended twice."""

    producer_id: int
    sequence: int
    oldest_known: int
    template = (
        "producer {producer_id}: sequence {sequence} is older than the deduplication window "
        "(oldest remembered sequence {oldest_known})"
    )


@with_fields
class ProducerFenced(PartitionError):
    """A batch of an older epoch than the producer's newest: the producer was replaced (a zombie), and its
    write is refused."""

    producer_id: int
    epoch: int
    current_epoch: int
    template = "producer {producer_id}: epoch {epoch} is older than its current epoch {current_epoch}"


@with_fields
class CoordinatorFenced(PartitionError):
    """A transaction marker from a coordinator older than one whose marker the partition already took for
    the producer (Kafka's TRANSACTION_COORDINATOR_FENCED): a deposed coordinator's marker still in flight."""

    producer_id: int
    coordinator_epoch: int
    current: int
    template = (
        "producer {producer_id}: a marker of coordinator epoch {coordinator_epoch} "
        "after one of coordinator epoch {current}"
    )


@with_fields
class OffsetMetadataTooLarge(PartitionError):
    """A committed offset's metadata is longer than a partition keeps (Kafka's ``offset.metadata.max.bytes``,
    counted as Kafka counts it, in UTF-16 units): that partition's offset is not committed."""

    length: int
    limit: int
    template = "offset metadata of {length} characters is longer than the {limit} a commit may carry"


@with_fields
class UnstableOffsetCommit(PartitionError):
    """A transaction still open holds a committed offset of the group in the partition (KIP-447): the
    reader asks again once it ends."""

    group: str
    template = "group {group!r}: an offset committed in an open transaction is pending"


class InvalidTxnState(PartitionError):
    """A transactional request that the transaction's state does not allow (Kafka's INVALID_TXN_STATE)."""


class TransactionUnverified(PartitionError):
    """A transactional batch whose partition's place in its producer's ongoing transaction could not be
    verified: the transaction's coordinator did not answer (retriable; nothing was written)."""


@with_fields
class OutOfOrderSequence(PartitionError):
    """A producer's batch does not start at the sequence its epoch expects (0 for a new epoch, else the
    last batch's last sequence + 1 for a Kafka producer): records before it are missing."""

    producer_id: int
    epoch: int
    sequence: int
    expected: int = 0
    template = (
        "producer {producer_id}: a batch of epoch {epoch} at sequence {sequence}, out of order "
        "(expected {expected})"
    )


class LeaderEpochMismatch(PartitionError):
    """The leader epoch a client named (Kafka's ``current_leader_epoch``: the Raft term its metadata
    gave) is not this replica's: the client refreshes its metadata and asks again."""


@with_fields
class FencedLeaderEpoch(LeaderEpochMismatch):
    """The client's leader epoch is older than this replica's: its metadata is stale (Kafka's
    FENCED_LEADER_EPOCH)."""

    group_id: str
    epoch: int
    current_epoch: int
    template = "{group_id}: leader epoch {epoch} is older than the current epoch {current_epoch}"


@with_fields
class UnknownLeaderEpoch(LeaderEpochMismatch):
    """The client's leader epoch is newer than this replica's: this replica has not heard of it yet
    (Kafka's UNKNOWN_LEADER_EPOCH)."""

    group_id: str
    epoch: int
    current_epoch: int
    template = "{group_id}: leader epoch {epoch} is newer than the current epoch {current_epoch}"


@with_fields
class ReplicaRecovering(PartitionError):
    """This replica's log lacks committed records that it is copying from its peers (it installed a
    snapshot of its leader ahead of its log): offsets in ``[log_end_offset, high_watermark)`` cannot be
    read here yet. Retriable: recovery goes on until the log reaches the high watermark."""

    group_id: str
    log_end_offset: int
    high_watermark: int
    template = (
        "replica of {group_id} is recovering committed records from its peers: its log ends at "
        "offset {log_end_offset}, the high watermark is {high_watermark}"
    )


class InvalidTopic(PartitionError):
    """A topic name, partition count or replication factor that cannot be used."""


@with_fields
class InternalTopicWrite(InvalidTopic):
    """Records produced to a topic the cluster keeps for itself (``partitions.names.INTERNAL_TOPICS``:
    the groups', transactions' and schemas' own, written only with their commands), whichever door they
    came through: Kafka's INVALID_TOPIC_EXCEPTION, in Kafka's words."""

    topic: str
    template = "Cannot append to internal topic {topic}"


@with_fields
class InvalidName(PartitionError):
    """A topic, consumer group or consumer instance name that cannot be used (``partitions.names``); the
    message names the field, the name and the rule it breaks."""

    field: str
    name: object
    reason: str
    template = "{field} {name!r}: {reason}"


class ReservedName(InvalidName):
    """A topic name kept for the cluster's own topics (starting with ``__``): users cannot create or
    subscribe to it."""


@with_fields
class TopicExists(PartitionError):
    topic: str
    template = "topic {topic!r} already exists"


@with_fields
class UnknownTopic(PartitionError):
    topic: str
    template = "topic {topic!r} does not exist"


@with_fields
class TopicIdGone(UnknownTopic):
    """A change naming a topic by its id (its creation index) while the topic of that name is another
    incarnation, or none: the topic it meant is gone (Kafka's UNKNOWN_TOPIC_ID)."""

    topic: str
    topic_id: int
    template = "topic {topic!r} of creation index {topic_id} does not exist"


@with_fields
class UnknownPartition(PartitionError):
    topic: str
    partition: int
    template = "topic {topic!r} has no partition {partition}"


@with_fields
class UnknownNode(PartitionError):
    """A node id that no configured peer and no gossip member carries."""

    node_id: str
    template = "node {node_id!r} is not a member of the cluster"


@with_fields
class UnknownUser(PartitionError):
    name: str
    template = "user {name!r} does not exist"


@with_fields
class UnknownCredential(UnknownUser):
    """A user without a credential of the mechanism asked to be removed (or no such user at all)."""

    mechanism: str
    template = "user {name!r} has no {mechanism} credential"


@with_fields
class UnknownToken(PartitionError):
    """No token of this id belongs to the user (never made, revoked, or its user deleted)."""

    user: str
    token_id: str
    template = "user {user!r} has no token {token_id!r}"


@with_fields
class TooManyTokens(PartitionError):
    """A new token would pass a limit: per user, or in the cluster (``controller_tokens``); nothing made."""

    user: str
    held: int
    limit: int
    scope: str
    template = "no token made for {user!r}: {scope} holds {held} tokens, at most {limit} (revoke some first)"


@with_fields
class DelegationTokenExpired(PartitionError):
    """A delegation token past its expiry or its max lifetime: it can be neither renewed nor pushed back."""

    token_id: str
    template = "delegation token {token_id!r} has expired"


@with_fields
class DelegationTokenOwnerMismatch(PartitionError):
    """A renewal or expiry of a delegation token by a user who is neither its owner nor a renewer."""

    user: str
    token_id: str
    template = "user {user!r} is neither the owner nor a renewer of delegation token {token_id!r}"


@with_fields
class AuthorizationFailed(PartitionError):
    """The caller may not do this: no ACL allows it, or one denies it (``acls.Authorizer``); nothing was
    done. The words say what was refused, never which ACL decided it. Raised as the subclass of the
    resource's type (Kafka has an error code for each)."""

    principal: str
    operation: str  # as ACLs name it: "read", "write", "describe", ...
    resource_type: str  # "topic", "group", "cluster" or "transactional_id"
    name: str
    template = "{principal} is not authorized to {operation} {resource_type} {name!r}"

    @classmethod
    def of(cls, principal: str, operation: str, resource_type: str, name: str) -> AuthorizationFailed:
        kinds = {
            "topic": TopicAuthorizationFailed,
            "group": GroupAuthorizationFailed,
            "transactional_id": TransactionalIdAuthorizationFailed,
        }
        return kinds.get(resource_type, ClusterAuthorizationFailed)(principal, operation, resource_type, name)


class TopicAuthorizationFailed(AuthorizationFailed):
    pass


class GroupAuthorizationFailed(AuthorizationFailed):
    pass


class ClusterAuthorizationFailed(AuthorizationFailed):
    pass


class TransactionalIdAuthorizationFailed(AuthorizationFailed):
    pass


class ProducerIdNotOwned(AuthorizationFailed):
    """A batch of a producer id InitProducerId gave another principal (``security.producer_ids``): nothing
    written. ``name`` is the producer id."""

    template = (
        "{principal} may not {operation} as producer {name}: InitProducerId gave it to another principal"
    )

    @classmethod
    def of_producer(cls, principal: str, producer_id: int) -> ProducerIdNotOwned:
        return cls(principal, "write", "producer_id", str(producer_id))


class TransactionalProducerIdNotOwned(ProducerIdNotOwned):
    """The same, of a transactional batch (a Kafka door answers it as a transactional id it may not use)."""


@with_fields
class TooManyProducerOwners(PartitionError):
    """A principal's first InitProducerId would pass the cluster's bound of principals holding producer ids
    (``controller.producer_owners``): no producer id given."""

    principal: str
    limit: int
    template = "no producer id for {principal}: {limit} principals hold producer ids already, at most {limit}"


class InvalidReassignment(PartitionError):
    """A replica set that cannot be used: empty, repeating a node, too small for a quorum, or naming a
    node that is down or leaving. Nothing was changed."""


@with_fields
class ReassignmentInProgress(PartitionError):
    """The partition is already moving to another replica set; cancel it or wait for it to end."""

    topic: str
    partition: int
    target: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"{self.topic}/{self.partition} is already moving to {','.join(self.target)}; cancel it first or "
            "wait until it ends"
        )


@with_fields
class NoReassignment(PartitionError):
    """A cancel for a partition that is not moving."""

    topic: str
    partition: int
    template = "{topic}/{partition} has no replica move in progress"


class DecommissionImpossible(PartitionError):
    """A decommission that could never finish: some replicas of the node have no node to go to. Nothing
    was changed. ``partitions``: (topic, partition, reason) of each."""

    def __init__(self, node_id: str, message: str, partitions: tuple[tuple[str, int, str], ...]) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.partitions = partitions


@with_fields
class ControllerChangeRefused(PartitionError):
    """A change of the controller group's members that may not be made now, and why (another change in
    progress, a node that is no member, no live majority left...). Nothing was changed."""

    node_id: str
    reason: str
    template = "controller group change of {node_id} refused: {reason}"


class PolicyViolation(PartitionError):
    """What a topic's configs rule out (records deleted from a topic whose cleanup.policy is compact
    alone): refused, nothing done."""


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


@with_fields
class PlacementImpossible(PartitionError):
    """Not enough nodes for the requested replication factor: live ones, and ones down after a crash (which
    hold a replica only when the live ones are too few, as Kafka places on a fenced broker)."""

    replication_factor: int
    nodes: int
    template = (
        "replication factor {replication_factor} needs {replication_factor} nodes; {nodes} can hold a replica"
        " (live, or down after a crash; a node that left does not count)"
    )


@with_fields
class TooFewLiveNodes(PartitionError):
    """An internal topic (``__consumer_groups``, ``__transactions``) is not created now: its replication
    factor counts the nodes down after a crash, and a majority of its replicas would be on them, so its
    partitions could elect no leader until they are back (``placement.internal_replication_factor``).
    Retriable, nothing done: as Kafka's FindCoordinator answers COORDINATOR_NOT_AVAILABLE while fewer
    brokers are registered than its offsets topic's replication factor."""

    replication_factor: int
    live: int
    down: int
    template = (
        "an internal topic of replication factor {replication_factor} needs a majority of its replicas on"
        " live nodes; {live} live, {down} down after a crash: retry once they are back"
    )


@with_fields
class NoControllerLeader(NoLeader):
    """The controller's Raft group knows no leader (an election, or too few of its voters answer), so
    nothing that changes the cluster's metadata (a topic created or deleted, partitions added, an ACL, a
    config) can be decided now. Safe to retry: Kafka's brokers wait for an active controller and its
    clients retry NOT_CONTROLLER, which the Kafka door answers."""

    template = "group {group_id}: no controller leader known (an election is in progress); retry"


@with_fields
class NoController(PartitionError):
    """This node knows no controller leader yet (right after a start, or during a controller election), so
    it cannot tell whether a topic it has not heard of exists. Safe to retry."""

    topic: str
    template = "topic {topic!r} is not known here and no controller is known yet to ask; retry"


@with_fields
class HopLimitExceeded(PartitionError):
    """A call followed leader hints from node to node too many times: the nodes disagree about who leads
    (an election is in progress or a hint is stale). Safe to retry after a moment."""

    hops: int
    template = "forwarded {hops} times without reaching a leader; retry later"


@with_fields
class OffsetsUnavailable(PartitionError):
    """A consumer group's committed offset of a partition could be neither stored nor read within the
    request's time: the partition had no leader that answered (an election, a node down, a replica
    recovering). Retriable, and asking again loses nothing: a commit stores the same offset again, a
    read reads it (``partitions.consumers.offsets``)."""

    group: str
    topic: str
    partition: int
    reason: str
    template = (
        "group {group}: the committed offset of {topic}-{partition} cannot be reached now ({reason}); retry"
    )


class PeerError(PartitionError):
    """A call to another node that did not get a typed answer from it."""


@with_fields
class PeerUnreachable(PeerError):
    """The peer could not be reached before the call was sent, or the call was a read that got no answer:
    nothing was done, safe to retry."""

    node_id: str
    reason: str
    template = "node {node_id} unreachable: {reason}"


@with_fields
class PeerOutcomeUnknown(PeerError):
    """A write was sent to a peer but its answer never came back: it may or may not have been applied.
    Retry only what is idempotent (a produce with its producer id and sequence)."""

    node_id: str
    reason: str
    template = "sent to node {node_id}, no answer: {reason}; the write may or may not be applied"


class PeerProtocolError(PeerError):
    """A peer answered something that is not a peer message of this version (a bug or a version mix)."""


@with_fields
class NodeKeptOut(PeerError):
    """A peer call from (or answered by) a node whose code cannot read the cluster's finalized formats
    (``features.kept_out``): refused, nothing done."""

    node_id: str
    reason: str
    template = "node {node_id} is kept out of the cluster: {reason}"


@with_fields
class FeatureUpdateRefused(PartitionError):
    """A change of a finalized feature level that may not be made (a node whose code does not support the
    level, a downgrade, an unknown feature or level). Nothing was changed."""

    feature: str
    level: int
    reason: str
    template = "feature {feature} to level {level} refused: {reason}"


class InvalidQuota(PartitionError):
    """A client quota entity, key or value Kafka refuses (``controller.quotas``); nothing was changed."""


@with_fields
class QuotaExceeded(PartitionError):
    """A user's (client id's) request over its quota, refused by the HTTP door (the Kafka door answers
    with ``throttle_time_ms`` instead): retry after ``retry_after_ms``."""

    quota: str
    entity: str
    retry_after_ms: int
    template = "{entity} is over its {quota} quota: retry after {retry_after_ms} ms"


@with_fields
class FeatureNotFinalized(PartitionError):
    """A change the cluster's finalized feature level does not allow yet (a node of the previous release
    could not apply it): ``kafka-features upgrade`` / ``raftlog cluster features upgrade`` first."""

    what: str
    feature: str
    level: int
    template = "{what} needs feature {feature} finalized at level {level} (kafka-features upgrade)"


class InvalidConfigRequest(PartitionError):
    """A resource's configs Kafka refuses as an invalid request (``resource_configs``: an unknown client
    metrics key, an interval out of bounds, an empty name); nothing was changed."""


class InvalidResourceConfig(PartitionError):
    """A resource's config value Kafka refuses as an invalid config (``resource_configs``: a wrong type, a
    group config's bound, a malformed match pattern or replica list); nothing was changed."""


@with_fields
class RegistryError(PartitionError):
    """A schema registry request refused, in Confluent's registry's terms: its ``error_code`` (40401
    subject not found, 40403 schema not found, 42201 invalid schema, 409 incompatible ...) and message;
    the HTTP status is the code's first three digits. Nothing was changed."""

    error_code: int
    reason: str
    template = "{reason}"

    @property
    def status(self) -> int:
        return self.error_code if self.error_code < 1000 else self.error_code // 100
