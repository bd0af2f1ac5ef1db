"""The one table from raftlog's typed errors to Kafka error codes (most specific class first).

Every ``RaftlogError`` a handler can meet resolves here; anything else is a bug, logged, and answered
``UNKNOWN_SERVER_ERROR``. ``tests/kafka_api/test_errors.py`` fails when an error class is not mapped.
Retriable codes are the ones Kafka clients retry on their own (refreshing metadata first for
``NOT_LEADER_OR_FOLLOWER``).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from partitions.errors import (
    AuthorizationFailed,
    CapacityExceeded,
    ClusterAuthorizationFailed,
    ControllerChangeRefused,
    CoordinatorFenced,
    DecommissionImpossible,
    FencedLeaderEpoch,
    GroupAuthorizationFailed,
    HopLimitExceeded,
    InvalidCommand,
    InvalidName,
    InvalidReassignment,
    InvalidTopic,
    InvalidTxnState,
    NoController,
    NoReassignment,
    OutOfOrderSequence,
    PeerError,
    PlacementImpossible,
    PolicyViolation,
    ProducerFenced,
    ReassignmentInProgress,
    ReplicaRecovering,
    SequenceTooOld,
    TooManyTokens,
    TopicAuthorizationFailed,
    TopicExists,
    TransactionalIdAuthorizationFailed,
    UnknownLeaderEpoch,
    UnknownNode,
    UnknownPartition,
    UnknownToken,
    UnknownTopic,
    UnknownUser,
    UnstableOffsetCommit,
)
from partitions.groups.errors import GroupError, GroupNotEmpty, StaleGeneration, UnknownGroup
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    TransactionError,
    TransactionLimitReached,
    UnknownTransactionalId,
)
from raftlog.consensus.errors import (
    ConsensusError,
    NoLeader,
    NotLeader,
    OutcomeUnknown,
    ProposalDiscarded,
    ProposalQueueFull,
    ProposalRejected,
)
from raftlog.errors import InvariantViolation, RaftlogError
from raftlog.storage.errors import (
    CorruptRecord,
    DiskFull,
    InvalidConfig,
    InvalidRecord,
    OffsetOutOfRange,
    RecordTooLarge,
    StorageError,
)

log = logging.getLogger(__name__)

TABLE: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (TopicAuthorizationFailed, ErrorCode.topic_authorization_failed),
    (GroupAuthorizationFailed, ErrorCode.group_authorization_failed),
    (ClusterAuthorizationFailed, ErrorCode.cluster_authorization_failed),
    (TransactionalIdAuthorizationFailed, ErrorCode.transactional_id_authorization_failed),
    (AuthorizationFailed, ErrorCode.cluster_authorization_failed),
    (NotLeader, ErrorCode.not_leader_or_follower),
    (FencedLeaderEpoch, ErrorCode.fenced_leader_epoch),  # the client's metadata is older: it refreshes
    (UnknownLeaderEpoch, ErrorCode.unknown_leader_epoch),  # newer than this replica knows: it retries
    (NoLeader, ErrorCode.leader_not_available),
    (ReplicaRecovering, ErrorCode.leader_not_available),
    (ProposalDiscarded, ErrorCode.not_leader_or_follower),
    (ProposalRejected, ErrorCode.not_leader_or_follower),
    (ProposalQueueFull, ErrorCode.request_timed_out),
    (OutcomeUnknown, ErrorCode.request_timed_out),
    (UnknownTopic, ErrorCode.unknown_topic_or_partition),
    (UnknownPartition, ErrorCode.unknown_topic_or_partition),
    (RecordTooLarge, ErrorCode.message_too_large),
    (InvalidRecord, ErrorCode.invalid_record),
    (CorruptRecord, ErrorCode.corrupt_message),
    (OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (SequenceTooOld, ErrorCode.out_of_order_sequence_number),
    (OutOfOrderSequence, ErrorCode.out_of_order_sequence_number),
    (ProducerFenced, ErrorCode.invalid_producer_epoch),
    (UnstableOffsetCommit, ErrorCode.unstable_offset_commit),
    (InvalidTxnState, ErrorCode.invalid_txn_state),
    (CoordinatorFenced, ErrorCode.transaction_coordinator_fenced),
    (ConcurrentTransactions, ErrorCode.concurrent_transactions),  # retriable: the previous one completes
    (InvalidProducerIdMapping, ErrorCode.invalid_producer_id_mapping),
    (InvalidTransactionTimeout, ErrorCode.invalid_transaction_timeout),
    (UnknownTransactionalId, ErrorCode.transactional_id_not_found),
    (TransactionLimitReached, ErrorCode.policy_violation),  # a bound of the coordinator's (its message says)
    (TransactionError, ErrorCode.invalid_request),
    (TopicExists, ErrorCode.topic_already_exists),
    (InvalidName, ErrorCode.invalid_topic_exception),
    (InvalidTopic, ErrorCode.invalid_request),
    (InvalidConfig, ErrorCode.invalid_config),
    (PlacementImpossible, ErrorCode.invalid_replication_factor),
    (CapacityExceeded, ErrorCode.policy_violation),
    (PolicyViolation, ErrorCode.policy_violation),
    (InvalidReassignment, ErrorCode.invalid_replica_assignment),
    (ReassignmentInProgress, ErrorCode.reassignment_in_progress),
    (NoReassignment, ErrorCode.no_reassignment_in_progress),
    (UnknownNode, ErrorCode.broker_not_available),
    (UnknownUser, ErrorCode.resource_not_found),
    # a user's API tokens are the HTTP API's (no Kafka API reaches them): their nearest codes
    (UnknownToken, ErrorCode.delegation_token_not_found),
    (TooManyTokens, ErrorCode.policy_violation),
    (DecommissionImpossible, ErrorCode.policy_violation),
    (ControllerChangeRefused, ErrorCode.policy_violation),  # no Kafka API changes the controller's voters
    (NoController, ErrorCode.not_controller),
    (HopLimitExceeded, ErrorCode.not_leader_or_follower),
    (PeerError, ErrorCode.request_timed_out),
    (StaleGeneration, ErrorCode.illegal_generation),
    (UnknownGroup, ErrorCode.group_id_not_found),
    (GroupNotEmpty, ErrorCode.non_empty_group),
    (GroupError, ErrorCode.invalid_request),
    (InvalidCommand, ErrorCode.invalid_request),
    (DiskFull, ErrorCode.kafka_storage_error),  # the leader's disk is full: not done, retriable
    (ConsensusError, ErrorCode.kafka_storage_error),
    (StorageError, ErrorCode.kafka_storage_error),
    (InvariantViolation, ErrorCode.unknown_server_error),  # a bug: logged
)


def code_of(error: BaseException) -> ErrorCode:
    """The Kafka error code a partition's or topic's answer carries for ``error``."""
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
