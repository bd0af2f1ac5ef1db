"""The contract's names are the server's: the codes a client acts on are the ones the error table
gives, and "retriable" means the same on both sides."""

from __future__ import annotations

import json

from api import errors
from api.errors import lookup
from partitions.errors import SequenceTooOld, UnknownTopic
from partitions.groups.errors import (
    ConsumerInstanceExists,
    PartitionNotAssigned,
    StaleGeneration,
    UnknownConsumerInstance,
)
from raftlog.storage.errors import OffsetOutOfRange as ServerOffsetOutOfRange
from raftlog_client import contract
from raftlog_client.errors import OffsetOutOfRange, RequestFailed, decode_error


def test_retriable_means_what_the_server_marks_retriable() -> None:
    for kind, mapped in errors.TABLE:
        assert contract.retriable(mapped.error_code) == mapped.retriable, kind.__name__
    assert not contract.retriable(errors.INTERNAL.error_code) and not contract.retriable(None)


def test_named_codes_are_the_tables() -> None:
    assert lookup(UnknownTopic("t")).error_code == contract.UNKNOWN_TOPIC
    assert lookup(SequenceTooOld(1, 2, 3)).error_code == contract.SEQUENCE_TOO_OLD
    assert lookup(ServerOffsetOutOfRange(9, 0, 2)).error_code == contract.OFFSET_OUT_OF_RANGE
    assert lookup(UnknownConsumerInstance("g", "c")).error_code == contract.UNKNOWN_INSTANCE
    assert lookup(ConsumerInstanceExists("g", "c")).error_code == contract.INSTANCE_EXISTS
    assert lookup(StaleGeneration("g", "c", 1, 2)).error_code == contract.STALE_GENERATION
    assert lookup(PartitionNotAssigned("g", "c", "t", 0, 2)).error_code == contract.PARTITION_NOT_ASSIGNED


def test_error_answers_decode_to_typed_errors() -> None:
    body = errors.body(ServerOffsetOutOfRange(9, 0, 2))
    decoded = decode_error(416, json.dumps(body).encode(), "GET /topics/t/partitions/0/records")
    assert isinstance(decoded, OffsetOutOfRange)
    assert (decoded.log_start_offset, decoded.end_offset, decoded.error_code) == (0, 2, 41601)
    assert str(decoded).startswith("GET /topics/t/partitions/0/records: HTTP 416 (error_code 41601)")
    proxy = decode_error(502, b"<html>bad gateway</html>")
    assert type(proxy) is RequestFailed and (proxy.status, proxy.error_code) == (502, None)
    assert "bad gateway" in proxy.message
