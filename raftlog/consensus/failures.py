"""The one place where pysyncobj's FAIL_REASON codes become typed errors.

"Not done" (the command was not applied and never will be) and "outcome unknown" (it may be applied, now
or later) stay distinct; see timeout_ambiguity.py in the pysyncobj research notes.
"""

from __future__ import annotations

from pysyncobj.config import FAIL_REASON

from raftlog.consensus.errors import (
    ConsensusError,
    NoLeader,
    NotLeader,
    OutcomeUnknown,
    ProposalDiscarded,
    ProposalQueueFull,
    ProposalRejected,
)
from raftlog.errors import InvariantViolation

SUCCESS = FAIL_REASON.SUCCESS


def error_for(
    group_id: str, fail_reason: int, leader_hint: str | None, request: str = "proposal"
) -> ConsensusError:
    """The typed error for a pysyncobj callback's non-success ``fail_reason``."""
    if fail_reason == FAIL_REASON.SUCCESS:
        raise InvariantViolation(f"group {group_id}: error_for called with SUCCESS")
    if fail_reason == FAIL_REASON.QUEUE_FULL:
        return ProposalQueueFull(group_id)
    if fail_reason == FAIL_REASON.MISSING_LEADER:
        return NoLeader(group_id)
    if fail_reason == FAIL_REASON.NOT_LEADER:
        return NotLeader(group_id, leader_hint)
    if fail_reason == FAIL_REASON.DISCARDED:
        return ProposalDiscarded(group_id)
    if fail_reason == FAIL_REASON.REQUEST_DENIED:
        return ProposalRejected(group_id, f"{request} denied by the leader")
    if fail_reason == FAIL_REASON.LEADER_CHANGED:
        return OutcomeUnknown(group_id, "the leader changed while the proposal was in flight")
    if fail_reason == FAIL_REASON.UNKNOWN_OUTCOME:
        return OutcomeUnknown(group_id, "the proposal's log position was applied before it could be tracked")
    return OutcomeUnknown(group_id, f"unrecognised pysyncobj fail reason {fail_reason!r}")


def timeout_error(group_id: str, timeout_ms: int, request: str = "proposal") -> OutcomeUnknown:
    """A proposal that was handed to the core and not answered in time may still be applied later."""
    return OutcomeUnknown(group_id, f"{request} not answered within {timeout_ms} ms")
