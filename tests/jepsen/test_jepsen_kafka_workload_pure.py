"""The Kafka workload's records are the HTTP workload's records: what ``record_args`` produces and a
consumer hands back reads as the value that was sent, and anything else reads as a phantom."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

from jepsen.kafka_workload import record_args, row_of
from jepsen.workload import APPEND_TIME_SLACK_MS, NULL_KEY_EVERY, TOMBSTONE_EVERY, read_back

BASE_MS = 1_790_000_000_000


def _consumed(sent: int, **changes: object) -> Message:
    args = record_args(sent, BASE_MS)
    fields = {
        "topic": "t0",
        "partition": 1,
        "offset": 42,
        "key": args["key"],
        "value": args["value"],
        "headers": args["headers"],
        "timestamp": (TIMESTAMP_CREATE_TIME, args["timestamp"]),
        **changes,
    }
    return Message(**fields)


@pytest.mark.parametrize("value", [1, 2, NULL_KEY_EVERY, TOMBSTONE_EVERY, 3 * TOMBSTONE_EVERY, 123_457])
def test_a_consumed_record_reads_back_as_the_value_sent(value: int) -> None:
    args = record_args(value, BASE_MS)
    assert args["key"] == (None if value % NULL_KEY_EVERY == 0 else str(value).encode())
    assert (args["value"] is None) == (value % TOMBSTONE_EVERY == 0)
    assert args["headers"] == [("v", str(value).encode()), ("n", None)]
    assert read_back(row_of(_consumed(value)), BASE_MS) == value


@pytest.mark.parametrize("value", [2, NULL_KEY_EVERY, 3 * TOMBSTONE_EVERY])
def test_a_consumed_record_of_a_log_append_time_topic_reads_back_with_the_leaders_stamp(value: int) -> None:
    read_ms = BASE_MS + 60_000
    for stamp in (BASE_MS + 30_000, BASE_MS - APPEND_TIME_SLACK_MS, read_ms + APPEND_TIME_SLACK_MS):
        consumed = _consumed(value, timestamp=(TIMESTAMP_LOG_APPEND_TIME, stamp))
        assert read_back(row_of(consumed), BASE_MS, log_append_time=True, read_ms=read_ms) == value
    for wrong in (
        (TIMESTAMP_LOG_APPEND_TIME, BASE_MS - APPEND_TIME_SLACK_MS - 1),  # before the run, skew or not
        (TIMESTAMP_LOG_APPEND_TIME, read_ms + APPEND_TIME_SLACK_MS + 1),  # after the read
        (TIMESTAMP_CREATE_TIME, BASE_MS + value),  # the producer's time on a topic that stamps
    ):
        read = read_back(
            row_of(_consumed(value, timestamp=wrong)), BASE_MS, log_append_time=True, read_ms=read_ms
        )
        assert isinstance(read, str), wrong


@pytest.mark.parametrize(
    "changes",
    [
        {"value": b"7"},  # not the value sent
        {"key": b"not json"},
        {"key": None},  # a key lost: 5 was sent with one
        {"headers": [("v", b"5")]},  # a header lost
        {"headers": [("v", b"5"), ("n", b"")]},  # a null header value came back empty
        {"timestamp": (TIMESTAMP_CREATE_TIME, BASE_MS)},
        {"timestamp": (TIMESTAMP_LOG_APPEND_TIME, BASE_MS + 5)},
    ],
)
def test_anything_not_as_sent_reads_as_a_phantom(changes: dict[str, object]) -> None:
    read = read_back(row_of(_consumed(5, **changes)), BASE_MS)
    assert isinstance(read, str)
    assert json.loads(read)["offset"] == 42
