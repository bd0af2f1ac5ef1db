"""Typed errors of the consensus adapter (pysyncobj's FAIL_REASON codes are mapped to these in exactly one
place, ``failures.py``).

The split that matters to a caller is :class:`NotDone` (the command was definitely not applied and will
not be: safe to retry, on the leader named by the hint if any) versus :class:`OutcomeUnknown` (it may or may
not have been applied, now or later: retry only if the command is idempotent, e.g. deduplicated by
producer_id and sequence).
"""

from __future__ import annotations

from raftlog.errors import RaftlogError


class ConsensusError(RaftlogError):
    """Base of the consensus adapter's errors."""


class NotDone(ConsensusError):
    """The proposal was not applied and never will be."""


class NotLeader(NotDone):
    """This replica is not the leader; ``leader_hint`` is the last leader it knew of (maybe stale)."""

    def __init__(self, group_id: str, leader_hint: str | None) -> None:
        super().__init__(f"group {group_id}: not the leader (leader hint: {leader_hint})")
        self.group_id = group_id
        self.leader_hint = leader_hint


class NoLeader(NotDone):
    """No leader is known (an election is in progress or this replica is cut off)."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"group {group_id}: no leader known")
        self.group_id = group_id


class ProposalQueueFull(NotDone):
    def __init__(self, group_id: str) -> None:
        super().__init__(f"group {group_id}: proposal queue full")
        self.group_id = group_id


class ProposalRejected(NotDone):
    """The leader refused the request (a membership change while another is pending, a transfer to a
    replica that is not caught up, removing the leader itself...)."""

    def __init__(self, group_id: str, reason: str) -> None:
        super().__init__(f"group {group_id}: request rejected: {reason}")
        self.group_id = group_id
        self.reason = reason


class ProposalDiscarded(NotDone):
    """The proposal was appended but a new leader overwrote it before it committed."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"group {group_id}: proposal discarded by a new leader")
        self.group_id = group_id


class OutcomeUnknown(ConsensusError):
    """The proposal may or may not be applied (timeout, leader change while forwarded, restart)."""

    def __init__(self, group_id: str, reason: str) -> None:
        super().__init__(f"group {group_id}: outcome unknown: {reason}")
        self.group_id = group_id
        self.reason = reason


class GroupClosed(ConsensusError):
    """The group was closed or its driver stopped; nothing more will be applied here."""

    def __init__(self, group_id: str, cause: BaseException | None = None) -> None:
        detail = "" if cause is None else f": {cause!r}"
        super().__init__(f"group {group_id}: closed{detail}")
        self.group_id = group_id
        self.cause = cause


class CorruptJournal(ConsensusError):
    """The Raft journal on disk is damaged somewhere other than a torn tail."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"journal {path} at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class CorruptSnapshot(ConsensusError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"snapshot {path}: {reason}")
        self.path = path
        self.reason = reason
