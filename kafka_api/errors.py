"""The Kafka door's one error boundary: the one table from raftlog's typed errors to Kafka error codes
(most specific class first), and ``Caught``, the one place a handler's error becomes an answer.

Every ``RaftlogError`` a handler can meet resolves here; anything else is a bug, logged with its traceback,
and answered ``UNKNOWN_SERVER_ERROR``. ``tests/kafka_api/test_kafka_errors.py`` fails when an error class is
not mapped. Retriable codes are the ones Kafka clients retry on their own (refreshing metadata first for
``NOT_LEADER_OR_FOLLOWER``). A refusal the door decides itself is a ``Refused`` carrying its code.

Kafka answers carry an error code per item (a partition, a topic, a group, a resource, a user) and some a
code of the whole answer: a handler runs each item's work ``with Caught() as caught:`` and answers
``caught.code`` and ``caught.message`` for it (``ErrorCode.none`` and None when nothing was raised), or
keeps the outcome of a task with ``outcome_of``. No handler catches ``Exception`` itself
(``tests/test_architecture.py`` holds the door to that): what escapes a handler is the server's, which logs
it and closes the connection (``server.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TypeVar

from kio.schema.errors import ErrorCode

from kafka_api import wire
from partitions import errors as broker
from partitions.groups import errors as groups
from partitions.names import TRANSACTIONS_TOPIC
from partitions.transactions import errors as transactions
from raftlog.consensus import errors as consensus
from raftlog.errors import InvariantViolation, RaftlogError
from raftlog.storage import errors as storage

log = logging.getLogger(__name__)
T = TypeVar("T")
Mapper = Callable[[BaseException], ErrorCode]  # an error's code: ``code_of``, or an API's own way first


class Refused(Exception):
    """An answer the door decides itself, before asking below it (a field out of range, a name given twice,
    an id that names no transactional producer): the Kafka ``code`` and its words (the code's name when
    none are given)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(code.name if message is None else message)
        self.code = code


TABLE: tuple[tuple[type[Exception], ErrorCode], ...] = (
    # a batch of a producer id InitProducerId gave another principal: answered as the refusal each Kafka
    # client already takes as fatal for the producer (Java's and librdkafka's producers fail for good, none
    # retries), a transactional one as its transactional id, an idempotent one as KIP-679's refusal of
    # idempotent writes; INVALID_PRODUCER_ID_MAPPING would have the idempotent producer ask for a new id
    (broker.TransactionalProducerIdNotOwned, ErrorCode.transactional_id_authorization_failed),
    (broker.ProducerIdNotOwned, ErrorCode.cluster_authorization_failed),
    (broker.TopicAuthorizationFailed, ErrorCode.topic_authorization_failed),
    (broker.GroupAuthorizationFailed, ErrorCode.group_authorization_failed),
    (broker.ClusterAuthorizationFailed, ErrorCode.cluster_authorization_failed),
    (broker.TransactionalIdAuthorizationFailed, ErrorCode.transactional_id_authorization_failed),
    (broker.AuthorizationFailed, ErrorCode.cluster_authorization_failed),
    (consensus.NotLeader, ErrorCode.not_leader_or_follower),
    (broker.FencedLeaderEpoch, ErrorCode.fenced_leader_epoch),  # the client's metadata is older: it refreshes
    (broker.UnknownLeaderEpoch, ErrorCode.unknown_leader_epoch),  # newer than this replica knows: it retries
    # a group's committed offset out of reach for the request's time: what Kafka answers while its offsets
    # partition loads, which every group client retries (LEADER_NOT_AVAILABLE would end its commit)
    (broker.OffsetsUnavailable, ErrorCode.coordinator_load_in_progress),
    # the controller's group without a leader: what a Kafka broker answers for want of an active controller
    # (admin clients look the controller up again and retry; LEADER_NOT_AVAILABLE ends franz-go's create)
    (broker.NoControllerLeader, ErrorCode.not_controller),
    (consensus.NoLeader, ErrorCode.leader_not_available),
    (broker.ReplicaRecovering, ErrorCode.leader_not_available),
    (consensus.ProposalDiscarded, ErrorCode.not_leader_or_follower),
    (consensus.ProposalRejected, ErrorCode.not_leader_or_follower),
    (consensus.ProposalQueueFull, ErrorCode.request_timed_out),
    (consensus.OutcomeUnknown, ErrorCode.request_timed_out),
    (broker.TopicIdGone, ErrorCode.unknown_topic_id),
    (broker.UnknownTopic, ErrorCode.unknown_topic_or_partition),
    (broker.UnknownPartition, ErrorCode.unknown_topic_or_partition),
    (storage.RecordBatchTooLarge, ErrorCode.record_list_too_large),  # Kafka's RECORD_BATCH_TOO_LARGE
    (storage.RecordTooLarge, ErrorCode.message_too_large),
    (storage.InvalidRecord, ErrorCode.invalid_record),
    (storage.CorruptRecord, ErrorCode.corrupt_message),
    (storage.OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (broker.SequenceTooOld, ErrorCode.out_of_order_sequence_number),
    (broker.OutOfOrderSequence, ErrorCode.out_of_order_sequence_number),
    (broker.ProducerFenced, ErrorCode.invalid_producer_epoch),
    (broker.OffsetMetadataTooLarge, ErrorCode.offset_metadata_too_large),
    (broker.UnstableOffsetCommit, ErrorCode.unstable_offset_commit),
    (broker.InvalidTxnState, ErrorCode.invalid_txn_state),
    (broker.TransactionUnverified, ErrorCode.not_enough_replicas),  # as Kafka answers it: retriable
    (broker.CoordinatorFenced, ErrorCode.transaction_coordinator_fenced),
    # retriable: the previous one completes
    (transactions.ConcurrentTransactions, ErrorCode.concurrent_transactions),
    (transactions.InvalidProducerIdMapping, ErrorCode.invalid_producer_id_mapping),
    (transactions.InvalidTransactionTimeout, ErrorCode.invalid_transaction_timeout),
    (transactions.UnknownTransactionalId, ErrorCode.transactional_id_not_found),
    (transactions.InvalidTransactionalIdPattern, ErrorCode.invalid_regular_expression),
    # a bound of the coordinator's (its message says)
    (transactions.TransactionLimitReached, ErrorCode.policy_violation),
    (transactions.TransactionError, ErrorCode.invalid_request),
    (broker.TopicExists, ErrorCode.topic_already_exists),
    (broker.InvalidName, ErrorCode.invalid_topic_exception),
    (broker.InternalTopicWrite, ErrorCode.invalid_topic_exception),
    (broker.InvalidTopic, ErrorCode.invalid_request),
    (storage.InvalidConfig, ErrorCode.invalid_config),
    (broker.PlacementImpossible, ErrorCode.invalid_replication_factor),
    # an internal topic not created while a majority of its replicas would be down: what Kafka's
    # FindCoordinator answers while too few brokers are registered for its offsets topic; clients retry
    (broker.TooFewLiveNodes, ErrorCode.coordinator_not_available),
    (broker.CapacityExceeded, ErrorCode.policy_violation),
    (broker.PolicyViolation, ErrorCode.policy_violation),
    (broker.InvalidReassignment, ErrorCode.invalid_replica_assignment),
    (broker.ReassignmentInProgress, ErrorCode.reassignment_in_progress),
    (broker.NoReassignment, ErrorCode.no_reassignment_in_progress),
    (broker.UnknownNode, ErrorCode.broker_not_available),
    (broker.UnknownUser, ErrorCode.resource_not_found),
    # a delegation token not held (its HMAC matches none; the same for a user's API token)
    (broker.UnknownToken, ErrorCode.delegation_token_not_found),
    (broker.DelegationTokenExpired, ErrorCode.delegation_token_expired),
    (broker.DelegationTokenOwnerMismatch, ErrorCode.delegation_token_owner_mismatch),
    (broker.TooManyTokens, ErrorCode.policy_violation),
    (broker.TooManyProducerOwners, ErrorCode.policy_violation),
    (broker.DecommissionImpossible, ErrorCode.policy_violation),
    # no Kafka API changes the controller's voters
    (broker.ControllerChangeRefused, ErrorCode.policy_violation),
    (broker.FeatureUpdateRefused, ErrorCode.invalid_update_version),  # UpdateFeatures' refusal
    (broker.FeatureNotFinalized, ErrorCode.unsupported_version),  # as Kafka before its metadata.version
    (broker.InvalidQuota, ErrorCode.invalid_request),
    # the Kafka door asks the schema registry only to check a produced record against its schema
    (broker.RegistryError, ErrorCode.invalid_record),
    (broker.InvalidConfigRequest, ErrorCode.invalid_request),
    (broker.InvalidResourceConfig, ErrorCode.invalid_config),
    (broker.QuotaExceeded, ErrorCode.throttling_quota_exceeded),  # the HTTP door's; Kafka's throttles
    (broker.NoController, ErrorCode.not_controller),
    (broker.HopLimitExceeded, ErrorCode.not_leader_or_follower),
    (broker.PeerError, ErrorCode.request_timed_out),
    (groups.StaleGeneration, ErrorCode.illegal_generation),
    # the consumer group protocol (KIP-848)
    (groups.NotCoordinator, ErrorCode.not_coordinator),
    (groups.NotConsumerGroup, ErrorCode.group_id_not_found),
    (groups.NotStreamsGroup, ErrorCode.group_id_not_found),
    (groups.StreamsGroupsNotFinalized, ErrorCode.unsupported_version),  # as Kafka's streams.version 0
    (groups.InvalidTopology, ErrorCode.streams_invalid_topology),
    (groups.UnknownMember, ErrorCode.unknown_member_id),
    (groups.FencedMemberEpoch, ErrorCode.fenced_member_epoch),
    (groups.StaleMemberEpoch, ErrorCode.stale_member_epoch),
    (groups.UnreleasedInstanceId, ErrorCode.unreleased_instance_id),
    (groups.FencedInstanceId, ErrorCode.fenced_instance_id),
    (groups.UnsupportedAssignor, ErrorCode.unsupported_assignor),
    (groups.InvalidRegularExpression, ErrorCode.invalid_regular_expression),
    (groups.ConsumerProtocolVersion, ErrorCode.unsupported_version),
    (groups.ConsumerProtocolNotFinalized, ErrorCode.unsupported_version),  # as Kafka's group.version 0
    (groups.GroupFull, ErrorCode.group_max_size_reached),
    # --group-share-max-groups (Kafka has no bound of share groups: the closest code its share
    # consumer fails on with the message, which names the bound)
    (groups.ShareGroupLimitReached, ErrorCode.group_max_size_reached),
    # share groups (KIP-932)
    (groups.InvalidRecordState, ErrorCode.invalid_record_state),
    (groups.ShareSessionNotFound, ErrorCode.share_session_not_found),
    (groups.ShareSessionLimitReached, ErrorCode.share_session_limit_reached),
    (groups.InvalidShareSessionEpoch, ErrorCode.invalid_share_session_epoch),
    (groups.ShareGroupsNotFinalized, ErrorCode.unsupported_version),
    (groups.UnknownGroup, ErrorCode.group_id_not_found),
    (groups.GroupNotEmpty, ErrorCode.non_empty_group),
    (groups.GroupError, ErrorCode.invalid_request),
    (broker.InvalidCommand, ErrorCode.invalid_request),
    (storage.DiskFull, ErrorCode.kafka_storage_error),  # the leader's disk is full: not done, retriable
    (consensus.ConsensusError, ErrorCode.kafka_storage_error),
    (storage.StorageError, ErrorCode.kafka_storage_error),
    (InvariantViolation, ErrorCode.unknown_server_error),  # a bug: logged
)


def code_of(error: BaseException) -> ErrorCode:
    """The Kafka error code a partition's or topic's answer carries for ``error``."""
    if isinstance(error, Refused):
        return error.code
    for kind, code in TABLE:
        if isinstance(error, kind):
            if code is ErrorCode.unknown_server_error:
                log.error("Kafka: %r", error)
            return code
    if isinstance(error, RaftlogError):
        log.error("Kafka: an error without a mapping (a bug): %r", error)
    else:
        log.exception("Kafka: unexpected error", exc_info=error)
    return ErrorCode.unknown_server_error


def group_coordinator_code(error: BaseException) -> ErrorCode:
    """The code of a group API whose group record was not written (in its ``__consumer_groups``
    partition), as Kafka's coordinator answers an append to its offsets partition that failed: leadership lost
    NOT_COORDINATOR, no leader yet COORDINATOR_LOAD_IN_PROGRESS, not written in time
    COORDINATOR_NOT_AVAILABLE, each retried by every group client (a leader's code would end a commit)."""
    if isinstance(error, (consensus.NotLeader, consensus.ProposalDiscarded, consensus.GroupClosed)):
        return ErrorCode.not_coordinator
    if isinstance(error, (consensus.NoLeader, broker.ReplicaRecovering)):
        return ErrorCode.coordinator_load_in_progress
    if isinstance(
        error,
        (consensus.OutcomeUnknown, consensus.ProposalQueueFull, broker.PeerError, storage.StorageUnavailable),
    ):
        return ErrorCode.coordinator_not_available
    return code_of(error)


def group_code(error: BaseException) -> ErrorCode:
    """A group API's answer: a group id that cannot name a group INVALID_GROUP_ID, the rest as everywhere."""
    return ErrorCode.invalid_group_id if isinstance(error, broker.InvalidName) else code_of(error)


def heartbeat_code(error: BaseException) -> ErrorCode:
    """A group heartbeat's (the consumer and streams protocols'): a group id that cannot name a group
    INVALID_GROUP_ID, a failed write of the group's record a coordinator's code
    (``group_coordinator_code``)."""
    return (
        ErrorCode.invalid_group_id if isinstance(error, broker.InvalidName) else group_coordinator_code(error)
    )


# the first version of each API whose clients know PRODUCER_FENCED (before it: INVALID_PRODUCER_EPOCH):
# InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
PRODUCER_FENCED_FROM = {22: 4, 24: 2, 25: 2, 26: 2}


def transaction_coordinator_code(error: BaseException, request: wire.Request) -> ErrorCode:
    """The Kafka code of an error the transaction coordinator raised, for this request: its leadership
    or a write to its log that failed as a coordinator's (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE), a fenced producer by the request's version, the rest as ``code_of``."""
    if isinstance(error, (consensus.NotLeader, consensus.ProposalDiscarded, consensus.ProposalRejected)):
        return ErrorCode.not_coordinator
    if isinstance(error, consensus.NoLeader):  # electing, or led here but not caught up with its log yet
        return ErrorCode.coordinator_load_in_progress
    if isinstance(error, (consensus.OutcomeUnknown, consensus.ProposalQueueFull)):
        # not written in time, as Kafka's coordinator answers an append to its log that timed out: every
        # client asks again (REQUEST_TIMED_OUT would end franz-go's EndTxn as failed, and it would take a
        # commit that may yet be decided for an abort and process the input again)
        return ErrorCode.coordinator_not_available
    if isinstance(error, broker.UnknownTopic) and error.topic == TRANSACTIONS_TOPIC:
        return ErrorCode.coordinator_not_available
    if isinstance(error, broker.ProducerFenced):
        fenced_from = PRODUCER_FENCED_FROM.get(request.api_key)
        if fenced_from is not None and request.api_version >= fenced_from:
            return ErrorCode.producer_fenced
        return ErrorCode.invalid_producer_epoch
    return code_of(error)


class Caught:
    """The outcome of one item's work (a partition's, a topic's, a group's, a resource's, or the whole
    request's where Kafka answers one code): ``with Caught() as caught:`` runs it, and an ``Exception``
    raised in it ends the work and becomes the item's answer, ``code`` (``mapper``'s: ``code_of`` unless
    an API maps some errors its own way) and ``message`` (its words); the others' items go on. A bug is
    logged here, with its traceback, by the mapper. Nothing of the error is kept: 100,000 items' errors
    holding their frames made the garbage collector hold the node for seconds. A cancellation
    (``BaseException``) is not an answer and goes through."""

    __slots__ = ("_mapper", "code", "failed", "message")

    def __init__(self, mapper: Mapper = code_of) -> None:
        self._mapper = mapper
        self.code = ErrorCode.none
        self.message: str | None = None
        self.failed = False

    @classmethod
    def of(cls, error: Exception, mapper: Mapper = code_of) -> Caught:
        """An item answered ``error`` without running anything (an unknown partition found in the request)."""
        caught = cls(mapper)
        caught._keep(error)
        return caught

    def __enter__(self) -> Caught:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if not isinstance(error, Exception):
            return False  # nothing raised, or a cancellation: not the item's answer
        self._keep(error)
        return True

    def _keep(self, error: Exception) -> None:
        self.code = self._mapper(error)  # a bug is logged here
        self.message = str(error)
        self.failed = True


async def outcome_of(work: Awaitable[T], mapper: Mapper = code_of) -> T | Caught:
    """``work``'s result, or what it raised as ``Caught``: for a task whose outcome is kept until the
    request is answered (a Produce's appends)."""
    with Caught(mapper) as caught:
        return await work
    return caught
