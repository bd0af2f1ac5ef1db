"""Typed errors of the consensus adapter (pysyncobj's FAIL_REASON codes are mapped to these in exactly one
place, ``failures.py``).

The split that matters to a caller is :class:`NotDone` (the command was definitely not applied and will
not be: safe to retry, on the leader named by the hint if any) versus :class:`OutcomeUnknown` (it may or may
not have been applied, now or later: retry only if the command is idempotent, e.g. deduplicated by
producer_id and sequence).
"""

from __future__ import annotations

from raftlog.errors import RaftlogError, with_fields


class ConsensusError(RaftlogError):
    """Base of the consensus adapter's errors."""


class NotDone(ConsensusError):
    """The proposal was not applied and never will be."""


@with_fields
class NotLeader(NotDone):
    """This replica is not the leader; ``leader_hint`` is the last leader it knew of (maybe stale)."""

    group_id: str
    leader_hint: str | None
    template = "group {group_id}: not the leader (leader hint: {leader_hint})"


@with_fields
class NoLeader(NotDone):
    """No leader is known (an election is in progress or this replica is cut off)."""

    group_id: str
    template = "group {group_id}: no leader known"


@with_fields
class ProposalQueueFull(NotDone):
    group_id: str
    template = "group {group_id}: proposal queue full"


@with_fields
class ProposalRejected(NotDone):
    """The leader refused the request (a membership change while another is pending, a transfer to a
    replica that is not caught up, removing the leader itself...)."""

    group_id: str
    reason: str
    template = "group {group_id}: request rejected: {reason}"


@with_fields
class ProposalDiscarded(NotDone):
    """The proposal was appended but a new leader overwrote it before it committed."""

    group_id: str
    template = "group {group_id}: proposal discarded by a new leader"


@with_fields
class OutcomeUnknown(ConsensusError):
    """The proposal may or may not be applied (timeout, leader change while forwarded, restart)."""

    group_id: str
    reason: str
    about: str = ""  # what the group is to its users (e.g. "partition orders/1"); "": its id is named
    template = "group {group_id}: outcome unknown: {reason}"

    def describe(self) -> str:
        if self.about:
            return f"{self.about}: outcome unknown: {self.reason}"
        return super().describe()


@with_fields
class GroupClosed(ConsensusError):
    """The group was closed or its driver stopped; nothing more will be applied here."""

    group_id: str
    cause: BaseException | None = None

    def describe(self) -> str:
        detail = "" if self.cause is None else f": {self.cause!r}"
        return f"group {self.group_id}: closed{detail}"


@with_fields
class CorruptJournal(ConsensusError):
    """The Raft journal on disk is damaged somewhere other than a torn tail."""

    path: str
    offset: int
    reason: str
    template = "journal {path} at offset {offset}: {reason}"


@with_fields
class CorruptSnapshot(ConsensusError):
    path: str
    reason: str
    template = "snapshot {path}: {reason}"
