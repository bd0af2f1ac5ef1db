"""The compaction workload's records: a value names its record key and whether it is a tombstone, both
doors write the same bytes, a read gives the value back only when the whole record is as sent (another
key, a value where a tombstone was sent, another time are phantoms); and the cleaner's metrics parse."""

from __future__ import annotations

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

from jepsen import compact_workload
from jepsen.compact_workload import MODEL, describe, record_key_of, tombstone_of, value_of
from jepsen.kafka_workload import record_args, row_of
from jepsen.workload import read_back

BASE_MS = 1_790_000_000_000


def test_a_value_names_its_record_key_and_tombstone_and_values_are_unique() -> None:
    seen = set()
    for count in range(1, 200):
        for key_index in range(compact_workload.RECORD_KEYS):
            for tombstone in (False, True):
                value = value_of(count, key_index, tombstone)
                assert (record_key_of(value), tombstone_of(value)) == (f"k{key_index}", tombstone)
                assert describe(value) == {"record_key": f"k{key_index}", "tombstone": tombstone}
                seen.add(value)
    assert len(seen) == 199 * compact_workload.RECORD_KEYS * 2
    with pytest.raises(ValueError):
        value_of(0, 0, False)


def test_record_timestamps_stay_behind_the_clock_of_the_run() -> None:
    """A record stamped ahead of the nodes' clocks would keep its segment from being cleaned (the
    compaction lag counts from the newest timestamp): a run's values advance far slower than 1 per ms."""
    value = value_of(5_000, 4, True)
    assert MODEL.record_of(value, BASE_MS)["timestamp"] == BASE_MS + 5_000


@pytest.mark.parametrize("tombstone", [False, True])
def test_both_doors_read_back_the_value_sent_and_nothing_else(tombstone: bool) -> None:
    value = value_of(17, 3, tombstone)
    row = {**MODEL.record_of(value, BASE_MS), "offset": 9, "timestamp_type": "CreateTime"}
    assert read_back(row, BASE_MS, model=MODEL) == value
    args = record_args(value, BASE_MS, MODEL)
    assert args["key"] == b'"k3"' and (args["value"] is None) == tombstone
    consumed = Message(
        topic="c0", partition=0, offset=9, key=args["key"], value=args["value"], headers=args["headers"],
        timestamp=(TIMESTAMP_CREATE_TIME, args["timestamp"]),
    )  # fmt: skip
    assert read_back(row_of(consumed), BASE_MS, model=MODEL) == value
    for wrong in ({"key": "k2"}, {"value": None if not tombstone else value}, {"timestamp": BASE_MS}):
        assert isinstance(read_back({**row, **wrong}, BASE_MS, model=MODEL), str), wrong


def test_the_cleaners_metrics_are_read_from_prometheus_text() -> None:
    text = "\n".join([
        "# HELP raftlog_cleaner_dirty_bytes Bytes ...",
        "# TYPE raftlog_cleaner_dirty_bytes gauge",
        "raftlog_cleaner_dirty_bytes 0",
        "raftlog_cleaner_passes_total 12",
        'raftlog_cleaner_records_removed_total{node="n1"} 300',
        "raftlog_cleaner_failures_total 1",
        "raftlog_cleaner_pass_seconds_bucket{le=\"0.1\"} 3",
    ])  # fmt: skip
    metrics = compact_workload.parse_metrics(text)
    assert metrics == {
        "raftlog_cleaner_dirty_bytes": 0.0,
        "raftlog_cleaner_passes_total": 12.0,
        "raftlog_cleaner_records_removed_total": 300.0,
        "raftlog_cleaner_failures_total": 1.0,
    }
    assert compact_workload.failures({"n1": metrics, "n2": "timeout"}) == {"n1": 1.0}
