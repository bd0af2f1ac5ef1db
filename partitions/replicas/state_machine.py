"""The replicated state machine of one partition: committed commands -> the partition's segmented log.

Deterministic: every replica applies the same committed entries in the same order and ends with the same
log bytes, the same producer table and the same committed consumer offsets. No clock, no randomness.

The log holds only committed batches (entries are applied after they commit), so the high watermark is the
applied end offset. After a restart the Raft journal replays entries from the last snapshot while the log
already holds their batches: a replayed produce is compared byte for byte with the batch already at that
offset and skipped, so nothing is written twice; a mismatch is a broken invariant and stops the group.

Behind: a snapshot installed from the leader may be ahead of the local log (the leader compacted its
journal past what this replica holds). ``restore`` then takes the metadata only and the machine is
*behind*, ``log.end_offset < high_watermark``, until ``partitions.replicas.recovery`` has copied the missing
batches from peer replicas (off the driver thread). Apply stays deterministic meanwhile: a produce whose
offset is the log's end is appended, one below it is compared as in replay, and one above it is not
written (it is committed: the peers hold it, and recovery copies it) while everything else (the high
watermark, dedup windows, consumer offsets, groups) advances exactly as on every other replica. Two
writers, one position each, both under the log's lock: apply appends only at the high watermark and only
when the log has reached it; recovery (``append_recovered``) appends only below the high watermark, at
the log's end. So the log never gets ahead of the high watermark, and neither writer can take the
other's offset. While behind, ``snapshot`` answers None: a snapshot must not claim records the log lacks.

A committed batch is trusted, not checked again: its bytes and records were checked once, where they
entered (the leader's ``check_producer_batch`` of a producer's batch, or ``encode_batch`` of records it
encoded, before proposing); they reach every other replica inside an authenticated Raft frame (AES-GCM,
``raftlog.consensus.wire``) and lie on disk under the journal's CRC, which a replay checks. Apply only
reads the header's frame, stamps the offset and term (outside the CRC), and writes the batch's bytes from
the entry itself. Reads check the CRC of what they return.

Deleted records (Kafka's DeleteRecords): a committed ``DeleteRecords`` moves the log's start offset up on
every replica (``Log.advance_start``: the start offset is written first, then the segments wholly below it
go) and is kept in the snapshot, so a replica that installs one moves its start as well. The start may lie
inside a batch, which stays and is served whole, as Kafka serves it; a replica behind its peers whose start
passes its log's end is restarted there by recovery, which then copies that batch whole.

Compacted logs (``raftlog.storage.cleaner``): each replica's cleaner rewrites batches below its log's
``compacted_below`` (recorded, fsynced, before it rewrites any), keeping every kept record's offset; a
replayed produce below it is passed over, not compared, as its batch was rewritten on purpose. Recovery
records the same before it appends a peer's compacted batches.

Transactions (docs/decisions/0019-transactions.md): a transactional producer's batches are applied as any
idempotent producer's; the log follows which transactions are open (``raftlog.storage.transactions``). A
``TxnMarker`` ends one: an epoch older than the producer's is refused, a newer one becomes the producer's
(fencing the older), a control batch is appended when the producer wrote here in the transaction (its bytes
a function of the command alone), and the producer's pending transactional offsets (``TxnOffset``) become
the group's committed offsets (commit) or go (abort). Pending offsets are kept in the snapshot, and so is,
per producer, the ordinal of the last transaction a marker ended here: a ``TxnOffset`` of that transaction
or an earlier one (a request that outlived its transaction, applied after the marker) is refused, or it
would wait pending and be committed by the producer's next transaction. A transactional batch is bounded
alike (``Produce.transaction``, the least ordinal its transaction can have, as its leader checked it: the
coordinator's, or one past the last ended here while its transaction was open here): a batch checked
before its transaction ended but applied after the marker (a Kafka producer's request its client timed out
and aborted, still on its way) is refused, or it would open a transaction that the producer's next one,
at the same epoch (transaction version 1), commits: a read_committed reader would read an aborted record.
This is what Kafka's verification guard (KIP-890) does on its leader.

Journals written before the upgrade: a ``Produce`` entry proposed by an older raftlog carries a batch of
its own format (magic 1). Apply converts it to Kafka RecordBatch v2 first (``legacy_batch.convert``, a
pure function: every replica gets the same bytes, those ``raftlog log migrate`` wrote for the batch once
stamped with its offset and term), then checks, dedups, compares and appends it as any other. One that
cannot be converted is refused like any malformed batch, on every replica alike.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import msgpack

from partitions.commands import (
    NO_LEADER_EPOCH,
    NO_TRANSACTION,
    Barrier,
    Command,
    CommitOffset,
    DeleteOffset,
    DeleteRecords,
    GroupCommand,
    Produce,
    SchemaCommand,
    ShareCommand,
    TxnCommand,
    TxnMarker,
    TxnOffset,
    decode,
)
from partitions.errors import (
    CoordinatorFenced,
    InvalidCommand,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerFenced,
    SequenceTooOld,
)
from partitions.groups.share.partition import ShareResult, ShareTable
from partitions.groups.state import GroupResult, GroupTable
from partitions.registry import table as registry_table
from partitions.registry.table import Done, Refusal, SchemaTable
from partitions.replicas.dedup import Appended, ProducerTable
from partitions.transactions.state import TransactionTable, TxnResult
from raftlog.errors import InvariantViolation, check
from raftlog.packing import unpack_versioned
from raftlog.storage import legacy_batch
from raftlog.storage.batch import BatchFormatError, BatchHeader, framed, rebase
from raftlog.storage.errors import DiskFull, InvalidRecord, OffsetOutOfRange
from raftlog.storage.log import AppendResult, Log
from raftlog.storage.transactions import encode_control_batch

SNAPSHOT_VERSION = 1
TXN_PRODUCERS_MAX = 10_000  # producers with pending transactional offsets in one partition
TXN_GROUPS_MAX = 100  # groups one producer's open transaction commits offsets of in one partition
TXN_ENDED_MAX = 10_000  # producers whose last ended transaction a partition remembers


@dataclass(frozen=True, slots=True)
class Produced:
    base_offset: int
    end_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Refused:
    """A deterministic refusal: every replica refuses the same entry the same way; nothing is written."""

    error: (
        InvalidCommand
        | SequenceTooOld
        | ProducerFenced
        | OutOfOrderSequence
        | InvalidRecord
        | OffsetOutOfRange
        | InvalidTxnState
        | CoordinatorFenced
    )


@dataclass(frozen=True, slots=True)
class OffsetCommitted:
    group: str
    offset: int


@dataclass(frozen=True, slots=True)
class OffsetDeleted:
    group: str
    existed: bool


@dataclass(frozen=True, slots=True)
class RecordsDeleted:
    log_start_offset: int  # this replica's, after the delete


@dataclass(frozen=True, slots=True)
class MarkerWritten:
    offset: int  # the control batch's (-1: none written, the producer wrote nothing here)


@dataclass(frozen=True, slots=True)
class TxnOffsetPending:
    group: str
    offset: int


ApplyResult = (
    Produced
    | Refused
    | OffsetCommitted
    | OffsetDeleted
    | RecordsDeleted
    | MarkerWritten
    | TxnOffsetPending
    | GroupResult
    | TxnResult
    | ShareResult
    | Done
    | Refusal
    | None
)


class PartitionStateMachine:
    """Implements ``raftlog.consensus.interface.StateMachine`` for one partition replica."""

    def __init__(
        self,
        log: Log,
        producers: ProducerTable | None = None,
        on_behind: Callable[[], None] | None = None,
    ) -> None:
        """``on_behind()`` is called (on the driver thread, from ``restore``) when the machine is left
        behind its log: its owner starts the recovery that copies the missing batches."""
        self.log = log
        self._on_behind = on_behind
        self.producers = producers or ProducerTable()
        # replaced whole by each commit (driver thread), never changed in place: read on the event loop
        self.consumer_offsets: Mapping[str, int] = MappingProxyType({})
        # the leader epoch committed with a group's offset, when the commit named one (as above)
        self.consumer_offset_epochs: Mapping[str, int] = MappingProxyType({})
        # offsets committed in open transactions, producer id -> group -> offset (replaced whole, as above)
        self.txn_offsets: Mapping[int, Mapping[str, int]] = MappingProxyType({})
        # (producer id, group) -> the leader epoch of its pending offset, when named (replaced whole)
        self.txn_offset_epochs: Mapping[tuple[int, str], int] = MappingProxyType({})
        # the metadata strings committed with offsets (Kafka's ``committed_metadata``), only the non-empty
        self.consumer_offset_metadata: Mapping[str, str] = MappingProxyType({})
        self.txn_offset_metadata: Mapping[tuple[int, str], str] = MappingProxyType({})
        # producer id -> the ordinal of the last transaction a marker ended here (the least recently ended
        # forgotten past TXN_ENDED_MAX)
        self.txn_ended: OrderedDict[int, int] = OrderedDict()
        self.groups = GroupTable()  # consumer groups coordinated here (``__consumer_groups`` partitions)
        self.transactions = TransactionTable()  # transactional ids coordinated here (``__transactions``)
        self.shares = ShareTable()  # share groups' records of this partition (KIP-932)
        self.schemas = SchemaTable()  # the schema registry's table (``__schemas``), replaced whole
        self.applied_index = 0
        # Offsets below the high watermark are committed and applied. Without a snapshot the journal
        # replays from its first entry, which produced offset 0.
        self.high_watermark = 0
        # The highest offset a DeleteRecords moved the log's start to: the same on every replica (retention,
        # each replica's own, may have moved its log's start further)
        self.deleted_below = 0
        # A restore left the log behind, and recovery has not confirmed it caught up (recovered): only
        # then may an apply find the log's end below its offset.
        self._left_behind = False

    # -- apply ---------------------------------------------------------------------------------------

    def apply(self, index: int, term: int, command: bytes | memoryview) -> ApplyResult:
        """``DiskFull``: no room in the log for the entry's batch, and nothing of the entry applied (the
        core applies the same entry again later: ``StateMachine``)."""
        if index <= self.applied_index:  # on every apply: not check(), which formats its message first
            raise InvariantViolation(f"apply of index {index} after index {self.applied_index}")
        previous = self.applied_index
        self.applied_index = index
        try:
            decoded = decode(command)
        except InvalidCommand as exc:
            return Refused(exc)
        try:
            return self._apply(decoded, term)
        except DiskFull:
            # a produce, marker or records delete changes nothing before its write succeeds (its append
            # to the log, the start offset file)
            self.applied_index = previous
            raise

    def _apply(self, decoded: Command, term: int) -> ApplyResult:
        if isinstance(decoded, Produce):
            return self._produce(decoded.batch, term, decoded.contiguous, decoded.transaction)
        if isinstance(decoded, CommitOffset):
            return self._commit_offset(decoded)
        if isinstance(decoded, GroupCommand):
            return self.groups.apply(decoded.payload)
        if isinstance(decoded, TxnCommand):
            return self.transactions.apply(decoded.payload)
        if isinstance(decoded, ShareCommand):
            try:
                return self.shares.apply(decoded.payload)
            except InvalidCommand as exc:
                return Refused(exc)
        if isinstance(decoded, SchemaCommand):
            try:
                self.schemas, done = self.schemas.apply(registry_table.decode(decoded.payload))
            except InvalidCommand as exc:
                return Refused(exc)
            return done
        if isinstance(decoded, DeleteRecords):
            return self._delete_records(decoded.offset)
        if isinstance(decoded, TxnMarker):
            return self._txn_marker(decoded, term)
        if isinstance(decoded, TxnOffset):
            return self._txn_offset(decoded)
        if isinstance(decoded, DeleteOffset):
            offsets = dict(self.consumer_offsets)
            existed = offsets.pop(decoded.group, None) is not None
            self.consumer_offsets = MappingProxyType(offsets)
            self._set_details(decoded.group, NO_LEADER_EPOCH, "")
            return OffsetDeleted(decoded.group, existed)
        check(isinstance(decoded, Barrier), f"unhandled command {decoded!r}")
        return None

    def _produce(
        self, batch: bytes | memoryview, term: int, contiguous: bool, transaction: int = NO_TRANSACTION
    ) -> Produced | Refused:
        if legacy_batch.is_legacy(batch):  # a journal entry from before the upgrade (module docstring)
            try:
                batch = legacy_batch.convert(batch)
            except (BatchFormatError, InvalidRecord) as exc:
                return Refused(InvalidRecord(f"malformed batch of format v1: {exc}"))
        try:  # trusted as committed: checked where it entered (module docstring), framed here only
            header = framed(batch)
        except BatchFormatError as exc:
            return Refused(InvalidRecord(f"malformed batch: {exc}"))
        producer_id, sequence = header.producer_id, header.sequence
        epoch = header.producer_epoch or 0  # None: a batch of format v1, which had epoch 0 only
        if producer_id is not None and sequence is not None:
            decision = self.producers.decide(producer_id, epoch, sequence, header.span, contiguous)
            if isinstance(decision, Appended):  # a retry of a batch applied before: its offsets again
                return Produced(decision.base_offset, decision.end_offset, duplicate=True)
            if decision is not None:
                return Refused(decision)
            if transaction != NO_TRANSACTION and self.transaction_ended(producer_id) >= transaction:
                return Refused(
                    InvalidTxnState(
                        f"producer {producer_id}: the transaction this batch was checked in (ordinal "
                        f"{transaction} or later) has ended here already: a request that outlived it"
                    )
                )
        base_offset = self.high_watermark
        end_offset = base_offset + header.span
        self._write(batch, header, term, base_offset)
        self.high_watermark = end_offset
        if producer_id is not None and sequence is not None:
            self.producers.record(producer_id, epoch, sequence, base_offset, end_offset)
        return Produced(base_offset, end_offset)

    def _write(self, batch: bytes | memoryview, header: BatchHeader, term: int, base_offset: int) -> None:
        log = self.log
        log_end = log.end_offset  # read once: recovery may append below base_offset meanwhile, never at it
        if log_end == base_offset:
            # The committed entry is in this replica's Raft journal (fsynced on a majority before the
            # commit); snapshot() flushes the log before compaction drops that entry, and a replay after a
            # crash appends whatever tail the log lost. So no fsync per apply.
            # The leader checked every record before proposing (encode_batch or check_producer_batch).
            result = log.append_prepared(
                batch,
                term,
                enforce_size_limit=False,
                durable_elsewhere=True,
                checked_records=True,
                verified_header=header,
            )
            if result.base_offset != base_offset:
                raise InvariantViolation(
                    f"{log.directory}: appended at {result.base_offset}, expected {base_offset}"
                )
            return
        if log_end < base_offset:
            # Behind (see the module docstring): committed, held by the peers, copied by recovery. The
            # high watermark was already above the log's end before this entry, and only restore puts it
            # there; anything else would be a log that lost acknowledged records.
            if not self._left_behind:
                raise InvariantViolation(
                    f"{log.directory}: log ends at {log_end}, below the applied end offset {base_offset}, "
                    "and no snapshot left it behind"
                )
            return
        if base_offset < log.log_start_offset:
            return  # replayed entry whose batch retention already deleted
        if base_offset < log.compacted_below:
            return  # replayed entry whose batch compaction may have rewritten (raftlog.storage.cleaner)
        existing = log.read_batches(base_offset, max_bytes=1)
        expected = rebase(batch, base_offset, term)
        check(
            len(existing) == 1 and existing[0].data == expected,
            f"{log.directory}: replayed entry at offset {base_offset} differs from the batch on disk",
        )

    def transaction_ended(self, producer_id: int) -> int:
        """The ordinal of the producer's last transaction a marker ended here (-1: none remembered). Read
        on the event loop too, while apply changes it: a read racing a marker's gives the lower value (the
        entry is popped, then set higher), which bounds a batch more, never less."""
        return self.txn_ended.get(producer_id, NO_TRANSACTION)

    def _txn_marker(self, marker: TxnMarker, term: int) -> MarkerWritten | Refused:
        producer_id, epoch = marker.producer_id, marker.producer_epoch
        current = self.producers.epoch_of(producer_id)
        if current is not None and epoch < current:
            return Refused(ProducerFenced(producer_id, epoch, current))
        coordinator_epoch = self.producers.coordinator_epoch_of(producer_id)
        if marker.coordinator_epoch < coordinator_epoch:  # a deposed coordinator's marker, still in flight
            return Refused(CoordinatorFenced(producer_id, marker.coordinator_epoch, coordinator_epoch))
        offset = -1
        if marker.write_control:
            batch = encode_control_batch(
                producer_id, epoch, marker.commit, marker.coordinator_epoch, marker.timestamp_ms
            )
            offset = self.high_watermark
            self._write(batch, framed(batch), term, offset)
            self.high_watermark = offset + 1
        self.producers.bump(producer_id, epoch, marker.coordinator_epoch)
        self.txn_ended[producer_id] = max(
            marker.transaction, self.txn_ended.pop(producer_id, marker.transaction)
        )
        while len(self.txn_ended) > TXN_ENDED_MAX:
            self.txn_ended.popitem(last=False)
        pending = self.txn_offsets.get(producer_id)
        if pending is not None:
            others = {p: groups for p, groups in self.txn_offsets.items() if p != producer_id}
            self.txn_offsets = MappingProxyType(others)
            epochs, metadata = self.txn_offset_epochs, self.txn_offset_metadata
            self.txn_offset_epochs = MappingProxyType(
                {k: e for k, e in epochs.items() if k[0] != producer_id}
            )
            if metadata:
                self.txn_offset_metadata = MappingProxyType(
                    {k: m for k, m in metadata.items() if k[0] != producer_id}
                )
            if marker.commit:  # as Kafka: a transaction's commit may move an offset back
                self.consumer_offsets = MappingProxyType({**self.consumer_offsets, **pending})
                for group in pending:
                    key = (producer_id, group)
                    self._set_details(group, epochs.get(key, NO_LEADER_EPOCH), metadata.get(key, ""))
        return MarkerWritten(offset)

    def _txn_offset(self, command: TxnOffset) -> TxnOffsetPending | Refused:
        producer_id, epoch = command.producer_id, command.producer_epoch
        current = self.producers.epoch_of(producer_id)
        if current is not None and epoch < current:
            return Refused(ProducerFenced(producer_id, epoch, current))
        ended = self.txn_ended.get(producer_id)
        if ended is not None and command.transaction <= ended:
            return Refused(
                InvalidTxnState(
                    f"producer {producer_id}: its transaction {command.transaction} has ended here already"
                )
            )
        pending = dict(self.txn_offsets.get(producer_id, {}))
        if producer_id not in self.txn_offsets and len(self.txn_offsets) >= TXN_PRODUCERS_MAX:
            return Refused(InvalidTxnState(f"{TXN_PRODUCERS_MAX} producers hold pending offsets here"))
        if command.group not in pending and len(pending) >= TXN_GROUPS_MAX:
            return Refused(
                InvalidTxnState(f"a transaction may commit offsets of {TXN_GROUPS_MAX} groups here")
            )
        pending[command.group] = command.offset
        self.txn_offsets = MappingProxyType({**self.txn_offsets, producer_id: MappingProxyType(pending)})
        key = (producer_id, command.group)
        epochs = {k: e for k, e in self.txn_offset_epochs.items() if k != key}
        if command.leader_epoch != NO_LEADER_EPOCH:
            epochs[key] = command.leader_epoch
        self.txn_offset_epochs = MappingProxyType(epochs)
        if command.metadata or key in self.txn_offset_metadata:
            metadata = {k: m for k, m in self.txn_offset_metadata.items() if k != key}
            if command.metadata:
                metadata[key] = command.metadata
            self.txn_offset_metadata = MappingProxyType(metadata)
        return TxnOffsetPending(command.group, command.offset)

    def pending_offset(self, group: str) -> bool:
        """Whether an open transaction holds an offset of ``group`` here (event loop: a snapshot read)."""
        return any(group in groups for groups in self.txn_offsets.values())

    def _delete_records(self, offset: int) -> RecordsDeleted | Refused:
        """Records below ``offset`` go (the leader checked that it is at most the high watermark, which has
        only grown since). On a replica behind its peers the start may pass the log's end: recovery then
        restarts the log there."""
        if offset > self.high_watermark:
            return Refused(OffsetOutOfRange(offset, self.deleted_below, self.high_watermark))
        self.log.advance_start(offset)
        self.deleted_below = max(self.deleted_below, offset)
        return RecordsDeleted(self.log.log_start_offset)

    def _commit_offset(self, command: CommitOffset) -> OffsetCommitted:
        current = self.consumer_offsets.get(command.group)
        group = command.group
        if command.reset or current is None or command.offset > current:
            self.consumer_offsets = MappingProxyType({**self.consumer_offsets, group: command.offset})
            self._set_details(group, command.leader_epoch, command.metadata)
        elif command.offset == current:  # the same offset: its metadata now, its epoch if now known
            epoch = command.leader_epoch
            if epoch == NO_LEADER_EPOCH:
                epoch = self.committed_epoch(group)
            self._set_details(group, epoch, command.metadata)
        return OffsetCommitted(group, self.consumer_offsets[group])

    def _set_details(self, group: str, leader_epoch: int, metadata: str) -> None:
        """The leader epoch (NO_LEADER_EPOCH: none) and metadata ("": none) stored with ``group``'s
        committed offset."""
        if self.consumer_offset_epochs.get(group, NO_LEADER_EPOCH) != leader_epoch:
            epochs = {g: e for g, e in self.consumer_offset_epochs.items() if g != group}
            if leader_epoch != NO_LEADER_EPOCH:
                epochs[group] = leader_epoch
            self.consumer_offset_epochs = MappingProxyType(epochs)
        if self.consumer_offset_metadata.get(group, "") != metadata:
            kept = {g: m for g, m in self.consumer_offset_metadata.items() if g != group}
            if metadata:
                kept[group] = metadata
            self.consumer_offset_metadata = MappingProxyType(kept)

    def committed_metadata(self, group: str) -> str:
        """The metadata committed with ``group``'s offset (event loop: a snapshot read); "": none."""
        return self.consumer_offset_metadata.get(group, "")

    def committed_epoch(self, group: str) -> int:
        """The leader epoch committed with ``group``'s offset (event loop: a snapshot read); -1: none."""
        return self.consumer_offset_epochs.get(group, NO_LEADER_EPOCH)

    # -- behind: recovery ---------------------------------------------------------------------------

    @property
    def behind(self) -> bool:
        """The log lacks committed records below the high watermark (recovery is copying them)."""
        return self.log.end_offset < self.high_watermark

    def append_recovered(self, batch: bytes, header: BatchHeader) -> AppendResult | None:
        """Recovery (any thread): append a committed batch copied from a peer replica, exactly as it came
        (``header``: what ``verify`` returned for it), if it starts at the log's end and ends at or below
        the high watermark; None, and nothing written, otherwise (apply appends from the high watermark
        on). Race-free with apply: while the log's end is below the high watermark, apply writes nothing,
        and this writes nothing at or past it (the high watermark only grows).

        No fsync of its own (the caller flushes once per chunk): what a crash takes back is fetched
        again, since the installed snapshot stays this replica's until a snapshot after the recovery,
        which flushes the log first."""
        log = self.log
        if header.base_offset != log.end_offset or header.end_offset > self.high_watermark:
            return None
        return log.append_batch(
            batch, enforce_size_limit=False, verified_header=header, durable_elsewhere=True
        )

    def restart_log_at(self, offset: int) -> bool:
        """Recovery (any thread): the peers' logs start at ``offset``, after this log's end (retention
        deleted what lies between): restart the log empty there. Only up to the high watermark, so the log
        never gets ahead of it; False, and nothing done, past it."""
        if offset > self.high_watermark:
            return False
        self.log.truncate_fully_and_start_at(offset)
        return True

    def recovered(self) -> bool:
        """Driver thread (no apply runs meanwhile): whether the log holds everything below the high
        watermark. Once it does, every later apply appends at the log's end, and recovery is over."""
        if self.log.end_offset < self.high_watermark:
            return False
        self._left_behind = False
        return True

    # -- snapshots -----------------------------------------------------------------------------------

    def snapshot(self) -> bytes | None:
        """Metadata only: the log's segments are fsynced first, so the snapshot never covers data that a
        power loss could take back. None while behind: the log lacks records the metadata says were
        applied, and the snapshot would claim them (the core skips the compaction, see StateMachine)."""
        if self.behind:
            return None
        self.log.flush()
        check(
            self.log.durable_end_offset >= self.high_watermark,
            f"{self.log.directory}: durable {self.log.durable_end_offset} < applied {self.high_watermark}",
        )
        packed: bytes = msgpack.packb(
            {
                "v": SNAPSHOT_VERSION,
                "applied_index": self.applied_index,
                "high_watermark": self.high_watermark,
                "deleted_below": self.deleted_below,
                "producers": self.producers.to_rows(),
                "consumer_offsets": dict(self.consumer_offsets),
                # absent from a snapshot of an older release: no epoch known (the keys above unchanged,
                # so an older release reads this one too)
                "consumer_offset_epochs": dict(self.consumer_offset_epochs),
                "groups": self.groups.to_rows(),
                "transactions": self.transactions.to_rows(),
                "txn_ended": [[pid, ordinal] for pid, ordinal in self.txn_ended.items()],
                "txn_offsets": [
                    [pid, group, offset]
                    for pid, groups in self.txn_offsets.items()
                    for group, offset in groups.items()
                ],
                "txn_offset_epochs": [[pid, group, e] for (pid, group), e in self.txn_offset_epochs.items()],
                # absent from a snapshot of a release before committed metadata was kept (and left out
                # while none is, so such a snapshot keeps that release's bytes)
                **(
                    {"consumer_offset_metadata": dict(self.consumer_offset_metadata)}
                    if self.consumer_offset_metadata
                    else {}
                ),
                **(
                    {"txn_offset_metadata": [[p, g, m] for (p, g), m in self.txn_offset_metadata.items()]}
                    if self.txn_offset_metadata
                    else {}
                ),
                # absent from a snapshot of a release before share groups (and left out while none is
                # held, so such a snapshot keeps that release's bytes)
                **({"shares": self.shares.to_rows()} if self.shares.groups else {}),
                # absent from a snapshot of a release before the schema registry (and left out while the
                # table is empty, so such a snapshot keeps that release's bytes)
                **(
                    {"schemas": self.schemas.to_rows()}
                    if self.schemas.next_id > 1 or self.schemas.configs or self.schemas.modes
                    else {}
                ),
            },
            use_bin_type=True,
        )
        return packed

    def restore(self, snapshot: bytes) -> None:
        state = unpack_versioned(snapshot, SNAPSHOT_VERSION, "partition snapshot")
        self.applied_index = int(state["applied_index"])
        self.high_watermark = int(state["high_watermark"])
        self.producers = ProducerTable.from_rows(state["producers"])
        self.consumer_offsets = MappingProxyType(
            {str(k): int(v) for k, v in state["consumer_offsets"].items()}
        )
        self.groups = GroupTable.from_rows(state.get("groups", []))
        # absent: a snapshot from before transactions
        self.transactions = TransactionTable.from_rows(state.get("transactions", []))
        pending: dict[int, dict[str, int]] = {}
        for pid, group, offset in state.get("txn_offsets", []):  # absent: a snapshot from before transactions
            pending.setdefault(int(pid), {})[str(group)] = int(offset)
        self.txn_offsets = MappingProxyType({p: MappingProxyType(g) for p, g in pending.items()})
        # absent: a snapshot from before committed leader epochs were kept
        self.consumer_offset_epochs = MappingProxyType(
            {str(k): int(v) for k, v in state.get("consumer_offset_epochs", {}).items()}
        )
        self.txn_offset_epochs = MappingProxyType(
            {(int(p), str(g)): int(e) for p, g, e in state.get("txn_offset_epochs", [])}
        )
        # absent: a snapshot from before committed metadata was kept, or holding none
        self.consumer_offset_metadata = MappingProxyType(
            {str(k): str(v) for k, v in state.get("consumer_offset_metadata", {}).items()}
        )
        self.txn_offset_metadata = MappingProxyType(
            {(int(p), str(g)): str(m) for p, g, m in state.get("txn_offset_metadata", [])}
        )
        self.txn_ended = OrderedDict((int(p), int(o)) for p, o in state.get("txn_ended", []))
        self.shares = ShareTable.from_rows(state.get("shares", []))  # absent: before share groups
        self.schemas = SchemaTable.from_rows(state.get("schemas", []))  # absent: before the registry
        self.deleted_below = int(
            state.get("deleted_below", 0)
        )  # absent: a snapshot from before DeleteRecords
        self.log.advance_start(self.deleted_below)
        if self.log.end_offset < self.high_watermark:
            # Ahead of the local log (installed from the leader now, or that same snapshot again after a
            # restart mid-recovery: none is taken while behind): the records come from the peers, copied
            # off this thread.
            self._left_behind = True
            if self._on_behind is not None:
                self._on_behind()
