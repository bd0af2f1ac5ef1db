"""What every job of the Raft core shares: ``CoreBase``, the ``SyncObj`` subclass under ``RaftCore``.

``RaftCore`` (``core.py``) keeps pysyncobj's overrides, the tick and the thread-safe entry points; each of its
other jobs is a class of its own module (``core_*.py``) over this base, which ``RaftCore`` inherits. They are
mixins, not collaborators holding the core, because each job reads and writes most of the same state: a
quiet leader's ``_quiet`` is read by the tick, an election, a pre-vote, a follower's append, the leader's
sends and a read; ``_credited_heard_at`` by check-quorum, a reply, a wake and a membership change. A job
that needs little is plain functions or a small class instead (``core_log.py``: log access by index over
the journal; ``core_transfer.py``: a leadership transfer attempt).

A job that calls another job's methods is built on that job's class (``Elections(Quiescence)``,
``FollowerSide(Quiescence, Snapshots, Memberships)``, ...), so the imports among ``core_*.py`` run one way
and every call between jobs is type-checked; no two of the classes define the same name, so the order
``RaftCore`` inherits them in decides nothing.

This base holds no logic of a job: the state ``RaftCore.__init__`` sets (declared once, with its type,
so the type checker holds every job to it) and the pysyncobj members the jobs assign; ``RaftCore``'s
overrides and entry point that the jobs call (declared as callables, defined in ``core.py``); pysyncobj's
raft states and the entry types; the process-wide counters; and the few helpers every job uses
(``node_id``, ``_send``, ``_notify_activity``, ``_election_timeout_s``, ``_has_majority``, and
``_term_at`` / ``_entry_at`` over ``core_log``). It defines no ``__init__`` and overrides nothing of
pysyncobj's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pysyncobj import SyncObj

from raftlog.consensus import core_log, decisions
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.interface import StateMachine
from raftlog.consensus.journal import Entry, RaftJournal
from raftlog.consensus.journal_files import SyncJob
from raftlog.consensus.liveness import Liveness
from raftlog.consensus.membership import MembershipLog
from raftlog.consensus.messages import NextNodeIdx, RaftMessage
from raftlog.storage.errors import DiskFull

# pysyncobj's raft states and command types (syncobj.py _RAFT_STATE / _COMMAND_TYPE).
FOLLOWER, CANDIDATE, LEADER = 0, 1, 2
COMMAND_NO_OP = 1
COMMAND_MEMBERSHIP = 2
COMMAND_USER = 0x20  # ours: the rest of the entry is an opaque StateMachine command
MEMBERSHIP_TYPE_BYTE = bytes((COMMAND_MEMBERSHIP,))
USER_TYPE_BYTE = bytes((COMMAND_USER,))
NO_OP_ENTRY = bytes([COMMAND_NO_OP])

Callback = Callable[[object, int], None]
# Why a replica won a leadership (``RaftCore.leader_changes``; see ``_on_became_leader``).
LEADER_CHANGE_CAUSES = ("election", "transfer", "check_quorum", "leader_gone")


class CoreBase(SyncObj):  # type: ignore[misc]  # pysyncobj is untyped
    """The state and helpers ``RaftCore``'s jobs share (see the module docstring)."""

    # Process-wide counters, read as ``RaftCore.<name>`` and only ever incremented as ``CoreBase.<name>``
    # (an assignment through a subclass would shadow them there).
    role_changes = 0  # every replica's role changes in this process (see group.role_changes)
    # Elections the replicas of this process stood for when they stopped hearing a leader (a transfer's
    # and a new group's first ones excluded), and pre-vote rounds they asked for (see group.election_counts).
    elections_on_timeout = 0
    pre_vote_rounds = 0
    # Pre-votes they granted, and those they refused in their first shortest election timeout knowing no
    # leader yet (core_elections: a replica just started grants none).
    pre_votes_granted = 0
    pre_votes_refused_starting = 0
    # Starved thread: leader ticks whose late start was credited, follower deadlines put off for a late tick.
    stalls_credited = 0
    late_deadlines = 0
    # Leaderships won by the replicas of this process, by cause (every key present from the start, so a
    # reader on another thread copies a dict that never changes size): one per leader change of a group.
    leader_changes: dict[str, int] = dict.fromkeys(LEADER_CHANGE_CAUSES, 0)

    # SyncObj state the jobs assign (SyncObj.__init__ sets them).
    _SyncObj__raftCommitIndex: int
    _SyncObj__raftLastApplied: int
    _SyncObj__leaderCommitIndex: int | None
    _SyncObj__needLoadDumpFile: bool
    _SyncObj__transferInProgress: bool
    _SyncObj__onReadyCalled: bool
    _SyncObj__forceLogCompaction: bool
    _SyncObj__lastSerializedTime: float
    _SyncObj__lastSerializedEntry: int | None
    _SyncObj__otherNodes: set[Any]
    _SyncObj__raftLeader: Any
    _SyncObj__raftElectionDeadline: float

    # RaftCore's overrides of pysyncobj and its entry points that the jobs call (defined in core.py; a job
    # that calls another job's methods is built on that job's class instead).
    _SyncObj__setState: Callable[[int], None]
    _SyncObj__setCurrentTerm: Callable[[int, Any], None]
    _SyncObj__onBecomeLeader: Callable[[], None]
    _SyncObj__getEntries: Callable[..., list[Entry]]
    request_transfer: Callable[[str | None, Callback], None]

    # RaftCore's own state (RaftCore.__init__ sets it and says what each is), by job.
    _clock: Callable[[], float]
    _config: CoreConfig
    _state_machine: StateMachine
    _journal: RaftJournal
    group_id: str
    _stopped_error: BaseException | None
    _external_poll: bool
    _ticking: bool
    activity: bool
    on_activity: Callable[[], None] | None
    before_sync: Callable[[], None] | None
    sync_runner: Callable[[SyncJob, Callable[[], None]], None] | None
    sync_runner_min_bytes: int
    _receive: Callable[[], None] | None
    # a follower's acknowledgements held until their entries are durable; a leader's sends
    _held_replies: list[tuple[Any, NextNodeIdx]]
    _send_rotation: int
    _followers_to_send: set[Any]
    # elections, pre-vote, leader changes, check-quorum
    _voters: set[Any]
    _credited_heard_at: dict[Any, float]
    _early_campaigns: int
    _prevote_term: int | None
    _prevoters: set[Any]
    _leader_seen_at: float
    _started_at: float
    _last_leader_id: str | None
    _leader_lost: str | None
    _campaign_cause: str
    # a starved thread
    _ticked_at: float | None
    _led_when_ticked: bool
    _deferred_deadline: float | None
    # quiescence
    _quiet: bool
    _quiet_acks: dict[Any, int]
    _quiescing: bool
    _quiet_tick_at: float
    # reads and a leader's view of its followers
    liveness: Liveness | None
    _heard_at: dict[Any, float]
    _caught_up_at: dict[Any, float]
    _last_reply: dict[Any, tuple[float, int]]
    _timeouts_now_sent: int
    _read_confirmed: tuple[int, int] | None
    _read_barrier_term: int | None
    # membership, transfers
    _membership_index: int
    _transfer_until: float
    _learner_nodes: set[Any]
    _outside_nodes: set[Any]
    _voting: bool
    _memberships: MembershipLog
    # disk full, compaction
    _apply_space_error: DiskFull | None
    _apply_retry_at: float
    _apply_retry_delay_s: float
    _space_handover: bool
    _space_handover_at: float
    _space_told_at: float
    _compaction_retry_at: float

    @property
    def node_id(self) -> str:
        return str(self.selfNode.id)

    def _election_timeout_s(self) -> float:
        """A fresh random election timeout (``decisions.election_timeout_s``, drawn from the ``random``
        module as pysyncobj drew it)."""
        config = self._config
        return decisions.election_timeout_s(
            config.election_timeout_min_ms / 1000, config.election_timeout_max_ms / 1000, random
        )

    def _notify_activity(self) -> None:
        self.activity = True
        if self.on_activity is not None:
            self.on_activity()

    def _send(self, node: Any, message: RaftMessage) -> None:
        """Every message this core sends goes through here, typed (``raftlog.consensus.messages``)."""
        self._SyncObj__transport.send(node, message)

    def _has_majority(self, voters: set[Any]) -> bool:
        """This replica and ``voters`` (other nodes' ids) are a majority of the group."""
        return decisions.majority(1 + len(voters), len(self._SyncObj__otherNodes) + 1)

    def _term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``, None if the journal does not hold it (``core_log``)."""
        return core_log.term_at(self._journal, index, self.node_id)

    def _entry_at(self, index: int) -> Entry | None:
        return core_log.entry_at(self._journal, index, self.node_id)
