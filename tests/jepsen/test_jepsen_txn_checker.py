"""The transactional checker on built histories: clean ones (commits, aborts, lost acknowledgements,
consume-transform-produce) are valid, and each anomaly is caught, naming the transaction: an aborted
read, a read before the commit was requested, a lost committed write, a transaction half visible,
duplicates, reorderings, and consumer offsets visible although their transaction did not commit, or lost
although it did."""

from __future__ import annotations

from typing import Any

import pytest
from jepsen_history_builder import TxnHistory

from jepsen import history as history_module
from jepsen.txn_checker import CLASSES, check, is_transactional

A, B, C = "tx/0", "tx/1", "ty/0"


def found(results: dict[str, Any]) -> dict[str, int]:
    return {kind: count for kind, count in results["anomaly_counts"].items() if count}


def only(results: dict[str, Any], kind: str) -> dict[str, Any]:
    """The history is invalid with anomalies of ``kind`` only; the first of them."""
    assert results["verdict"] == "invalid", results["reasons"]
    assert set(found(results)) == {kind}, found(results)
    anomaly: dict[str, Any] = results["anomalies"][kind][0]
    assert anomaly["class"] == kind
    assert anomaly["ops"] and [op["index"] for op in anomaly["ops"]] == anomaly["indexes"]
    return anomaly


def valid(results: dict[str, Any]) -> None:
    assert results["verdict"] == "valid", (results["reasons"], found(results), results["anomalies"])


def a_run() -> TxnHistory:
    """Two producers: T1 commits to A and B, T2 aborts on purpose (A, C), T3 commits to C; readers see
    the committed records only (under read_uncommitted, T2's as well); offsets 2 and 5 are markers."""
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (B, 2), (A, 3)], [0, 0, 1])
    t.aborted_txn(1, "p1.1", [(A, 4), (C, 5)], [3, 0])
    t.committed_txn(1, "p1.2", [(C, 6)], [2])
    t.poll(2, A, 0, [(0, 1), (1, 3)])  # 2: T1's marker; 3: T2's aborted record; 4: its marker
    t.poll(2, A, 0, [(0, 1), (1, 3), (3, 4)], isolation="read_uncommitted")
    t.poll(3, C, 0, [(2, 6)])
    t.final_read(5, A, [(0, 1), (1, 3)], end=5)
    t.final_read(6, B, [(0, 2)], end=2)
    t.final_read(7, C, [(2, 6)], end=4)
    return t


# ----------------------------------------------------------------------------------------------------
# Valid histories


def test_commits_and_aborts_read_as_committed_are_valid() -> None:
    history = a_run().history()
    assert is_transactional(history)
    results = check(history)
    valid(results)
    stats = results["stats"]
    assert stats["transactions"] == {"committed": 2, "aborted, deliberately": 1}
    assert stats["committed_writes"] == 4
    assert stats["aborted_values_seen_by_read_uncommitted"] == 1  # the committed readers had one to skip
    assert stats["complete_final_read_keys"] == [A, B, C]
    assert set(results["anomaly_counts"]) == set(CLASSES)


def test_a_commit_whose_answer_was_lost_may_be_read_or_not() -> None:
    t = TxnHistory()
    t.txn(0, "p0.1", [(A, 1), (B, 2)], [0, 0])
    t.end(0, "p0.1", type="info")  # the commit's answer was lost...
    t.poll(2, A, 0, [(0, 1)])  # ...and it had committed: read after the commit was requested
    t.txn(1, "p1.1", [(A, 3)], [2])
    t.end(1, "p1.1", type="info")  # this one had not: never visible
    t.final_read(5, A, [(0, 1)], end=4)
    t.final_read(6, B, [(0, 2)], end=2)
    results = check(t.history())
    valid(results)
    assert results["stats"]["transactions"] == {"unknown, not visible": 1, "unknown, visible": 1}


def test_a_read_during_the_commit_is_fine() -> None:
    t = TxnHistory()
    t.txn(0, "p0.1", [(A, 1)], [0])
    t.h.invoke(0, "end", txn="p0.1", commit=True)
    t.poll(2, A, 0, [(0, 1)])  # completes while the commit is in flight
    t.h.complete(0, "ok", txn="p0.1")
    t.final_read(5, A, [(0, 1)], end=2)
    valid(check(t.history()))


def test_other_producers_may_interleave_within_a_transaction() -> None:
    t = TxnHistory()
    t.txn(0, "p0.1", [(A, 1), (A, 3)], [0, 2])
    t.txn(1, "p1.1", [(A, 2)], [1])  # p1's record between p0's two
    t.end(1, "p1.1")
    t.end(0, "p0.1")
    t.final_read(5, A, [(0, 1), (1, 2), (2, 3)], end=5)
    valid(check(t.history()))


def test_consume_transform_produce_with_offsets_is_valid() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (A, 2)], [0, 1])
    # p1 consumes A through group g1: committed offset none yet, reads 1 and 2, writes 11 and 12, sends 2
    t.committed(1, A, "g1", None)
    t.poll(1, A, 0, [(0, 1), (1, 2)])
    t.txn(1, "p1.1", [(B, 11), (B, 12)], [0, 1], sent=[("g1", A, 2)], consumed=[(A, 0, 1), (A, 1, 2)])
    t.end(1, "p1.1", commit=False)  # aborted: the offset stays unset
    t.committed(1, A, "g1", None)
    t.poll(1, A, 0, [(0, 1), (1, 2)])
    t.txn(1, "p1.2", [(B, 13), (B, 14)], [3, 4], sent=[("g1", A, 2)], consumed=[(A, 0, 1), (A, 1, 2)])
    t.end(1, "p1.2")
    t.committed(1, A, "g1", 2)
    t.final_read(5, A, [(0, 1), (1, 2)], end=3)
    t.final_read(6, B, [(3, 13), (4, 14)], end=6)
    t.committed(7, A, "g1", 2)
    results = check(t.history())
    valid(results)
    assert results["stats"]["transactions_sending_offsets"] == 2
    assert results["stats"]["committed_offset_reads"] == 4


def test_an_offset_sent_with_a_commit_of_unknown_outcome_may_be_read() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.txn(1, "p1.1", [(B, 11)], [0], sent=[("g1", A, 1)], consumed=[(A, 0, 1)])
    t.end(1, "p1.1", type="info")
    t.committed(1, A, "g1", 1)  # it committed after all
    t.final_read(5, A, [(0, 1)], end=2)
    t.final_read(6, B, [(0, 11)], end=2)
    valid(check(t.history()))


# ----------------------------------------------------------------------------------------------------
# Negative controls: each anomaly caught, naming the transaction


@pytest.mark.parametrize(
    ("how", "outcome"),
    [
        ("deliberate", "abort requested and acknowledged"),
        ("refused", "commit refused, abort acknowledged"),
        ("abort-unknown", "abort requested"),
        ("no-end", "commit never requested (no end)"),
    ],
)
def test_a_record_of_an_aborted_transaction_read_committed_is_an_aborted_read(how: str, outcome: str) -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    if how == "deliberate":
        t.aborted_txn(1, "p1.1", [(A, 2), (B, 3)], [2, 0])
    elif how == "refused":
        t.txn(1, "p1.1", [(A, 2), (B, 3)], [2, 0])
        t.end(1, "p1.1", commit=True, type="fail")
    elif how == "abort-unknown":
        t.txn(1, "p1.1", [(A, 2), (B, 3)], [2, 0], intent="abort")
        t.end(1, "p1.1", commit=False, type="info")
    else:
        t.txn(1, "p1.1", [(A, 2), (B, 3)], [2, None], type="info")  # its producer failed mid-way
    t.poll(2, A, 0, [(0, 1), (2, 2)])  # the aborted record, read as committed
    t.final_read(5, A, [(0, 1)], end=4)
    t.final_read(6, B, [], end=2)
    anomaly = only(check(t.history()), "aborted-read")
    assert (anomaly["txn"], anomaly["transactional_id"], anomaly["outcome"]) == ("p1.1", "tid-1", outcome)
    assert (anomaly["key"], anomaly["offset"], anomaly["value"]) == (A, 2, 2)


def test_a_record_read_before_its_commit_was_requested_is_an_uncommitted_read() -> None:
    t = TxnHistory()
    t.txn(0, "p0.1", [(A, 1), (B, 2)], [0, 0])
    t.poll(2, A, 0, [(0, 1)])  # the transaction is still open: nothing of it may be read yet
    t.end(0, "p0.1")
    t.final_read(5, A, [(0, 1)], end=2)
    t.final_read(6, B, [(0, 2)], end=2)
    results = check(t.history())
    anomaly = only(results, "uncommitted-read")
    assert anomaly["txn"] == "p0.1" and anomaly["value"] == 1
    assert anomaly["read_completed_at"] < anomaly["commit_requested_at"]
    assert any("txn p0.1" in reason for reason in results["reasons"]), results["reasons"]


def test_a_committed_record_missing_from_a_final_read_is_a_lost_write() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (A, 2)], [0, 1])
    t.committed_txn(0, "p0.2", [(B, 3)], [0])
    t.final_read(5, A, [(0, 1), (1, 2)], end=3)
    t.final_read(6, B, [], end=2)  # p0.2 gone
    anomaly = only(check(t.history()), "lost-write")
    assert (anomaly["txn"], anomaly["key"], anomaly["value"], anomaly["offset"]) == ("p0.2", B, 3, 0)


def test_a_poll_passing_over_a_committed_record_is_a_lost_write() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.committed_txn(1, "p1.1", [(A, 2)], [2])
    t.poll(2, A, 0, [(2, 2)])  # passes over offset 0, where p0.1's committed record is
    t.final_read(5, A, [(0, 1), (2, 2)], end=4)
    anomaly = only(check(t.history()), "lost-write")
    assert anomaly["txn"] == "p0.1" and anomaly["offset"] == 0


def test_a_transaction_visible_in_one_partition_only_is_not_atomic() -> None:
    t = TxnHistory()
    t.txn(0, "p0.1", [(A, 1), (B, 2), (C, 3)], [0, 0, 0])
    t.end(0, "p0.1", type="info")  # unknown outcome: all or nothing
    t.final_read(5, A, [(0, 1)], end=2)
    t.final_read(6, B, [], end=2)  # B's record aborted while A's committed
    t.final_read(7, C, [(0, 3)], end=2)
    anomaly = only(check(t.history()), "non-atomic")
    assert anomaly["txn"] == "p0.1"
    assert anomaly["visible"] == [[A, 1], [C, 3]] and anomaly["missing"] == [[B, 2]]


def test_a_committed_transaction_half_lost_is_both_lost_and_not_atomic() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (B, 2)], [0, 0])
    t.final_read(5, A, [(0, 1)], end=2)
    t.final_read(6, B, [], end=2)
    results = check(t.history())
    assert found(results) == {"lost-write": 1, "non-atomic": 1}


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.final_read(5, A, [(0, 1), (1, 1)], end=3)  # appended twice by the idempotent producer
    anomaly = only(check(t.history()), "duplicate")
    assert anomaly["txn"] == "p0.1" and anomaly["places"] == [[A, 0], [A, 1]]


def test_two_values_at_one_offset_are_inconsistent_offsets() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.committed_txn(1, "p1.1", [(A, 2)], [0])  # both acknowledged at 0
    t.final_read(5, A, [(0, 1)], end=3)
    results = check(t.history())
    assert found(results)["inconsistent-offsets"] == 1
    assert results["anomalies"]["inconsistent-offsets"][0]["values"] == [1, 2]


def test_a_poll_going_backwards_is_nonmonotonic() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (A, 2)], [0, 1])
    t.poll(2, A, 0, [(1, 2), (0, 1)])
    t.final_read(5, A, [(0, 1), (1, 2)], end=3)
    assert only(check(t.history()), "nonmonotonic-poll")["key"] == A


def test_a_transactions_records_out_of_production_order_are_reordered() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (A, 2)], [1, 0])
    t.final_read(5, A, [(0, 2), (1, 1)], end=3)
    anomaly = only(check(t.history()), "reordered")
    assert anomaly["txn"] == "p0.1" and anomaly["offsets_in_production_order"] == [1, 0]


def test_a_producers_later_transaction_before_its_earlier_one_is_reordered() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (A, 2)], [0, 3])  # p0.1 ends at 3 ...
    t.committed_txn(0, "p0.2", [(A, 3)], [2])  # ... p0.2, begun after p0.1 ended, inside it
    t.final_read(5, A, [(0, 1), (2, 3), (3, 2)], end=5)
    anomaly = only(check(t.history()), "reordered")
    assert (anomaly["earlier_txn"], anomaly["txn"], anomaly["offset"]) == ("p0.1", "p0.2", 2)


def test_a_value_never_written_is_a_phantom_read() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.final_read(5, A, [(0, 1), (2, 77)], end=4)
    anomaly = only(check(t.history()), "phantom-read")
    assert anomaly["value"] == 77


def _offsets_history(read: int | None, *, last: str = "commit") -> TxnHistory:
    """p1 sends offset 1 of A for group g1 (committed), then offset 2 in p1.2, which ``last`` ends."""
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (A, 2)], [0, 1])
    t.txn(1, "p1.1", [(B, 11)], [0], sent=[("g1", A, 1)], consumed=[(A, 0, 1)])
    t.end(1, "p1.1")
    t.txn(1, "p1.2", [(B, 12)], [2], sent=[("g1", A, 2)], consumed=[(A, 1, 2)])
    if last == "open":
        t.committed(2, A, "g1", read)  # while p1.2 is open
    t.end(1, "p1.2", commit=last != "abort")
    if last != "open":
        t.committed(2, A, "g1", read)
    t.final_read(5, A, [(0, 1), (1, 2)], end=3)
    t.final_read(6, B, [(0, 11)] + ([(2, 12)] if last != "abort" else []), end=4)
    return t


def test_an_offset_of_an_aborted_transaction_read_is_an_uncommitted_offset() -> None:
    valid(check(_offsets_history(1, last="abort").history()))
    anomaly = only(check(_offsets_history(2, last="abort").history()), "uncommitted-offset")
    assert (anomaly["txn"], anomaly["group"], anomaly["key"], anomaly["read"]) == ("p1.2", "g1", A, 2)
    assert anomaly["outcome"] == "abort requested and acknowledged"


def test_an_offset_read_before_its_commit_was_requested_is_an_uncommitted_offset() -> None:
    valid(check(_offsets_history(1, last="open").history()))
    anomaly = only(check(_offsets_history(2, last="open").history()), "uncommitted-offset")
    assert anomaly["txn"] == "p1.2" and anomaly["read_completed_at"] < anomaly["commit_requested_at"]


@pytest.mark.parametrize("read", [1, None])
def test_an_offset_read_below_an_acknowledged_commit_is_a_lost_offset(read: int | None) -> None:
    valid(check(_offsets_history(2).history()))
    anomaly = only(check(_offsets_history(read).history()), "lost-offset")
    assert (anomaly["txn"], anomaly["committed_offset"], anomaly["read"]) == ("p1.2", 2, read)


def test_an_input_record_processed_by_two_committed_transactions_is_duplicate_processing() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.txn(1, "p1.1", [(B, 11)], [0], sent=[("g1", A, 1)], consumed=[(A, 0, 1)])
    t.end(1, "p1.1", type="info")  # committed, as its output shows
    t.txn(1, "p1.2", [(B, 12)], [2], sent=[("g1", A, 1)], consumed=[(A, 0, 1)])  # from 0 again
    t.end(1, "p1.2")
    t.final_read(5, A, [(0, 1)], end=2)
    t.final_read(6, B, [(0, 11), (2, 12)], end=4)
    anomaly = only(check(t.history()), "duplicate-processing")
    assert (anomaly["group"], anomaly["key"], anomaly["offset"], anomaly["txns"]) == (
        "g1",
        A,
        0,
        ["p1.1", "p1.2"],
    )


# ----------------------------------------------------------------------------------------------------
# Unknown verdicts and the history's shape


def test_without_a_complete_final_read_of_a_written_partition_the_verdict_is_unknown() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1), (B, 2)], [0, 0])
    t.final_read(5, A, [(0, 1)], end=2)
    t.poll(6, B, 0, [], final=True)  # never reached the end: not complete
    results = check(t.history())
    assert results["verdict"] == "unknown"
    assert results["reasons"] == [f"partitions without a complete final read: ['{B}']"]


def test_a_history_where_nothing_committed_is_unknown() -> None:
    t = TxnHistory()
    t.aborted_txn(0, "p0.1", [(A, 1)], [0])
    t.txn(1, "p1.1", [(A, 2)], type="fail")
    t.final_read(5, A, [], end=2)
    results = check(t.history())
    assert results["verdict"] == "unknown"
    assert results["reasons"] == ["no transaction committed: nothing was checked"]


def test_an_aborted_transactions_partition_needs_no_final_read() -> None:
    t = TxnHistory()
    t.committed_txn(0, "p0.1", [(A, 1)], [0])
    t.aborted_txn(0, "p0.2", [(B, 2)], [0])
    t.final_read(5, A, [(0, 1)], end=2)
    valid(check(t.history()))


def test_transactional_operations_are_validated() -> None:
    t = TxnHistory()
    t.h.invoke(0, "txn", txn="p0.1", transactional_id="tid-0", intent="maybe", writes=[[A, 1]])
    t.h.complete(0, "ok", txn="p0.1", written=[[A, 1, 0]])
    with pytest.raises(history_module.HistoryError, match="intent"):
        t.history()
    t = TxnHistory()
    t.h.invoke(0, "txn", txn="p0.1", transactional_id="tid-0", intent="commit", writes=[[A, 1], [B, 2]])
    t.h.complete(0, "ok", txn="p0.1", written=[[A, 1, 0]])
    with pytest.raises(history_module.HistoryError, match="every write's offset"):
        t.history()
    t = TxnHistory()
    t.h.invoke(0, "end", txn="p0.1", commit=True)
    t.h.complete(0, "ok", txn="p0.2")
    with pytest.raises(history_module.HistoryError, match="names transaction"):
        t.history()
    t = TxnHistory()
    t.poll(2, A, 0, [], isolation="snapshot")
    with pytest.raises(history_module.HistoryError, match="isolation"):
        t.history()
