"""Sparse indexes of one segment, stored beside it and never held whole in memory.

``.index``:     entries of (relative_offset u32, position u32), both strictly increasing. An entry says
                "the batch whose base offset is base_offset + relative_offset starts at byte position".
``.timeindex``: entries of (timestamp i64, relative_offset u32), timestamps strictly increasing. An entry
                says "every record up to and including the batch at that offset has timestamp <= ts".

Lookups binary-search the file with ``pread``; only the entry count and the last entry live in memory.
Both files are derived data: recovery rebuilds them from the segment when missing or inconsistent.
"""

from __future__ import annotations

import os
import struct

from raftlog.errors import check
from raftlog.storage.handle import FileHandle

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class _EntryFile(FileHandle):
    """A file of fixed-size, sorted entries, appended and searched with ``pwrite``/``pread``. Its
    descriptor closes on :meth:`release_descriptor` (see ``Segment.release_handles``)."""

    def __init__(self, path: str, entry: struct.Struct) -> None:
        super().__init__(path)
        self._entry = entry
        size = os.fstat(self.fd).st_size
        whole = size - size % entry.size
        if whole != size:  # a torn trailing entry: drop it
            os.ftruncate(self.fd, whole)
        self.count = whole // entry.size
        self.last: tuple[int, int] | None = self.entry(self.count - 1) if self.count else None
        self._dirty = False

    def entry(self, index: int) -> tuple[int, int]:
        data = os.pread(self.fd, self._entry.size, index * self._entry.size)
        check(len(data) == self._entry.size, f"{self.path}: short read of entry {index} of {self.count}")
        first, second = self._entry.unpack(data)
        return int(first), int(second)

    def append(self, first: int, second: int) -> None:
        """Raises ``OSError`` (the disk is full, an I/O error) with the file cut back to its entries."""
        data = self._entry.pack(first, second)
        position = self.count * self._entry.size
        written = 0
        try:
            while written < len(data):  # a short write is followed by one that says why it stopped
                written += os.pwrite(self.fd, data[written:], position + written)
        except OSError:
            if written:
                os.ftruncate(self.fd, position)  # no torn entry (the open would drop one anyway)
            raise
        self.count += 1
        self.last = (first, second)
        self._dirty = True

    def floor(self, key: int) -> int:
        """Index of the last entry whose first field is <= key, or -1. A key at or past the last entry (a
        read at the log's end, what a consumer keeping up asks) is answered from memory, without a read."""
        if self.last is not None and self.last[0] <= key:
            return self.count - 1
        low, high = 0, self.count - 1
        found = -1
        while low <= high:
            mid = (low + high) // 2
            if self.entry(mid)[0] <= key:
                found = mid
                low = mid + 1
            else:
                high = mid - 1
        return found

    def lower(self, key: int) -> int:
        """Index of the last entry whose first field is < key, or -1."""
        return self.floor(key - 1)

    def truncate_entries(self, keep: int) -> None:
        check(0 <= keep <= self.count, f"{self.path}: keep={keep} outside [0, {self.count}]")
        os.ftruncate(self.fd, keep * self._entry.size)
        self.count = keep
        self.last = self.entry(keep - 1) if keep else None
        self._dirty = True

    def entries(self) -> list[tuple[int, int]]:
        """All entries (for consistency checks and tests; bounded by segment size / index interval)."""
        data = os.pread(self.fd, self.count * self._entry.size, 0)
        return [(int(a), int(b)) for a, b in self._entry.iter_unpack(data)]

    def flush(self) -> None:
        if self._dirty:
            os.fdatasync(self.fd)
            self._dirty = False


class _SparseIndex:
    """What both indexes share: a sorted entry file and the segment's base offset."""

    _entry: struct.Struct
    _second_may_repeat: bool  # an entry's second field may equal the last one's (else it increases)

    def __init__(self, path: str, base_offset: int) -> None:
        self.base_offset = base_offset
        self._file = _EntryFile(path, self._entry)

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def count(self) -> int:
        return self._file.count

    def _relative(self, offset: int) -> int:
        """``offset`` as stored in an entry: relative to the base offset, within a u32."""
        relative = offset - self.base_offset
        check(
            0 <= relative < 2**32, f"{self.path}: offset {offset} not within u32 of base {self.base_offset}"
        )
        return relative

    def _append(self, first: int, second: int) -> None:
        """An entry after the last one: its first field greater, its second greater or, where the index
        allows it, equal (an entry out of order is a bug: it would mislead every lookup)."""
        last = self._file.last
        check(
            last is None
            or (first > last[0] and (second > last[1] or (second == last[1] and self._second_may_repeat))),
            f"{self.path}: entry ({first}, {second}) does not follow last entry {last}",
        )
        self._file.append(first, second)

    def flush(self) -> None:
        self._file.flush()

    def keep(self, count: int) -> None:
        """Keep only the first ``count`` entries (an append that failed after its entries were written)."""
        if count < self._file.count:
            self._file.truncate_entries(count)

    def open(self) -> None:
        self._file.fd.bit_length()  # the property opens it

    def release(self) -> None:
        self._file.release_descriptor()

    def close(self) -> None:
        self._file.close_descriptor()


class OffsetIndex(_SparseIndex):
    """Sparse map from offset to byte position in the segment's data file."""

    _entry = _OFFSET_ENTRY
    _second_may_repeat = False

    def append(self, offset: int, position: int) -> None:
        self._append(self._relative(offset), position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch starting at or before ``offset``, else (base, 0)."""
        found = self._file.floor(offset - self.base_offset)
        if found < 0:
            return self.base_offset, 0
        relative, position = self._file.entry(found)
        return self.base_offset + relative, position

    def last(self) -> tuple[int, int] | None:
        if self._file.last is None:
            return None
        return self.base_offset + self._file.last[0], self._file.last[1]

    def truncate_from(self, offset: int) -> None:
        """Drop entries for batches at or after ``offset``."""
        self._file.truncate_entries(self._file.lower(offset - self.base_offset) + 1)

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in self._file.entries()]


class TimeIndex(_SparseIndex):
    """Sparse map from the running maximum timestamp to the batch that reached it."""

    _entry = _TIME_ENTRY
    _second_may_repeat = True

    def append(self, timestamp_ms: int, offset: int) -> None:
        self._append(timestamp_ms, self._relative(offset))

    def max_timestamp(self) -> int | None:
        return None if self._file.last is None else self._file.last[0]

    def scan_start(self, timestamp_ms: int) -> int:
        """An offset from which a forward scan finds the first record with timestamp >= ``timestamp_ms``.

        Every record in batches up to the returned entry's batch has a smaller timestamp, so the answer
        lies at or after it.
        """
        found = self._file.lower(timestamp_ms)
        if found < 0:
            return self.base_offset
        return self.base_offset + self._file.entry(found)[1]

    def truncate_from(self, offset: int) -> None:
        """Drop entries for batches at or after ``offset``."""
        relative = offset - self.base_offset
        keep = 0
        for keep_count, (_, entry_relative) in enumerate(self._file.entries(), start=1):
            if entry_relative >= relative:
                break
            keep = keep_count
        self._file.truncate_entries(keep)

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in self._file.entries()]
