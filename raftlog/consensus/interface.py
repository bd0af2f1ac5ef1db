"""The narrow consensus interface the rest of the product uses.

``partitions/`` provides a :class:`StateMachine` and talks to a :class:`RaftGroup`; nothing outside
``raftlog/consensus/`` sees pysyncobj. An in-house Raft core can replace pysyncobj behind these two
protocols without touching the callers.

This module is pure: no sockets, threads, clocks or pysyncobj.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# Why a replica may not answer a read from its own state now (``RaftGroup.read_refusal``).
READ_NOT_LEADER = "not the leader"
READ_NOT_READY = "its term's first entry is not applied yet"
READ_STANDING_STILL = "its Raft thread is standing still"
READ_UNCONFIRMED = "its leadership is not confirmed since its Raft thread stood still or it sent TimeoutNow"
READ_NO_QUORUM = "no majority of its voters heard from within its read lease"


class Role(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True)
class GroupStatus:
    """A point-in-time view of one replica of a Raft group (read without locks: fields may be one tick
    apart from each other)."""

    group_id: str
    node_id: str
    role: Role
    term: int
    leader: str | None
    commit_index: int
    last_applied: int
    last_index: int
    durable_index: int
    # Leader only: for each other member (voters and learners), the highest index known to be durable on
    # that replica.
    match_index: dict[str, int] = field(default_factory=dict)
    # Leader whose own no-op entry of this term is applied: everything committed before its term is in the
    # state machine, so reads served from it are complete. A leader that is not yet ready must not serve
    # reads (right after an election or a restart it may not have replayed the journal).
    leader_ready: bool = False
    # The configuration in effect on this replica (the latest in its log, committed or not): the voters
    # count in quorums and elections, the learners only receive the log (raftlog.consensus.membership).
    voters: frozenset[str] = frozenset()
    learners: frozenset[str] = frozenset()
    # Leader only, in wall-clock ms (as Kafka's DescribeQuorum reports them): for each member, when it was
    # last heard from (its last reply of this leadership as it arrived) and when it last held this leader's
    # whole log; a member not heard from since this replica leads is absent. The leader itself: now.
    heard_at_ms: dict[str, int] = field(default_factory=dict)
    caught_up_at_ms: dict[str, int] = field(default_factory=dict)


@runtime_checkable
class StateMachine(Protocol):
    """Deterministic replicated state, provided by ``partitions/``.

    ``apply`` is called on the driver thread, in commit order, exactly once per index in the life of a
    process; after a restart the journal replays from the last snapshot, so ``apply`` must skip indexes its
    own durable state already covers (the segmented log knows its last applied index). ``apply`` must not
    block on I/O other than local disk and must raise only on a bug: an exception stops the group. The one
    exception is ``raftlog.storage.errors.DiskFull``: no room to apply the entry, and nothing of it
    applied (the state exactly as before the call); the core calls ``apply`` with the same entry again
    later, on a backoff, and applies nothing after it meanwhile.
    ``command`` is a read-only view of the journal entry's bytes (a batch is not copied for it); holding
    on to it holds the whole entry in memory, so a state machine keeps ``bytes()`` of what it needs.
    """

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object: ...

    def snapshot(self) -> bytes | None:
        """A small metadata snapshot of everything applied so far (the log segments are durable
        separately and must be fsynced before this returns), or None for "not now": the state cannot be
        captured truthfully at the moment (a partition replica whose log still lacks records its metadata
        says were applied, while it recovers them from its peers). The core then skips this compaction,
        keeps its journal and asks again at a later tick; a snapshot never claims what is not on disk."""
        ...

    def restore(self, snapshot: bytes) -> None:
        """Replace the state with ``snapshot`` (from this node's disk or installed by the leader)."""
        ...


class RaftGroup(Protocol):
    """One replica of one Raft group, as seen from asyncio code."""

    group_id: str

    async def propose(self, command: bytes, timeout_ms: int) -> object:
        """Replicate ``command``; return what ``StateMachine.apply`` returned for it on this node.

        Raises ``NotLeader(leader_hint)``, ``NoLeader``, ``ProposalQueueFull``, ``ProposalDropped``,
        ``DiskFull`` (the leader's disk is full: not done, safe to retry anywhere) or ``OutcomeUnknown``
        (may or may not be applied).
        """
        ...

    def status(self) -> GroupStatus: ...

    def read_refusal(self) -> str | None:
        """Why this replica may not answer a read from its own state now, None when it may: it leads, its
        no-op is applied (``leader_ready``) and it can show that no other leader was elected since (a
        majority heard within its read lease, its Raft thread running and its leadership confirmed since
        that thread last stood still). Cheap enough for every read; asks for the confirmation it lacks."""
        ...

    def campaign_if_new(self, delay_ms: int, attempts: int) -> None:
        """If this replica's group never held an election, stand for one soon instead of after a random
        election timeout (the preferred replica of a new partition calls it)."""
        ...

    async def compact_now(self, timeout_ms: int) -> None:
        """Compact the journal up to what is applied (a snapshot), so that a member added next installs
        the snapshot; ProposalRejected if the state machine cannot take one within ``timeout_ms``."""
        ...

    async def add_learner(self, node_id: str, timeout_ms: int) -> None:
        """Commit the change making ``node_id`` a learner: it receives the log, counts in no quorum."""
        ...

    async def promote_learner(self, node_id: str, timeout_ms: int) -> None:
        """Commit the change making the learner ``node_id`` a voter."""
        ...

    async def add_replica(self, node_id: str, timeout_ms: int) -> None:
        """Commit the change making ``node_id`` a voter at once (no learner phase)."""
        ...

    async def remove_replica(self, node_id: str, timeout_ms: int) -> None:
        """Commit the change removing ``node_id`` (a voter or a learner; never the leader itself)."""
        ...

    async def transfer_leadership(self, target_node_id: str | None, timeout_ms: int) -> None: ...

    def close(self) -> None: ...
