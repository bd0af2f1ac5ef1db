"""Share groups' records (KIP-932) served by a data partition's leader: what ShareFetch and
ShareAcknowledge (and the HTTP door's share consumers) ask of a partition, as replicated commands of the
partition's own Raft group (``partitions.groups.share.partition``).

A fetch reads the committed batches from the group's first available record (a group new to the partition
starts where its group config ``share.auto.offset.reset`` says: ``latest``, the high watermark, as Kafka's
default, ``earliest``, the log's start, or ``by_duration:<ISO-8601 duration>`` (KIP-1106), the first
committed record whose timestamp is at or after now minus the duration, else the high watermark; its
``share.record.lock.duration.ms`` sets its locks' duration), names their data records' offsets in an
``Acquire`` and answers the batches with the records that command acquired: what it acquired is committed
before any record is handed out, so a new leader knows every lock and acknowledgement. A leader's first
share command of a group in a term releases every lock the group's records hold (as Kafka's new leader
loads a share partition, whose acquired records become available): what was acquired but not acknowledged
before a leader change is delivered again, its delivery counted. The commands carry this leader's wall
clock, the lock duration and the delivery limit, so every replica applies them alike. A lock that expires
is released by the partition's next fetch or acknowledgement (each first releases every lock due at its
time), which is when another member can take the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from partitions import commands
from partitions.data.plane import DataPlane
from partitions.errors import InvalidCommand
from partitions.features import SHARE_GROUPS, Features
from partitions.groups.errors import InvalidGroupRequest, ShareGroupsNotFinalized
from partitions.groups.share.partition import (
    DELIVERY_LIMIT_DEFAULT,
    LOCK_MS_DEFAULT,
    Acknowledge,
    Acquire,
    Acquired,
    DeleteState,
    ExpireLocks,
    ReleaseMember,
    ResetOffset,
    ShareApplied,
    ShareCommand,
    SharePartition,
    encode,
    expire,
)
from partitions.peer_ops import peer
from partitions.replicas.manager import Replica
from partitions.replicas.state_machine import Refused
from partitions.resource_configs import BY_DURATION, group_settings, share_reset
from raftlog.errors import InvariantViolation
from raftlog.storage.batch import decode_header

LATEST, EARLIEST = "latest", "earliest"
RESETS = (LATEST, EARLIEST)
WRITE_TIMEOUT_MS = 10_000
EVERY_LOCK_MS = 2**62  # an expiry at this time releases every lock


@dataclass(frozen=True, slots=True)
class ShareFetched:
    """Batches as stored (the first may start before the first acquired record) and the acquired runs
    among them: (first, last, delivery count); the client hands out only those."""

    data: bytes
    acquired: tuple[tuple[int, int, int], ...]
    high_watermark: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ShareSettings:
    lock_ms: int = LOCK_MS_DEFAULT  # Kafka's group.share.record.lock.duration.ms
    delivery_limit: int = DELIVERY_LIMIT_DEFAULT  # Kafka's group.share.delivery.count.limit


Batches = tuple[
    tuple[int, int, tuple[int, ...]], ...
]  # acknowledgements: (first, last, one type or one each)


class ShareService(Protocol):
    """What a door asks of a partition's leader for a share group (``ShareRecords`` on the leader); each
    declared ``@peer``, so the HTTP door's share members reach the leader wherever it is
    (``partitions.peers.cluster.ClusterShares``). The Kafka door's clients call the leader themselves."""

    @peer("Acquire a share group's records on the partition's leader", write=True, wait_arg="wait_ms",
          topic_arg="topic")  # fmt: skip
    async def acquire(
        self,
        group: str,
        member: str,
        topic: str,
        partition: int,
        max_records: int,
        max_bytes: int,
        wait_ms: int = 0,
        reset: str | None = None,  # None: the group's share.auto.offset.reset
        record_limit: bool = False,  # at most max_records records, splitting a batch (KIP-1206)
    ) -> ShareFetched: ...

    @peer("Whether a share group's record came to be available (long poll)", wait_arg="wait_ms",
          topic_arg="topic")  # fmt: skip
    async def wait_available(self, group: str, topic: str, partition: int, wait_ms: int) -> bool: ...

    @peer("Acknowledge a share group's records on the partition's leader", write=True, topic_arg="topic")
    async def acknowledge(
        self, group: str, member: str, topic: str, partition: int, batches: Batches
    ) -> None: ...

    @peer("Release what a share group member holds in a partition", write=True, topic_arg="topic")
    async def release_member(self, group: str, member: str, topic: str, partition: int) -> None: ...


class ShareRecords(ShareService):
    """Event loop only; over this node's ``DataPlane`` (its leaders' replicas)."""

    def __init__(
        self,
        data: DataPlane,
        wall_ms: Callable[[], int],
        features: Features | None = None,
        settings: ShareSettings = ShareSettings(),
        group_configs: Callable[[str], Mapping[str, str]] = lambda group: {},
    ) -> None:
        self._data = data
        self._wall_ms = wall_ms
        self._features = features
        self.settings = settings
        self._group_configs = group_configs  # a group's configs (``partitions.resource_configs``)
        self._released: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> term released

    def reset_and_lock_ms(self, group: str) -> tuple[str, int]:
        """The group's ``share.auto.offset.reset`` and its lock duration: its group configs, else the
        node's (Kafka's ``group.share.record.lock.duration.ms``) and ``latest``."""
        configs = self._group_configs(group)
        reset, lock_ms = group_settings(configs)
        return reset, lock_ms if "share.record.lock.duration.ms" in configs else self.settings.lock_ms

    def state(self, group: str, topic: str, partition: int) -> SharePartition | None:
        """The group's records of the partition as its leader (this node) applied them, the locks due by
        now released (as the next command will)."""
        replica = self._data.leader_replica(topic, partition)
        state = replica.machine.shares.groups.get(group)
        return None if state is None else expire(state, self._wall_ms(), self.settings.delivery_limit)

    async def _propose(self, group: str, topic: str, partition: int, command: ShareCommand) -> object:
        replica = await self._taken_over(group, topic, partition)
        return await self._write(replica, command)

    async def _taken_over(self, group: str, topic: str, partition: int) -> Replica:
        """The leader's replica, once this leader's term released the locks taken in earlier terms."""
        if self._features is not None and not self._features.allows(SHARE_GROUPS):
            raise ShareGroupsNotFinalized(group)
        replica = self._data.leader_replica(topic, partition)
        term = replica.group.leader_term()
        key = (group, topic, partition)
        if term is not None and self._released.get(key) != term:
            state = replica.machine.shares.groups.get(group)
            if state is not None and state.acquired():  # locks taken under another leader (or term)
                release = ExpireLocks(group, EVERY_LOCK_MS, self.settings.delivery_limit)
                await self._write(replica, release)
            self._released[key] = term
        return replica

    async def _write(self, replica: Replica, command: ShareCommand) -> object:
        entry = commands.encode(commands.ShareCommand(encode(command)))
        result = await replica.group.propose(entry, WRITE_TIMEOUT_MS)
        if isinstance(result, Refused):
            raise result.error
        if not isinstance(result, Acquired | ShareApplied):
            raise InvariantViolation(f"{command!r} in {replica.group.group_id} answered {result!r}")
        return result

    async def acquire(
        self,
        group: str,
        member: str,
        topic: str,
        partition: int,
        max_records: int,
        max_bytes: int,
        wait_ms: int = 0,
        reset: str | None = None,
        record_limit: bool = False,
    ) -> ShareFetched:
        """The records acquired for ``member`` (none: an empty answer), waiting up to ``wait_ms`` for a
        record when none is available: whole batches, or with ``record_limit`` at most ``max_records``
        records. A group new to the partition starts where ``reset`` says, else its
        ``share.auto.offset.reset``."""
        configured, lock_ms = self.reset_and_lock_ms(group)
        reset = configured if reset is None else reset
        check_reset(reset)
        await self._taken_over(group, topic, partition)
        state = self.state(group, topic, partition)
        start = await self._start(state, topic, partition, reset)
        read = await self._data.fetch_batches(topic, partition, start, max_bytes, wait_ms)
        ranges, through = _data_ranges(read.data, start)
        if not ranges and state is not None and through <= state.end:
            return ShareFetched(b"", (), read.high_watermark, read.leader_epoch)
        now = self._wall_ms()
        command = Acquire(
            group, member, ranges, max(through, start), max(1, max_records), now, lock_ms,
            self.settings.delivery_limit, start, record_limit,
        )  # fmt: skip
        result = await self._propose(group, topic, partition, command)
        if not isinstance(result, Acquired):
            raise InvariantViolation(f"an acquire answered {result!r}")
        data = read.data if result.ranges else b""
        return ShareFetched(data, result.ranges, read.high_watermark, read.leader_epoch)

    async def wait_available(self, group: str, topic: str, partition: int, wait_ms: int) -> bool:
        """Whether a record came to be available to the group within ``wait_ms`` (a read: cancellable)."""
        state = self.state(group, topic, partition)
        start = await self._start(state, topic, partition, self.reset_and_lock_ms(group)[0])
        if state is not None and state.next_deadline() is not None:
            due = state.next_deadline() - self._wall_ms()  # type: ignore[operator]
            wait_ms = max(0, min(wait_ms, due))  # a lock expiring makes its record available
        read = await self._data.fetch_batches(topic, partition, start, 1, wait_ms)
        return bool(read.data)

    async def _start(self, state: SharePartition | None, topic: str, partition: int, reset: str) -> int:
        """Where the group reads the partition from: its first available record, or for a group new to
        the partition where ``reset`` says."""
        offsets = self._data.offsets_now(topic, partition)
        if state is not None:
            return max(state.first_available(), offsets.log_start_offset)
        kind, duration_ms = share_reset(reset)
        found = None
        if kind == BY_DURATION:
            at = await self._data.offset_for_timestamp(topic, partition, self._wall_ms() - duration_ms)
            found = None if at is None else at.offset
        return reset_start(kind, offsets.log_start_offset, offsets.high_watermark, found)

    async def acknowledge(
        self,
        group: str,
        member: str,
        topic: str,
        partition: int,
        batches: Batches,
    ) -> None:
        """ACCEPT, RELEASE, REJECT (or GAP) of records ``member`` holds, or RENEW of their locks for the
        group's lock duration: all or none (InvalidRecordState)."""
        batches = tuple((int(f), int(la), tuple(int(t) for t in types)) for f, la, types in batches)
        _, lock_ms = self.reset_and_lock_ms(group)
        command = Acknowledge(group, member, batches, self._wall_ms(), self.settings.delivery_limit, lock_ms)
        result = await self._propose(group, topic, partition, command)
        if isinstance(result, ShareApplied) and result.error is not None:
            raise result.error

    async def release_member(self, group: str, member: str, topic: str, partition: int) -> None:
        """Every record ``member`` holds in the partition made available again (its session closed)."""
        state = self.state(group, topic, partition)
        if state is None or not any(r.member == member for r in state.records.values()):
            return
        await self._propose(
            group, topic, partition, ReleaseMember(group, member, self.settings.delivery_limit)
        )

    async def reset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """The group's start moved to ``offset`` (AlterShareGroupOffsets), nothing in flight."""
        await self._propose(group, topic, partition, ResetOffset(group, offset))

    async def forget(self, group: str, topic: str, partition: int) -> bool:
        """The group's state in the partition deleted (DeleteShareGroupOffsets); whether there was one."""
        if self.state(group, topic, partition) is None:
            return False
        result = await self._propose(group, topic, partition, DeleteState(group))
        return isinstance(result, ShareApplied) and result.existed


def check_reset(reset: str) -> None:
    """InvalidGroupRequest unless ``reset`` is a ``share.auto.offset.reset`` (KIP-1106's by_duration too)."""
    try:
        share_reset(reset)
    except ValueError:
        raise InvalidGroupRequest(
            f"share.auto.offset.reset must be one of {', '.join(RESETS)} or by_duration:<ISO-8601 duration>"
        ) from None


def reset_start(kind: str, log_start: int, high_watermark: int, found: int | None) -> int:
    """Where a share group new to a partition starts (Kafka's SharePartition initialization): ``latest``
    the high watermark, ``earliest`` the log's start, ``by_duration`` the record ``found`` by timestamp,
    kept within the committed log; when none is that recent, the high watermark (the next record written
    is the first at or after the time, where Kafka's share fetch answers OFFSET_NOT_AVAILABLE until one
    is)."""
    if kind == EARLIEST:
        return log_start
    if kind == BY_DURATION and found is not None:
        return max(log_start, min(found, high_watermark))
    return high_watermark


def _data_ranges(data: bytes, start: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """The (first, last) offsets of each data batch of ``data`` at or past ``start``, and where the
    batches end (``start`` when there are none): control batches are left out."""
    ranges: list[tuple[int, int]] = []
    position, through = 0, start
    while position < len(data):
        try:
            header = decode_header(data, position)
        except ValueError as exc:
            raise InvalidCommand(f"a batch read back did not frame: {exc}") from None
        position += header.size_bytes
        last = header.end_offset - 1
        through = max(through, header.end_offset)
        if header.is_control or last < start:
            continue
        ranges.append((max(header.base_offset, start), last))
    return tuple(ranges), through
