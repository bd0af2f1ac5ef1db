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
from partitions.groups import errors as groups
from partitions.transactions import errors as transactions
from raftlog.consensus import errors as consensus
from raftlog.errors import InvariantViolation, RaftlogError
from raftlog.storage import errors as storage

log = logging.getLogger(__name__)

TABLE: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (TopicAuthorizationFailed, ErrorCode.topic_authorization_failed),
    (GroupAuthorizationFailed, ErrorCode.group_authorization_failed),
    (ClusterAuthorizationFailed, ErrorCode.cluster_authorization_failed),
    (TransactionalIdAuthorizationFailed, ErrorCode.transactional_id_authorization_failed),
    (AuthorizationFailed, ErrorCode.cluster_authorization_failed),
    (consensus.NotLeader, ErrorCode.not_leader_or_follower),
    (FencedLeaderEpoch, ErrorCode.fenced_leader_epoch),  # the client's metadata is older: it refreshes
    (UnknownLeaderEpoch, ErrorCode.unknown_leader_epoch),  # newer than this replica knows: it retries
    (consensus.NoLeader, ErrorCode.leader_not_available),
    (ReplicaRecovering, ErrorCode.leader_not_available),
    (consensus.ProposalDiscarded, ErrorCode.not_leader_or_follower),
    (consensus.ProposalRejected, ErrorCode.not_leader_or_follower),
    (consensus.ProposalQueueFull, ErrorCode.request_timed_out),
    (consensus.OutcomeUnknown, ErrorCode.request_timed_out),
    (UnknownTopic, ErrorCode.unknown_topic_or_partition),
    (UnknownPartition, ErrorCode.unknown_topic_or_partition),
    (storage.RecordTooLarge, ErrorCode.message_too_large),
    (storage.InvalidRecord, ErrorCode.invalid_record),
    (storage.CorruptRecord, ErrorCode.corrupt_message),
    (storage.OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (SequenceTooOld, ErrorCode.out_of_order_sequence_number),
    (OutOfOrderSequence, ErrorCode.out_of_order_sequence_number),
    (ProducerFenced, ErrorCode.invalid_producer_epoch),
    (UnstableOffsetCommit, ErrorCode.unstable_offset_commit),
    (InvalidTxnState, ErrorCode.invalid_txn_state),
    (CoordinatorFenced, ErrorCode.transaction_coordinator_fenced),
    # retriable: the previous one completes
    (transactions.ConcurrentTransactions, ErrorCode.concurrent_transactions),
    (transactions.InvalidProducerIdMapping, ErrorCode.invalid_producer_id_mapping),
    (transactions.InvalidTransactionTimeout, ErrorCode.invalid_transaction_timeout),
    (transactions.UnknownTransactionalId, ErrorCode.transactional_id_not_found),
    # a bound of the coordinator's (its message says)
    (transactions.TransactionLimitReached, ErrorCode.policy_violation),
    (transactions.TransactionError, ErrorCode.invalid_request),
    (TopicExists, ErrorCode.topic_already_exists),
    (InvalidName, ErrorCode.invalid_topic_exception),
    (InvalidTopic, ErrorCode.invalid_request),
    (storage.InvalidConfig, ErrorCode.invalid_config),
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
    (groups.StaleGeneration, ErrorCode.illegal_generation),
    (groups.UnknownGroup, ErrorCode.group_id_not_found),
    (groups.GroupNotEmpty, ErrorCode.non_empty_group),
    (groups.GroupError, ErrorCode.invalid_request),
    (InvalidCommand, ErrorCode.invalid_request),
    (storage.DiskFull, ErrorCode.kafka_storage_error),  # the leader's disk is full: not done, retriable
    (consensus.ConsensusError, ErrorCode.kafka_storage_error),
    (storage.StorageError, ErrorCode.kafka_storage_error),
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
