"""Typed errors of the transaction coordinator (mapped once per door: ``api/errors.py``,
``kafka_api/errors.py``). ``ProducerFenced`` and ``InvalidTxnState``, which a partition raises as well, are
``partitions.errors``'."""

from __future__ import annotations

from partitions.errors import PartitionError
from raftlog.errors import with_fields


class TransactionError(PartitionError):
    """Base of every transaction coordinator error."""


@with_fields
class ConcurrentTransactions(TransactionError):
    """The transactional id's previous transaction is still being completed (its markers are being
    written): the producer asks again shortly (Kafka's CONCURRENT_TRANSACTIONS, retriable)."""

    transactional_id: str
    state: str
    template = "transactional id {transactional_id!r}: its transaction is completing ({state}); retry"


@with_fields
class InvalidProducerIdMapping(TransactionError):
    """The producer id is not the one the transactional id holds (or the id holds none: InitProducerId
    first)."""

    transactional_id: str
    producer_id: int
    template = "transactional id {transactional_id!r} does not hold producer id {producer_id}"


@with_fields
class InvalidTransactionTimeout(TransactionError):
    """A transaction timeout out of bounds: above the node's ``--transaction-max-timeout-ms`` (Kafka's
    transaction.max.timeout.ms) or not positive."""

    timeout_ms: int
    timeout_ms_max: int
    template = "transaction timeout {timeout_ms} ms: use 1 to {timeout_ms_max} ms"


@with_fields
class UnknownTransactionalId(TransactionError):
    """No producer ever initialized this transactional id here, or it expired (7 days unused)."""

    transactional_id: str
    template = "transactional id {transactional_id!r} is not known"


@with_fields
class TransactionLimitReached(TransactionError):
    """A bound on what a coordinator holds was reached: transactional ids in one coordinator partition,
    partitions or groups in one transaction, partitions across a coordinator partition's open
    transactions. Nothing was changed."""

    what: str
    limit: int
    template = "at most {limit} {what}"


@with_fields
class InvalidTransactionalIdPattern(TransactionError):
    """A listing's transactional id pattern (KIP-1152) that RE2 does not accept, or longer than
    ``partitions.regex.REGEX_CHARS_MAX`` (Kafka's INVALID_REGULAR_EXPRESSION, in Kafka's words)."""

    pattern: str
    reason: str
    template = "Transaction ID pattern `{pattern}` is not a valid regular expression: {reason}."
