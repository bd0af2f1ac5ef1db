"""The read side of a partition's log: what a read resolved under the log's lock reads without it.

A :class:`LogView` holds the segments and byte ranges a read covers (``Log.read_view`` resolves them under
the lock); its preads, CRC checks and decoding run without the lock, so a large fetch does not delay the
appends of the thread applying the partition's entries. A :class:`LogReader` streams one segment's view at a
time. Both hold segments (``Segment.acquire``) until closed, so retention, truncation, handle sweeps and the
log's close leave the files readable meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from raftlog.storage.batch import BatchFormatError, BatchHeader, Record, decode_records
from raftlog.storage.closing import Closing
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.segment import Segment, batch_bytes


@dataclass(frozen=True, slots=True)
class ReadBatch:
    """A CRC-checked raw batch as read from disk (for replication and zero-copy serving)."""

    header: BatchHeader
    data: bytes

    def records(self) -> tuple[Record, ...]:
        return decode_records(self.data, self.header)


class LogView(Closing):
    """A read resolved by :meth:`Log.read_view`: byte ranges of held segments, read without the lock.

    ``spans``: (segment, first batch's byte position, readable end when the view was taken). Reading
    sees exactly the batches the log held then: what is appended later lies past the ends, and a segment
    deleted or a log closed meanwhile stays readable through the descriptors the view holds. (Bytes that
    :meth:`Log.truncate` cuts from under a view, entries nobody committed, read as corruption.)"""

    def __init__(
        self,
        lock: threading.Lock | threading.RLock,
        directory: str,
        offset: int,
        max_bytes: int | None,
        limit: int,
        spans: list[tuple[Segment, int, int]],
    ) -> None:
        self._lock = lock  # the log's: segments are released under it
        self.directory = directory
        self.offset = offset
        self.max_bytes = max_bytes  # None: no byte budget
        self.limit = limit  # no batch starting at or after it: min(max_offset, end offset then)
        self._spans = spans
        # after records() or read_bytes(): the end offset of the last batch read (None: none was)
        self.batches_end: int | None = None

    def iter_batches(self) -> Iterator[ReadBatch]:
        """The batches one by one (preads and CRC checks as they go), cut as :meth:`Log.read_batches`."""
        total = 0
        first = True
        for segment, position, end in self._spans:
            for _, header, view in segment.batches(position, end):
                size = header.size_bytes
                if header.base_offset >= self.limit:
                    return
                if not first and self.max_bytes is not None and total + size > self.max_bytes:
                    return
                first = False
                total += size
                yield ReadBatch(header, batch_bytes(view))

    def batches(self) -> list[ReadBatch]:
        return list(self.iter_batches())

    def read_bytes(self) -> bytes:
        """The batches :meth:`iter_batches` yields, as one bytes object: each span read with one ``pread``
        of what the byte budget leaves (the first batch whole, however large) and its batches
        CRC-checked in that buffer, not copied out one by one and joined (``batches_end`` learned on the
        way). No copy but the kernel's when the view ends where a read did; else one of the bytes kept."""
        runs: list[bytes] = []
        total = 0
        for segment, position, end in self._spans:
            budget = None if self.max_bytes is None else self.max_bytes - total
            run, stopped, run_end = segment.read_run(
                position, end, budget, self.limit, whole_first=total == 0
            )
            if run:
                runs.append(run)
                total += len(run)
                self.batches_end = run_end
            if stopped:
                break
        return runs[0] if len(runs) == 1 else b"".join(runs)

    def records(self) -> list[Record]:
        """The records from the view's offset on, below its limit; a batch that does not decode is
        ``CorruptRecord`` (its CRC held: a bug, or damage the CRC missed)."""
        offset, limit = self.offset, self.limit
        records: list[Record] = []
        for batch in self.iter_batches():
            self.batches_end = batch.header.end_offset
            try:
                decoded = batch.records()
            except BatchFormatError as exc:
                raise CorruptRecord(
                    self.directory, -1, f"batch at offset {batch.header.base_offset}: {exc}"
                ) from exc
            if not decoded:
                continue  # every record of it went to compaction: its offsets are covered, none is read
            if decoded[0].offset >= offset and decoded[-1].offset < limit:
                records.extend(decoded)
            else:
                records.extend(r for r in decoded if offset <= r.offset < limit)
        return records

    @property
    def is_empty(self) -> bool:
        return not self._spans

    @property
    def size_bytes(self) -> int:
        """About what reading the view costs: the bytes its spans hold, or the byte budget if less (a
        first batch larger than the budget is still read whole)."""
        held = sum(end - position for _, position, end in self._spans)
        return held if self.max_bytes is None else min(held, self.max_bytes)

    def close(self) -> None:
        """Let go of the segments (idempotent): a deleted one's files go to their discard now."""
        spans, self._spans = self._spans, []
        if spans:
            with self._lock:
                for segment, _, _ in spans:
                    segment.release()


class LogReader(Closing):
    """Streams batches from an offset, one segment at a time: a :class:`LogView` of the segment it is in
    (held, so deletion cannot pull it away; read without the log's lock), then of the next one.
    ``segment_view(offset)``: the log's view of the one segment holding ``offset``, None at the end."""

    def __init__(self, segment_view: Callable[[int], LogView | None], offset: int) -> None:
        self._segment_view = segment_view
        self._next_offset = offset
        self._view: LogView | None = None
        self._batches: Iterator[ReadBatch] | None = None

    def __iter__(self) -> Iterator[ReadBatch]:
        while True:
            batch = self.next_batch()
            if batch is None:
                return
            yield batch

    def next_batch(self) -> ReadBatch | None:
        """The next batch, or None at the end of the log (or at ``max_offset``). ``OffsetOutOfRange`` when
        the next segment was deleted before the reader got to it."""
        while True:  # at most two turns: a view's end, then a view of the next segment (never empty)
            if self._batches is None:
                view = self._segment_view(self._next_offset)
                if view is None:
                    return None
                self._view, self._batches = view, view.iter_batches()
            batch = next(self._batches, None)
            if batch is not None:
                self._next_offset = batch.header.end_offset
                return batch
            self.close()

    def close(self) -> None:
        if self._view is not None:
            self._view.close()
        self._view, self._batches = None, None
