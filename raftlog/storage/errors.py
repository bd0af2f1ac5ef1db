"""Typed errors raised by the storage engine. ``api/errors.py`` maps each one to HTTP exactly once."""

from __future__ import annotations

from raftlog.errors import RaftlogError


class StorageError(RaftlogError):
    """Base of every error raised by ``raftlog.storage``."""


class InvalidConfig(StorageError):
    """A log configuration value is missing, malformed or outside its allowed range."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"invalid config {key}={value!r}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class RecordTooLarge(StorageError):
    """A record or batch is larger than ``max.message.bytes``; nothing was written."""

    def __init__(self, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"batch of {size_bytes} bytes exceeds max.message.bytes={limit_bytes}")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class InflatedTooLarge(RecordTooLarge):
    """A compressed batch whose records inflate past the bound they may inflate to (a decompression
    bomb, or a batch compressed far better than any the node takes); nothing was written. Inflating
    stopped at ``size_bytes``, just past ``limit_bytes``: the whole would have been larger still."""

    def __init__(self, codec: str, compressed_bytes: int, size_bytes: int, limit_bytes: int) -> None:
        StorageError.__init__(
            self,
            f"the records of a {codec} batch of {compressed_bytes} bytes inflate past {limit_bytes} bytes, "
            f"the most a batch's records may inflate to here",
        )
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        self.codec = codec
        self.compressed_bytes = compressed_bytes


class InvalidRecord(StorageError):
    """A record or batch given to the log is malformed (empty batch, wrong types, bad offsets)."""


class CorruptRecord(StorageError):
    """Bytes on disk fail their CRC or framing check. Names the file and byte position."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch in {path} at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class OffsetOutOfRange(StorageError):
    """An offset outside ``[log_start_offset, end_offset]``."""

    def __init__(self, offset: int, log_start_offset: int, end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [log_start_offset={log_start_offset}, end_offset={end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.end_offset = end_offset


class NotBatchBoundary(StorageError):
    """A tail truncation was asked for at an offset inside a batch; batches are never split."""

    def __init__(self, offset: int, batch_base_offset: int, batch_end_offset: int) -> None:
        super().__init__(
            f"cannot truncate at offset {offset}: inside batch [{batch_base_offset}, {batch_end_offset})"
        )
        self.offset = offset
        self.batch_base_offset = batch_base_offset
        self.batch_end_offset = batch_end_offset


class LogClosed(StorageError):
    """The log was closed; no further operation is possible on this handle."""


class StorageUnavailable(StorageError):
    """The disk refused a write or an fsync (an I/O error, or a full disk at fsync time). A partial write
    is rolled back; either way the log is marked failed and refuses every further write until it is
    reopened, because after a failed fsync the kernel may have dropped dirty pages and nothing written
    since can be trusted. (A write refused for want of room is :class:`DiskFull`, which fails nothing.)"""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"storage unavailable at {path}: {reason}")
        self.path = path
        self.reason = reason


class DiskFull(StorageUnavailable):
    """A write found the file system full (ENOSPC) or the quota spent (EDQUOT): nothing of it was kept
    (a partial write was cut back before this was raised), nothing written before is lost, and the log
    or journal that raised it accepts the same write again once there is room. For a produce: refused
    before it was proposed, definitely not done (``raftlog.storage.space`` says who decides what)."""


class DirectoryLocked(StorageError):
    """Another process (or another open lock in this one) holds this data directory
    (``raftlog.storage.dirlock``); nothing in it was touched. ``holder`` says who, as the holder wrote it
    (pid, owner, start time), or is None when it has not said yet."""

    def __init__(self, directory: str, holder: str | None) -> None:
        who = holder if holder is not None else "another process (it has not written who it is yet)"
        super().__init__(f"data directory {directory} is in use by {who}")
        self.directory = directory
        self.holder = holder


class LegacyLogFormat(StorageError):
    """A partition log written by an older raftlog, in its own batch format (magic 1) rather than Kafka's
    RecordBatch v2: nothing in it is read until ``raftlog log migrate`` has rewritten it (the node that
    holds it stopped). Never read silently as something else. A node refuses a data directory holding
    such logs before it opens anything: ``directory`` is then the first of ``count`` such logs and
    ``data_dir`` the node's data directory, which the command is given."""

    def __init__(self, directory: str, data_dir: str | None = None, count: int = 1) -> None:
        logs = f"log {directory} holds" if count == 1 else f"{count} logs ({directory}, ...) hold"
        super().__init__(
            f"{logs} batches of the format raftlog used before Kafka's RecordBatch v2: run `raftlog log "
            f"migrate {data_dir if data_dir is not None else 'DATA_DIR'}` once, with the node stopped, to "
            f"rewrite {'it' if count == 1 else 'them'}"
        )
        self.directory = directory
        self.data_dir = data_dir
        self.count = count
