"""Who may write a transactional batch, and where: the checks the data plane runs on every producer's
transactional batch, whichever door it came through (``DataPlane.produce_batch``).

As Kafka (``KafkaApis.handleProduceRequest``): a transactional batch needs its producer's transactional id,
which the producer must be allowed to WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise, and always
without one: the HTTP door has none, so transactional batches are refused there). Then KIP-890's defence:
it is written only where its producer's transaction is open already, or where the producer's coordinator
confirms that the partition is in its ongoing transaction at that epoch (INVALID_TXN_STATE otherwise). A
write that outlived its transaction, or that no coordinator ever heard of, would open a transaction that
no coordinator ends, holding the partition's last stable offset back for good.

Transaction version 2 (KIP-890's second part, a Kafka Produce v12's batch): the producer sends no
AddPartitionsToTxn; the partition's first batch of a transaction adds the partition to it at the
coordinator (``TransactionService.add_partitions``, a transaction beginning if none is open), as Kafka's
leader does (its AddPartitionsToTxnManager's addPartition), once the coordinator, asked first, does not
have it in already (librdkafka sends v12 after its own AddPartitionsToTxn: nothing is added again for it).
A transaction open here counts only at the batch's epoch: with version 2 the next transaction's batches
carry the bumped epoch and may arrive before this one's marker, and must wait for it (the coordinator
answers CONCURRENT_TRANSACTIONS until it lands). What the coordinator could not decide yet is answered as
Kafka answers it, retriable (NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from partitions.commands import NO_TRANSACTION
from partitions.data.service import Producer
from partitions.errors import (
    AuthorizationFailed,
    InvalidName,
    InvalidTxnState,
    ProducerFenced,
    ProducerIdNotOwned,
    TransactionUnverified,
    UnknownTopic,
)
from partitions.security.acls import AclBinding, AclOperation, Authorizers, ResourceType
from partitions.transactions.errors import InvalidProducerIdMapping, TransactionLimitReached
from raftlog.errors import RaftlogError
from raftlog.storage.batch import BatchHeader
from raftlog.storage.transactions import LogTransactions

# (transactional id, producer id, epoch, topic, partition) -> the ordinal of the producer's ongoing
# transaction (``Transaction.started_ms``) when the coordinator has the partition in it, None when not (the
# transaction's description, ``TransactionService.describe_transaction``, from the id's coordinator)
VerifyPartition = Callable[[str, int, int, str, int], Awaitable[int | None]]
# (transactional id, producer id, epoch, topic, partition, principal): the partition added to the
# producer's transaction (``TransactionService.add_partitions``), raising what its coordinator answered
AddPartition = Callable[[str, int, int, str, int, str | None], Awaitable[None]]
ANONYMOUS = Producer()


class TransactionalWrites:
    """The checks of a transactional batch. ``authorizers`` None: ACLs are not enforced on this node
    (``raftlog serve --enforce-acls``); ``acls`` gives the ACLs the node holds now."""

    def __init__(
        self,
        authorizers: Authorizers | None,
        acls: Callable[[], tuple[AclBinding, ...]],
        verify_partition: VerifyPartition,
        add_partition: AddPartition,
    ) -> None:
        self._authorizers = authorizers
        self._acls = acls
        self._verify_partition = verify_partition
        self._add_partition = add_partition

    def authorize(self, producer: Producer | None) -> str:
        """The transactional id ``producer`` writes a transactional batch as, once it may;
        ``TransactionalIdAuthorizationFailed`` when it has none or may not WRITE it."""
        producer = producer or ANONYMOUS
        tid = producer.transactional_id
        allowed = tid is not None and (
            self._authorizers is None
            or (
                producer.principal is not None
                and self._authorizers.of(self._acls()).allows(
                    producer.principal, producer.host, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid
                )
            )
        )
        if not allowed or tid is None:
            who = producer.principal or "an anonymous client"
            name = tid if tid is not None else "(none given for a transactional batch)"
            raise AuthorizationFailed.of(who, "write", "transactional_id", name)
        return tid

    async def verify(
        self,
        transactions: LogTransactions | None,
        tid: str,
        header: BatchHeader,
        topic: str,
        partition: int,
        open_epoch: int | None = None,
        join: Producer | None = None,
        ended: int = NO_TRANSACTION,
    ) -> int:
        """KIP-890: ``InvalidTxnState`` unless the producer's transaction is open in the partition (its
        ``transactions``, at ``open_epoch``, the producer's epoch here; None: any) or its coordinator has the
        partition in it; ``TransactionUnverified`` when the coordinator could not say. ``transactions`` None:
        the partition's view may be behind (a leader that has not applied its term's first entry yet may
        miss a marker a former leader wrote, and the producer's ended transaction would look open there),
        so only the coordinator answers. ``join``: the
        producer of a transaction version 2 batch, whose partition its coordinator adds instead.

        Returns the least ordinal the batch's transaction can have (``commands.Produce.transaction``),
        which apply holds it to, as Kafka's verification guard holds it on its leader: the coordinator's
        ordinal of the transaction it verified, or, with the transaction open here, one past ``ended``
        (the ordinal of the producer's last transaction ended here, read before the open transaction
        was: a marker applied between the two reads makes it lower, never higher). A joined batch (version
        2) needs none: every marker of version 2 carries an epoch above its transaction's batches."""
        producer_id = header.producer_id
        epoch = header.producer_epoch or 0
        if producer_id is None:
            return NO_TRANSACTION
        if transactions is not None and transactions.is_open(producer_id) and open_epoch in (None, epoch):
            return ended + 1
        try:
            ordinal = await self._verify_partition(tid, producer_id, epoch, topic, partition)
        except UnknownTopic:  # no transactional id has ever been coordinated: none holds this partition
            ordinal = None
        except InvalidName:
            raise
        except RaftlogError as exc:  # as Kafka answers a verification it could not make: retriable
            if join is None:
                raise TransactionUnverified(f"the coordinator could not verify it: {exc}") from exc
            ordinal = None  # the add below is answered alike, or adds it
        if ordinal is not None:
            return ordinal
        if join is not None:
            # a batch of Produce v12 adds its partition (the read above spares a producer that added it
            # already with AddPartitionsToTxn, as librdkafka does at v12, the replicated add)
            await self._join(tid, producer_id, epoch, topic, partition, join.principal)
            return NO_TRANSACTION
        raise InvalidTxnState(
            f"{topic}-{partition} is not in an ongoing transaction of {tid!r} "
            f"(producer {producer_id}, epoch {epoch}): AddPartitionsToTxn first"
        )

    async def _join(
        self, tid: str, producer_id: int, epoch: int, topic: str, partition: int, principal: str | None
    ) -> None:
        try:
            await self._add_partition(tid, producer_id, epoch, topic, partition, principal)
        except (
            InvalidName,
            ProducerFenced,
            InvalidProducerIdMapping,
            InvalidTxnState,
            TransactionLimitReached,
            AuthorizationFailed,
            ProducerIdNotOwned,
        ):
            raise
        except RaftlogError as exc:  # electing, moved, the previous transaction completing: retriable
            raise TransactionUnverified(f"the transaction's coordinator could not add it: {exc}") from exc
