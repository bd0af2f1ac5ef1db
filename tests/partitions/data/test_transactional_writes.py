"""The data plane's checks of a transactional batch (``partitions.data.transactional``), whichever door the
batch came through: a transactional id the producer may WRITE (always refused without one, as Kafka
refuses it), then KIP-890's verification: its transaction open in the partition already, or the partition
in the producer's ongoing transaction as its coordinator says."""

from __future__ import annotations

import pathlib

import pytest

from partitions.commands import NO_TRANSACTION
from partitions.data.service import Producer
from partitions.data.service import Producer as Joiner
from partitions.data.transactional import TransactionalWrites
from partitions.errors import (
    InvalidTxnState,
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
    TransactionUnverified,
    UnknownTopic,
)
from partitions.security.acls import (
    AclBinding,
    AclOperation,
    Authorizers,
    PatternType,
    Permission,
    ResourceType,
)
from partitions.transactions.errors import ConcurrentTransactions
from raftlog.consensus.errors import NoLeader
from raftlog.storage.batch import ProducerRecord, decode_header, encode_batch
from raftlog.storage.transactions import LogTransactions

ORDINAL = 1_764_000_000_123  # the verified transaction's ordinal: its start, as its coordinator stamped it
WRITE_TX = AclBinding(
    ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE,
    Permission.ALLOW,
)  # fmt: skip


def _writes(enforced: bool, verify: object = None) -> tuple[TransactionalWrites, list[tuple[object, ...]]]:
    asked: list[tuple[object, ...]] = []

    async def verify_partition(
        tid: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> int | None:
        asked.append((tid, producer_id, epoch, topic, partition))
        if isinstance(verify, Exception):
            raise verify
        return ORDINAL if verify else None  # the ongoing transaction's ordinal, as its coordinator has it

    authorizers = Authorizers({"User:root"}) if enforced else None

    async def add_partition(
        tid: str, producer_id: int, epoch: int, topic: str, partition: int, principal: str | None
    ) -> None:
        asked.append(("add", tid, producer_id, epoch, topic, partition, principal))
        if isinstance(verify, Exception):
            raise verify

    return TransactionalWrites(authorizers, lambda: (WRITE_TX,), verify_partition, add_partition), asked


def test_a_transactional_batch_needs_a_transactional_id_its_producer_may_write() -> None:
    open_to_all, _ = _writes(enforced=False)
    with pytest.raises(TransactionalIdAuthorizationFailed):  # Kafka's answer to one without an id
        open_to_all.authorize(Producer("User:bob", "10.0.0.7"))
    with pytest.raises(TransactionalIdAuthorizationFailed):  # an older node's call, or an HTTP producer's
        open_to_all.authorize(None)
    assert open_to_all.authorize(Producer(None, "", "any-id")) == "any-id"  # no ACLs: any id
    acls, _ = _writes(enforced=True)
    assert acls.authorize(Producer("User:bob", "10.0.0.7", "tx-1")) == "tx-1"
    assert acls.authorize(Producer("User:root", "10.0.0.9", "other")) == "other"  # a super user
    for who in (Producer("User:mallory", "10.0.0.8", "tx-1"), Producer(None, "", "tx-1")):
        with pytest.raises(TransactionalIdAuthorizationFailed, match="tx-1"):
            acls.authorize(who)
    with pytest.raises(TransactionalIdAuthorizationFailed):
        acls.authorize(Producer("User:bob", "10.0.0.7", "other"))


async def test_kip_890_asks_the_coordinator_unless_the_transaction_is_open_in_the_partition(
    tmp_path: pathlib.Path,
) -> None:
    batch = encode_batch(0, [ProducerRecord(b"v")], 0, 1_000, 77, 0, producer_epoch=3)
    header = decode_header(batch)
    transactions = LogTransactions(str(tmp_path))
    refusing, asked = _writes(enforced=False, verify=False)
    with pytest.raises(InvalidTxnState, match="AddPartitionsToTxn first"):
        await refusing.verify(transactions, "tx-1", header, "t", 0)
    assert asked == [("tx-1", 77, 3, "t", 0)]
    confirming, _ = _writes(enforced=False, verify=True)
    # the batch is held to the verified transaction: refused if applied after its marker
    assert await confirming.verify(transactions, "tx-1", header, "t", 0) == ORDINAL
    no_coordinator, _ = _writes(enforced=False, verify=UnknownTopic("__transactions"))
    with pytest.raises(InvalidTxnState):  # no id was ever coordinated: none holds the partition
        await no_coordinator.verify(transactions, "tx-1", header, "t", 0)
    unreachable, _ = _writes(enforced=False, verify=NoLeader("__transactions-0"))
    with pytest.raises(TransactionUnverified):  # retriable: Kafka's NOT_ENOUGH_REPLICAS
        await unreachable.verify(transactions, "tx-1", header, "t", 0)
    opened = LogTransactions(str(tmp_path), open_txns={77: 0})
    # its transaction is open here already: held to one past the producer's last transaction ended here
    assert await refusing.verify(opened, "tx-1", header, "t", 0, ended=ORDINAL - 5) == ORDINAL - 4
    assert await refusing.verify(opened, "tx-1", header, "t", 0) == NO_TRANSACTION + 1  # none ended here
    assert len(asked) == 1, "the coordinator was not asked again"
    # a leader whose view may be behind (None) asks the coordinator, whatever the partition shows
    with pytest.raises(InvalidTxnState, match="AddPartitionsToTxn first"):
        await refusing.verify(None, "tx-1", header, "t", 0, ended=ORDINAL - 5)
    assert len(asked) == 2
    assert await confirming.verify(None, "tx-1", header, "t", 0, ended=ORDINAL - 5) == ORDINAL


async def test_transaction_version_2_adds_the_partition_and_waits_for_the_previous_marker(
    tmp_path: pathlib.Path,
) -> None:
    """A Produce v12 batch (transaction version 2) adds its partition to the transaction at the coordinator
    when the coordinator does not have it in already (librdkafka sends v12 after its AddPartitionsToTxn:
    nothing replicated again for it); a transaction open here at an older epoch (the previous one, its
    marker not yet landed) does not count: the coordinator decides, and CONCURRENT_TRANSACTIONS while the
    previous transaction completes is answered retriable, a fenced producer as fenced."""
    batch = encode_batch(0, [ProducerRecord(b"v")], 0, 1_000, 77, 0, producer_epoch=4)
    header = decode_header(batch)
    bob = Joiner("User:bob", "10.0.0.7", "tx-1")
    writes, asked = _writes(enforced=False, verify=False)
    # joined: not held to an ordinal (every version 2 marker carries an epoch above the batch's)
    assert await writes.verify(LogTransactions(str(tmp_path)), "tx-1", header, "t", 0, None, bob) == -1
    assert asked == [("tx-1", 77, 4, "t", 0), ("add", "tx-1", 77, 4, "t", 0, "User:bob")]
    added_before, asked_added = _writes(enforced=False, verify=True)
    await added_before.verify(LogTransactions(str(tmp_path)), "tx-1", header, "t", 0, None, bob)
    assert asked_added == [("tx-1", 77, 4, "t", 0)], "in the transaction already: not added again"
    previous_open = LogTransactions(str(tmp_path), open_txns={77: 0})  # epoch 3's, its marker in flight
    await writes.verify(previous_open, "tx-1", header, "t", 0, 3, bob)
    assert len(asked) == 4, "an open transaction of an older epoch is not this batch's"
    await writes.verify(previous_open, "tx-1", header, "t", 0, 4, bob)
    assert len(asked) == 4, "open at the batch's epoch: nothing asked"
    completing, _ = _writes(enforced=False, verify=ConcurrentTransactions("tx-1", "PrepareCommit"))
    with pytest.raises(TransactionUnverified):  # retriable: the producer sends it again
        await completing.verify(previous_open, "tx-1", header, "t", 0, 3, bob)
    fenced, _ = _writes(enforced=False, verify=ProducerFenced(77, 4, 5))
    with pytest.raises(ProducerFenced):  # a zombie's batch of a transaction since ended
        await fenced.verify(LogTransactions(str(tmp_path)), "tx-1", header, "t", 0, None, bob)
    verifying, asked_v1 = _writes(enforced=False, verify=True)  # version 1: asked, not added
    await verifying.verify(previous_open, "tx-1", header, "t", 0, 3)
    assert asked_v1 == [("tx-1", 77, 4, "t", 0)]
