"""The lazy file system's page cache, pure: what one file holds that its backing file does not yet.

A file's :class:`FileCache` is what a power failure would lose: the byte ranges written since its last
sync (sorted, disjoint, adjacent ranges merged), its size now, and ``floor``, the lowest size it had since
that sync (the backing file is trusted only below it: a truncation followed by a write past the old end
reads zeros in between, as it would on a disk). No I/O here: :meth:`FileCache.read` is given the backing
file's bytes, :meth:`FileCache.flush_plan` says what to write through to make the backing file equal the
cached one. Tested against a plain ``bytearray`` model (``tests/jepsen/test_jepsen_page_cache.py``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class FlushPlan:
    """How to make the backing file equal the cached one: cut it to ``cut_to`` (None: no cut), write
    every ``(offset, bytes)``, then set its size to ``size``; then fsync it."""

    cut_to: int | None
    writes: list[tuple[int, bytes]]
    size: int


@dataclass
class FileCache:
    """One file's unsynced state; made with the backing file's size when the file is first changed."""

    backing_size: int
    size: int = -1
    floor: int = -1
    starts: list[int] = field(default_factory=list)  # sorted starts of the dirty extents
    extents: list[bytearray] = field(default_factory=list)  # extents[i] starts at starts[i]

    def __post_init__(self) -> None:
        if self.backing_size < 0:
            raise ValueError(f"a backing file of {self.backing_size} bytes")
        if self.size < 0:
            self.size = self.backing_size
        if self.floor < 0:
            self.floor = self.backing_size

    @property
    def dirty_bytes(self) -> int:
        """Bytes a power failure would lose now (written ranges; a size change alone counts as 0)."""
        return sum(len(extent) for extent in self.extents)

    @property
    def changed(self) -> bool:
        """Whether the backing file differs from the cached one (data or size)."""
        return bool(self.extents) or self.size != self.backing_size or self.floor != self.backing_size

    def write(self, offset: int, data: bytes) -> None:
        if offset < 0:
            raise ValueError(f"a write at offset {offset}")
        if not data:
            return
        end = offset + len(data)
        # the extents touching [offset, end] (adjacent ones included): first .. last-1
        first = bisect.bisect_left(self.starts, offset)
        if first > 0 and self.starts[first - 1] + len(self.extents[first - 1]) >= offset:
            first -= 1
        last = bisect.bisect_right(self.starts, end)
        if first == last:
            self.starts.insert(first, offset)
            self.extents.insert(first, bytearray(data))
        else:
            start = min(self.starts[first], offset)
            merged = self.extents[first]
            if self.starts[first] > offset:
                merged = bytearray(self.starts[first] - offset) + merged
            for i in range(first + 1, last):  # later extents, placed at their offsets (gaps are
                gap = self.starts[i] - start - len(merged)  # overwritten by ``data`` below)
                if gap > 0:
                    merged += bytes(gap)
                tail = self.starts[i] - start
                merged[tail : tail + len(self.extents[i])] = self.extents[i]
            merged[offset - start : end - start] = data  # in place when it only extends the end
            del self.starts[first + 1 : last], self.extents[first + 1 : last]
            self.starts[first], self.extents[first] = start, merged
        self.size = max(self.size, end)

    def truncate(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"a truncation to {size} bytes")
        if size < self.size:
            keep = bisect.bisect_left(self.starts, size)
            del self.starts[keep:], self.extents[keep:]
            if self.extents and self.starts[-1] + len(self.extents[-1]) > size:
                del self.extents[-1][size - self.starts[-1] :]
            self.floor = min(self.floor, size)
        self.size = size

    def read(self, offset: int, length: int, backing: Callable[[int, int], bytes]) -> bytes:
        """``length`` bytes at ``offset`` as the file reads now (short at its end); ``backing(offset,
        length)`` reads the backing file (only ever below ``floor``)."""
        end = min(offset + length, self.size)
        if offset >= end:
            return b""
        below = min(end, self.floor)
        out = bytearray(backing(offset, below - offset) if offset < below else b"")
        if len(out) < end - offset:  # beyond the floor (or a short backing read): zeros
            out += bytes(end - offset - len(out))
        i = max(0, bisect.bisect_right(self.starts, offset) - 1)
        while i < len(self.starts) and self.starts[i] < end:
            start, extent = self.starts[i], self.extents[i]
            lo, hi = max(start, offset), min(start + len(extent), end)
            if lo < hi:
                out[lo - offset : hi - offset] = extent[lo - start : hi - start]
            i += 1
        return bytes(out)

    def flush_plan(self) -> FlushPlan:
        cut_to = self.floor if self.floor < self.backing_size else None
        writes = [(start, bytes(extent)) for start, extent in zip(self.starts, self.extents, strict=True)]
        return FlushPlan(cut_to, writes, self.size)

    def flushed(self) -> None:
        """The plan was written and fsynced: the backing file is the file now."""
        self.backing_size = self.floor = self.size
        self.starts.clear()
        self.extents.clear()
