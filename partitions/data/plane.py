"""Records in and out of this node's partition replicas: what every front door calls (``DataService``).

Writes are proposed to the partition's Raft group on its leader and answered once a majority has them
(acks=all). Reads are served by the leader once it has applied its own term's no-op (Raft's rule for
leader reads: everything committed before its election is then in its log) and while it can show that no
other leader was elected since (``RaftGroup.read_refusal``: a leader whose process was paused past the
election timeout waits, on waking, for a majority to acknowledge a no-op of its term, and steps down if a
newer term answers), below the high watermark, and wait (long poll) for records that are not there yet. A
read that cannot be answered for that is refused retriably (``_read_refused``); every read checks, below
both doors.

A read takes its view of the log's segments under the log's lock and reads the bytes outside it: the driver
thread, which appends every partition's committed entries under that lock, never waits for a fetch. A read
of more than ``INLINE_READ_BYTES_MAX`` is done on a reader thread; a smaller one on the event loop, where it
costs less than the hop to a thread.

A partition this node does not lead raises ``NotLeader(leader_hint)`` (``NoLeader`` when none is known):
the cluster-wide service then runs the call on the leader.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from partitions import commands
from partitions.controller.state import TopicMetadata
from partitions.data import admission, long_poll, schema_checks
from partitions.data.service import (
    HIGH_WATERMARK,
    NO_LEADER_EPOCH,
    EpochEndOffset,
    FetchedBatches,
    GroupOffset,
    PartitionOffsets,
    Producer,
    ProduceResult,
    ProducerState,
    TimestampOffset,
    check_leader_epoch,
)
from partitions.data.transactional import TransactionalWrites
from partitions.errors import PolicyViolation, ReplicaRecovering, UnknownPartition, UnstableOffsetCommit
from partitions.features import PRODUCE_CONTIGUOUS, SHARE_GROUPS, Features
from partitions.groups.errors import ShareGroupsNotFinalized
from partitions.groups.share import partition as share_partition
from partitions.groups.share.partition import ShareOffset
from partitions.replicas.manager import Replica, ReplicaManager
from partitions.replicas.routing import Routing
from partitions.replicas.state_machine import (
    MarkerWritten,
    OffsetCommitted,
    OffsetDeleted,
    Produced,
    RecordsDeleted,
    Refused,
    TxnOffsetPending,
)
from partitions.security.producer_ids import ProducerIds
from partitions.transactions.service import Marker
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.consensus.interface import READ_NOT_READY, READ_STANDING_STILL, READ_UNCONFIRMED, Role
from raftlog.errors import InvariantViolation, check
from raftlog.histogram import Histogram
from raftlog.storage.batch import (
    BatchHeader,
    Record,
    TimestampType,
    check_producer_batch,
    claimed_record_count,
    decode_header,
    decode_records,
    is_compressed,
    recompress,
    with_log_append_time,
    with_producer_id,
)
from raftlog.storage.config import LogConfig
from raftlog.storage.defaults import INFLATED_BYTES_MAX_DEFAULT
from raftlog.storage.errors import (
    InflatedTooLarge,
    OffsetOutOfRange,
)
from raftlog.storage.leader_epochs import end_offset_for, epoch_for_offset
from raftlog.storage.log import Log, last_stable_offset
from raftlog.storage.log_read import LogView

log = logging.getLogger(__name__)
T = TypeVar("T")
RunOnDriver = Callable[[Callable[[], Any]], Awaitable[Any]]  # RaftHost.run

LEADER_READY_WAIT_S = 2.0
READ_THREADS = 2  # threads that read (pread, CRC check) and compress batches off the event loop
INLINE_READ_BYTES_MAX = 64 * 1024  # a fetch this small is read on the event loop: a thread hop costs more
# A producer's uncompressed batch is checked on the event loop while that costs less than a thread hop
# (~90 us): up to INLINE_CHECK_BYTES_MAX bytes claiming at most INLINE_CHECK_RECORDS_MAX records (the C
# check costs ~0.15 us a KiB and ~0.03 us a record: 100 records of 1 KiB 20 us, 1,500 of 85 bytes ~65 us;
# a header claiming fewer records than its offsets span is refused before the walk). A compressed one is
# always checked on a reader thread, where two at most are inflated at once, each up to its bound: a
# decompression bomb neither stalls the loop nor holds more than READ_THREADS times the bound
INLINE_CHECK_BYTES_MAX = 128 * 1024
INLINE_CHECK_RECORDS_MAX = 1_500
INLINE_DECODE_BYTES_MAX = 64 * 1024  # a compacted topic's batch decoded to Records on the loop up to this
INFLATED_REFUSAL_LOG_INTERVAL_S = 60.0  # at most one log line this often for batches refused as bombs


class DataPlane:
    """Implements ``DataService`` over this node's replicas. Event loop only (reads run on its threads)."""

    def __init__(
        self,
        node_id: str,
        replicas: ReplicaManager,
        routing: Routing,
        topic: Callable[[str], TopicMetadata],
        clock: Callable[[], int],
        transactional: TransactionalWrites,
        producer_ids: ProducerIds,
        run_on_driver: RunOnDriver,
        inflated_bytes_max: int = INFLATED_BYTES_MAX_DEFAULT,
        features: Features | None = None,
        schemas: schema_checks.SchemaChecks | None = None,
    ) -> None:
        """``transactional``: the checks of a transactional batch; ``producer_ids``: whose producer id a
        batch may carry (``security.producer_ids``); ``run_on_driver``: a function run on
        the Raft driver thread, between two applies (``RaftHost.run``). ``inflated_bytes_max``: the most a
        producer's compressed batch's records may inflate to (or its topic's ``max.message.bytes``, when
        larger); past it the batch is refused, InflatedTooLarge. ``features``: the gate before a format the
        previous release cannot read (None: every format allowed)."""
        check(inflated_bytes_max > 0, f"inflated_bytes_max {inflated_bytes_max} must be positive")
        self.node_id = node_id
        self.inflated_bytes_max = inflated_bytes_max
        self._replicas = replicas
        self._routing = routing
        self._topic = topic
        self._clock = clock
        self._transactional = transactional
        self._producer_ids = producer_ids
        self._run_on_driver = run_on_driver
        self._features = features
        self._schemas = schemas  # records checked against their schemas (None: not on this node)
        self._readers = concurrent.futures.ThreadPoolExecutor(READ_THREADS, thread_name_prefix="raftlog-read")
        self.counters: dict[str, float] = {
            "produce_requests": 0,
            "produced_records": 0,
            "fetch_requests": 0,
            "fetched_records": 0,
            "schema_checked_parts": 0,
        }
        self._inflated_refusals = 0  # batches refused as too large inflated since the last log line
        self._inflated_logged_s = -INFLATED_REFUSAL_LOG_INTERVAL_S
        # a produce from proposing its batch until it was committed by a majority and applied here
        self.commit_seconds = Histogram()

    def close(self) -> None:
        self._readers.shutdown(wait=True, cancel_futures=True)

    # -- finding the replica -------------------------------------------------------------------------

    def replica(self, topic: str, partition: int) -> Replica:
        """This node's replica of the partition; NotLeader naming where to go when it has none."""
        metadata = self._topic(topic)
        if not isinstance(partition, int) or not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        group_id = metadata.group_id(partition)
        replica = self._replicas.get(group_id)
        if replica is None:
            hint = self._routing.leader_hint(topic, partition)
            if hint is None or hint == self.node_id:
                others = [n for n in metadata.replicas[partition] if n != self.node_id]
                hint = others[0] if others else None  # a replica knows its leader better than this node
            raise NotLeader(group_id, hint)
        return replica

    def leader_replica(self, topic: str, partition: int) -> Replica:
        """This node's replica if it leads the partition. Else NotLeader naming the leader its replica
        follows, or, when it follows none yet (a replica just opened, one joining in a move), the leader
        another node claims in gossip; NoLeader when nobody is known to lead."""
        replica = self.replica(topic, partition)
        role, leader = replica.group.role_and_leader()
        if role is not Role.LEADER:
            if leader is None:
                leader = self._routing.claimed_leader(replica.topic, partition)
            if leader is None:
                raise NoLeader(replica.group.group_id)
            raise NotLeader(replica.group.group_id, leader)
        return replica

    def ready_leader(self, topic: str, partition: int) -> Replica:
        """For reads that do not wait: the leader replica if it may answer a read now
        (``RaftGroup.read_refusal``), else NoLeader or NotLeader (``_read_refused``)."""
        replica = self.leader_replica(topic, partition)
        refusal = replica.group.read_refusal()
        if refusal is not None:
            raise _read_refused(replica, refusal)
        return replica

    async def reading_leader(self, topic: str, partition: int) -> Replica:
        """The local leader replica once it may answer reads (``ready_leader``), waiting up to
        ``LEADER_READY_WAIT_S`` for that: for its term's no-op to be applied (Raft's rule for leader reads:
        everything committed before its election is then in its log), or for its leadership to be
        confirmed after its Raft thread stood still (one round trip, or the newer term that deposes it:
        then NotLeader naming the new leader)."""
        deadline = time.monotonic() + LEADER_READY_WAIT_S
        while True:
            replica = self.leader_replica(topic, partition)
            refusal = replica.group.read_refusal()
            if refusal is None:
                return replica
            if time.monotonic() >= deadline:
                raise _read_refused(replica, refusal)
            await asyncio.sleep(0.01)

    # -- writes --------------------------------------------------------------------------------------

    async def produce_batch(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        timeout_ms: int,
        producer: Producer | None = None,
        *,
        contiguous: bool = False,
        join_transaction: bool = False,
    ) -> ProduceResult:
        """Append a record batch the producer encoded (Kafka's RecordBatch v2: any Kafka producer's, or
        ``raftlog.storage.batch.encode_batch`` at the HTTP door from JSON records; base offset and leader
        epoch are overwritten; producer id, epoch and sequence ride in its header; ``contiguous``: its
        sequence must follow its producer's last, as a Kafka producer's must, the Kafka door's, while the
        HTTP API's producers number requests, ``partitions.replicas.dedup``): the one write of
        records, so every rule a produced batch meets is here, whichever door it came through. It is
        checked (``check_producer_batch``: format, CRC, no control batch, timestamps; a compacted topic's
        keys; its producer id's owner, ``ProducerIds``; a transactional batch's producer and transaction,
        ``TransactionalWrites``), then replicated
        as it came, unless the topic's configs ask for another codec (recompressed) or LogAppendTime
        (stamped: attributes, max timestamp and CRC only). Produces to one partition are proposed in the
        order their calls began (``SubmitOrder``), waits or not.

        RecordTooLarge when the batch as sent is larger than ``max.message.bytes`` (as Kafka measures it),
        RecordBatchTooLarge when larger than ``segment.bytes``,
        InflatedTooLarge when its records inflate past ``inflated_bytes_max`` or ``max.message.bytes``,
        whichever is larger; a compressed batch is inflated on a reader thread, never on the event loop.
        InternalTopicWrite for a topic the cluster keeps for itself."""
        admission.check_topic(topic)
        replica = self.leader_replica(topic, partition)
        turn = replica.submit_order.take()
        try:
            config = replica.log.config
            admission.check_size(len(batch), config)  # before anything is inflated
            now = self._clock()
            append_time = admission.appends_time(config)
            header = await self._checked(topic, partition, batch, config, now)
            # a producer id is written only by the principal InitProducerId gave it to: before the
            # transaction's checks and the dedup window, so another's id is refused, never answered with
            # the offsets of its owner's records
            principal = producer.principal if producer else None
            self._producer_ids.check(header.producer_id, principal, header.is_transactional)
            # an id the producer picked itself is written as one bound to its principal (``own``)
            owned = await self._producer_ids.own(header.producer_id, principal, header.is_transactional)
            if owned is not None and owned != header.producer_id:
                batch = with_producer_id(batch, owned)
                header = decode_header(batch)
            transaction = commands.NO_TRANSACTION
            if header.is_transactional:  # a Kafka producer's; checked while the turn holds its place
                tid = self._transactional.authorize(producer)
                pid = header.producer_id
                machine = replica.machine
                # the partition's own view counts once this leader applied its term's first entry (asked
                # before the view is read): before, a marker a former leader wrote may be missing here, the
                # producer's ended transaction would look open, and the batch of its next one be bound
                # below that one's ordinal and refused
                current = replica.group.leader_ready()
                ended = commands.NO_TRANSACTION if pid is None else machine.transaction_ended(pid)
                transaction = await self._transactional.verify(
                    replica.log.transactions if current else None, tid, header, topic, partition,
                    None if pid is None else machine.producers.epoch_of(pid),
                    producer if join_transaction else None, ended,
                )  # fmt: skip
            if config.compacted:
                await self._check_keys(topic, partition, batch, header, config)
            if self._schemas is not None and any(schema_checks.checks_asked(config)):
                await self._check_schemas(topic, batch, header, config)
            codec = admission.STORED_CODEC[config.compression_type]
            if codec is not None and codec is not header.compression:  # recompressing: off the event loop
                batch = await self._off_loop(recompress, batch, header, codec)
            if append_time:
                batch = with_log_append_time(batch, now)
            await turn.wait()
        finally:
            turn.end()
        result = await self._propose_batch(
            replica, partition, batch, header.record_count, timeout_ms, contiguous, transaction
        )
        if not append_time:
            return result
        if result.duplicate:  # its stamp is its first append's, not this one's (as Kafka answers it)
            return dataclasses.replace(
                result, log_append_time_ms=await self._stamp_at(replica, result.base_offset)
            )
        return dataclasses.replace(result, log_append_time_ms=now)

    async def _stamp_at(self, replica: Replica, offset: int) -> int | None:
        """The leader's stamp on the stored batch holding ``offset``: None when retention removed it, or it
        was stored with its producer's times before the topic became LogAppendTime."""
        loop = asyncio.get_running_loop()
        try:  # a batch may be up to max.message.bytes: read (and CRC-checked) on a reader thread
            batches = await loop.run_in_executor(
                self._readers, replica.log.read_batches, offset, 1, offset + 1
            )
        except OffsetOutOfRange:
            return None
        if not batches or batches[0].header.timestamp_type is not TimestampType.LOG_APPEND_TIME:
            return None
        return batches[0].header.max_timestamp_ms

    async def _checked(
        self, topic: str, partition: int, batch: bytes, config: LogConfig, now_ms: int
    ) -> BatchHeader:
        """``check_producer_batch`` of a producer's batch by its topic's rules (``admission``): on the
        event loop when it is small and not compressed, else on a reader thread. A batch refused as too
        large inflated is logged at most once per INFLATED_REFUSAL_LOG_INTERVAL_S, with how many were
        refused since."""
        latest_ms = admission.latest_timestamp_ms(config, now_ms)
        bound = admission.inflated_bound(config, self.inflated_bytes_max)
        if (
            not is_compressed(batch)
            and len(batch) <= INLINE_CHECK_BYTES_MAX
            and claimed_record_count(batch) <= INLINE_CHECK_RECORDS_MAX
        ):
            return check_producer_batch(batch, latest_ms, bound)
        try:
            return await self._off_loop(check_producer_batch, batch, latest_ms, bound)
        except InflatedTooLarge as refused:
            self._inflated_refusals += 1
            now_s = time.monotonic()
            if now_s - self._inflated_logged_s >= INFLATED_REFUSAL_LOG_INTERVAL_S:
                log.warning(
                    "refused %d batch(es) whose records inflate past their bound since the last such line, "
                    "the latest to %s/%d: %s",
                    self._inflated_refusals, topic, partition, refused,
                )  # fmt: skip
                self._inflated_refusals = 0
                self._inflated_logged_s = now_s
            raise

    async def _check_keys(
        self, topic: str, partition: int, batch: bytes, header: BatchHeader, config: LogConfig
    ) -> None:
        """A compacted topic's records each need a key (``admission.check_keys``). Decoded on a reader
        thread when compressed or large."""
        if not is_compressed(batch) and len(batch) <= INLINE_DECODE_BYTES_MAX:
            records = decode_records(batch, header)
        else:
            records = await self._off_loop(decode_records, batch, header)
        admission.check_keys(config, records, topic, partition)

    async def _check_schemas(self, topic: str, batch: bytes, header: BatchHeader, config: LogConfig) -> None:
        """Each record's key or value against its registered schema, as the topic's configs ask
        (``schema_checks``): the schemas looked up on the event loop, the records decoded on a reader
        thread."""
        assert self._schemas is not None  # asked only when the node checks schemas
        records = await self._off_loop(decode_records, batch, header)
        plan = await self._schemas.prepare(topic, records, config)
        if plan is not None:
            keys, values = schema_checks.checks_asked(config)
            self.counters["schema_checked_parts"] += await self._off_loop(
                plan.decode_all, topic, records, keys, values
            )

    async def _off_loop(self, work: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._readers, work, *args)

    async def _propose_batch(
        self,
        replica: Replica,
        partition: int,
        batch: bytes,
        count: int,
        timeout_ms: int,
        contiguous: bool,
        transaction: int = commands.NO_TRANSACTION,
    ) -> ProduceResult:
        self.counters["produce_requests"] += 1
        admission.check_size(len(batch), replica.log.config)  # as recompressed or stamped
        if contiguous and self._features is not None and not self._features.allows(PRODUCE_CONTIGUOUS):
            contiguous = False  # kind 10 is unknown to release 0.1.0: its rule waits for the feature level
        if not contiguous:  # kind 1 has no form with a transaction's ordinal (0.1.0 reads kind 1 only)
            transaction = commands.NO_TRANSACTION
        started = time.perf_counter()
        result = await replica.group.propose(
            commands.encode_parts(commands.Produce(batch, contiguous, transaction)), timeout_ms
        )
        self.commit_seconds.observe(time.perf_counter() - started)
        if isinstance(result, Refused):
            raise result.error
        if not isinstance(result, Produced):  # not check(): its message would be formatted every time
            raise InvariantViolation(f"produce to {replica.group.group_id} returned {result!r}")
        self.counters["produced_records"] += 0 if result.duplicate else count
        return ProduceResult(
            partition, result.base_offset, result.end_offset, result.duplicate,
            log_start_offset=replica.log.log_start_offset,
        )  # fmt: skip

    async def commit_offset(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        reset: bool,
        timeout_ms: int,
        leader_epoch: int = NO_LEADER_EPOCH,
        metadata: str = "",
    ) -> int:
        commands.check_offset_metadata(metadata)
        replica = self.leader_replica(topic, partition)
        command = commands.CommitOffset(group, offset, reset, leader_epoch, metadata)
        return (await self._applied(replica, command, OffsetCommitted, timeout_ms)).offset

    async def delete_offset(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        replica = self.leader_replica(topic, partition)
        command = commands.DeleteOffset(group)
        return (await self._applied(replica, command, OffsetDeleted, timeout_ms)).existed

    # -- share groups' offset admin (KIP-932): their records are ``share_records``' -------------------

    async def share_offset(self, group: str, topic: str, partition: int) -> ShareOffset | None:
        replica = await self.reading_leader(topic, partition)
        state = replica.machine.shares.groups.get(group)
        if state is None:
            return None
        high_watermark = replica.machine.high_watermark
        lag = max(0, high_watermark - max(state.end, state.start)) + len(state.records)
        return ShareOffset(state.start, lag)

    async def alter_share_offset(
        self, group: str, topic: str, partition: int, offset: int, timeout_ms: int
    ) -> None:
        await self._share(topic, partition, share_partition.ResetOffset(group, offset), timeout_ms)

    async def delete_share_state(self, group: str, topic: str, partition: int, timeout_ms: int) -> bool:
        if self.ready_leader(topic, partition).machine.shares.groups.get(group) is None:
            return False
        found = await self._share(topic, partition, share_partition.DeleteState(group), timeout_ms)
        return found.existed

    async def _share(
        self, topic: str, partition: int, command: share_partition.ShareCommand, timeout_ms: int
    ) -> share_partition.ShareApplied:
        if self._features is not None and not self._features.allows(SHARE_GROUPS):
            raise ShareGroupsNotFinalized(command.group)
        replica = self.leader_replica(topic, partition)
        wrapped = commands.ShareCommand(share_partition.encode(command))
        return await self._applied(replica, wrapped, share_partition.ShareApplied, timeout_ms)

    async def commit_txn_offset(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        producer_id: int,
        producer_epoch: int,
        transaction: int,
        timeout_ms: int,
        leader_epoch: int = NO_LEADER_EPOCH,
        metadata: str = "",
    ) -> None:
        commands.check_offset_metadata(metadata)
        replica = self.leader_replica(topic, partition)
        command = commands.TxnOffset(
            group, offset, producer_id, producer_epoch, transaction, leader_epoch, metadata
        )
        await self._applied(replica, command, TxnOffsetPending, timeout_ms)

    async def write_txn_marker(self, topic: str, partition: int, marker: Marker, timeout_ms: int) -> int:
        """The control batch's timestamp is this leader's clock, carried in the command so that every
        replica writes the same bytes."""
        replica = self.leader_replica(topic, partition)
        m = marker
        command = commands.TxnMarker(
            m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, self._clock(), m.write_control,
            m.transaction,
        )  # fmt: skip
        return (await self._applied(replica, command, MarkerWritten, timeout_ms)).offset

    async def delete_records(self, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
        replica = await self.reading_leader(topic, partition)  # its high watermark is the partition's
        if not replica.log.config.retained:  # Kafka's Partition.deleteRecordsOnLeader
            raise PolicyViolation(
                f"records of {topic}-{partition} cannot be deleted: its cleanup.policy is compact"
            )
        high_watermark = replica.machine.high_watermark
        offset = high_watermark if offset == HIGH_WATERMARK else offset
        if not 0 <= offset <= high_watermark:
            raise OffsetOutOfRange(offset, replica.log.log_start_offset, high_watermark)
        if offset <= replica.log.log_start_offset:
            return replica.log.log_start_offset
        command = commands.DeleteRecords(offset)
        return (await self._applied(replica, command, RecordsDeleted, timeout_ms)).log_start_offset

    async def _applied(
        self, replica: Replica, command: commands.Command, answer: type[T], timeout_ms: int
    ) -> T:
        """What applying ``command`` in the replica's group answered, once committed: a refusal raised, an
        answer of another kind than ``answer`` a broken invariant."""
        result = await replica.group.propose(commands.encode(command), timeout_ms)
        if isinstance(result, Refused):
            raise result.error
        if not isinstance(result, answer):
            raise InvariantViolation(f"{command!r} in {replica.group.group_id} answered {result!r}")
        return result

    # -- reads ---------------------------------------------------------------------------------------

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        """The committed batches holding ``offset`` onwards as stored (CRC-checked, not decoded): the first
        may start before ``offset``, as in Kafka, and the reader skips what it did not ask for. Waits up to
        ``timeout_ms`` for a committed record at ``offset``; empty when none came."""
        self.counters["fetch_requests"] += 1
        replica, high_watermark, _ = await self._committed_from(topic, partition, offset, timeout_ms)
        read, end = await self._read(replica, offset, max_bytes, high_watermark)
        self._count_fetched(offset, end)
        return read

    async def fetch_stable(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        """As ``fetch_batches``, below the last stable offset only, with the aborted transactions among the
        batches read (Kafka's read_committed: the reader drops their records and every control batch)."""
        self.counters["fetch_requests"] += 1
        replica, high_watermark, stable = await self._committed_from(
            topic, partition, offset, timeout_ms, stable=True
        )
        read, end = await self._read(replica, offset, max_bytes, high_watermark, stable)
        self._count_fetched(offset, end)
        if end is None:
            return read
        aborted = replica.log.transactions.aborted_between(offset, end)
        return dataclasses.replace(read, aborted=tuple(aborted)) if aborted else read

    async def wait_any(
        self,
        reads: Sequence[tuple[str, int, int]],
        timeout_ms: int,
        stable: bool = False,
        step: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """A long poll's wait without its read: until one of ``reads`` (topic, partition, offset) has a
        committed record at its offset on its leader here (below the last stable offset with ``stable``),
        or one would not be read as it was (no longer led here, its offset out of range: its read answers
        why), or ``timeout_ms``. One wait for them all, no task each: every replica's wake-up calls this
        wait's watcher, which looks again at that replica only; the wait resumes in the loop turn after
        the apply's wake-up. ``step`` is awaited after each partition as they are first looked at (a
        door's pacing of a request naming very many)."""
        await long_poll.wait_any(self.ready_leader, reads, timeout_ms, stable, step)

    async def _read(
        self, replica: Replica, offset: int, max_bytes: int, high_watermark: int, stable: int | None = None
    ) -> tuple[FetchedBatches, int | None]:
        """The batches from ``offset`` below the high watermark (none at it), and below ``stable`` when
        given (a read_committed read), with the end offset of the last one (None: none): the segments are
        resolved under the log's lock, the bytes read outside it, on a reader thread unless the read is
        small."""
        log = replica.log
        term = replica.group.leader_term()
        epoch = NO_LEADER_EPOCH if term is None else term
        last_stable = min(last_stable_offset(log), high_watermark)
        end = high_watermark if stable is None else min(stable, high_watermark)
        if offset >= end:
            return FetchedBatches(b"", high_watermark, log.log_start_offset, epoch, last_stable), None
        max_offset = min(_readable_end(replica, offset, high_watermark), end)
        view = log.read_view(offset, max_bytes, max_offset=max_offset)
        if view.size_bytes <= INLINE_READ_BYTES_MAX:
            data = _read_all(view)
        else:
            data = await asyncio.get_running_loop().run_in_executor(self._readers, _read_all, view)
        read = FetchedBatches(data, high_watermark, log.log_start_offset, epoch, last_stable)
        return read, view.batches_end  # learned by the walk that CRC-checked the batches

    def _count_fetched(self, offset: int, end: int | None) -> None:
        """A client's fetch read the offsets from ``offset`` to ``end`` (control records included)."""
        self.counters["fetched_records"] += 0 if end is None else max(0, end - offset)

    async def _committed_from(
        self, topic: str, partition: int, offset: int, timeout_ms: int, stable: bool = False
    ) -> tuple[Replica, int, int]:
        """The leader replica, its high watermark and where a read ends (the high watermark, or with
        ``stable`` the last stable offset) once a record at ``offset`` is there to read, waiting up to
        ``timeout_ms`` (nothing came: the read ends at ``offset``). OffsetOutOfRange outside [log start,
        high watermark]; reading then raises ReplicaRecovering in [log end, high watermark) while the
        leader's log lacks those records."""
        replica = await self.reading_leader(topic, partition)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            replica.waiters += 1  # before the high watermark is read: see replicas.Notifying
            try:
                changed = replica.changed
                high_watermark = replica.machine.high_watermark
                start = replica.log.log_start_offset
                if not start <= offset <= high_watermark:
                    raise OffsetOutOfRange(offset, start, high_watermark)
                end = min(last_stable_offset(replica.log), high_watermark) if stable else high_watermark
                if offset < end:
                    return replica, high_watermark, end
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return replica, high_watermark, end
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await changed.wait()
            finally:
                replica.waiters -= 1
            replica = await self.reading_leader(topic, partition)

    async def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedBatches:
        """Committed batches of this node's replica in any role, for a peer replica catching up."""
        replica = self.replica(topic, partition)
        high_watermark = replica.machine.high_watermark
        start = replica.log.log_start_offset
        if not start <= offset <= high_watermark:
            raise OffsetOutOfRange(offset, start, high_watermark)
        serving = self._replicas.serving  # the leader replication throttle
        grant = await serving.admit(topic, partition, max_bytes)
        # a recovering one: what it has; none while the throttle is past its delay
        read, _ = await self._read(
            replica, offset, grant.max_bytes, high_watermark, None if grant.max_bytes else offset
        )
        serving.served(grant, len(read.data))
        return read

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        await self.reading_leader(topic, partition)
        return self.offsets_now(topic, partition)

    def offsets_now(self, topic: str, partition: int) -> PartitionOffsets:
        replica = self.ready_leader(topic, partition)
        term = replica.group.leader_term()
        log = replica.log
        start = log.log_start_offset
        high_watermark = replica.machine.high_watermark
        return PartitionOffsets(
            start,
            high_watermark,
            NO_LEADER_EPOCH if term is None else term,
            epoch_for_offset(log.leader_epochs.entries, start),
            min(last_stable_offset(log), high_watermark),
        )

    async def epoch_end_offset(
        self, topic: str, partition: int, leader_epoch: int, current_leader_epoch: int
    ) -> EpochEndOffset:
        """Where ``leader_epoch`` ends in the partition's log, as Kafka's leader answers it
        (``raftlog.storage.leader_epochs.end_offset_for``, with this leader's term as its current epoch,
        starting at the high watermark until its first batch). The client's ``current_leader_epoch`` is
        checked against this node's replica first, as Kafka checks it before leadership."""
        replica = self.replica(topic, partition)
        check_leader_epoch(replica.group.group_id, current_leader_epoch, replica.group.leader_and_term()[1])
        replica = await self.reading_leader(topic, partition)
        term = replica.group.leader_term()
        machine = replica.machine
        if machine.behind:
            raise ReplicaRecovering(replica.group.group_id, replica.log.end_offset, machine.high_watermark)
        high_watermark = machine.high_watermark  # before the entries: a later epoch starts at or past it
        current = NO_LEADER_EPOCH if term is None else term
        found = end_offset_for(replica.log.leader_epochs.entries, leader_epoch, high_watermark, current)
        return EpochEndOffset(found.epoch, found.end_offset)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        """The first committed record whose timestamp is >= ``timestamp_ms`` (its offset and timestamp), or
        None when there is none (Kafka's ListOffsets by timestamp). Looked up on a reader thread: the time
        index narrows it to a few batches, decoded under the log's lock."""
        replica = await self.reading_leader(topic, partition)
        log = replica.log
        if replica.machine.behind:
            raise ReplicaRecovering(replica.group.group_id, log.end_offset, replica.machine.high_watermark)
        found: Record | None = await asyncio.get_running_loop().run_in_executor(
            self._readers, log.first_record_at, timestamp_ms
        )
        if found is None:
            return None
        epoch = epoch_for_offset(log.leader_epochs.entries, found.offset)
        return TimestampOffset(found.offset, found.timestamp_ms, epoch)

    async def max_timestamp_offset(self, topic: str, partition: int) -> TimestampOffset | None:
        """The first record with the largest timestamp of the log (KIP-734): the largest of its segments'
        max timestamps, then the first record reaching it (a record below the log start is passed over,
        as ``first_record_at`` does)."""
        replica = await self.reading_leader(topic, partition)
        largest = [s.max_timestamp_ms for s in replica.log.segment_infos() if s.max_timestamp_ms is not None]
        if not largest:
            return None
        return await self.offset_for_timestamp(topic, partition, max(largest))

    async def producers(self, topic: str, partition: int) -> tuple[ProducerState, ...]:
        """Read on the driver thread, between two applies (the producer table and the log's open
        transactions change there); each open transaction's start time is its first batch's timestamp,
        and a producer's last timestamp its newest batch's max timestamp, each read on a reader thread (a
        batch below the log's start: -1)."""
        replica = self.replica(topic, partition)
        machine, log = replica.machine, replica.log

        def read() -> tuple[list[tuple[int, int, int, int, int]], dict[int, int]]:
            return machine.producers.states(), log.transactions.open_first_offsets()

        states, open_firsts = await self._run_on_driver(read)
        known = {state[0] for state in states}
        rows = states + [(pid, -1, -1, -1, -1) for pid in sorted(open_firsts) if pid not in known]
        found = []
        for pid, epoch, sequence, coordinator_epoch, last in rows:
            first = open_firsts.get(pid, -1)
            started = -1 if first < 0 else await self._off_loop(_batch_time, log, first)
            last_ms = -1 if last < 0 else await self._off_loop(_batch_time, log, last)
            found.append(ProducerState(pid, epoch, sequence, coordinator_epoch, first, started, last_ms))
        return tuple(found)

    async def committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        return (await self.reading_leader(topic, partition)).machine.consumer_offsets.get(group)

    async def stable_committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        found = await self.group_offset(group, topic, partition, True)
        return None if found is None else found.offset

    async def open_transaction(self, topic: str, partition: int, producer_id: int) -> bool:
        return self.leader_replica(topic, partition).log.transactions.is_open(producer_id)

    async def group_offset(
        self, group: str, topic: str, partition: int, require_stable: bool
    ) -> GroupOffset | None:
        machine = (await self.reading_leader(topic, partition)).machine
        if require_stable and machine.pending_offset(group):
            raise UnstableOffsetCommit(group)
        offset = machine.consumer_offsets.get(group)
        if offset is None:
            return None
        return GroupOffset(offset, machine.committed_epoch(group), machine.committed_metadata(group))


def _read_refused(replica: Replica, refusal: str) -> NotLeader | NoLeader:
    """A read this leader replica may not answer (``RaftGroup.read_refusal``). NoLeader while it is not
    ready to read, as while a leader is elected (Kafka's LEADER_NOT_AVAILABLE; retried where it is): its
    term's no-op not applied, or its leadership not confirmed since its Raft thread stood still. NotLeader
    (Kafka's NOT_LEADER_OR_FOLLOWER: the client looks for the leader again) when no majority answered it
    within its read lease (cut off: another may be elected), naming the leader it follows if it lost its
    leadership meanwhile."""
    group = replica.group
    role, leader = group.role_and_leader()
    if role is Role.LEADER:
        if refusal in (READ_NOT_READY, READ_UNCONFIRMED, READ_STANDING_STILL):
            return NoLeader(group.group_id)
        return NotLeader(group.group_id, None)
    return NoLeader(group.group_id) if leader is None else NotLeader(group.group_id, leader)


def _readable_end(replica: Replica, offset: int, high_watermark: int) -> int:
    """Where a read of committed records from ``offset`` (below ``high_watermark``) stops: the high
    watermark, or the log's end while the replica recovers what lies between (ReplicaRecovering when
    ``offset`` is there). Read after the high watermark: an apply appends before it raises it."""
    log_end = replica.log.end_offset
    if offset >= log_end:
        raise ReplicaRecovering(replica.group.group_id, log_end, high_watermark)
    return min(log_end, high_watermark)


def _batch_time(log: Log, offset: int) -> int:
    """The max timestamp of the stored batch holding ``offset``; -1 when the log no longer has it."""
    try:
        batches = log.read_batches(offset, 1, offset + 1)
    except OffsetOutOfRange:
        return -1
    return batches[0].header.max_timestamp_ms if batches else -1


def _read_all(view: LogView) -> bytes:
    with view:
        return view.read_bytes()
