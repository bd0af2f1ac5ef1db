"""Whether a partition's replicas hold the same bytes (``raftlog log compare``): each replica's log
directory read without a server and without a lock, its stored batches (Kafka RecordBatch v2, as written)
walked in offset order beside the other replicas', and compared byte for byte.

What is compared:
- From the highest log start offset (retention or DeleteRecords may have moved one replica's start before
  another's), or from the highest offset below which a replica's compaction rewrote batches on purpose
  (``cleaner-offsets``: each replica compacts its own copy, at its own time), whichever is higher.
- As long as at least two replicas hold batches: a replica that ends earlier is behind (it has not yet
  applied what its peers hold, or it stopped), not different; the others are compared on among themselves.
- Up to the first difference, which ends the partition's comparison: after it offsets are shifted or
  bytes rewritten anyway. A difference is a missing batch (one replica's next batch starts later than
  another's), different bytes (with the header fields that differ, so that diverged offsets show), or
  a replica whose bytes are no batch (damage: ``raftlog log verify`` says more).

A running node's files are read as they are: the last (active) segment only as far as its last whole
batch when the replica was opened (bytes after it, a write in progress or a torn tail that a node's
recovery drops, are counted, not compared), the others as they hold when opened. A file deleted or cut
while read (retention, compaction or a truncation on a running node) raises ``ReplicaChanged``;
``compare_partition`` then reads the partition again, a few times at most, as it does when replicas that
differ changed meanwhile. Nothing is written, and no lock is taken: who holds the lock file above a
replica's directory (``dirlock``) is only read, to say that its node may be running.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass

from raftlog.errors import check
from raftlog.storage import log_format
from raftlog.storage.batch import BatchHeader, crc_ok
from raftlog.storage.dirlock import HOLDER_BYTES_MAX, LOCK_FILE, Holder
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.inspect import data_files
from raftlog.storage.log_open import read_cleaner_offsets, read_start_offset
from raftlog.storage.segment import ScanStop, batch_bytes, walk, walk_headers

ATTEMPTS = 3  # reads of a partition whose files changed under the comparison before giving up
HOLDER_LEVELS = 3  # a replica's directory is DATA_DIR/logs/GROUP; raftlog dev's folder holds DATA_DIR

# A batch header's fields as an operator names them, in the order they are shown.
HEADER_FIELDS = (
    ("base_offset", "base offset"),
    ("length", "length"),
    ("crc", "CRC"),
    ("record_count", "records count"),
    ("last_offset_delta", "last offset delta"),
    ("attributes", "attributes"),
    ("term", "leader epoch"),
    ("first_timestamp_ms", "first timestamp"),
    ("max_timestamp_ms", "max timestamp"),
    ("producer_id", "producer id"),
    ("producer_epoch", "producer epoch"),
    ("sequence", "base sequence"),
)


class Unreadable(Exception):
    """A directory that cannot be compared: unreadable, no partition log, a log of batch format v1, or a
    partition whose files kept changing while read. Names it and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ReplicaChanged(Exception):
    """A replica's data file was deleted or cut while it was read (a running node's retention,
    compaction or truncation)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


class _Damaged(Exception):
    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path} at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica's log as it was when opened (``open_replica``)."""

    name: str
    directory: str
    segments: tuple[tuple[int, str], ...]  # (base offset, data file), in offset order
    log_start_offset: int
    end_offset: int  # after the last whole batch of the last segment
    last_segment_bytes: int  # of the last segment: up to the end of its last whole batch
    tail_bytes: int  # after that: a write in progress, or a torn tail; not compared
    tail_reason: str  # why the walk stopped there ("" when the file ends with its last whole batch)
    compacted_below: int  # compaction may have rewritten the batches below it (cleaner-offsets)
    level: int | None  # what the format marker names (log_format.marker_level); None: no marker yet
    holder: Holder | None  # who the lock file above the directory names: its node may be running


def open_replica(name: str, directory: str) -> Replica:
    """Read what ``directory``'s log holds: its segments, log start, end and compaction's progress.
    Raises ``Unreadable`` (no log here, or one of format v1) or ``ReplicaChanged``."""
    try:
        files = data_files(directory)
    except OSError as exc:
        raise Unreadable(directory, exc.strerror or str(exc)) from None
    written = log_format.read_marker(directory)
    level = None if written is None else log_format.marker_level(written)
    if written is not None and level is None:
        raise Unreadable(directory, f"its format marker says {written!r}, not {log_format.FORMAT!r}")
    if written is None and log_format.needs_migration(directory):
        raise Unreadable(
            directory,
            "batch format v1 (before Kafka's RecordBatch v2): `raftlog log migrate DATA_DIR` rewrites it, "
            "with the node stopped",
        )
    if not files:
        raise Unreadable(directory, "holds no segment (NNNNNNNNNNNNNNNNNNNN.log): no partition log")
    try:
        start = read_start_offset(directory)
        compacted_below = read_cleaner_offsets(directory).rewritten_below
    except CorruptRecord as exc:
        raise Unreadable(directory, str(exc)) from None
    base, path = files[-1]
    end_offset, whole, tail_bytes, tail_reason = _last_segment(path, base)
    return Replica(
        name,
        directory,
        tuple(files),
        max(files[0][0], start),
        end_offset,
        whole,
        tail_bytes,
        tail_reason,
        compacted_below,
        level,
        _holder(directory),
    )


def _last_segment(path: str, base_offset: int) -> tuple[int, int, int, str]:
    """(end offset, bytes up to the end of the last whole batch, bytes after it, why they are no batch)
    of the last segment, as it is now: its batches' headers only."""
    with _opened(path, "deleted while the replica was opened") as (fd, size):
        end_offset, whole, reason = base_offset, 0, ""
        try:
            for position, header in walk_headers(fd, 0, size):
                end_offset, whole = header.end_offset, position + header.size_bytes
        except ScanStop as stop:
            reason = stop.reason
        return end_offset, whole, size - whole, reason


@contextlib.contextmanager
def _opened(path: str, gone: str) -> Iterator[tuple[int, int]]:
    """A segment file's descriptor, read-only, and its size now; closed on leaving. Raises
    ``ReplicaChanged(path, gone)`` when there is no such file any more."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise ReplicaChanged(path, gone) from None
    try:
        yield fd, os.fstat(fd).st_size
    finally:
        os.close(fd)


def _holder(directory: str) -> Holder | None:
    """Who the nearest lock file above ``directory`` names (read, never locked): a node, or raftlog dev,
    that holds it now or held it when it was killed."""
    path = os.path.abspath(directory)
    for _ in range(HOLDER_LEVELS):
        path = os.path.dirname(path)
        try:
            with open(os.path.join(path, LOCK_FILE), "rb") as f:
                holder = Holder.decode(f.read(HOLDER_BYTES_MAX))
        except OSError:
            continue
        if holder is not None:
            return holder
    return None


# -- comparing -------------------------------------------------------------------------------------


class DifferenceKind(enum.Enum):
    MISSING_BATCH = "missing batch"  # a replica's next batch starts later than another's
    BYTES = "different bytes"
    DAMAGED = "damaged"  # a replica's bytes are no batch


@dataclass(frozen=True, slots=True)
class BatchSeen:
    """One replica's batch where the replicas differ."""

    path: str
    position: int
    header: BatchHeader
    crc_valid: bool  # the stored CRC matches the batch's bytes


@dataclass(frozen=True, slots=True)
class Difference:
    offset: int  # the first offset at which the replicas differ
    kind: DifferenceKind
    fields: tuple[str, ...]  # the header fields that differ (HEADER_FIELDS' names), in that order
    batches: tuple[BatchSeen | None, ...]  # each replica's batch there; None: it holds none there
    damage: str = ""  # DAMAGED: which file, where, what


@dataclass(frozen=True, slots=True)
class Comparison:
    partition: str
    replicas: tuple[Replica, ...]
    compared_from: int
    compared_to: int  # every replica holding offsets in [compared_from, compared_to) holds the same bytes
    batches: int  # batches compared (each held by two replicas or more)
    difference: Difference | None

    @property
    def identical(self) -> bool:
        return self.difference is None

    @property
    def end_offset(self) -> int:
        return max(r.end_offset for r in self.replicas)

    def behind(self, replica: Replica) -> int:
        """How many offsets ``replica`` lacks at its end that another replica holds."""
        return self.end_offset - replica.end_offset


@dataclass(slots=True)
class _Stored:
    path: str
    position: int
    header: BatchHeader
    view: memoryview


def _batches(replica: Replica, from_offset: int) -> Generator[_Stored]:
    """The replica's batches that hold offsets from ``from_offset`` on, in offset order, as stored (each
    view valid until the next step). Raises ``_Damaged`` at bytes that are no batch, ``ReplicaChanged``
    when a file is gone or cut."""
    segments = replica.segments
    for index, (_, path) in enumerate(segments):
        last = index + 1 == len(segments)
        if not last and segments[index + 1][0] <= from_offset:
            continue
        with _opened(path, "deleted while read") as (fd, size):
            end = replica.last_segment_bytes if last else size
            if size < end:
                raise ReplicaChanged(path, f"holds {size} bytes, {end} when the replica was opened")
            try:
                for position, header, view in walk(fd, 0, end, verify=False):
                    if header.end_offset > from_offset:
                        yield _Stored(path, position, header, view)
            except ScanStop as stop:
                if os.fstat(fd).st_size < end:
                    raise ReplicaChanged(path, "cut while read") from None
                raise _Damaged(path, stop.position, stop.reason) from None


def differing_fields(headers: Sequence[BatchHeader]) -> tuple[str, ...]:
    return tuple(
        name for attribute, name in HEADER_FIELDS if len({getattr(h, attribute) for h in headers}) > 1
    )


def compare(partition: str, replicas: Sequence[Replica]) -> Comparison:
    """Walk the replicas' batches side by side from where all of them hold offsets; see the module's
    docstring. Raises ``ReplicaChanged``."""
    check(len(replicas) >= 2, f"comparing partition {partition} needs two replicas, got {len(replicas)}")
    compared_from = max(max(r.log_start_offset for r in replicas), max(r.compacted_below for r in replicas))
    walks = [_batches(r, compared_from) for r in replicas]
    current: list[_Stored | None] = [None] * len(replicas)
    batches = 0
    compared_to = compared_from

    def result(difference: Difference | None) -> Comparison:
        return Comparison(partition, tuple(replicas), compared_from, compared_to, batches, difference)

    try:
        while True:  # each step moves every walk on by a batch: bounded by the batches the files hold
            for i, walk_ in enumerate(walks):
                try:
                    current[i] = next(walk_, None)
                except _Damaged as damaged:
                    nothing = tuple(None for _ in replicas)
                    damage = f"{replicas[i].name}: {damaged}"
                    return result(Difference(compared_to, DifferenceKind.DAMAGED, (), nothing, damage))
            holding = [b for b in current if b is not None]
            if len(holding) < 2:
                return result(None)
            base = min(b.header.base_offset for b in holding)
            if any(b.header.base_offset != base for b in holding):
                kind = DifferenceKind.MISSING_BATCH if base >= compared_from else DifferenceKind.BYTES
            elif _same_bytes(holding):
                batches += 1
                compared_to = holding[0].header.end_offset
                continue
            else:
                kind = DifferenceKind.BYTES
            seen = tuple(None if b is None else _seen(b) for b in current)
            fields = differing_fields([b.header for b in holding])
            return result(Difference(max(base, compared_from), kind, fields, seen))
    finally:
        for walk_ in walks:
            walk_.close()


def _same_bytes(batches: Sequence[_Stored]) -> bool:
    first = batches[0]
    if any(b.header.crc != first.header.crc or b.header.length != first.header.length for b in batches):
        return False
    data = batch_bytes(first.view)
    return all(batch_bytes(b.view) == data for b in batches[1:])


def _seen(stored: _Stored) -> BatchSeen:
    return BatchSeen(stored.path, stored.position, stored.header, crc_ok(stored.view, stored.header))


def _unchanged(replica: Replica) -> bool:
    """Whether what decides where ``replica`` is compared is as it was when it was opened: its log start,
    compaction's progress and its last segment (a running node's retention, cleaner or truncation moves
    them; its appends do not count)."""
    try:
        again = open_replica(replica.name, replica.directory)
    except (Unreadable, ReplicaChanged):
        return False
    return (
        again.segments[0] == replica.segments[0]
        and again.log_start_offset == replica.log_start_offset
        and again.compacted_below == replica.compacted_below
        and replica.segments[-1] in again.segments
        and (again.segments[-1] != replica.segments[-1] or again.end_offset >= replica.end_offset)
    )


def compare_partition(partition: str, directories: Sequence[tuple[str, str]]) -> Comparison:
    """Compare the replicas at ``directories`` ((name, log directory) each), read again when a file
    changed under the comparison, or when replicas that differ changed meanwhile (``ATTEMPTS`` reads at
    most). Raises ``Unreadable``."""
    for _ in range(ATTEMPTS):
        try:
            replicas = [open_replica(name, directory) for name, directory in directories]
            comparison = compare(partition, replicas)
        except ReplicaChanged:
            continue
        if comparison.identical or all(_unchanged(r) for r in replicas):
            return comparison
    raise Unreadable(
        partition,
        f"its files changed under each of {ATTEMPTS} reads (a running node's retention, compaction or "
        "truncation): run it again",
    )
