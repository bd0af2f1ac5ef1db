"""Classification of answers into ok / fail / info, keys, and the recorder's history format."""

from __future__ import annotations

import json
import pathlib

import pytest

from jepsen import workload
from jepsen.checker import check
from jepsen.history import build, read_history
from jepsen.recorder import Recorder
from jepsen.workload import classify_record_error, classify_status, key_of, split_key


@pytest.mark.parametrize(
    ("status", "kind"),
    [(200, "ok"), (204, "ok"), (400, "fail"), (404, "fail"), (416, "fail"), (503, "fail"), (504, "info"),
     (500, "info"), (502, "info")],
)  # fmt: skip
def test_status_classification(status: int, kind: str) -> None:
    assert classify_status(status) == kind


def test_record_errors_inside_a_200_produce() -> None:
    assert classify_record_error(50301) == "fail"  # no leader: not done
    assert classify_record_error(50401) == "info"  # commit not confirmed: outcome unknown
    assert classify_record_error(41301) == "fail"
    assert classify_record_error(50001) == "info"


def test_keys_round_trip() -> None:
    assert split_key(key_of("orders", 3)) == ("orders", 3)
    assert split_key("a/b/12") == ("a/b", 12)


def test_recorder_writes_a_history_the_checker_reads(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "history.jsonl"
    recorder = Recorder(str(path))
    recorder.invoke(0, "send", key="t0/0", value=1, producer_id=7, sequence=0)
    recorder.invoke(1, "poll", key="t0/0", offset=0)
    recorder.nemesis("start", "kill", {"nodes": ["n1"]})
    recorder.complete(0, "ok", value=1, offset=0)
    recorder.complete(1, "ok", offset=0, records=[[0, 1]])
    recorder.invoke(0, "commit", key="t0/0", group="g0", offset=1)
    recorder.complete(0, "info", group="g0", offset=1, error="timeout")
    recorder.nemesis("stop", "kill", {"nodes": ["n1"]})
    recorder.invoke(2, "poll", key="t0/0", offset=0)
    with pytest.raises(RuntimeError, match="in flight"):
        recorder.invoke(2, "poll", key="t0/0", offset=0)  # one operation per process
    recorder.complete(2, "fail", offset=0, status=503)
    recorder.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(len(lines)))
    history = read_history(path)
    assert len(history.operations) == 4
    assert [e.f for e in history.nemesis] == ["start", "stop"]
    assert history.operations[0].result("offset") == 0


def test_a_record_reads_back_as_its_number_only_when_all_of_it_came_back() -> None:
    """Every record carries the record model (key, tombstone, headers with a null value, CreateTime);
    anything that does not come back as sent reads as JSON text: a value never sent, a phantom read."""
    base = 1_800_000_000_000
    assert workload.record_of(8, base)["value"] is None and workload.record_of(9, base)["value"] == 9
    for number in (8, 9):
        row = {**workload.record_of(number, base), "offset": 3, "timestamp_type": "CreateTime"}
        assert workload.read_back(row, base) == number
        assert isinstance(workload.read_back(row, base + 1), str)  # a record of another run's times
        for field, wrong in (
            ("value", 10),
            ("headers", [{"key": "v", "value": str(number)}, {"key": "n", "value": ""}]),
            ("timestamp", row["timestamp"] + 1),
            ("timestamp_type", "LogAppendTime"),
            ("key", str(number)),
        ):
            mangled = workload.read_back({**row, field: wrong}, base)
            assert isinstance(mangled, str) and json.loads(mangled)[field] == wrong
    lost_value = workload.read_back(
        {**workload.record_of(9, base), "timestamp_type": "CreateTime", "value": None}, base
    )
    events = [
        {"process": 0, "type": "invoke", "f": "send", "key": "t/0", "value": 9},
        {"process": 0, "type": "ok", "f": "send", "key": "t/0", "value": 9, "offset": 0},
        {"process": 1, "type": "invoke", "f": "poll", "key": "t/0", "offset": 0},
        {"process": 1, "type": "ok", "f": "poll", "key": "t/0", "offset": 0, "records": [[0, lost_value]]},
    ]
    history = [{"index": i, "time": i, **event} for i, event in enumerate(events)]
    result = check(build(history))
    assert result["anomaly_counts"]["phantom-read"] == 1


def test_a_record_sent_without_a_key_is_known_by_its_v_header() -> None:
    """Every ``NULL_KEY_EVERY``-th value goes without a key (some of them tombstones too, with nothing but
    the header to tell them apart); a key that appears or vanishes on the way reads as a phantom."""
    base = 1_800_000_000_000
    null_key, both = workload.NULL_KEY_EVERY, workload.NULL_KEY_EVERY * workload.TOMBSTONE_EVERY
    assert workload.record_of(null_key, base)["key"] is None and workload.record_of(null_key + 1, base)["key"]
    assert workload.record_of(both, base)["key"] is None and workload.record_of(both, base)["value"] is None
    for number in (null_key, both):
        row = {**workload.record_of(number, base), "offset": 3, "timestamp_type": "CreateTime"}
        assert workload.read_back(row, base) == number
        for field, wrong in (
            ("key", number),  # a key it was not sent with
            ("headers", [{"key": "n", "value": None}]),  # the header that names it lost
            ("headers", [{"key": "v", "value": str(number + 1)}, {"key": "n", "value": None}]),
        ):
            assert isinstance(workload.read_back({**row, field: wrong}, base), str), (number, field)
    keyed = {**workload.record_of(null_key + 1, base), "timestamp_type": "CreateTime"}
    assert isinstance(workload.read_back({**keyed, "key": None}, base), str), "a key lost on the way"


def test_a_log_append_time_record_reads_back_with_a_stamp_within_the_run() -> None:
    base, read_ms, slack = 1_800_000_000_000, 1_800_000_090_000, workload.APPEND_TIME_SLACK_MS
    for number in (5, workload.NULL_KEY_EVERY, workload.TOMBSTONE_EVERY):
        sent = workload.record_of(number, base)
        for stamp in (base + 1, base - slack, read_ms + slack):
            row = {**sent, "timestamp": stamp, "timestamp_type": "LogAppendTime"}
            assert workload.read_back(row, base, log_append_time=True, read_ms=read_ms) == number
        for timestamp, kind in (
            (base - slack - 1, "LogAppendTime"),
            (read_ms + slack + 1, "LogAppendTime"),
            (sent["timestamp"], "CreateTime"),  # the producer's time: the topic did not stamp it
            (None, "LogAppendTime"),
        ):
            row = {**sent, "timestamp": timestamp, "timestamp_type": kind}
            assert isinstance(workload.read_back(row, base, log_append_time=True, read_ms=read_ms), str)
        stamped = {**sent, "timestamp": base + 1, "timestamp_type": "LogAppendTime"}
        assert isinstance(workload.read_back(stamped, base), str), "stamped on a CreateTime topic"
    with pytest.raises(ValueError, match="read_ms"):
        workload.read_back({**workload.record_of(5, base), "timestamp_type": "LogAppendTime"}, base,
                           log_append_time=True)  # fmt: skip
