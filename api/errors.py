"""The one table from typed errors to HTTP status and stable ``error_code`` (listed in ``api/README.md``).
The codes clients act on are named in ``raftlog_contract``, which both sides import.

Every ``RaftlogError`` subclass resolves through this table (most specific class first); an error not in
it is a bug and becomes a logged 500. ``tests/api/test_errors.py`` fails when a new error is not mapped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from membership.errors import InvalidAddress, MetadataTooLarge, NotStarted
from partitions import errors as broker
from partitions.groups import errors as groups
from partitions.transactions import errors as transactions
from raftlog.consensus import errors as consensus
from raftlog.errors import InvariantViolation, RaftlogError, with_fields
from raftlog.storage import errors as storage
from raftlog_contract import (
    DISK_FULL,
    INSTANCE_EXISTS,
    INVALID_RECORD_STATE,
    NOT_AUTHORIZED,
    OFFSET_OUT_OF_RANGE,
    PARTITION_NOT_ASSIGNED,
    SEQUENCE_TOO_OLD,
    STALE_GENERATION,
    UNKNOWN_INSTANCE,
    UNKNOWN_MEMBER,
    UNKNOWN_TOPIC,
)


class ApiError(RaftlogError):
    """Errors raised by the HTTP layer itself."""


class BadRequest(ApiError):
    """Malformed JSON, a missing or wrong-typed field, a bad query parameter."""


class UnsupportedMediaType(ApiError):
    def __init__(self, content_type: str, hint: str = "") -> None:
        super().__init__(f"unsupported content type {content_type!r}" + (f": {hint}" if hint else ""))
        self.content_type = content_type


@with_fields
class NotAcceptable(ApiError):
    """The ``Accept`` header asks only for a representation this server no longer answers."""

    media_type: str
    hint: str
    template = "cannot answer {media_type!r}: {hint}"


@with_fields
class RequestTooLarge(ApiError):
    """A request body larger than the server's configured maximum; nothing was read or written."""

    limit_bytes: int
    template = "request body exceeds the maximum of {limit_bytes} bytes"


@with_fields
class RequestTimeout(ApiError):
    """A request body not received whole within the node's deadline (``serve --http-body-timeout-ms``);
    nothing was done, and the connection is closed."""

    timeout_s: float
    template = "request body not received within {timeout_s:g} s"


class KeySchemaMissing(ApiError):
    """A schema format's produce with a key and neither ``key_schema`` nor ``key_schema_id`` (Confluent
    REST Proxy's 42201); nothing was written."""


class ValueSchemaMissing(ApiError):
    """A schema format's produce with a value and no value schema (Confluent's 42202)."""


class RecordConversionFailed(ApiError):
    """A produced key or value that is not data of its schema (Confluent's 42203); nothing was written."""


class InvalidEmbeddedSchema(ApiError):
    """A produce's schema text that is not a schema of its format (Confluent's 42205)."""


class SchemaSerializationFailed(ApiError):
    """A produce's schema the registry refused, or an id it does not hold under the topic's subject
    (Confluent's 42207); nothing was written."""


class RecordNotDeserializable(ApiError):
    """A record a schema format's reader cannot decode: not in Confluent's wire format, an unknown id, a
    schema of another type, or data its schema does not read (Confluent's 500/50002, as its consumer's poll
    fails at it); the read answers the records before it, none after."""


class Unauthorized(ApiError):
    """An admin call without the configured ``Authorization: Bearer <token>``; with ``--require-auth``, a
    client call without a user's password or token (or the admin token)."""


class CrossOrigin(ApiError):
    """A state-changing request a browser sent from a page of another origin (its ``Origin`` header names
    another host than the request's): refused before anything is done, so a page elsewhere cannot use the
    credentials a browser holds for this node (cross-site request forgery)."""


@with_fields
class TooManyLoginFailures(ApiError):
    """Too many failed logins lately from the client's address or for the user name given
    (``partitions.security.login_failures``): refused unchecked; ``retry_after_s`` until it may try again."""

    retry_after_s: float

    def describe(self) -> str:
        return f"too many failed logins lately: try again in {math.ceil(self.retry_after_s)} s"


class RouteNotFound(ApiError):
    """No endpoint at this path."""


class MethodNotAllowed(ApiError):
    """The path exists but not with this method."""

    def __init__(self, method: str, path: str, allowed: list[str]) -> None:
        super().__init__(f"{method} is not allowed on {path}; allowed: {', '.join(sorted(allowed))}")
        self.allowed = sorted(allowed)


class NotReady(ApiError):
    """The node cannot serve yet (no controller known)."""


@with_fields
class Overloaded(ApiError):
    """This node already holds its maximum of requests of this kind in flight; retry after a pause."""

    kind: str
    limit: int
    template = "overloaded: {limit} {kind} requests already in flight on this node; retry later"


@dataclass(frozen=True, slots=True)
class HttpError:
    status: int
    error_code: int
    retriable: bool = False


# Most specific first: the first class an error is an instance of decides.
TABLE: list[tuple[type[RaftlogError], HttpError]] = [
    (BadRequest, HttpError(400, 40001)),
    (Unauthorized, HttpError(401, 40101)),
    (CrossOrigin, HttpError(403, 40303)),
    # serve --acls: no ACL allows it; nothing done
    # a batch of a producer id InitProducerId gave another principal (``security.producer_ids``)
    (broker.ProducerIdNotOwned, HttpError(403, 40302)),
    (broker.AuthorizationFailed, HttpError(403, NOT_AUTHORIZED)),
    (RouteNotFound, HttpError(404, 40400)),
    (MethodNotAllowed, HttpError(405, 40501)),
    (RequestTooLarge, HttpError(413, 41301)),
    (RequestTimeout, HttpError(408, 40801)),
    (TooManyLoginFailures, HttpError(429, 42901)),
    (NotReady, HttpError(503, 50301, retriable=True)),
    (broker.NoController, HttpError(503, 50301, retriable=True)),
    (broker.PeerUnreachable, HttpError(503, 50301, retriable=True)),  # the node a call went to: safe to retry
    (broker.HopLimitExceeded, HttpError(503, 50303, retriable=True)),
    (broker.PeerOutcomeUnknown, HttpError(504, 50401, retriable=True)),
    # a node of an earlier release calling (or answering) once the cluster's levels rose above its code
    (broker.NodeKeptOut, HttpError(409, 40934)),
    (broker.PeerProtocolError, HttpError(500, 50000)),
    # Consensus: NotLeader is normally followed to the leader; it reaches a client only when the hint is
    # unusable (no address, this node): then it is "no leader right now".
    (consensus.NotLeader, HttpError(503, 50301, retriable=True)),
    (consensus.NoLeader, HttpError(503, 50301, retriable=True)),
    (InvalidAddress, HttpError(400, 40001)),
    (NotStarted, HttpError(503, 50308, retriable=True)),
    (MetadataTooLarge, HttpError(500, 50001)),
    (consensus.ProposalQueueFull, HttpError(503, 50304, retriable=True)),
    (Overloaded, HttpError(503, 50307, retriable=True)),
    (consensus.ProposalDiscarded, HttpError(503, 50305, retriable=True)),
    (consensus.GroupClosed, HttpError(503, 50306, retriable=True)),
    (consensus.ProposalRejected, HttpError(409, 40903)),
    (consensus.OutcomeUnknown, HttpError(504, 50401, retriable=True)),
    (consensus.CorruptJournal, HttpError(500, 50002)),
    (consensus.CorruptSnapshot, HttpError(500, 50002)),
    (storage.InvalidConfig, HttpError(400, 40001)),
    (broker.ReservedName, HttpError(400, 40003)),  # a topic name kept for the cluster's own topics
    (broker.InvalidName, HttpError(400, 40001)),
    (broker.InvalidTopic, HttpError(400, 40001)),
    (broker.PlacementImpossible, HttpError(400, 40001)),
    # an internal topic not created while a majority of its replicas would be down: no quorum right now
    (broker.TooFewLiveNodes, HttpError(503, 50301, retriable=True)),
    (broker.UnknownTopic, HttpError(404, UNKNOWN_TOPIC)),
    (broker.UnknownPartition, HttpError(404, 40402)),
    (broker.TopicExists, HttpError(409, 40901)),
    (broker.UnknownNode, HttpError(404, 40405)),
    (broker.UnknownUser, HttpError(404, 40407)),
    (broker.UnknownToken, HttpError(404, 40408)),  # never made, revoked, or its user deleted
    (broker.TooManyTokens, HttpError(409, 40915)),  # per user or in the cluster: nothing made
    (broker.DelegationTokenExpired, HttpError(409, 40935)),  # a delegation token past its expiry
    (broker.DelegationTokenOwnerMismatch, HttpError(403, 40304)),  # neither its owner nor a renewer
    (broker.TooManyProducerOwners, HttpError(409, 40925)),  # principals holding producer ids: none given
    (broker.NoReassignment, HttpError(404, 40406)),
    (broker.InvalidReassignment, HttpError(400, 40002)),
    (broker.ReassignmentInProgress, HttpError(409, 40908)),
    (broker.DecommissionImpossible, HttpError(409, 40909)),
    (broker.CapacityExceeded, HttpError(409, 40910)),
    (broker.PolicyViolation, HttpError(409, 40918)),
    (broker.ControllerChangeRefused, HttpError(409, 40914)),
    (broker.FeatureUpdateRefused, HttpError(409, 40926)),
    (broker.FeatureNotFinalized, HttpError(409, 40932)),  # a change the finalized feature level predates
    (broker.InvalidQuota, HttpError(400, 40001)),
    # the schema registry's refusals carry Confluent's code, which says the status (``lookup``)
    (broker.RegistryError, HttpError(422, 42201)),
    (broker.InvalidConfigRequest, HttpError(400, 40001)),
    (broker.InvalidResourceConfig, HttpError(400, 40001)),
    (broker.QuotaExceeded, HttpError(429, 42902)),  # a user's client quota: Retry-After says when
    (broker.SequenceTooOld, HttpError(409, SEQUENCE_TOO_OLD)),
    (broker.ProducerFenced, HttpError(409, 40911)),
    (broker.OutOfOrderSequence, HttpError(409, 40912)),
    (broker.OffsetMetadataTooLarge, HttpError(400, 40001)),  # a commit's metadata past Kafka's bound
    (broker.UnstableOffsetCommit, HttpError(409, 40919, retriable=True)),  # a transaction holds it pending
    (broker.InvalidTxnState, HttpError(409, 40920)),
    (broker.TransactionUnverified, HttpError(503, 50301, retriable=True)),  # its coordinator: not reached
    (broker.CoordinatorFenced, HttpError(409, 40924)),  # a deposed transaction coordinator's marker
    # the transaction coordinator's (Kafka's producers meet these; the HTTP API reads transactions only)
    (transactions.UnknownTransactionalId, HttpError(404, 40409)),
    (transactions.ConcurrentTransactions, HttpError(409, 40921)),
    (transactions.InvalidProducerIdMapping, HttpError(409, 40922)),
    (transactions.TransactionLimitReached, HttpError(409, 40923)),
    (transactions.InvalidTransactionTimeout, HttpError(400, 40001)),
    (transactions.InvalidTransactionalIdPattern, HttpError(400, 40001)),
    (storage.RecordTooLarge, HttpError(413, 41301)),
    (NotAcceptable, HttpError(406, 40601)),
    (UnsupportedMediaType, HttpError(415, 41501)),
    (storage.OffsetOutOfRange, HttpError(416, OFFSET_OUT_OF_RANGE)),
    (storage.InvalidRecord, HttpError(422, 42201)),
    # Confluent REST Proxy's codes of its schema formats (avro, jsonschema, protobuf)
    (KeySchemaMissing, HttpError(422, 42201)),
    (ValueSchemaMissing, HttpError(422, 42202)),
    (RecordConversionFailed, HttpError(422, 42203)),
    (InvalidEmbeddedSchema, HttpError(422, 42205)),
    (SchemaSerializationFailed, HttpError(422, 42207)),
    (RecordNotDeserializable, HttpError(500, 50002)),
    (broker.InvalidCommand, HttpError(422, 42201)),
    # Kafka's current_leader_epoch named an older or newer term (the Kafka door's; no HTTP route names one)
    (broker.LeaderEpochMismatch, HttpError(409, 40917)),
    # recovering committed records from peers
    (broker.ReplicaRecovering, HttpError(503, 50309, retriable=True)),
    # a group's committed offset: the partition found no leader within the request's time
    (broker.OffsetsUnavailable, HttpError(503, 50310, retriable=True)),
    (storage.LogClosed, HttpError(503, 50301, retriable=True)),
    # the leader's disk is full (raftlog.storage.space): refused before it was proposed, not done
    (storage.DiskFull, HttpError(507, DISK_FULL, retriable=True)),
    (storage.StorageUnavailable, HttpError(503, 50302, retriable=True)),
    # a node refuses to start: never on a request
    (storage.DirectoryLocked, HttpError(503, 50302, retriable=True)),
    (storage.CorruptRecord, HttpError(500, 50002)),
    (storage.LegacyLogFormat, HttpError(500, 50003)),  # a log of the format before v2: `raftlog log migrate`
    (storage.NotBatchBoundary, HttpError(500, 50001)),
    (InvariantViolation, HttpError(500, 50001)),
    # Consumer groups
    (groups.InvalidConsumerConfig, HttpError(422, 42204)),  # Confluent's "Invalid consumer configuration"
    (groups.ConsumerFormatMismatch, HttpError(406, 40601)),  # records asked for in the other format
    (groups.UnknownConsumerInstance, HttpError(404, UNKNOWN_INSTANCE)),
    (groups.UnknownGroup, HttpError(404, 40404)),
    (groups.ConsumerInstanceExists, HttpError(409, INSTANCE_EXISTS)),
    (groups.StaleGeneration, HttpError(409, STALE_GENERATION)),  # rebalanced since: read the assignment again
    # not the instance's in this generation
    (groups.PartitionNotAssigned, HttpError(409, PARTITION_NOT_ASSIGNED)),
    (groups.GroupFull, HttpError(409, 40907)),
    (groups.ShareGroupLimitReached, HttpError(409, 40933)),  # --group-share-max-groups: none created
    # live members: delete, reset, the other door's join refused
    (groups.GroupNotEmpty, HttpError(409, 40916)),
    (groups.ConsumerProtocolNotFinalized, HttpError(409, 40927)),  # the Kafka door's alone
    # the consumer group protocol's (KIP-848) rules: met by the Kafka door's members; the HTTP door meets
    # a group of theirs only as another protocol's (NotConsumerGroup)
    (groups.NotConsumerGroup, HttpError(409, 40928)),
    (groups.NotStreamsGroup, HttpError(409, 40928)),  # the Kafka door's alone
    (groups.StreamsGroupsNotFinalized, HttpError(409, 40927)),  # the Kafka door's alone
    (groups.InvalidTopology, HttpError(422, 42201)),  # the Kafka door's alone
    (groups.NotCoordinator, HttpError(503, 50311, retriable=True)),
    (groups.UnknownMember, HttpError(404, UNKNOWN_MEMBER)),
    (groups.InvalidRecordState, HttpError(409, INVALID_RECORD_STATE)),
    (groups.ShareSessionNotFound, HttpError(404, UNKNOWN_MEMBER)),
    (groups.ShareSessionLimitReached, HttpError(503, 50312, retriable=True)),  # the Kafka door's alone
    (groups.InvalidShareSessionEpoch, HttpError(409, 40929)),
    (groups.ShareGroupsNotFinalized, HttpError(409, 40927)),
    (groups.FencedMemberEpoch, HttpError(409, 40929)),
    (groups.StaleMemberEpoch, HttpError(409, 40929)),
    (groups.UnreleasedInstanceId, HttpError(409, 40930)),
    (groups.FencedInstanceId, HttpError(409, 40930)),
    (groups.UnsupportedAssignor, HttpError(400, 40001)),
    (groups.InvalidRegularExpression, HttpError(400, 40001)),
    (groups.InvalidGroupRequest, HttpError(400, 40001)),
    (groups.ConsumerProtocolVersion, HttpError(400, 40001)),
]
INTERNAL = HttpError(500, 50000)
RETRY_AFTER_S = 1  # the Retry-After header of every retriable 503


def lookup(error: BaseException) -> HttpError:
    if isinstance(error, broker.RegistryError) and hasattr(error, "error_code"):  # Confluent's own code
        return HttpError(error.status, error.error_code)
    for kind, mapped in TABLE:
        if isinstance(error, kind):
            return mapped
    return INTERNAL


# The attributes a client can act on, by class, as the error body names them (JSON key -> attribute).
BODY_FIELDS: tuple[tuple[type[RaftlogError], dict[str, str]], ...] = (
    (storage.OffsetOutOfRange, {"log_start_offset": "log_start_offset", "end_offset": "end_offset"}),
    (storage.RecordTooLarge, {"size_bytes": "size_bytes", "limit_bytes": "limit_bytes"}),
    (RequestTooLarge, {"limit_bytes": "limit_bytes"}),
    (consensus.NotLeader, {"leader_hint": "leader_hint"}),
    (broker.ControllerChangeRefused, {"reason": "reason"}),
    (broker.FeatureUpdateRefused, {"feature": "feature", "level": "level", "reason": "reason"}),
    (broker.QuotaExceeded, {"quota": "quota", "retry_after_ms": "retry_after_ms"}),
    (broker.CapacityExceeded, {"replicas_max": "replicas_max", "room": "room"}),
    (MethodNotAllowed, {"allowed": "allowed"}),
    (groups.StaleGeneration, {"generation": "current"}),
    (groups.PartitionNotAssigned, {"generation": "generation"}),
    (broker.TooManyTokens, {"limit": "limit"}),
    (groups.GroupNotEmpty, {"members": "members"}),
    (
        broker.AuthorizationFailed,
        {"resource_type": "resource_type", "resource": "name", "operation": "operation"},
    ),
)


def body(error: BaseException) -> dict[str, Any]:
    """The JSON error body: ``error_code``, ``message`` and the fields a client can act on."""
    mapped = lookup(error)
    payload: dict[str, Any] = {"error_code": mapped.error_code, "message": str(error)}
    for kind, fields in BODY_FIELDS:
        if isinstance(error, kind):
            payload.update((key, getattr(error, attribute)) for key, attribute in fields.items())
    if isinstance(error, broker.DecommissionImpossible):
        payload["partitions"] = [{"topic": t, "partition": p, "reason": r} for t, p, r in error.partitions]
    if mapped.retriable:
        payload["retriable"] = True
    return payload
