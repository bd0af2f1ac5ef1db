"""failures.py (FAIL_REASON -> typed error) and bridge.py (driver-thread callbacks -> asyncio futures)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pysyncobj.config import FAIL_REASON

from raftlog.consensus.bridge import CallbackBridge
from raftlog.consensus.errors import (
    GroupClosed,
    NoLeader,
    NotDone,
    NotLeader,
    OutcomeUnknown,
    ProposalDiscarded,
    ProposalQueueFull,
    ProposalRejected,
)
from raftlog.consensus.failures import error_for, timeout_error
from raftlog.errors import InvariantViolation, RaftlogError

EXPECTED = {
    FAIL_REASON.QUEUE_FULL: ProposalQueueFull,
    FAIL_REASON.MISSING_LEADER: NoLeader,
    FAIL_REASON.NOT_LEADER: NotLeader,
    FAIL_REASON.DISCARDED: ProposalDiscarded,
    FAIL_REASON.REQUEST_DENIED: ProposalRejected,
    FAIL_REASON.LEADER_CHANGED: OutcomeUnknown,
    FAIL_REASON.UNKNOWN_OUTCOME: OutcomeUnknown,
}


@pytest.mark.parametrize(("code", "error_class"), sorted(EXPECTED.items()))
def test_every_fail_reason_maps_to_one_typed_error(code: int, error_class: type) -> None:
    error = error_for("g", code, "127.0.0.1:7")
    assert type(error) is error_class
    assert isinstance(error, RaftlogError)
    assert isinstance(error, NotDone) != isinstance(error, OutcomeUnknown), (
        "exactly one of not-done / unknown"
    )


def test_not_leader_carries_the_hint_and_unknown_codes_are_outcome_unknown() -> None:
    error = error_for("g", FAIL_REASON.NOT_LEADER, "127.0.0.1:7")
    assert isinstance(error, NotLeader) and error.leader_hint == "127.0.0.1:7"
    assert isinstance(error_for("g", 99, None), OutcomeUnknown)
    assert isinstance(timeout_error("g", 100), OutcomeUnknown)
    with pytest.raises(InvariantViolation):
        error_for("g", FAIL_REASON.SUCCESS, None)


async def test_bridge_resolves_from_another_thread() -> None:
    bridge = CallbackBridge("g", asyncio.get_running_loop(), lambda: "127.0.0.1:9")
    ok, ok_callback = bridge.pending()
    failed, failed_callback = bridge.pending()
    worker = threading.Thread(
        target=lambda: (ok_callback(42, 0), failed_callback(None, FAIL_REASON.NOT_LEADER))
    )
    worker.start()
    worker.join()
    assert await asyncio.wait_for(ok, 1) == 42
    with pytest.raises(NotLeader) as raised:
        await asyncio.wait_for(failed, 1)
    assert raised.value.leader_hint == "127.0.0.1:9"


async def test_bridge_fail_all_fails_pending_and_later_futures() -> None:
    """A call handed to the core before the close may have been appended (a new leader commits it after
    this replica closed): its outcome is unknown, never "not done"; one made after the close is not done."""
    bridge = CallbackBridge("g", asyncio.get_running_loop(), lambda: None)
    pending, callback = bridge.pending()
    bridge.fail_all(GroupClosed("g"))
    with pytest.raises(OutcomeUnknown, match="closed with the proposal in flight") as raised:
        await asyncio.wait_for(pending, 1)
    assert not isinstance(raised.value, GroupClosed)
    callback(1, 0)  # a late answer after close is ignored
    later, _ = bridge.pending()
    with pytest.raises(GroupClosed):
        await later
