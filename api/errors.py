"""The one table from typed errors to HTTP status and stable ``error_code`` (``../shared/API.md``).

Every ``RaftlogError`` subclass resolves through this table (most specific class first); an error not in
it is a bug and becomes a logged 500. ``tests/api/test_errors.py`` fails when a new error is not mapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from partitions.errors import (
    InvalidCommand,
    InvalidTopic,
    ReplicaBehind,
    SequenceTooOld,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
)
from partitions.placement import PlacementImpossible
from raftlog.errors import InvariantViolation, RaftlogError
from raftlog.storage.errors import (
    CorruptRecord,
    InvalidConfig,
    InvalidRecord,
    LogClosed,
    NotBatchBoundary,
    OffsetOutOfRange,
    RecordTooLarge,
    StorageUnavailable,
)


class ApiError(RaftlogError):
    """Errors raised by the HTTP layer itself."""


class BadRequest(ApiError):
    """Malformed JSON, a missing or wrong-typed field, a bad query parameter."""


class UnsupportedMediaType(ApiError):
    def __init__(self, content_type: str) -> None:
        super().__init__(f"unsupported content type {content_type!r}")
        self.content_type = content_type


@dataclass(frozen=True, slots=True)
class HttpError:
    status: int
    error_code: int
    retriable: bool = False


# Most specific first: the first class an error is an instance of decides.
TABLE: list[tuple[type[RaftlogError], HttpError]] = [
    (BadRequest, HttpError(400, 40001)),
    (InvalidConfig, HttpError(400, 40001)),
    (InvalidTopic, HttpError(400, 40001)),
    (PlacementImpossible, HttpError(400, 40001)),
    (UnknownTopic, HttpError(404, 40401)),
    (UnknownPartition, HttpError(404, 40402)),
    (TopicExists, HttpError(409, 40901)),
    (SequenceTooOld, HttpError(409, 40902)),
    (RecordTooLarge, HttpError(413, 41301)),
    (UnsupportedMediaType, HttpError(415, 41501)),
    (OffsetOutOfRange, HttpError(416, 41601)),
    (InvalidRecord, HttpError(422, 42201)),
    (InvalidCommand, HttpError(422, 42201)),
    (ReplicaBehind, HttpError(503, 50301, retriable=True)),
    (LogClosed, HttpError(503, 50301, retriable=True)),
    (StorageUnavailable, HttpError(503, 50302, retriable=True)),
    (CorruptRecord, HttpError(500, 50002)),
    (NotBatchBoundary, HttpError(500, 50001)),
    (InvariantViolation, HttpError(500, 50001)),
]
INTERNAL = HttpError(500, 50000)


def lookup(error: BaseException) -> HttpError:
    for kind, mapped in TABLE:
        if isinstance(error, kind):
            return mapped
    return INTERNAL


def body(error: BaseException) -> dict[str, Any]:
    """The JSON error body: ``error_code``, ``message`` and the fields a client can act on."""
    mapped = lookup(error)
    payload: dict[str, Any] = {"error_code": mapped.error_code, "message": str(error)}
    if isinstance(error, OffsetOutOfRange):
        payload["log_start_offset"] = error.log_start_offset
        payload["end_offset"] = error.end_offset
    if isinstance(error, RecordTooLarge):
        payload["size_bytes"] = error.size_bytes
        payload["limit_bytes"] = error.limit_bytes
    return payload
