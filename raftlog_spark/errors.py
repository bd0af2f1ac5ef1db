"""The connector's errors. Spark shows a Python worker's exception text in the failed query's message,
so every message names what the user can change: the option, the column or the topic-partition. What the
cluster answered comes as the client's errors (``raftlog_client.errors``: ``RequestFailed`` naming the
request, status and error code; ``Unavailable`` when no server answered in time)."""

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
    """A row the sink cannot write (no topic, a negative partition or timestamp, a null header key)."""


class BadRecord(RaftlogSparkError, ValueError):
    """A record's value that is not what ``valueFormat`` says (not in Confluent's wire format, or not
    decoding with the schema its id names), or a row's value the sink cannot encode; the message names
    the topic, partition and offset (or the row's topic)."""


class DataLoss(RaftlogSparkError):
    """Records the query should read are gone (retention deleted them, or the topic shrank). Raised only
    with ``failOnDataLoss=true`` (the default); ``false`` skips to what is still there."""
