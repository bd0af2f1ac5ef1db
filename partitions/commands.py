"""The commands a partition's Raft group replicates (pure codec, msgpack, versioned).

[1, 1, batch]                    Produce: a record batch encoded by the leader (offset and term are
                                 stamped when applied); producer id and sequence ride in its header
[1, 2, group, offset, reset]     CommitOffset: a consumer group's next offset to read (its first
                                 form, still read: no leader epoch known)
[1, 2, group, offset, reset, leader_epoch]
                                 CommitOffset's second form: the leader epoch the client read the
                                 record before ``offset`` in (Kafka's ``committed_leader_epoch``,
                                 KIP-320); written only when one is known, so a commit without one
                                 keeps the first form's bytes
[1, 2, group, offset, reset, leader_epoch, metadata]
                                 CommitOffset's third form: the metadata string committed with the
                                 offset (Kafka's ``committed_metadata``, at most
                                 ``OFFSET_METADATA_MAX`` UTF-16 units); written only when not empty
[1, 3]                           Barrier: commits nothing; proves leadership for linearizable reads
[1, 4, payload]                  GroupCommand: a consumer-group membership change (``groups.group_commands``),
                                 only in partitions of the internal ``__consumer_groups`` topic
[1, 5, group]                    DeleteOffset: forget a consumer group's offset (the group was deleted)
[1, 6, offset]                   DeleteRecords: move the log start offset up to ``offset`` (Kafka's
                                 DeleteRecords); never past the high watermark, never back
[1, 7, producer_id, epoch, commit, coordinator_epoch, timestamp_ms, write_control, transaction]
                                 TxnMarker: end a producer's transaction in this partition (docs/decisions/
                                 0019-transactions.md): a control batch when ``write_control``, and its
                                 pending transactional offsets made visible or dropped
[1, 8, group, offset, producer_id, epoch, transaction]
                                 TxnOffset: a consumer group's offset committed inside a transaction,
                                 pending until the producer's marker; ``transaction`` is the
                                 transaction's ordinal (its coordinator's start stamp, rising per id),
                                 so one arriving after its transaction's marker is refused
[1, 8, group, offset, producer_id, epoch, transaction, leader_epoch]
                                 TxnOffset's second form, with the offset's leader epoch (as
                                 CommitOffset's); the first form still read
[1, 8, group, offset, producer_id, epoch, transaction, leader_epoch, metadata]
                                 TxnOffset's third form, with the offset's metadata (as CommitOffset's)
[1, 9, payload]                  TxnCommand: a transaction coordinator's change (``transactions.state``),
                                 only in partitions of the internal ``__transactions`` topic
[1, 10, batch]                   Produce, ``contiguous``: a Kafka producer's batch, whose sequence must
                                 follow its producer's last (``replicas.dedup``); kind 1 keeps the HTTP
                                 API's rule, and every entry written before the rule existed replays
                                 under the rule it was applied with. A node of an earlier release
                                 refuses kind 10 as malformed: upgrade every replica's node before
                                 Kafka producers write to it
[1, 11, payload]                 ShareCommand: a share group's acquisitions, acknowledgements and lock
                                 expiries of this partition's records (``groups.share.partition``),
                                 written only once feature ``raftlog.version`` 2 is finalized (a node
                                 of an earlier release refuses kind 11 as malformed)
[1, 12, payload]                 SchemaCommand: a schema registry change (``registry.table``), only in the
                                 partition of the internal ``__schemas`` topic, written only once feature
                                 ``raftlog.version`` 2 is finalized (a node of 0.1.0 refuses kind 12)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from partitions.errors import InvalidCommand, OffsetMetadataTooLarge
from raftlog.packing import bin_header

VERSION = 1
_PRODUCE, _COMMIT_OFFSET, _BARRIER, _GROUP, _DELETE_OFFSET, _DELETE_RECORDS = 1, 2, 3, 4, 5, 6
_TXN_MARKER, _TXN_OFFSET, _TXN, _PRODUCE_CONTIGUOUS, _SHARE, _SCHEMA = 7, 8, 9, 10, 11, 12
NO_LEADER_EPOCH = -1  # a committed offset's leader epoch, unknown (Kafka's -1)
OFFSET_METADATA_MAX = 4096  # Kafka's offset.metadata.max.bytes default: a committed offset's metadata
NO_TRANSACTION = -1  # a produce bound to no transaction's ordinal (not transactional, or not checked so)


@dataclass(frozen=True, slots=True)
class Produce:
    batch: bytes | memoryview  # decoded: a view into the command, not a copy of a ~1 MiB batch
    contiguous: bool = False  # Kafka's sequence rule: the batch starts at its producer's last sequence + 1
    # a contiguous transactional batch's: the least ordinal its transaction can have (the module docstring)
    transaction: int = NO_TRANSACTION


@dataclass(frozen=True, slots=True)
class CommitOffset:
    group: str
    offset: int
    reset: bool = False
    leader_epoch: int = NO_LEADER_EPOCH  # of the record before ``offset``, as the client read it
    metadata: str = ""  # the client's string committed with the offset (Kafka's ``committed_metadata``)


@dataclass(frozen=True, slots=True)
class DeleteOffset:
    group: str


@dataclass(frozen=True, slots=True)
class DeleteRecords:
    offset: int  # the new log start offset


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    timestamp_ms: int  # the control record's timestamp: the coordinator's clock, the same on every replica
    write_control: bool  # the producer wrote to this partition in the transaction: a control batch ends it
    transaction: int  # the transaction's ordinal: its start, as its coordinator stamped it (rising per id)


@dataclass(frozen=True, slots=True)
class TxnOffset:
    group: str
    offset: int
    producer_id: int
    producer_epoch: int
    transaction: int  # the ordinal of the transaction it belongs to (``TxnMarker.transaction``)
    leader_epoch: int = NO_LEADER_EPOCH  # as ``CommitOffset.leader_epoch``
    metadata: str = ""  # as ``CommitOffset.metadata``


@dataclass(frozen=True, slots=True)
class Barrier:
    pass


@dataclass(frozen=True, slots=True)
class GroupCommand:
    payload: bytes  # encoded by ``partitions.groups.group_commands.encode``


@dataclass(frozen=True, slots=True)
class TxnCommand:
    payload: bytes  # encoded by ``partitions.transactions.state.encode``


@dataclass(frozen=True, slots=True)
class ShareCommand:
    payload: bytes  # encoded by ``partitions.groups.share.partition.encode``


@dataclass(frozen=True, slots=True)
class SchemaCommand:
    payload: bytes  # encoded by ``partitions.registry.table.encode``


# a command carrying a table's own encoded command, by its kind on the wire
PayloadCommand = GroupCommand | TxnCommand | ShareCommand | SchemaCommand
_PAYLOAD_KINDS: dict[type[PayloadCommand], int] = {
    GroupCommand: _GROUP,
    TxnCommand: _TXN,
    ShareCommand: _SHARE,
    SchemaCommand: _SCHEMA,
}
_PAYLOAD_CLASSES = {kind: cls for cls, kind in _PAYLOAD_KINDS.items()}

Command = (
    Produce | CommitOffset | Barrier | DeleteOffset | DeleteRecords | TxnMarker | TxnOffset | PayloadCommand
)


def encode_parts(command: Command) -> tuple[bytes, ...]:
    """What :func:`encode` gives, in pieces to be joined by whoever frames them next (the consensus
    layer): a produce's ~1 MiB batch is then copied once on its way into the Raft log, not twice. A
    produce is framed by hand, as ``msgpack.packb([VERSION, _PRODUCE, batch])`` would frame it: packb
    grows its buffer while packing a large bin, and every fresh buffer costs page faults."""
    if isinstance(command, Produce):
        batch = command.batch if isinstance(command.batch, bytes) else bytes(command.batch)
        prefix = _PRODUCE_CONTIGUOUS_PREFIX if command.contiguous else _PRODUCE_PREFIX
        if command.transaction == NO_TRANSACTION:
            return (b"\x93", prefix, bin_header(len(batch)), batch)
        if not command.contiguous or command.transaction < 0:
            raise ValueError(f"only a contiguous produce is bound to a transaction: {command.transaction}")
        return (b"\x94", prefix, bin_header(len(batch)), batch, msgpack.packb(command.transaction))
    return (encode(command),)


def encode(command: Command) -> bytes:
    if isinstance(command, Produce):
        return b"".join(encode_parts(command))
    fields: list[object]
    if isinstance(command, CommitOffset):
        fields = [VERSION, _COMMIT_OFFSET, command.group, command.offset, command.reset]
        fields += _offset_details(command.leader_epoch, command.metadata)
    elif isinstance(command, PayloadCommand):
        fields = [VERSION, _PAYLOAD_KINDS[type(command)], command.payload]
    elif isinstance(command, DeleteOffset):
        fields = [VERSION, _DELETE_OFFSET, command.group]
    elif isinstance(command, DeleteRecords):
        fields = [VERSION, _DELETE_RECORDS, command.offset]
    elif isinstance(command, TxnMarker):
        c = command
        fields = [
            VERSION, _TXN_MARKER, c.producer_id, c.producer_epoch, c.commit, c.coordinator_epoch,
            c.timestamp_ms, c.write_control, c.transaction,
        ]  # fmt: skip
    elif isinstance(command, TxnOffset):
        fields = [
            VERSION,
            _TXN_OFFSET,
            command.group,
            command.offset,
            command.producer_id,
            command.producer_epoch,
            command.transaction,
        ]
        fields += _offset_details(command.leader_epoch, command.metadata)
    else:
        fields = [VERSION, _BARRIER]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def check_offset_metadata(metadata: str) -> None:
    """Kafka's bound on a committed offset's metadata (``offset.metadata.max.bytes``, 4096, counted as Java
    counts a string's length: UTF-16 units): OffsetMetadataTooLarge past it."""
    length = len(metadata.encode("utf-16-le", "surrogatepass")) // 2
    if length > OFFSET_METADATA_MAX:
        raise OffsetMetadataTooLarge(length, OFFSET_METADATA_MAX)


def _offset_details(leader_epoch: int, metadata: str) -> list[object]:
    """The fields a committed offset's later forms add, each form only when it says more than the one
    before: none, the leader epoch, or both with the metadata (older forms keep their bytes)."""
    if metadata:
        return [leader_epoch, metadata]
    return [leader_epoch] if leader_epoch != NO_LEADER_EPOCH else []


_PRODUCE_PREFIX = msgpack.packb([VERSION, _PRODUCE], use_bin_type=True)[1:]  # the two fields after the array
_PRODUCE_CONTIGUOUS_PREFIX = msgpack.packb([VERSION, _PRODUCE_CONTIGUOUS], use_bin_type=True)[1:]
_PRODUCE_HEAD = b"\x93" + _PRODUCE_PREFIX
_PRODUCE_CONTIGUOUS_HEAD = b"\x93" + _PRODUCE_CONTIGUOUS_PREFIX
_PRODUCE_TRANSACTIONAL_HEAD = b"\x94" + _PRODUCE_CONTIGUOUS_PREFIX
_BIN_LENGTH_BYTES = {0xC4: 1, 0xC5: 2, 0xC6: 4}  # msgpack bin 8/16/32: bytes of the length after the tag


def _decode_produce(data: bytes | memoryview) -> Produce | None:
    """A produce framed as :func:`encode_parts` frames it, read without copying its batch; None for
    anything else (msgpack then decodes it, and refuses what is malformed)."""
    head = len(_PRODUCE_HEAD)
    if len(data) <= head:
        return None
    if data[:head] == _PRODUCE_HEAD:
        contiguous = False
    elif data[:head] == _PRODUCE_CONTIGUOUS_HEAD:
        contiguous = True
    elif data[:head] == _PRODUCE_TRANSACTIONAL_HEAD:
        return _decode_transactional_produce(data, head)
    else:
        return None
    width = _BIN_LENGTH_BYTES.get(data[head])
    if width is None or len(data) < head + 1 + width:
        return None
    start = head + 1 + width
    if int.from_bytes(data[head + 1 : start], "big") != len(data) - start:
        return None
    return Produce(memoryview(data)[start:], contiguous)


def _decode_transactional_produce(data: bytes | memoryview, head: int) -> Produce | None:
    """The second form of kind 10: the batch, then the transaction's ordinal (a non-negative int)."""
    width = _BIN_LENGTH_BYTES.get(data[head])
    if width is None or len(data) < head + 1 + width:
        return None
    start = head + 1 + width
    end = start + int.from_bytes(data[head + 1 : start], "big")
    if end >= len(data):
        return None
    try:
        transaction = msgpack.unpackb(data[end:])
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return None
    if type(transaction) is not int or transaction < 0:
        return None
    return Produce(memoryview(data)[start:end], True, transaction)


def decode(data: bytes | memoryview) -> Command:
    produce = _decode_produce(data)
    if produce is not None:
        return produce
    try:
        fields = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidCommand(f"not msgpack: {exc}") from None
    if not isinstance(fields, list) or len(fields) < 2 or fields[0] != VERSION:
        raise InvalidCommand(f"unknown command envelope {str(fields)[:80]!r}")
    kind = fields[1]
    if kind in (_PRODUCE, _PRODUCE_CONTIGUOUS) and len(fields) == 3 and isinstance(fields[2], bytes):
        return Produce(fields[2], kind == _PRODUCE_CONTIGUOUS)
    if (
        kind == _PRODUCE_CONTIGUOUS
        and len(fields) == 4
        and isinstance(fields[2], bytes)
        and type(fields[3]) is int
        and fields[3] >= 0
    ):
        return Produce(fields[2], True, fields[3])
    if kind == _COMMIT_OFFSET and len(fields) in (5, 6, 7):
        group, offset, reset = fields[2:5]
        leader_epoch, metadata = _read_details(fields[5:])
        if (
            isinstance(group, str)
            and isinstance(offset, int)
            and offset >= 0
            and isinstance(reset, bool)
            and _is_leader_epoch(leader_epoch)
            and isinstance(metadata, str)
        ):
            return CommitOffset(group, offset, reset, leader_epoch, metadata)
    if kind in _PAYLOAD_CLASSES and len(fields) == 3 and isinstance(fields[2], bytes):
        return _PAYLOAD_CLASSES[kind](fields[2])
    if kind == _DELETE_OFFSET and len(fields) == 3 and isinstance(fields[2], str):
        return DeleteOffset(fields[2])
    if kind == _DELETE_RECORDS and len(fields) == 3 and type(fields[2]) is int and fields[2] >= 0:
        return DeleteRecords(fields[2])
    if kind == _TXN_MARKER and len(fields) == 9:
        _, _, producer_id, epoch, commit, coordinator_epoch, timestamp_ms, write_control, transaction = fields
        if (
            _is_id(producer_id)
            and _is_epoch(epoch)
            and type(commit) is bool
            and type(coordinator_epoch) is int
            and type(timestamp_ms) is int
            and type(write_control) is bool
            and type(transaction) is int
        ):
            return TxnMarker(
                producer_id, epoch, commit, coordinator_epoch, timestamp_ms, write_control, transaction
            )
    if kind == _TXN_OFFSET and len(fields) in (7, 8, 9):
        group, offset, producer_id, epoch, transaction = fields[2:7]
        leader_epoch, metadata = _read_details(fields[7:])
        if (
            isinstance(group, str)
            and type(offset) is int
            and offset >= 0
            and _is_id(producer_id)
            and _is_epoch(epoch)
            and type(transaction) is int
            and _is_leader_epoch(leader_epoch)
            and isinstance(metadata, str)
        ):
            return TxnOffset(group, offset, producer_id, epoch, transaction, leader_epoch, metadata)
    if kind == _BARRIER and len(fields) == 2:
        return Barrier()
    raise InvalidCommand(f"malformed command of kind {kind!r}")


def _read_details(details: list[Any]) -> tuple[Any, Any]:
    """A committed offset's leader epoch and metadata from the fields its later forms add."""
    leader_epoch = details[0] if details else NO_LEADER_EPOCH
    return leader_epoch, details[1] if len(details) > 1 else ""


def _is_id(value: object) -> bool:
    return type(value) is int and 0 <= value < 2**63


def _is_epoch(value: object) -> bool:
    return type(value) is int and 0 <= value < 2**15


def _is_leader_epoch(value: object) -> bool:
    """Kafka's int32 leader epoch, -1 for none."""
    return type(value) is int and NO_LEADER_EPOCH <= value < 2**31
