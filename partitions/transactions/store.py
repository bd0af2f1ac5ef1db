"""``TransactionLog`` over a node's Raft groups: the partitions of ``__transactions`` are ordinary replicated
partitions whose state machine also applies transaction commands (``PartitionStateMachine.transactions``).
The internal topic is created on first use, as ``__consumer_groups`` is."""

from __future__ import annotations

from partitions import commands
from partitions.errors import InvalidCommand, InvalidTxnState, ProducerFenced
from partitions.internal_topic import InternalTopicLog
from partitions.names import TRANSACTIONS_TOPIC
from partitions.transactions.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    TransactionLimitReached,
)
from partitions.transactions.state import (
    TransactionTable,
    TxnChanged,
    TxnCommand,
    TxnResult,
    TxnsExpired,
    encode,
)
from raftlog.errors import check

_RESULTS = (
    TxnChanged,
    TxnsExpired,
    ProducerFenced,
    InvalidProducerIdMapping,
    ConcurrentTransactions,
    InvalidTxnState,
    TransactionLimitReached,
    InvalidCommand,
)


class ReplicatedTransactionLog(InternalTopicLog[TransactionTable]):
    TOPIC = TRANSACTIONS_TOPIC
    TABLE = "transactions"

    async def propose(self, partition: int, command: TxnCommand) -> TxnResult:
        result = await self._propose_entry(partition, commands.encode(commands.TxnCommand(encode(command))))
        # a Refused entry would be one this node encoded wrongly: a bug, not an answer
        check(
            isinstance(result, _RESULTS),
            f"transaction command on {TRANSACTIONS_TOPIC}/{partition}: {result!r}",
        )
        return result  # type: ignore[return-value]  # checked above
