"""Typed errors raised by the storage engine. ``api/errors.py`` maps each one to HTTP exactly once."""

from __future__ import annotations

from raftlog.errors import RaftlogError, with_fields


class StorageError(RaftlogError):
    """Base of every error raised by ``raftlog.storage``."""


@with_fields
class InvalidConfig(StorageError):
    """A log configuration value is missing, malformed or outside its allowed range."""

    key: str
    value: object
    reason: str
    template = "invalid config {key}={value!r}: {reason}"


@with_fields
class RecordTooLarge(StorageError):
    """A record or batch is larger than ``max.message.bytes``; nothing was written."""

    size_bytes: int
    limit_bytes: int
    template = "batch of {size_bytes} bytes exceeds max.message.bytes={limit_bytes}"


@with_fields
class RecordBatchTooLarge(RecordTooLarge):
    """A batch larger than its topic's ``segment.bytes``: no segment could hold it (Kafka's
    ``RecordBatchTooLargeException``); nothing was written."""

    size_bytes: int
    limit_bytes: int
    template = "batch of {size_bytes} bytes exceeds segment.bytes={limit_bytes}"


class InflatedTooLarge(RecordTooLarge):
    """A compressed batch whose records inflate past the bound they may inflate to (a decompression
    bomb, or a batch compressed far better than any the node takes); nothing was written. Inflating
    stopped at ``size_bytes``, just past ``limit_bytes``: the whole would have been larger still."""

    def __init__(
        self, codec: str, compressed_bytes: int, size_bytes: int, limit_bytes: int, why: str = ""
    ) -> None:
        StorageError.__init__(
            self,
            f"the records of a {codec} batch of {compressed_bytes} bytes: {why}"
            if why
            else f"the records of a {codec} batch of {compressed_bytes} bytes inflate past {limit_bytes} "
            "bytes, the most a batch's records may inflate to here",
        )
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        self.codec = codec
        self.compressed_bytes = compressed_bytes


class InvalidRecord(StorageError):
    """A record or batch given to the log is malformed (empty batch, wrong types, bad offsets)."""


@with_fields
class CorruptRecord(StorageError):
    """Bytes on disk fail their CRC or framing check. Names the file and byte position."""

    path: str
    position: int
    reason: str
    template = "corrupt record batch in {path} at byte {position}: {reason}"


@with_fields
class OffsetOutOfRange(StorageError):
    """An offset outside ``[log_start_offset, end_offset]``."""

    offset: int
    log_start_offset: int
    end_offset: int
    template = (
        "offset {offset} is out of range [log_start_offset={log_start_offset}, end_offset={end_offset}]"
    )


@with_fields
class NotBatchBoundary(StorageError):
    """A tail truncation was asked for at an offset inside a batch; batches are never split."""

    offset: int
    batch_base_offset: int
    batch_end_offset: int
    template = "cannot truncate at offset {offset}: inside batch [{batch_base_offset}, {batch_end_offset})"


class LogClosed(StorageError):
    """The log was closed; no further operation is possible on this handle."""


@with_fields
class StorageUnavailable(StorageError):
    """The disk refused a write or an fsync (an I/O error, or a full disk at fsync time). A partial write
    is rolled back; either way the log is marked failed and refuses every further write until it is
    reopened, because after a failed fsync the kernel may have dropped dirty pages and nothing written
    since can be trusted. (A write refused for want of room is :class:`DiskFull`, which fails nothing.)"""

    path: str
    reason: str
    template = "storage unavailable at {path}: {reason}"


class DiskFull(StorageUnavailable):
    """A write found the file system full (ENOSPC) or the quota spent (EDQUOT): nothing of it was kept
    (a partial write was cut back before this was raised), nothing written before is lost, and the log
    or journal that raised it accepts the same write again once there is room. For a produce: refused
    before it was proposed, definitely not done (``raftlog.storage.space`` says who decides what)."""


@with_fields
class DirectoryLocked(StorageError):
    """Another process (or another open lock in this one) holds this data directory
    (``raftlog.storage.dirlock``); nothing in it was touched. ``holder`` says who, as the holder wrote it
    (pid, owner, start time), or is None when it has not said yet."""

    directory: str
    holder: str | None

    def describe(self) -> str:
        who = self.holder if self.holder is not None else "another process (it has not written who it is yet)"
        return f"data directory {self.directory} is in use by {who}"


@with_fields
class LegacyLogFormat(StorageError):
    """A partition log written by an older raftlog, in its own batch format (magic 1) rather than Kafka's
    RecordBatch v2: nothing in it is read until ``raftlog log migrate`` has rewritten it (the node that
    holds it stopped). Never read silently as something else. A node refuses a data directory holding
    such logs before it opens anything: ``directory`` is then the first of ``count`` such logs and
    ``data_dir`` the node's data directory, which the command is given."""

    directory: str
    data_dir: str | None = None
    count: int = 1

    def describe(self) -> str:
        one = self.count == 1
        logs = f"log {self.directory} holds" if one else f"{self.count} logs ({self.directory}, ...) hold"
        data_dir = self.data_dir if self.data_dir is not None else "DATA_DIR"
        return (
            f"{logs} batches of the format raftlog used before Kafka's RecordBatch v2: run `raftlog log "
            f"migrate {data_dir}` once, with the node stopped, to rewrite {'it' if one else 'them'}"
        )
