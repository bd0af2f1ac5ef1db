"""The checker must catch every anomaly class (naming the exact operations) and pass clean histories."""

from __future__ import annotations

from typing import Any

from jepsen_history_builder import HistoryBuilder

from jepsen.checker import CLASSES, check

K = "t0/0"
K2 = "t0/1"


def found(results: dict[str, Any]) -> dict[str, int]:
    return {kind: count for kind, count in results["anomaly_counts"].items() if count}


def only(results: dict[str, Any], kind: str) -> dict[str, Any]:
    """Assert the history is invalid with exactly one anomaly, of `kind`; return it."""
    assert results["verdict"] == "invalid", results["reasons"]
    assert found(results) == {kind: 1}, found(results)
    (anomaly,) = results["anomalies"][kind]
    assert anomaly["class"] == kind
    assert anomaly["ops"] and [op["index"] for op in anomaly["ops"]] == anomaly["indexes"]
    return anomaly


def indexes(*ranges: tuple[int, int]) -> set[int]:
    return {i for pair in ranges for i in pair}


# ----------------------------------------------------------------------------------------------------
# Clean histories


def test_a_clean_history_is_valid() -> None:
    h = HistoryBuilder()
    h.send(0, K, 10, 0)
    h.send(1, K, 11, 1)
    h.poll(2, K, 0, [(0, 10)])
    h.poll(2, K, 1, [(1, 11)])
    h.poll(2, K, 2, [])
    h.commit(2, K, "g", 2, 2)
    h.committed(3, K, "g", 2)
    h.final_read(4, K, [10, 11])
    results = check(h.history())
    assert results["verdict"] == "valid", results["reasons"]
    assert found(results) == {}
    assert results["stats"]["acked_sends"] == 2
    assert results["stats"]["read_values"] == 2


def test_timeouts_failures_and_retries_are_valid() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, type="info")  # timed out, but landed at 1
    h.send(0, K, 2, 2)  # non-idempotent retry appends it again: at-least-once, not an anomaly
    h.send(1, K, 3, type="info", producer_id=7, sequence=0)  # timed out, landed at 3
    h.send(1, K, 3, 3, producer_id=7, sequence=0)  # idempotent retry: original offset back
    h.send(1, K, 4, type="fail")  # definitely not appended
    h.send(2, K, 5, type="info")  # timed out and never appended: not an error either
    h.invoke(3, "send", key=K, value=6)  # still in flight when the history ends
    h.final_read(4, K, [1, 2, 2, 3])
    results = check(h.history())
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])
    assert results["stats"]["duplicates_explained_by_retries"] == 1
    assert results["history"]["pending_operations"] == 1


def test_committed_offsets_may_go_back_after_a_reset() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.commit(1, K, "g", 5, 5)
    h.commit(1, K, "g", 1, 1, reset=True)
    h.committed(2, K, "g", 1)
    h.commit(1, K, "g", 0, 1)  # a lower commit without reset keeps the stored offset
    h.final_read(3, K, [1])
    assert check(h.history())["verdict"] == "valid"


def test_a_lagging_consumer_committing_a_lower_offset_is_not_a_regression() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.commit(1, K, "g", 10, 10)
    h.commit(2, K, "g", 5, 5)  # the answer echoes the request; the stored offset stays 10
    h.committed(3, K, "g", 10)
    h.final_read(4, K, [1])
    assert check(h.history())["verdict"] == "valid"


def test_rewinding_a_consumer_on_purpose_is_not_a_nonmonotonic_poll() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.poll(1, K, 0, [(0, 1), (1, 2)])
    h.poll(1, K, 0, [(0, 1)])  # the process chose to read from 0 again
    h.final_read(2, K, [1, 2])
    assert check(h.history())["verdict"] == "valid"


# ----------------------------------------------------------------------------------------------------
# Each class is caught, with the right operations


def test_lost_write_never_read_below_a_read_offset() -> None:
    h = HistoryBuilder()
    lost = h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    reader = h.poll(1, K, 1, [(1, 2)])
    h.poll(1, K, 2, [], final=True)
    anomaly = only(check(h.history()), "lost-write")
    assert anomaly["value"] == 1 and anomaly["offset"] == 0 and anomaly["max_read_offset"] == 1
    assert set(anomaly["indexes"]) == indexes(lost, reader)


def test_lost_write_read_once_then_missing_from_the_final_read() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    lost = h.send(0, K, 2, 1)
    earlier = h.poll(1, K, 0, [(0, 1), (1, 2)])
    h.poll(2, K, 0, [(0, 1)], final=True)
    end = h.poll(2, K, 1, [], final=True)  # the log ends at 1: the acked record at 1 is gone
    anomaly = only(check(h.history()), "lost-write")
    assert anomaly["value"] == 2 and anomaly["final_read_end"] == 1
    assert indexes(lost, end, earlier) <= set(anomaly["indexes"])


def test_unseen_after_a_complete_final_read_is_an_error() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    unseen = h.send(0, K, 2, 1)
    h.poll(2, K, 0, [(0, 1)], final=True)
    end = h.poll(2, K, 1, [], final=True)
    results = check(h.history())
    anomaly = only(results, "unseen")
    assert anomaly["value"] == 2
    assert indexes(unseen, end) <= set(anomaly["indexes"])
    assert results["unseen"] == {
        "count": 1,
        "missing_from_final_read": 1,
        "by_key": {K: 1},
        "values": {K: [2]},
    }


def test_unseen_without_a_complete_final_read_is_counted_and_unknown() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.poll(2, K, 0, [(0, 1)], final=True)  # the final read stopped without reaching the end
    results = check(h.history())
    assert results["verdict"] == "unknown"
    assert found(results) == {}
    assert results["unseen"]["count"] == 1 and results["unseen"]["missing_from_final_read"] == 0


def test_duplicate_value_at_two_offsets() -> None:
    h = HistoryBuilder()
    send = h.send(0, K, 1, 0, producer_id=3, sequence=0)
    h.send(0, K, 1, 0, producer_id=3, sequence=0)  # idempotent retry: may not append again
    h.send(1, K, 2, 1)
    reader = h.poll(2, K, 0, [(0, 1), (1, 2), (2, 1)], final=True)
    h.poll(2, K, 3, [], final=True)
    anomaly = only(check(h.history()), "duplicate")
    assert anomaly["value"] == 1 and anomaly["offsets"] == [0, 2] and anomaly["keys"] == [K]
    assert indexes(send, reader) <= set(anomaly["indexes"])


def test_duplicate_of_a_single_send_is_caught_even_without_idempotence() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.final_read(2, K, [1, 1])
    assert only(check(h.history()), "duplicate")["offsets"] == [0, 1]


def test_duplicate_value_in_two_keys() -> None:
    h = HistoryBuilder()
    send = h.send(0, K, 1, 0)
    h.final_read(2, K, [1])
    wrong = h.poll(3, K2, 0, [(0, 1)], final=True)
    h.poll(3, K2, 1, [], final=True)
    anomaly = only(check(h.history()), "duplicate")
    assert anomaly["keys"] == [K, K2]
    assert indexes(send, wrong) <= set(anomaly["indexes"])


def test_inconsistent_offsets() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, type="info")
    h.send(1, K, 2, type="info")
    first = h.poll(2, K, 0, [(0, 1)])
    second = h.poll(3, K, 0, [(0, 2)])
    h.poll(3, K, 1, [], final=True)
    anomaly = only(check(h.history()), "inconsistent-offsets")
    assert anomaly["offset"] == 0 and anomaly["values"] == [1, 2]
    assert set(anomaly["indexes"]) == indexes(first, second)


def test_inconsistent_offsets_between_an_ack_and_a_read() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(1, K, 2, 0)  # acknowledged at the same offset
    results = check(h.history())
    assert results["verdict"] == "invalid"
    assert results["anomaly_counts"]["inconsistent-offsets"] == 1


def test_nonmonotonic_poll_within_one_poll() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    bad = h.poll(1, K, 0, [(1, 2), (0, 1)])
    h.final_read(2, K, [1, 2])
    anomaly = only(check(h.history()), "nonmonotonic-poll")
    assert anomaly["backwards"] == [{"after": 1, "offset": 0}]
    assert set(anomaly["indexes"]) == indexes(bad)


def test_nonmonotonic_poll_across_a_process_s_consecutive_polls() -> None:
    h = HistoryBuilder()
    for value, offset in ((1, 0), (2, 1), (3, 2)):
        h.send(0, K, value, offset)
    before = h.poll(1, K, 0, [(0, 1), (1, 2)])
    bad = h.poll(1, K, 2, [(1, 2), (2, 3)])  # asked for 2, got 1 again: went backwards
    h.final_read(2, K, [1, 2, 3])
    anomaly = only(check(h.history()), "nonmonotonic-poll")
    assert set(anomaly["indexes"]) == indexes(before, bad)


def test_nonmonotonic_send() -> None:
    h = HistoryBuilder()
    first = h.send(0, K, 1, 1)
    second = h.send(0, K, 2, 0)  # the same process's later send got a lower offset
    h.final_read(2, K, [2, 1])
    anomaly = only(check(h.history()), "nonmonotonic-send")
    assert anomaly["offsets"] == [1, 0]
    assert set(anomaly["indexes"]) == indexes(first, second)


def test_poll_skip_within_one_poll() -> None:
    h = HistoryBuilder()
    for value, offset in ((1, 0), (2, 1), (3, 2)):
        h.send(0, K, value, offset)
    bad = h.poll(1, K, 0, [(0, 1), (2, 3)])
    h.final_read(2, K, [1, 2, 3])
    anomaly = only(check(h.history()), "poll-skip")
    assert anomaly["skipped"] == [1]
    assert indexes(bad) <= set(anomaly["indexes"])


def test_poll_skip_from_where_the_previous_poll_ended() -> None:
    h = HistoryBuilder()
    for value, offset in ((1, 0), (2, 1), (3, 2)):
        h.send(0, K, value, offset)
    before = h.poll(1, K, 0, [(0, 1)])
    bad = h.poll(1, K, 1, [(2, 3)])
    h.final_read(2, K, [1, 2, 3])
    anomaly = only(check(h.history()), "poll-skip")
    assert anomaly["skipped"] == [1]
    assert indexes(before, bad) <= set(anomaly["indexes"])


def test_g1a_read_of_a_failed_send() -> None:
    h = HistoryBuilder()
    failed = h.send(0, K, 1, type="fail")
    reader = h.poll(1, K, 0, [(0, 1)], final=True)
    h.poll(1, K, 1, [], final=True)
    anomaly = only(check(h.history()), "G1a")
    assert anomaly["value"] == 1
    assert set(anomaly["indexes"]) == indexes(failed, reader)


def test_phantom_read_of_a_value_never_sent() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    reader = h.poll(1, K, 0, [(0, 1), (1, {"garbage": True})], final=True)
    h.poll(1, K, 2, [], final=True)
    anomaly = only(check(h.history()), "phantom-read")
    assert set(anomaly["indexes"]) == indexes(reader)


def test_committed_offset_regression() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    high = h.commit(1, K, "g", 5, 5)
    low = h.committed(2, K, "g", 3)
    h.final_read(3, K, [1])
    anomaly = only(check(h.history()), "committed-offset-regression")
    assert anomaly["group"] == "g" and anomaly["offsets"] == [5, 3]
    assert set(anomaly["indexes"]) == indexes(high, low)


def test_committed_offset_vanishing_is_a_regression() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.committed(2, K, "g", 1)
    h.committed(2, K, "g", None)
    h.final_read(3, K, [1])
    assert only(check(h.history()), "committed-offset-regression")["offsets"] == [1, None]


def test_acknowledged_commit_storing_less_than_asked_is_a_regression() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    bad = h.commit(1, K, "g", 5, 4)
    h.final_read(3, K, [1])
    anomaly = only(check(h.history()), "committed-offset-regression")
    assert set(anomaly["indexes"]) == indexes(bad)


def test_concurrent_committed_reads_are_not_ordered() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.invoke(1, "commit", key=K, group="g", offset=5)
    h.invoke(2, "committed", key=K, group="g")
    h.complete(1, "ok", committed=5)
    h.complete(2, "ok", offset=3)  # overlapped the commit: may have read before it
    h.final_read(3, K, [1])
    assert check(h.history())["verdict"] == "valid"


def test_dense_offset_hole_nobody_ever_saw() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(0, K, 3, 2)
    bad = h.poll(1, K, 0, [(0, 1), (2, 3)], final=True)
    h.poll(1, K, 3, [], final=True)
    anomaly = only(check(h.history()), "dense-offset")
    assert anomaly["holes"] == [[1, 1]]
    assert set(anomaly["indexes"]) == indexes(bad)


def test_dense_offset_gap_between_final_reads() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.send(0, K, 3, 2)
    h.poll(1, K, 0, [(0, 1)], final=True)
    h.poll(1, K, 2, [(2, 3)], final=True)
    h.poll(1, K, 3, [], final=True)
    assert only(check(h.history()), "dense-offset")["gaps"] == [[1, 1]]


def test_every_class_has_a_test_above() -> None:
    import pathlib

    here = pathlib.Path(__file__)
    compacted = here.with_name("test_jepsen_compaction_checker.py")  # the classes of compacted topics
    reads = here.with_name("test_jepsen_read_checker.py")  # the classes of reads (jepsen/read_checker.py)
    text = "".join(path.read_text(encoding="utf-8") for path in (here, compacted, reads))
    missing = [kind for kind in CLASSES if f'"{kind}")' not in text]
    assert not missing, f"no test makes the checker catch {missing}"


# ----------------------------------------------------------------------------------------------------
# Verdict unknown, examples bound, availability


def test_no_final_read_is_unknown() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.poll(1, K, 0, [(0, 1)])
    results = check(h.history())
    assert results["verdict"] == "unknown"
    assert "no final read happened" in results["reasons"]


def test_anomalies_win_over_unknown_and_examples_are_bounded() -> None:
    h = HistoryBuilder()
    for value in range(15):
        h.send(0, K, value, type="fail")
        h.poll(1, K, value, [(value, value)])
    results = check(h.history(), examples_per_class=10)
    assert results["verdict"] == "invalid"
    assert results["anomaly_counts"]["G1a"] == 15
    assert len(results["anomalies"]["G1a"]) == 10


def test_availability_per_fault_window() -> None:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.nemesis("start", "partition", "n1 | n2 n3")
    h.send(0, K, 2, type="fail")
    h.send(0, K, 3, type="info")
    h.nemesis("start", "kill", "n1")
    h.send(0, K, 4, 1)
    h.nemesis("stop", "partition")
    h.nemesis("stop", "kill")
    h.send(0, K, 5, 2)
    h.final_read(1, K, [1, 4, 5])
    results = check(h.history())
    assert results["verdict"] == "valid", results["reasons"]
    windows = results["availability"]["windows"]
    assert [w["fault"] for w in windows] == ["partition", "kill"]
    partition_sends = windows[0]["ops"]["send"]
    assert (partition_sends["ok"], partition_sends["fail"], partition_sends["info"]) == (1, 1, 1)
    assert partition_sends["ok_fraction"] == round(1 / 3, 4)
    assert windows[1]["ops"]["send"]["ok"] == 1 and windows[1]["ops"]["send"]["total"] == 1
    outside = results["availability"]["outside"]["send"]
    assert (outside["ok"], outside["total"]) == (2, 2)
    assert results["availability"]["by_fault"]["kill"]["send"]["ok"] == 1
