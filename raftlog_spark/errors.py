"""The connector's errors. Spark shows a Python worker's exception text in the failed query's message,
so every message names what the user can change: the option, the column or the topic-partition."""

from __future__ import annotations


class RaftlogSparkError(Exception):
    """Base of every error the connector raises."""


class OptionError(RaftlogSparkError, ValueError):
    """An option of ``spark.read/readStream/write/writeStream.format("raftlog")`` that cannot be used."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"raftlog option '{option}': {problem}")
        self.option = option


class SchemaError(RaftlogSparkError, ValueError):
    """The DataFrame given to the sink lacks a column or has one of the wrong type."""


class BadRow(RaftlogSparkError, ValueError):
    """A row the sink cannot write (null value, no topic, partition out of range)."""


class DataLoss(RaftlogSparkError):
    """Records the query should read are gone (retention deleted them, or the topic shrank). Raised only
    with ``failOnDataLoss=true`` (the default); ``false`` skips to what is still there."""


class ServerError(RaftlogSparkError):
    """The cluster answered a request with an error it does not retry (or kept failing until the deadline)."""

    def __init__(self, method: str, path: str, status: int, error_code: int | None, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status} (error_code {error_code}): {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


class OffsetOutOfRange(ServerError):
    """HTTP 416: the wanted offset is below the log start or above the end."""

    def __init__(self, method: str, path: str, message: str, log_start_offset: int, end_offset: int) -> None:
        super().__init__(method, path, 416, 41601, message)
        self.log_start_offset = log_start_offset
        self.end_offset = end_offset


class Unreachable(RaftlogSparkError):
    """No server of the ``servers`` option answered before the request's deadline."""
