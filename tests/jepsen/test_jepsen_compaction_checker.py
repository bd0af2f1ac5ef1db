"""The checker on compacted topics (histories of the compaction workload): superseded records may go,
each key must end with its last acknowledged write (or a later write of unknown outcome), and the
negative controls: an older acknowledged value, a tombstone lost, a value never written, a latest record
skipped during the run are each caught, naming the key."""

from __future__ import annotations

from typing import Any

from jepsen_history_builder import HistoryBuilder

from jepsen.checker import COMPACTED_CLASSES, FINAL_VALUE, LOST_LATEST, check
from jepsen.compact_workload import describe, value_of

P = "c0/0"


class Writes:
    """Sends of the compaction workload: value ``n`` of record key ``k<i>``, as the workload numbers them."""

    def __init__(self, h: HistoryBuilder) -> None:
        self.h = h
        self.count = 0

    def send(
        self, process: int, key_index: int, offset: int | None, type: str = "ok", tombstone: bool = False
    ) -> int:
        self.count += 1
        value = value_of(self.count, key_index, tombstone)
        self.h.send(process, P, value, offset, type=type, **describe(value))
        return value


def final_pass(h: HistoryBuilder, process: int, records: list[tuple[int, int]], chunk: int = 2) -> None:
    """A final read from offset 0 as the runner's reader goes: each poll from the last record + 1, then an
    empty poll past the last record."""
    offset = 0
    for i in range(0, len(records), chunk):
        part = records[i : i + chunk]
        h.poll(process, P, offset, part, final=True)
        offset = part[-1][0] + 1
    h.poll(process, P, offset, [], final=True)


def invalid(results: dict[str, Any], kind: str) -> dict[str, Any]:
    assert results["verdict"] == "invalid", results["reasons"]
    assert results["anomaly_counts"][kind] >= 1, results["anomaly_counts"]
    return results["anomalies"][kind][0]


def test_overwrites_and_deletes_read_after_compaction_are_valid() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    a0 = w.send(0, 0, 0)
    b0 = w.send(1, 1, 1)
    a1 = w.send(0, 0, 2)
    b_gone = w.send(1, 1, 3, tombstone=True)  # k1 deleted
    a2 = w.send(0, 0, 4)
    h.poll(2, P, 0, [(0, a0), (1, b0), (2, a1)])  # before the cleaner
    h.poll(2, P, 0, [(3, b_gone), (4, a2)])  # after: 0..2 superseded, a fetch at 0 answers 3
    final_pass(h, 3, [(3, b_gone), (4, a2)])
    final_pass(h, 4, [(0, a0), (1, b0), (2, a1), (3, b_gone), (4, a2)])  # a replica not yet cleaned
    results = check(h.history())
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])
    assert results["workload"] == "compact"
    assert {k for k, n in results["anomaly_counts"].items() if n} <= COMPACTED_CLASSES


def test_a_key_ending_with_an_older_acknowledged_value_is_invalid_naming_it() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    old = w.send(0, 1, 0)
    w.send(0, 1, 1)  # k1's last acknowledged value, compacted away by mistake
    other = w.send(1, 2, 2)
    final_pass(h, 3, [(0, old), (2, other)])
    results = check(h.history())
    anomaly = invalid(results, "final-value")
    assert (anomaly["key"], anomaly["record_key"]) == (P, "k1")
    assert anomaly["read"] == {"offset": 0, "value": old}
    assert anomaly["last_acknowledged"]["offset"] == 1
    assert any(f"{P} k1" in reason for reason in results["reasons"]), results["reasons"]


def test_a_deleted_key_must_show_its_tombstone_while_tombstones_are_retained() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    before = w.send(0, 3, 0)
    tombstone = w.send(0, 3, 1, tombstone=True)
    final_pass(h, 3, [(0, before)])  # the delete lost: the key is back
    final_pass(h, 4, [])  # the key gone altogether, tombstone and all
    final_pass(h, 5, [(1, tombstone)])  # as it should be
    results = check(h.history())
    anomalies = results["anomalies"][FINAL_VALUE]
    assert results["verdict"] == "invalid"
    assert [(a["final_read_by"], a["record_key"], a["read"]) for a in anomalies] == [
        (3, "k3", {"offset": 0, "value": before}),
        (4, "k3", None),
    ]
    assert anomalies[0]["last_acknowledged"] == {"offset": 1, "value": tombstone, "tombstone": True}


def test_a_value_never_written_is_invalid_naming_the_key() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    value = w.send(0, 0, 0)
    final_pass(h, 3, [(0, value), (1, 999_999)])
    results = check(h.history())
    anomaly = invalid(results, "phantom-read")
    assert (anomaly["key"], anomaly["value"], anomaly["offset"]) == (P, 999_999, 1)
    assert any(P in reason for reason in results["reasons"]), results["reasons"]


def test_writes_of_unknown_outcome_after_the_last_acknowledged_one_may_end_the_key() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    w.send(0, 0, 0)
    last = w.send(0, 0, 1)
    timed_out = w.send(1, 0, None, type="info")
    in_flight = value_of(w.count + 1, 0, True)
    h.invoke(2, "send", key=P, value=in_flight, **describe(in_flight))  # never completed
    final_pass(h, 3, [(1, last)])  # neither landed
    final_pass(h, 4, [(2, timed_out)])  # the timed-out one did, after the last acknowledged
    final_pass(h, 5, [(2, timed_out), (3, in_flight)])  # both did
    results = check(h.history())
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])


def test_a_write_of_unknown_outcome_below_the_last_acknowledged_one_cannot_end_the_key() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    timed_out = w.send(1, 0, None, type="info")
    w.send(0, 0, 1)  # acknowledged at 1; the timed-out write had landed at 0
    final_pass(h, 3, [(0, timed_out)])
    anomaly = invalid(check(h.history()), "final-value")
    assert anomaly["unknown_outcome_writes"] == [timed_out]
    assert anomaly["read"] == {"offset": 0, "value": timed_out}


def test_a_poll_during_the_run_passing_over_a_keys_latest_record_is_a_lost_latest() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    a = w.send(0, 0, 0)
    b = w.send(0, 1, 1)  # k1's only record
    c = w.send(0, 0, 2)
    h.poll(2, P, 0, [(2, c)])  # 0 superseded by 2: fine; 1 is k1's latest: lost
    h.poll(2, P, 0, [(1, b), (2, c)])  # another replica, fine
    final_pass(h, 3, [(0, a), (1, b), (2, c)])
    anomaly = invalid(check(h.history()), "lost-latest")
    assert anomaly["record_key"] == "k1" and anomaly["missing"]["offset"] == 1
    assert check(h.history())["anomaly_counts"][LOST_LATEST] == 1


def test_records_read_at_other_offsets_or_out_of_order_are_caught() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    a = w.send(0, 0, 0)
    b = w.send(0, 1, 1)
    h.poll(2, P, 0, [(1, b), (0, a)])  # backwards
    final_pass(h, 3, [(0, a), (2, b)])  # b moved from 1 to 2
    results = check(h.history())
    assert results["anomaly_counts"]["nonmonotonic-poll"] == 1
    assert results["anomaly_counts"]["duplicate"] == 1  # b at two offsets, one plain attempt


def test_without_a_complete_final_read_the_verdict_is_unknown() -> None:
    h = HistoryBuilder()
    w = Writes(h)
    value = w.send(0, 0, 0)
    h.poll(3, P, 0, [(0, value)], final=True)  # never reached an empty poll: not complete
    results = check(h.history())
    assert results["verdict"] == "unknown", results["reasons"]
    assert results["anomaly_counts"][FINAL_VALUE] == 0
