"""A node's failed replicas: one state for "cannot open" and "cannot replay", retried with a doubling
backoff, reported until a retry has run long enough, and a wire form whose digest names its content."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitions.replicas import failures as replica_failures
from partitions.replicas.failures import (
    ERROR_CHARS_MAX,
    NO_FAILURES_DIGEST,
    RETRY_MAX_S,
    SETTLE_S,
    FailedReplicas,
    ReplicaFailure,
    describe_error,
)
from raftlog.errors import InvariantViolation


def test_failures_back_off_doubling_and_are_retried_only_when_due() -> None:
    failed = FailedReplicas("n2")
    error = InvariantViolation("replayed entry at offset 6 differs from the batch on disk")
    assert failed.record("orders-0.5", "orders", 0, error, now_s=100.0) == 1.0
    assert not failed.may_open("orders-0.5", 100.5) and failed.may_open("orders-0.5", 101.0)
    assert failed.may_open("other-0.7", 100.0), "a replica that never failed opens at once"
    assert failed.next_retry_s() == 101.0
    assert failed.failures() == [
        ReplicaFailure(
            "n2",
            "orders",
            0,
            "InvariantViolation: replayed entry at offset 6 differs from the batch on disk",
            1,
        )
    ]
    delays = [failed.record("orders-0.5", "orders", 0, error, now_s=100.0) for _ in range(8)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, RETRY_MAX_S, RETRY_MAX_S, RETRY_MAX_S]
    assert failed.get("orders-0.5") is not None and failed.get("orders-0.5").attempts == 9  # type: ignore[union-attr]


def test_a_replica_that_fails_again_after_reopening_stays_failed_and_backs_off() -> None:
    failed = FailedReplicas("n2")
    failed.record("t-0.1", "t", 0, OSError("bad segment"), now_s=0.0)
    failed.opened("t-0.1", now_s=1.0)
    assert len(failed) == 1 and failed.next_retry_s() is None, "reported while it proves itself"
    assert not failed.settle({"t-0.1"}, now_s=1.0 + SETTLE_S / 2)
    assert failed.record("t-0.1", "t", 0, OSError("bad segment"), now_s=2.0) == 2.0, (
        "a replay failure counts on"
    )
    failed.opened("t-0.1", now_s=4.0)
    assert not failed.settle(set(), now_s=4.0 + SETTLE_S), "a replica that is not running does not settle"
    assert failed.settle({"t-0.1"}, now_s=4.0 + SETTLE_S)
    assert len(failed) == 0 and failed.failures() == []


def test_replicas_no_longer_held_are_forgotten() -> None:
    failed = FailedReplicas("n1")
    failed.record("a-0.1", "a", 0, OSError("x"), 0.0)
    failed.record("b-0.2", "b", 0, OSError("y"), 0.0)
    failed.keep_only({"b-0.2"})
    assert [f.topic for f in failed.failures()] == ["b"]


def test_error_messages_are_bounded_for_gossip() -> None:
    text = describe_error(OSError("x" * 1000))
    assert len(text) == ERROR_CHARS_MAX and text.startswith("OSError: xxx") and text.endswith("...")


failures_strategy = st.lists(
    st.builds(
        ReplicaFailure,
        st.just("n3"),
        st.text(min_size=1, max_size=30),
        st.integers(0, 2**31 - 1),
        st.text(max_size=ERROR_CHARS_MAX),
        st.integers(1, 100),
    ),
    max_size=20,
)


@given(failures_strategy)
def test_rows_round_trip_and_the_digest_names_the_content(failures: list[ReplicaFailure]) -> None:
    assert replica_failures.from_rows("n3", replica_failures.rows(failures)) == failures
    assert replica_failures.digest(failures) == replica_failures.digest(list(reversed(failures)))
    assert (replica_failures.digest(failures) == NO_FAILURES_DIGEST) == (not failures)


def test_a_change_of_any_field_changes_the_digest() -> None:
    base = ReplicaFailure("n1", "t", 0, "OSError: x", 1)
    variants = [
        ReplicaFailure("n1", "u", 0, "OSError: x", 1),
        ReplicaFailure("n1", "t", 1, "OSError: x", 1),
        ReplicaFailure("n1", "t", 0, "OSError: y", 1),
        ReplicaFailure("n1", "t", 0, "OSError: x", 2),
    ]
    digests = {replica_failures.digest([f]) for f in [base, *variants]}
    assert len(digests) == 5


@pytest.mark.parametrize(
    "value", [None, {}, [["t", 0, "e"]], [["t", -1, "e", 1]], [[1, 0, "e", 1]], [["t", True, "e", 1]]]
)
def test_malformed_rows_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        replica_failures.from_rows("n1", value)
