"""Rewriting a partition log of raftlog's own batch format v1 (magic 1) as Kafka RecordBatch v2, in place:
what ``raftlog log migrate`` does to each log directory of a stopped node.

Offsets, terms (as leader epochs), keys, values, headers, timestamps, producer ids and sequences are kept
(``legacy_batch.convert``, which is deterministic); segments keep their base offsets, and their offset and
time indexes are built again for the new byte positions.

Two passes over a log:

1. :func:`plan_log` reads every segment and writes nothing. It finds each segment's kind (empty, v1, or v2
   already: converted by a run that was interrupted), CRC-checks and decodes every v1 batch, checks that
   offsets are dense within and across segments and that every term fits a Kafka leader epoch (at most
   2**31 - 1). Anything wrong is the plan's ``problem``, and nothing of that log is written.
2. :func:`migrate_log` converts the v1 segments in offset order. A segment's new batches are appended to a
   segment of the same base offset in the staging directory ``migrating/`` inside the log (the same code
   as a live append builds its indexes) and sealed (data and indexes fsynced); then its two index files,
   and after them its data file, are renamed over the old ones, the directory fsynced after each. The
   staging directory is removed, and the ``format`` marker written last (fsync, rename).

A crash at any point leaves each segment's data file either the old one or the new one whole, a new data
file always beside its new indexes, and no marker until every segment is new: a node refuses the log
(``LegacyLogFormat``) until the command, run again, has finished it (segments found in v2 are kept, the
staging directory is discarded). Running it on a finished log does nothing.

Reading and writing files is all this module does; deciding what to do is the plan, made before any
write. The caller holds the data directory's lock (``dirlock``): a node must not run meanwhile.
"""

from __future__ import annotations

import enum
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from raftlog.errors import InvariantViolation, check
from raftlog.storage import legacy_batch
from raftlog.storage.batch import EPOCH_MAX, BatchFormatError, decode_header
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidRecord
from raftlog.storage.log_format import FORMAT, FORMAT_FILE, read_marker, write_marker
from raftlog.storage.log_open import START_OFFSET_FILE
from raftlog.storage.segment import NAME_DIGITS, ScanStop, Segment, fsync_directory, walk

STAGING_DIR = "migrating"  # inside a log directory while it is migrated
READ_CHUNK_BYTES = 4 * 1024 * 1024  # v1 segments are read in chunks of this (or of one larger batch)
PROGRESS_BYTES = 1024 * 1024  # the progress callback hears of converted bytes about this often
# Index spacing of the new segments. The topic's own index.interval.bytes is the controller's, which a
# stopped node's data directory cannot ask; indexes are derived data, and any spacing is valid for them.
# (A closed segment of a topic with a smaller spacing whose new index is empty, one shorter than this
# plus a batch, looks to a node's first open as an index it lost: rebuilt there once, with a warning.)
INDEX_INTERVAL_BYTES = LogConfig().index_interval_bytes
SEQUENCE_MAX = 2**31 - 1  # a Kafka batch's base sequence is an int32
_HAS_PRODUCER = 0x01  # a v1 batch's attributes bit: producer id and sequence present


class SegmentKind(enum.Enum):
    EMPTY = "empty"
    LEGACY = "v1"
    CONVERTED = "v2"  # by an interrupted run


class LogState(enum.Enum):
    MIGRATED = "migrated"  # the marker says Kafka RecordBatch v2: nothing to do
    EMPTY = "empty"  # no batches: only the marker to write
    LEGACY = "legacy"  # segments to convert (some may be converted already), then the marker
    REFUSED = "refused"  # ``problem`` says why; nothing is written


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    base_offset: int
    path: str
    kind: SegmentKind
    size_bytes: int
    end_offset: int
    batches: int
    records: int
    torn_tail_bytes: int = 0  # v1 bytes after the last whole batch of the last segment: dropped


@dataclass(frozen=True, slots=True)
class LogPlan:
    directory: str
    state: LogState
    segments: tuple[SegmentPlan, ...] = ()
    problem: str = ""

    def _legacy(self) -> Iterator[SegmentPlan]:
        return (s for s in self.segments if s.kind is SegmentKind.LEGACY)

    @property
    def legacy_bytes(self) -> int:
        """Bytes of v1 segments to convert."""
        return sum(s.size_bytes for s in self._legacy())

    @property
    def legacy_batches(self) -> int:
        return sum(s.batches for s in self._legacy())

    @property
    def legacy_records(self) -> int:
        return sum(s.records for s in self._legacy())

    @property
    def torn_tail_bytes(self) -> int:
        return sum(s.torn_tail_bytes for s in self.segments)


@dataclass(slots=True)
class LogOutcome:
    """What :func:`migrate_log` did to one log."""

    plan: LogPlan
    segments_converted: int = 0
    batches: int = 0
    records: int = 0
    bytes_before: int = 0  # of the v1 segments converted
    bytes_after: int = 0  # of the v2 segments that replaced them
    steps: list[str] = field(default_factory=list)


def _nothing(_: str) -> None:
    return None


def _no_progress(batches: int, size_bytes: int) -> None:
    return None


# -- which logs need it ------------------------------------------------------------------------------


# -- pass 1: the plan --------------------------------------------------------------------------------


class _Refused(Exception):
    """Planning found a reason not to touch the log (becomes ``LogPlan.problem``)."""


def plan_log(directory: str) -> LogPlan:
    """Read the log in ``directory`` and say what migrating it involves; writes nothing."""
    names = set(os.listdir(directory))
    written = read_marker(directory)
    if written == FORMAT:
        return LogPlan(directory, LogState.MIGRATED)
    if written is not None:
        path = os.path.join(directory, FORMAT_FILE)
        return LogPlan(directory, LogState.REFUSED, problem=f"{path} says {written!r}, not {FORMAT!r}")
    try:
        segments = _plan_segments(directory, names)
    except _Refused as refused:
        return LogPlan(directory, LogState.REFUSED, problem=str(refused))
    if all(s.kind is SegmentKind.EMPTY for s in segments):
        return LogPlan(directory, LogState.EMPTY, tuple(segments))
    return LogPlan(directory, LogState.LEGACY, tuple(segments))


def _start_offset(directory: str, names: set[str]) -> int:
    if START_OFFSET_FILE not in names:
        return 0
    path = os.path.join(directory, START_OFFSET_FILE)
    with open(path, encoding="ascii", errors="replace") as f:
        text = f.read().strip()
    if not text.isdigit():
        raise _Refused(f"{path} holds {text!r}, not an offset")
    return int(text)


def _segment_bases(directory: str, names: set[str]) -> list[int]:
    """Base offsets of the segments a Log would open: not deleted, not below the start offset (the Log
    removes those when it opens)."""
    start = _start_offset(directory, names)
    bases = []
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix == "log" and stem.isdigit() and len(stem) == NAME_DIGITS and int(stem) >= start:
            bases.append(int(stem))
    return sorted(bases)


def _plan_segments(directory: str, names: set[str]) -> list[SegmentPlan]:
    bases = _segment_bases(directory, names)
    plans: list[SegmentPlan] = []
    expected: int | None = None  # where the next batch must start
    for position, base in enumerate(bases):
        path = os.path.join(directory, f"{base:0{NAME_DIGITS}d}.log")
        if expected is not None and base != expected:
            raise _Refused(f"{path}: segment starts at offset {base}, the one before ends at {expected}")
        last = position == len(bases) - 1
        plan = _plan_segment(path, base, last)
        plans.append(plan)
        expected = plan.end_offset
    return plans


def _plan_segment(path: str, base: int, last: bool) -> SegmentPlan:
    size = os.path.getsize(path)
    if size == 0:
        return SegmentPlan(base, path, SegmentKind.EMPTY, 0, base, 0, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, legacy_batch.HEADER_SIZE + 4096, 0)
        if legacy_batch.is_legacy(head) or _starts_legacy(fd, head):
            return _plan_legacy(fd, path, base, size, last)
        if _starts_v2(head):
            return _plan_converted(fd, path, base, size)
        if last:  # an active segment torn within its first batch: the Log would cut it to nothing
            return SegmentPlan(base, path, SegmentKind.LEGACY, size, base, 0, 0, torn_tail_bytes=size)
        raise _Refused(f"{path}: byte 0 starts no batch of format v1 or v2")
    finally:
        os.close(fd)


def _starts_legacy(fd: int, head: bytes) -> bool:
    """A first v1 batch larger than ``head``: read it whole to check its CRC."""
    if len(head) < legacy_batch.HEADER_SIZE or head[8] != legacy_batch.MAGIC:
        return False
    length: int = legacy_batch.HEADER.unpack_from(head)[0]
    return legacy_batch.is_legacy(os.pread(fd, 4 + length, 0))


def _starts_v2(head: bytes) -> bool:
    try:
        decode_header(head)
    except BatchFormatError:
        return False
    return True


def _plan_legacy(fd: int, path: str, base: int, size: int, last: bool) -> SegmentPlan:
    expected = base
    batches = 0
    end = 0
    for position, view in _legacy_batches(fd, size):
        reason = _unconvertible(view, expected)
        if reason:
            raise _Refused(f"{path}: batch at byte {position}: {reason}")
        expected += legacy_batch.HEADER.unpack_from(view)[5]
        batches += 1
        end = position + len(view)
    if end < size and not last:
        raise _Refused(f"{path}: no whole v1 batch with a valid CRC at byte {end} of {size}")
    return SegmentPlan(base, path, SegmentKind.LEGACY, size, expected, batches, expected - base, size - end)


def _unconvertible(batch: memoryview, expected: int) -> str:
    """Why a v1 batch (framing and CRC checked) cannot become a v2 batch at ``expected``, from its header
    alone; empty when it can. Its body, CRC-checked and written by the encoder that checked every record,
    is decoded once, when converted (decoding it here too would double the time a migration takes)."""
    (_, _, _, attributes, base_offset, count, first_ms, max_ms, term, producer_id, sequence) = (
        legacy_batch.HEADER.unpack_from(batch)
    )
    if base_offset != expected:
        return f"starts at offset {base_offset}, not {expected}"
    if count < 1:
        return f"record_count {count}"
    if term > EPOCH_MAX:
        return f"term {term} at offset {base_offset}: no Kafka leader epoch holds it (at most {EPOCH_MAX})"
    if attributes & _HAS_PRODUCER and not (producer_id >= 0 and 0 <= sequence <= SEQUENCE_MAX):
        return (
            f"producer_id {producer_id} with sequence {sequence} at offset {base_offset}: a Kafka batch "
            f"holds a producer id >= 0 and a sequence in [0, {SEQUENCE_MAX}]"
        )
    if first_ms < 0 or max_ms < first_ms:
        return f"timestamps from {first_ms} to {max_ms} at offset {base_offset}: before the epoch"
    return ""


def _plan_converted(fd: int, path: str, base: int, size: int) -> SegmentPlan:
    expected = base
    batches = 0
    try:
        for position, header, _ in walk(fd, 0, size, verify=True):
            if header.base_offset != expected:
                raise _Refused(f"{path}: batch at byte {position} starts at offset {header.base_offset}, "
                               f"not {expected}")  # fmt: skip
            expected = header.end_offset
            batches += 1
    except ScanStop as stop:
        raise _Refused(f"{path}: converted segment damaged at byte {stop.position}: {stop.reason}") from None
    return SegmentPlan(base, path, SegmentKind.CONVERTED, size, expected, batches, expected - base)


def _legacy_batches(fd: int, size: int) -> Iterator[tuple[int, memoryview]]:
    """(byte position, bytes) of each whole v1 batch with a valid CRC from the start of the file, read
    in chunks (framing and CRC only: nothing decoded); stops at the first bytes that are not one (the
    caller compares with the size). A view is valid until the next step."""
    position = 0
    while position < size:
        chunk = os.pread(fd, READ_CHUNK_BYTES, position)
        if len(chunk) >= legacy_batch.HEADER_SIZE and chunk[8] == legacy_batch.MAGIC:
            length: int = legacy_batch.HEADER.unpack_from(chunk)[0]
            if 4 + length > len(chunk) and position + 4 + length <= size:
                chunk = os.pread(fd, 4 + length, position)  # one batch larger than a chunk
        view = memoryview(chunk)
        at = 0
        while at < len(view) and legacy_batch.is_legacy(view, at):
            end = at + 4 + legacy_batch.HEADER.unpack_from(view, at)[0]
            yield position + at, view[at:end]
            at = end
        if at == 0:
            return  # no whole batch at ``position``
        position += at  # the next chunk starts at the first batch this one did not hold whole


# -- pass 2: the rewrite -----------------------------------------------------------------------------


def migrate_log(
    plan: LogPlan,
    progress: Callable[[int, int], None] = _no_progress,
    before_step: Callable[[str], None] = _nothing,
) -> LogOutcome:
    """Carry out ``plan`` (from :func:`plan_log`, with nothing changed in the directory since). A
    refused or migrated log is left as it is. ``progress(batches, size_bytes)`` hears of v1 batches and
    bytes converted since its last call; ``before_step(name)`` runs before each step that changes the
    directory (a test stops the migration there, as a crash would)."""
    outcome = LogOutcome(plan)
    if plan.state in (LogState.MIGRATED, LogState.REFUSED):
        return outcome
    directory = plan.directory
    staging = os.path.join(directory, STAGING_DIR)
    if os.path.lexists(staging):
        _step(outcome, before_step, "discard staging left by an interrupted run")
        shutil.rmtree(staging)
        fsync_directory(directory)
    for segment in plan.segments:
        if segment.kind is SegmentKind.LEGACY:
            _convert_segment(segment, staging, outcome, progress, before_step)
    if os.path.lexists(staging):
        _step(outcome, before_step, "remove staging")
        os.rmdir(staging)
        fsync_directory(directory)
    _step(outcome, before_step, "write format marker")
    write_marker(directory)
    return outcome


def _step(outcome: LogOutcome, before_step: Callable[[str], None], name: str) -> None:
    before_step(name)
    outcome.steps.append(name)


def _convert_segment(
    plan: SegmentPlan,
    staging: str,
    outcome: LogOutcome,
    progress: Callable[[int, int], None],
    before_step: Callable[[str], None],
) -> None:
    directory = os.path.dirname(plan.path)
    name = os.path.basename(plan.path)
    _step(outcome, before_step, f"stage {name}")
    os.makedirs(staging, exist_ok=True)
    segment = Segment(staging, plan.base_offset, INDEX_INTERVAL_BYTES)
    try:
        _append_converted(plan, segment, progress)
        segment.seal()
        staged = [segment.index.path, segment.time_index.path, segment.path]
        size_after = segment.size
    finally:
        segment.close()
    fsync_directory(staging)
    outcome.bytes_after += size_after
    for path in staged[:2]:
        _step(outcome, before_step, f"rename {os.path.basename(path)}")
        os.replace(path, os.path.join(directory, os.path.basename(path)))
    fsync_directory(directory)
    _step(outcome, before_step, f"rename {name}")  # the segment's commit point: its data file
    os.replace(staged[2], plan.path)
    fsync_directory(directory)
    outcome.segments_converted += 1
    outcome.batches += plan.batches
    outcome.records += plan.records
    outcome.bytes_before += plan.size_bytes


def _append_converted(plan: SegmentPlan, segment: Segment, progress: Callable[[int, int], None]) -> None:
    fd = os.open(plan.path, os.O_RDONLY)
    try:
        batches = unreported_batches = unreported_bytes = 0
        for _, view in _legacy_batches(fd, plan.size_bytes):
            try:
                converted = legacy_batch.convert(view)
            except (BatchFormatError, InvalidRecord) as exc:  # the plan decoded it: a bug, or a changed file
                raise InvariantViolation(f"{plan.path}: batch {batches} no longer converts: {exc}") from exc
            segment.append(converted, decode_header(converted), 0)
            batches += 1
            unreported_batches += 1
            unreported_bytes += len(view)
            if unreported_bytes >= PROGRESS_BYTES:
                progress(unreported_batches, unreported_bytes)
                unreported_batches = unreported_bytes = 0
        check(
            batches == plan.batches and segment.end_offset == plan.end_offset,
            f"{plan.path}: converted {batches} batches up to offset {segment.end_offset}, the plan read "
            f"{plan.batches} up to {plan.end_offset}",
        )
        progress(unreported_batches, unreported_bytes + plan.torn_tail_bytes)
    finally:
        os.close(fd)
