"""Share groups' records (KIP-932) as a pure, deterministic state machine: which records of one data
partition each share group has delivered, to whom, until when, how often, and which it is done with.

Kafka's ``SharePartition`` kept below the doors, replicated by the data partition's own Raft group (the
``ShareCommand`` of ``partitions.commands``, kind 11): every replica applies the same commands in the same
order and holds the same state, so a new leader knows every acquisition, lock and acknowledgement its
predecessor committed. Time rides in the commands (the leader's wall clock), never read here.

A share group's state in one partition (``SharePartition``) is its start offset (Kafka's SPSO: below it
every record is done with), its end offset (one past the last record ever acquired: Kafka's SPEO + 1)
and the records in between that are not done with: AVAILABLE (to be delivered again) or ACQUIRED (by a
member, until a lock deadline), each with its delivery count. A record between the two offsets that is
not held is ACKNOWLEDGED or ARCHIVED: done with, never delivered again.

Commands (``encode``/``decode``, msgpack ``[VERSION, kind, ...]``):

- ``Acquire``: a member's fetch. The leader read batches of the log and names their data records' ranges
  (control batches and compacted gaps left out) and where its read ended; the available records among them
  are acquired, whole batches until ``max_records`` is reached (Kafka's batch-optimized acquire mode; with
  ``record_limit``, KIP-1206's record-limit mode, at most ``max_records`` records, splitting a batch), each
  delivery counted and locked until ``now_ms + lock_ms``. A group new to the partition starts at
  ``initial_offset`` (what ``share.auto.offset.reset`` chose on the leader). At most ``RECORD_LOCKS_MAX``
  records are in flight (Kafka's ``group.share.partition.max.record.locks``).
- ``Acknowledge``: ACCEPT and REJECT (and GAP) are done with the record; RELEASE makes it available
  again, unless its delivery count reached the delivery limit (``group.share.delivery.count.limit``),
  when it is archived; RENEW (KIP-1222) keeps the record the member's, its lock renewed until
  ``now_ms + lock_ms`` and its delivery count unchanged (Kafka's ``SharePartition`` reschedules the
  acquisition lock). Only the member holding a record's lock acknowledges it, before the lock expired
  (INVALID_RECORD_STATE otherwise): all of one command or nothing.
- ``ExpireLocks``: every lock due by ``now_ms`` released (as by RELEASE). Each ``Acquire`` and
  ``Acknowledge`` first does the same at its own ``now_ms``.
- ``ReleaseMember``: a member gone (it left, its session ended): its records released.
- ``ResetOffset``: an administrator moved the start (Kafka's AlterShareGroupOffsets), nothing in flight.
- ``DeleteState``: the group's state in the partition forgotten (DeleteShareGroupOffsets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgpack

from partitions.errors import InvalidCommand
from partitions.groups.defaults import SHARE_LOCK_MS_DEFAULT
from partitions.groups.errors import InvalidRecordState

VERSION = 1
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4  # Kafka's RecordState ids
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4  # Kafka's acknowledge types (RENEW: KIP-1222)
ACK_TYPES = frozenset((GAP, ACCEPT, RELEASE, REJECT, RENEW))
RECORD_LOCKS_MAX = 2_000  # Kafka's group.share.partition.max.record.locks
DELIVERY_LIMIT_DEFAULT = 5  # Kafka's group.share.delivery.count.limit
LOCK_MS_DEFAULT = SHARE_LOCK_MS_DEFAULT
_ACQUIRE, _ACKNOWLEDGE, _EXPIRE, _RELEASE_MEMBER, _RESET, _DELETE = 1, 2, 3, 4, 5, 6


@dataclass(frozen=True, slots=True)
class ShareOffset:
    """A share group's state in one partition, as its offset admin APIs show it (KIP-932): its start
    offset (Kafka's SPSO: every record below it done with) and its lag, the records from there to the high
    watermark not yet done with."""

    start_offset: int
    lag: int


@dataclass(frozen=True, slots=True)
class InFlight:
    state: int  # AVAILABLE or ACQUIRED
    deliveries: int
    member: str = ""  # the lock's holder (ACQUIRED)
    deadline_ms: int = 0  # when its lock expires (ACQUIRED)

    def to_row(self) -> list[Any]:
        return [self.state, self.deliveries, self.member, self.deadline_ms]


@dataclass(frozen=True, slots=True)
class SharePartition:
    """One share group's records of one partition (immutable: each command gives a new value)."""

    start: int
    end: int
    records: Mapping[int, InFlight] = field(default_factory=lambda: MappingProxyType({}))

    def first_available(self) -> int:
        """Where a fetch reads from: the first available record, else the end."""
        available = [o for o, r in self.records.items() if r.state == AVAILABLE]
        return min(available) if available else self.end

    def acquired(self) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED)

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def to_row(self) -> list[Any]:
        return [self.start, self.end, [[o, *r.to_row()] for o, r in sorted(self.records.items())]]

    @classmethod
    def from_row(cls, row: list[Any]) -> SharePartition:
        start, end, records = row[0], row[1], row[2]
        held = {int(r[0]): InFlight(int(r[1]), int(r[2]), str(r[3]), int(r[4])) for r in records}
        return cls(int(start), int(end), MappingProxyType(held))


# -- commands -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Acquire:
    group: str
    member: str
    ranges: tuple[tuple[int, int], ...]  # the data records read, (first, last) inclusive, ascending
    through: int  # where the read ended (past a trailing control batch or gap)
    max_records: int
    now_ms: int
    lock_ms: int
    delivery_limit: int
    initial_offset: int  # the start of a group new to the partition
    record_limit: bool = False  # at most max_records records, splitting a batch (KIP-1206)


@dataclass(frozen=True, slots=True)
class Acknowledge:
    group: str
    member: str
    batches: tuple[tuple[int, int, tuple[int, ...]], ...]  # (first, last, one type or one per record)
    now_ms: int
    delivery_limit: int
    lock_ms: int = 0  # a RENEW's new lock


@dataclass(frozen=True, slots=True)
class ExpireLocks:
    group: str
    now_ms: int
    delivery_limit: int


@dataclass(frozen=True, slots=True)
class ReleaseMember:
    group: str
    member: str
    delivery_limit: int


@dataclass(frozen=True, slots=True)
class ResetOffset:
    group: str
    offset: int


@dataclass(frozen=True, slots=True)
class DeleteState:
    group: str


ShareCommand = Acquire | Acknowledge | ExpireLocks | ReleaseMember | ResetOffset | DeleteState


@dataclass(frozen=True, slots=True)
class Acquired:
    """What a fetch acquired: (first, last, delivery count) runs, ascending."""

    group: str
    ranges: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class ShareApplied:
    group: str
    error: InvalidRecordState | None = None  # an acknowledgement refused: nothing of it applied
    existed: bool = True  # DeleteState, ResetOffset: whether the group had state here


ShareResult = Acquired | ShareApplied


def encode(command: ShareCommand) -> bytes:
    c = command
    fields: list[Any]
    if isinstance(c, Acquire):
        fields = [
            VERSION, _ACQUIRE, c.group, c.member, [list(r) for r in c.ranges], c.through, c.max_records,
            c.now_ms, c.lock_ms, c.delivery_limit, c.initial_offset, c.record_limit,
        ]  # fmt: skip
    elif isinstance(c, Acknowledge):
        batches = [[f, la, list(t)] for f, la, t in c.batches]
        fields = [VERSION, _ACKNOWLEDGE, c.group, c.member, batches, c.now_ms, c.delivery_limit, c.lock_ms]
    elif isinstance(c, ExpireLocks):
        fields = [VERSION, _EXPIRE, c.group, c.now_ms, c.delivery_limit]
    elif isinstance(c, ReleaseMember):
        fields = [VERSION, _RELEASE_MEMBER, c.group, c.member, c.delivery_limit]
    elif isinstance(c, ResetOffset):
        fields = [VERSION, _RESET, c.group, c.offset]
    else:
        fields = [VERSION, _DELETE, c.group]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def _ints(values: Any, n: int) -> bool:
    return isinstance(values, list) and len(values) == n and all(type(v) is int for v in values)


def decode(data: bytes) -> ShareCommand:
    try:
        fields = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidCommand(f"share command not msgpack: {exc}") from None
    if (
        not isinstance(fields, list)
        or len(fields) < 3
        or fields[0] != VERSION
        or not isinstance(fields[2], str)
    ):
        raise InvalidCommand(f"unknown share command {str(fields)[:80]!r}")
    kind, group = fields[1], fields[2]
    if kind == _ACQUIRE and len(fields) >= 11:  # a later version's extra fields are not ours
        member, ranges = fields[3], fields[4]
        ranges_ok = isinstance(ranges, list) and all(_ints(r, 2) for r in ranges)
        if isinstance(member, str) and ranges_ok and _ints(fields[5:11], 6):
            through, max_records, now_ms, lock_ms, limit, initial = fields[5:11]
            record_limit = len(fields) > 11 and fields[11] is True  # absent: written before KIP-1206
            return Acquire(
                group, member, tuple((r[0], r[1]) for r in ranges), through, max_records, now_ms,
                lock_ms, limit, initial, record_limit,
            )  # fmt: skip
    if kind == _ACKNOWLEDGE and len(fields) >= 7:
        member, batches = fields[3], fields[4]
        if (
            isinstance(member, str)
            and isinstance(batches, list)
            and all(
                isinstance(b, list) and len(b) == 3 and _ints(b[:2], 2) and _ints(b[2], len(b[2]))
                for b in batches
            )
            and _ints(fields[5:7], 2)
        ):
            parsed = tuple((b[0], b[1], tuple(b[2])) for b in batches)
            lock_ms = fields[7] if len(fields) > 7 and type(fields[7]) is int else 0  # absent: before RENEW
            return Acknowledge(group, member, parsed, fields[5], fields[6], lock_ms)
    if kind == _EXPIRE and len(fields) >= 5 and _ints(fields[3:5], 2):
        return ExpireLocks(group, fields[3], fields[4])
    if kind == _RELEASE_MEMBER and len(fields) >= 5 and isinstance(fields[3], str) and type(fields[4]) is int:
        return ReleaseMember(group, fields[3], fields[4])
    if kind == _RESET and len(fields) >= 4 and type(fields[3]) is int and fields[3] >= 0:
        return ResetOffset(group, fields[3])
    if kind == _DELETE:
        return DeleteState(group)
    raise InvalidCommand(f"malformed share command of kind {kind!r}")


# -- the rules ------------------------------------------------------------------------------------------


def _released(record: InFlight, delivery_limit: int) -> InFlight | None:
    """A lock given up (released, expired): available again, or archived (None) at the delivery limit."""
    if record.deliveries >= delivery_limit:
        return None
    return InFlight(AVAILABLE, record.deliveries)


def _settled(start: int, end: int, records: dict[int, InFlight]) -> SharePartition:
    """The start moved up past every record done with."""
    start = min(records) if records else end
    return SharePartition(start, end, MappingProxyType(records))


def expire(state: SharePartition, now_ms: int, delivery_limit: int) -> SharePartition:
    due = [o for o, r in state.records.items() if r.state == ACQUIRED and r.deadline_ms <= now_ms]
    if not due:
        return state
    records = dict(state.records)
    for offset in due:
        released = _released(records[offset], delivery_limit)
        if released is None:
            del records[offset]
        else:
            records[offset] = released
    return _settled(state.start, state.end, records)


def acquire(state: SharePartition | None, c: Acquire) -> tuple[SharePartition, Acquired]:
    if state is None:
        state = SharePartition(c.initial_offset, c.initial_offset)
    state = expire(state, c.now_ms, c.delivery_limit)
    records = dict(state.records)
    end, count, got = state.end, 0, []
    deadline = c.now_ms + c.lock_ms
    finished = True
    for first, last in c.ranges:
        if count >= max(c.max_records, 1):
            finished = False
            break
        for offset in range(max(first, state.start), last + 1):
            if c.record_limit and count >= max(c.max_records, 1):
                finished = False  # record-limit mode: the rest of the batch stays for the next fetch
                break
            if offset >= end:
                if offset - min(records, default=offset) >= RECORD_LOCKS_MAX:
                    finished = False  # the records in flight span the most there may be
                    break
                records[offset] = InFlight(ACQUIRED, 1, c.member, deadline)
                end = offset + 1
            else:
                held = records.get(offset)
                if held is None or held.state != AVAILABLE:
                    continue  # done with, or locked by a member
                records[offset] = InFlight(ACQUIRED, held.deliveries + 1, c.member, deadline)
            got.append((offset, records[offset].deliveries))
            count += 1
        if not finished:
            break
    if finished and c.through > end:
        end = c.through  # what lay between the batches (control records, compacted gaps) is done with
    runs: list[tuple[int, int, int]] = []
    for offset, deliveries in got:
        if runs and runs[-1][1] == offset - 1 and runs[-1][2] == deliveries:
            runs[-1] = (runs[-1][0], offset, deliveries)
        else:
            runs.append((offset, offset, deliveries))
    return _settled(state.start, end, records), Acquired(c.group, tuple(runs))


def acknowledge(state: SharePartition | None, c: Acknowledge) -> tuple[SharePartition | None, ShareApplied]:
    if state is None:
        return None, ShareApplied(c.group, InvalidRecordState(f"share group {c.group} acquired nothing here"))
    state = expire(state, c.now_ms, c.delivery_limit)
    records = dict(state.records)
    for first, last, types in c.batches:
        if last < first or (len(types) != 1 and len(types) != last - first + 1):
            return state, ShareApplied(c.group, InvalidRecordState(f"malformed batch {first}..{last}"))
        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            if kind not in ACK_TYPES:
                return state, ShareApplied(c.group, InvalidRecordState(f"unknown acknowledge type {kind}"))
            held = records.get(offset)
            if held is None or held.state != ACQUIRED or held.member != c.member:
                why = "not acquired by this member (its lock expired, or it was acknowledged)"
                return state, ShareApplied(c.group, InvalidRecordState(f"offset {offset}: {why}"))
            if kind == RENEW:  # still the member's: a new lock, the same delivery count
                records[offset] = InFlight(ACQUIRED, held.deliveries, c.member, c.now_ms + c.lock_ms)
            elif kind == RELEASE:
                released = _released(held, c.delivery_limit)
                if released is None:
                    del records[offset]
                else:
                    records[offset] = released
            else:  # ACCEPT (acknowledged), REJECT and GAP (archived): done with
                del records[offset]
    return _settled(state.start, state.end, records), ShareApplied(c.group)


def release_member(state: SharePartition, member: str, delivery_limit: int) -> SharePartition:
    records: dict[int, InFlight] = {}
    for offset, held in state.records.items():
        if held.state == ACQUIRED and held.member == member:
            released = _released(held, delivery_limit)
            if released is not None:
                records[offset] = released
        else:
            records[offset] = held
    return _settled(state.start, state.end, records)


class ShareTable:
    """Every share group's state in one data partition (``PartitionStateMachine.shares``). ``groups`` is
    replaced whole by each command (driver thread) and read on the event loop."""

    def __init__(self, groups: Mapping[str, SharePartition] | None = None) -> None:
        self.groups: Mapping[str, SharePartition] = MappingProxyType(dict(groups or {}))

    def apply(self, data: bytes) -> ShareResult:
        c = decode(data)
        current = self.groups.get(c.group)
        result: ShareResult
        if isinstance(c, Acquire):
            updated, result = acquire(current, c)
            self._store(c.group, updated)
        elif isinstance(c, Acknowledge):
            after, result = acknowledge(current, c)
            if after is not None:
                self._store(c.group, after)
        elif isinstance(c, ExpireLocks):
            if current is not None:
                self._store(c.group, expire(current, c.now_ms, c.delivery_limit))
            result = ShareApplied(c.group, existed=current is not None)
        elif isinstance(c, ReleaseMember):
            if current is not None:
                self._store(c.group, release_member(current, c.member, c.delivery_limit))
            result = ShareApplied(c.group, existed=current is not None)
        elif isinstance(c, ResetOffset):
            self._store(c.group, SharePartition(c.offset, c.offset))
            result = ShareApplied(c.group, existed=current is not None)
        else:
            groups = dict(self.groups)
            groups.pop(c.group, None)
            self.groups = MappingProxyType(groups)
            result = ShareApplied(c.group, existed=current is not None)
        return result

    def _store(self, group: str, state: SharePartition) -> None:
        if self.groups.get(group) == state:
            return
        groups = dict(self.groups)
        groups[group] = state
        self.groups = MappingProxyType(groups)

    def to_rows(self) -> list[list[Any]]:
        return [[name, state.to_row()] for name, state in sorted(self.groups.items())]

    @classmethod
    def from_rows(cls, rows: Iterable[list[Any]]) -> ShareTable:
        return cls({str(name): SharePartition.from_row(row) for name, row in rows})
