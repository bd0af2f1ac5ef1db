"""A transactional batch checked while its transaction was open, but replicated after the marker that ended
it (a Kafka producer's request that outlived its transaction: its client timed the request out and aborted
the transaction), is refused when applied, on real nodes: else it would open a transaction of its producer
that the producer's next transaction's commit marker ends, and read_committed readers would read a record
of an aborted transaction (an aborted read, as the transactional fault runs found one). Both ways a batch
is let in: its transaction already open in the partition, and its coordinator confirming the partition is
in it (KIP-890's verification); and the producer's next transaction at the same epoch (transaction version
1, librdkafka's) still writes and commits."""

from __future__ import annotations

import asyncio
import pathlib
import struct
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import crc32c
import pytest
from in_process import Served, configs, controller_leader, partition_leader, until

from partitions.broker.node import Node
from partitions.data.service import Producer
from partitions.errors import InvalidTxnState, UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.transactions.errors import ConcurrentTransactions
from partitions.transactions.service import ProducerIdAndEpoch, TransactionService
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.storage import ProducerRecord
from raftlog.storage.batch import encode_batch
from raftlog.storage.batch_reads import decode_batch, split_batches

T = TypeVar("T")
TID = "payments-tx"
PAY = TopicPartition("pay", 0)


def _transactional(producer: ProducerIdAndEpoch, sequence: int, value: bytes) -> bytes:
    batch = bytearray(
        encode_batch(
            0, [ProducerRecord(value)], 0, 1_000, producer.producer_id, sequence,
            producer_epoch=producer.producer_epoch,
        )
    )  # fmt: skip
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)  # transactional
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


async def _read_committed(node: Node) -> list[bytes]:
    """The values a read_committed reader gets from the partition's start: stable batches, without the
    aborted transactions' records and the control batches."""
    fetched = await node.data.fetch_stable(PAY.topic, PAY.partition, 0, 1 << 20, 0)
    aborted = dict(fetched.aborted)
    values: list[bytes] = []
    for raw in split_batches(fetched.data):
        decoded = decode_batch(raw)
        header, records = decoded.header, decoded.records
        if header.is_control:
            aborted.pop(header.producer_id or -1, None)
            continue
        first = aborted.get(header.producer_id or -1)
        if first is not None and header.base_offset >= first:
            continue
        values.extend(bytes(r.value or b"") for r in records)
    return values


@pytest.fixture
async def nodes(tmp_path: pathlib.Path) -> AsyncIterator[list[Node]]:
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.topic_changes.create_topic(PAY.topic, 1, 3, {})
        await until(lambda: partition_leader(nodes, PAY.topic), what="partition leader")
        yield nodes
    finally:
        await asyncio.gather(*(s.stop() for s in served))


def _coordinator(node: Node) -> Callable[..., Awaitable[T]]:
    async def coordinator(method: Callable[..., Awaitable[T]], *args: object, **kwargs: object) -> T:
        """The transactional id's coordinator's answer, asked again while it elects or the previous
        transaction's markers are written (as a client asks)."""
        for _ in range(300):
            try:
                answer: T = await node.cluster.transactions.call(method, *args, **kwargs)
                return answer
            except (NotLeader, NoLeader, UnknownTopic, ConcurrentTransactions):
                await asyncio.sleep(0.05)
        raise AssertionError(f"{method.__name__} never answered")

    return coordinator


def _where(nodes: list[Node], tp: TopicPartition) -> str:
    """Each replica of ``tp`` as its node sees it, and each node's transaction marker retries."""
    rows = [
        f"{node.node_id}: {r.group.status().role.value} in term {r.group.status().term}, leader "
        f"{r.group.status().leader}, high watermark {r.machine.high_watermark}"
        for node in nodes
        for r in node.replicas
        if (r.topic.name, r.partition) == (tp.topic, tp.partition)
    ]
    retries = {node.node_id: node.transactions.counters["transaction_marker_retries"] for node in nodes}
    return f"{'; '.join(rows)}; marker retries {retries}"


def _held_after_its_checks(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> tuple[asyncio.Event, asyncio.Event]:
    """The next transactional batch ``node`` checks waits, once checked, until released: (checked,
    release)."""
    checked, release = asyncio.Event(), asyncio.Event()
    writes = node.data._transactional
    verify: Callable[..., Awaitable[object]] = writes.verify

    async def held(*args: object, **kwargs: object) -> object:
        answer = await verify(*args, **kwargs)
        checked.set()
        await release.wait()
        return answer

    monkeypatch.setattr(writes, "verify", held)
    return checked, release


@pytest.mark.parametrize("open_here", [True, False], ids=["open-in-the-partition", "verified-by-coordinator"])
async def test_a_batch_that_outlived_its_transaction_is_refused_and_never_read_committed(
    nodes: list[Node], monkeypatch: pytest.MonkeyPatch, open_here: bool
) -> None:
    leader = await until(lambda: partition_leader(nodes, PAY.topic), what="partition leader")
    await leader.local.transactions.ensure_topic()  # as FindCoordinator does
    coordinator = _coordinator(leader)
    service = TransactionService
    producer: ProducerIdAndEpoch = await coordinator(service.init_producer_id, TID, 60_000, -1, -1)
    pid, epoch = producer.producer_id, producer.producer_epoch
    who = Producer(None, "", TID)
    await coordinator(service.add_partitions, TID, pid, epoch, [PAY])
    sequence = 0
    if open_here:  # the transaction's first batch is in: the late one is let in as the open one's
        first = _transactional(producer, 0, b"first")
        await leader.data.produce_batch(*PAY, first, 5000, who, contiguous=True)
        sequence = 1
    checked, release = _held_after_its_checks(leader, monkeypatch)
    batch = _transactional(producer, sequence, b"late")
    late = asyncio.create_task(leader.data.produce_batch(*PAY, batch, 5000, who, contiguous=True))
    await asyncio.wait_for(checked.wait(), 10)
    # the client gave up on the request and aborted the transaction: its marker is written meanwhile
    await coordinator(service.end_transaction, TID, pid, epoch, False)
    try:
        await until(  # the marker is a control batch of its own
            lambda: leader.data.offsets_now(*PAY).high_watermark == sequence + 1,
            what="the abort marker in the partition",
        )
    except AssertionError as exc:  # say whether the leader moved, or the marker never came (a whole run's
        raise AssertionError(f"{exc}: {_where(nodes, PAY)}") from None  # failure said neither)
    release.set()
    with pytest.raises(InvalidTxnState, match="ended"):
        await late
    # the producer's next transaction, at the same epoch, writes and commits
    monkeypatch.undo()
    await coordinator(service.add_partitions, TID, pid, epoch, [PAY])
    # the refused batch took no sequence: the next one follows the last written
    nxt = _transactional(producer, sequence, b"next")
    await leader.data.produce_batch(*PAY, nxt, 5000, who, contiguous=True)
    await coordinator(service.end_transaction, TID, pid, epoch, True)
    for _ in range(200):
        values = await _read_committed(leader)
        if values:
            break
        await asyncio.sleep(0.05)
    assert values == [b"next"], values


async def test_a_new_leader_not_caught_up_asks_the_coordinator_so_the_next_transaction_is_not_refused(
    nodes: list[Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader just elected that has not applied its term's first entry yet may miss the marker a former
    leader wrote of the producer's last transaction: that transaction looks open there. A batch of the
    producer's next transaction (the rolling upgrade's load had one refused so, as one whose transaction
    had ended) is checked with its coordinator instead, bound to the next transaction's ordinal, and
    written. Here the leader shows the view it had before the marker, and says its term's entry is not
    applied."""
    leader = await until(lambda: partition_leader(nodes, PAY.topic), what="partition leader")
    await leader.local.transactions.ensure_topic()
    coordinator = _coordinator(leader)
    service = TransactionService
    producer: ProducerIdAndEpoch = await coordinator(service.init_producer_id, TID, 60_000, -1, -1)
    pid, epoch = producer.producer_id, producer.producer_epoch
    who = Producer(None, "", TID)
    await coordinator(service.add_partitions, TID, pid, epoch, [PAY])
    await leader.data.produce_batch(*PAY, _transactional(producer, 0, b"first"), 5000, who, contiguous=True)
    await coordinator(service.end_transaction, TID, pid, epoch, True)
    await coordinator(service.add_partitions, TID, pid, epoch, [PAY])  # once the commit's markers are in
    replica = leader.data.leader_replica(*PAY)
    assert replica.machine.transaction_ended(pid) >= 0  # the marker is applied: the view is put back
    monkeypatch.setattr(replica.log.transactions, "is_open", lambda producer_id: producer_id == pid)
    ended = replica.machine.transaction_ended
    loop = threading.get_ident()  # the leader's checks read the view here; its Raft thread applies

    def view_before_the_marker(producer_id: int) -> int:
        return -1 if threading.get_ident() == loop else ended(producer_id)

    monkeypatch.setattr(replica.machine, "transaction_ended", view_before_the_marker)
    monkeypatch.setattr(replica.group, "leader_ready", lambda: False)
    second = _transactional(producer, 1, b"second")
    await leader.data.produce_batch(*PAY, second, 5000, who, contiguous=True)
    monkeypatch.undo()
    await coordinator(service.end_transaction, TID, pid, epoch, True)
    for _ in range(200):
        values = await _read_committed(leader)
        if len(values) == 2:
            break
        await asyncio.sleep(0.05)
    assert values == [b"first", b"second"], values
