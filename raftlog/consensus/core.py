"""The Raft core: pysyncobj's SyncObj with the acknowledged-write-loss fix, our journal and no pickle.

``RaftCore`` and the job modules beside it (``core_*.py``) are the only code that reaches into pysyncobj's
core internals (the transport, ``transport.py``, subclasses its ``Transport``). pysyncobj 0.3.17 keeps its
state in name-mangled members (``_SyncObj__*``); a subclass method named ``_SyncObj__foo`` replaces the
base's ``__foo`` because the base looks it up on ``self``. Every such override, and ``_onTick`` and
``_checkCommandsToApply``, stays here, in ``RaftCore``, and delegates to the job that does the work, so a
pysyncobj upgrade is checked against one class. What to decide (the commit index, a follower's progress,
a vote, a pre-vote, an election's step, check-quorum, the reads' majority, an election timeout) is
:mod:`raftlog.consensus.decisions`' (pure); the jobs gather the inputs and carry the answers out. The
check-quorum times (``_credited_heard_at``) and a candidate's tally (``_voters``) are the core's own, and
the vote held is the journal's.

This module keeps the thread-safe entry points (``submit``, ``submit_membership``, ``request_transfer``,
``request_compaction``, ``tick_soon``), what the driver asks (``needs_tick``, ``next_timer``), the tick
with its group-commit fsync and the release of the acknowledgements it makes true, the message dispatch,
the overrides, and the two module-global hooks. Each other job is one class over ``core_base.CoreBase``
(the state they share, declared once), in its own module; ``RaftCore`` inherits them all:

* ``core_follower.FollowerSide``: ``__onMessageReceived``'s appends. A follower truncates only at a real
  term conflict, never on a heartbeat or a duplicate batch; it acknowledges ``prevLogIdx + len(entries)``
  (what it verified to match the leader), not the end of its log; its commit index is bounded by that
  verified index; acknowledgements carry the term and are held until the fsync covering them.
* ``core_leader.Replication``: ``__sendAppendEntries`` with a send budget per follower (time slice and a
  bound on entries in flight) in a rotating order, so one follower cannot starve the others, no pickled
  "transmission" chunks; the replies (the leader ignores those of other terms and steps down on a higher
  one; a stale success never moves ``nextIndex`` or ``matchIndex`` backwards); the leader's commit index,
  the majority of the match indexes (its own counted only up to what is fsynced). New proposals are sent
  in the tick that appended them.
* ``core_proposals.Proposals``: ``__applyLogEntries`` / ``_checkCommandsToApply``: commands are opaque
  bytes handed to a :class:`~raftlog.consensus.interface.StateMachine` with their index and term; a
  non-leader rejects a proposal (NOT_LEADER / MISSING_LEADER) instead of forwarding it; membership
  requests are msgpack.
* ``core_membership.Memberships``: learners and the configuration in effect, one change at a time.
* ``core_snapshots.Snapshots``: ``__tryLogCompaction`` / ``__loadDumpFile``: snapshots are the state
  machine's small metadata snapshot in a CRC-checked msgpack file written with fsync, never pickle; a
  state machine answering None ("not now") skips that compaction.
* ``core_elections.Elections``: elections, pre-vote, votes, check-quorum, leader changes.
* ``core_quiet.Quiescence``: an idle group stops heartbeating.
* ``core_stall.StarvedThread``: time this replica's own thread did not run is not held against its peers.
* ``core_reads.Reads``: the read-only accessors and the reads' lease.
* ``core_space.SpaceGiveWay``: what a replica whose disk is full does.
* ``core_log`` (log access by index) and ``core_transfer`` (a leadership transfer attempt) are plain
  functions and a small class.

``pysyncobj.syncobj.createJournal`` (and ``createPoller``) is patched once, here (:func:`_create_journal`),
to hand SyncObj the journal the caller built.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, cast

import pysyncobj.syncobj as _syncobj_module
from pysyncobj import SyncObj
from pysyncobj.config import FAIL_REASON
from pysyncobj.node import TCPNode
from pysyncobj.transport import TransportNotReadyError
from pysyncobj.version import VERSION as PYSYNCOBJ_VERSION

from raftlog.consensus import core_log, decisions, journal_files
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core_base import (
    CANDIDATE,
    COMMAND_MEMBERSHIP,
    FOLLOWER,
    LEADER,
    USER_TYPE_BYTE,
    Callback,
    CoreBase,
)
from raftlog.consensus.core_elections import Elections
from raftlog.consensus.core_follower import FollowerSide
from raftlog.consensus.core_leader import Replication
from raftlog.consensus.core_membership import Memberships
from raftlog.consensus.core_proposals import Proposals
from raftlog.consensus.core_quiet import Quiescence
from raftlog.consensus.core_reads import Reads
from raftlog.consensus.core_snapshots import SPACE_RETRY_COMPACTION_S, CompactionAttempt, Snapshots
from raftlog.consensus.core_space import SpaceGiveWay
from raftlog.consensus.core_stall import StarvedThread
from raftlog.consensus.core_transfer import TransferAttempt
from raftlog.consensus.interface import StateMachine
from raftlog.consensus.journal import MemoryJournal, RaftJournal
from raftlog.consensus.membership import Membership, MembershipLog, encode_change
from raftlog.consensus.messages import RaftMessage
from raftlog.consensus.transport import MuxTransport
from raftlog.errors import InvariantViolation
from raftlog.storage.errors import DiskFull

logger = logging.getLogger(__name__)

SUPPORTED_PYSYNCOBJ_VERSION = "0.3.17"
if PYSYNCOBJ_VERSION != SUPPORTED_PYSYNCOBJ_VERSION:
    raise ImportError(
        f"raftlog.consensus.core patches pysyncobj {SUPPORTED_PYSYNCOBJ_VERSION} internals, "
        f"found {PYSYNCOBJ_VERSION}"
    )


# The only monkeypatches of pysyncobj: SyncObj.__init__ calls createJournal and createPoller by module
# global name. RaftCore.__init__ hands its journal (and a Driver's shared poller) to them through this
# thread-local; a plain SyncObj (tests compare against stock) gets pysyncobj's own objects.
_handoff = threading.local()
_stock_create_journal = _syncobj_module.createJournal
_stock_create_poller = _syncobj_module.createPoller


def _create_journal(journal_file: str | None) -> Any:
    journal = getattr(_handoff, "journal", None)
    if journal is None:
        return _stock_create_journal(journal_file)
    _handoff.journal = None
    return journal


def _create_poller(poller_type: str) -> Any:
    poller = getattr(_handoff, "poller", None)
    if poller is None:
        return _stock_create_poller(poller_type)
    _handoff.poller = None
    return poller


_syncobj_module.createJournal = _create_journal
_syncobj_module.createPoller = _create_poller


class _Unpersisted(Exception):
    """A term or vote could not be made durable for want of room: the step that needed it (a vote, an
    acknowledgement, an election) is abandoned, failing closed; the core goes on."""


class RaftCore(  # one class per job (core_*.py) over their shared state (core_base)
    FollowerSide,
    Replication,
    Reads,
    Elections,
    StarvedThread,
    Quiescence,
    Proposals,
    SpaceGiveWay,
    Snapshots,
    Memberships,
    CoreBase,
):
    """One replica of one Raft group. All methods except :meth:`submit`, :meth:`submit_membership`,
    :meth:`request_transfer` and the read-only accessors must run on the thread that ticks this object."""

    def __init__(
        self,
        self_node: Any,
        other_nodes: list[Any],
        state_machine: StateMachine,
        config: CoreConfig | None = None,
        journal: RaftJournal | None = None,
        *,
        transport_class: Any,
        poller: Any = None,
        node_class: Any = TCPNode,
        learners: Collection[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``other_nodes``: the group's other members; ``learners``: which of them, and whether this
        replica itself, are learners (the others are voters). This is the configuration of a new group;
        a restarted one takes the configuration its snapshot and journal hold on top of it (see
        core_membership). ``poller``: a pysyncobj Poller shared with other cores and polled by a Driver;
        this core then never polls itself. None: the core owns a poller and polls it at the end of each
        tick. ``node_class``: TCPNode when node ids are ``host:port`` (TCPTransport), pysyncobj ``Node``
        for the mux transport's plain node ids. ``transport_class`` has no default: a node's groups take
        the mux hub's (``transport.transport_class``); pysyncobj's own ``TCPTransport`` unpickles what
        it receives (ADR 0002: remote code execution for anyone who reaches the port), so only a test or
        a benchmark against stock pysyncobj names it. ``clock``: the monotonic seconds every timed decision
        of this core reads (elections, heartbeats, quiescence, retries, transfers, compaction): one
        source, so a test can drive a core on a clock of its own."""
        self._clock = clock
        self._config = config or CoreConfig()
        self._state_machine = state_machine
        self._journal = journal if journal is not None else MemoryJournal()
        self._held_replies = []
        self._send_rotation = 0
        self._followers_to_send = set()
        self._voters = set()  # ids of the nodes that voted for this candidate in this term
        # Check-quorum (a leader's): when each follower last replied in this leadership, on this core's
        # clock, with the time a starved thread did not run credited to it (see core_stall).
        self._credited_heard_at = {}
        self._transfer_until = 0.0  # monotonic time until which a leader handing over appends nothing new
        # Log index of the last membership change this leader appended. pysyncobj means to allow one change
        # at a time (``__changeClusterIDx``) but never sets it; a change is denied here until the previous
        # one is applied (a new leader's applied no-op covers the changes of earlier terms).
        self._membership_index = 0
        # campaign_if_new: early campaigns left; any message from a peer of the group (a leader or another
        # candidate exists) zeroes it for good.
        self._early_campaigns = 0
        # Quiescence (see core_quiet): on a leader, ``_quiet`` means it sends no heartbeats, on
        # a follower that it holds no election; ``_quiet_acks`` holds, per follower, the index it held
        # when it acknowledged a quiescing heartbeat; ``_quiescing``: this tick's heartbeats ask for quiet.
        self._quiet = False
        self._quiet_acks = {}
        self._quiescing = False
        self._quiet_tick_at = 0.0  # a quiet replica's next tick (compaction and the like)
        # when a quiet replica closes its journal's files (``_release_idle_handles``; None while not quiet,
        # inf once closed), and its journal's last index when that was set (an append sets it again)
        self._handles_release_at: float | None = None
        self._handles_idle_index = 0
        # Pre-vote (see core_elections): the term this replica asks pre-votes for (None: not asking),
        # the ids of the nodes that granted them, when it last heard from a leader of its term, and when
        # it started (it grants no pre-vote in its first shortest election timeout: decisions.in_lease).
        self._prevote_term = None
        self._prevoters = set()
        self._leader_seen_at = 0.0
        self._started_at = clock()
        # Starved thread (see core_stall): when this replica was last ticked, whether it was a
        # (non-quiet) leader then, and the election deadline a late tick put off (put off once only).
        self._ticked_at = None
        self._led_when_ticked = False
        self._deferred_deadline = None
        # Reads (see core_reads): the thread's stalls, set by the Driver that ticks this core (a
        # test may set its own; None: no stall is known of); each voter's last reply of this term as it
        # arrived (never credited); the (stalls, TimeoutNows sent) at which this leadership was last
        # confirmed, None before; the term of the confirming no-op in flight, one at a time.
        self.liveness = None
        self._heard_at = {}
        # Each member's progress as Kafka's leader reports it (DescribeQuorum, ``member_ages``): when it
        # was last caught up (its reply acknowledged this leader's last index as the reply arrived, or the
        # last index at its previous reply: then caught up as of that reply), and (when, last index) at
        # its previous reply; replies of this leadership only.
        self._caught_up_at = {}
        self._last_reply = {}
        self._timeouts_now_sent = 0
        self._read_confirmed = None
        self._read_barrier_term = None
        # Leader changes (see ``_on_became_leader``): the leader this replica last followed (or was),
        # and why it holds an election: "election", "transfer" (TimeoutNow), "new_group" (a new group's
        # first campaign), "check_quorum" (it stepped down itself), "leader_gone" (its leader said so).
        self._last_leader_id = None
        self._leader_lost = None
        self._campaign_cause = "election"
        self.group_id = ""  # the owner names the group (ReplicaGroup.open), for the log lines
        # Learners (see core_membership): the other members that are learners (pysyncobj's
        # ``__otherNodes`` holds the other voters), whether this replica is a voter, nodes the transport
        # keeps although outside the configuration (the leader, while a snapshot's configuration predates
        # it), and the configurations this replica's log holds.
        self._learner_nodes = set()
        self._outside_nodes = set()
        self._voting = True
        self._memberships = MembershipLog(0, Membership(frozenset()))
        self._stopped_error = None
        # Disk full (see core_space): an apply refused for want of room waits for its retry time;
        # a leadership hand-over asked for because of it is under way, or may be asked again from then.
        self._apply_space_error = None
        self._apply_retry_at = math.inf
        self._apply_retry_delay_s = 0.0
        self._space_handover = False
        self._space_handover_at = 0.0
        self._space_told_at = -math.inf
        self._compaction_retry_at = 0.0
        self._external_poll = poller is not None
        self._ticking = False
        self.activity = True  # set when something happened that the next tick must handle
        # Called (any thread) after activity is set: a proposal, a transfer, a message delivered outside
        # a tick. A Driver sets it to mark the core ready.
        self.on_activity = None
        # Called on the tick thread just before the journal is fsynced: a Driver that runs the transport
        # on its thread writes the queued messages first, so peers receive them during the fsync.
        self.before_sync = None
        # Runs a journal's group commit on another thread: ``sync_runner(job, done)`` calls ``job.run()``
        # there and then ``done()``. None: the tick fsyncs itself, at its end. A Driver with sync threads
        # sets it, so that one group's fsync no longer holds up the ticks of every other group it drives.
        self.sync_runner = None
        self.sync_runner_min_bytes = 0  # smaller syncs run in the tick: a hand-off costs more than they wait
        # Set by a Driver: a tick leaves its journal's sync (and what waits on it: the acknowledgements it
        # makes true, the commit it allows) to ``finish_sync``, which the driver calls once every core of
        # the round has ticked. The round's sends and answers then all leave before its fsyncs, instead of
        # a core's waiting for the fsyncs of the cores ticked before it (``Driver``, "two phases").
        self.defer_sync = False
        self._sync_deferred_at: float | None = None  # the deferred tick's ``now``; None: none deferred
        _handoff.journal = self._journal
        _handoff.poller = poller
        try:
            super().__init__(
                self_node,
                other_nodes,
                self._config.to_syncobj_conf(),
                nodeClass=node_class,
                transportClass=transport_class,
            )
        finally:
            _handoff.journal = None
            _handoff.poller = None
        if self._SyncObj__raftLog is not self._journal:
            raise InvariantViolation("createJournal hook did not hand SyncObj the RaftCore journal")
        if poller is not None and self._poller is not poller:
            raise InvariantViolation("createPoller hook did not hand SyncObj the shared poller")
        # SyncObj set the first election deadline on its own clock: on this core's from here on
        self._SyncObj__raftElectionDeadline = self._clock() + self._election_timeout_s()
        me = self.node_id
        others = {str(getattr(node, "id", node)) for node in other_nodes} - {me}
        learner_ids = frozenset(str(node) for node in learners)
        initial = Membership(frozenset(others | {me}) - learner_ids, learner_ids & (others | {me}))
        self._memberships = self._replayed_memberships(0, initial)
        self._install_membership()
        # A MuxTransport's inbox is delivered first thing in each tick rather than from its end-of-tick
        # callback, so the tick acts on what arrived: a leader counts an acknowledgement, commits and
        # applies in the tick that receives it, instead of receiving at the end of one tick and acting
        # in another.
        self._receive = None
        transport = self._SyncObj__transport
        if isinstance(transport, MuxTransport):
            self.removeOnTickCallback(transport.receive)
            self._receive = transport.receive

    def __dir__(self) -> list[str]:
        """Nothing: pysyncobj's constructor scans ``dir(self)`` for ``@replicated`` methods, twice, reading
        every attribute, and a RaftCore has none (its commands are opaque bytes); the scan was a quarter
        of what building a replica cost, with thousands built when a node starts."""
        return []

    # -- thread-safe entry points ----------------------------------------------------------------
    def submit(self, command: bytes | tuple[bytes, ...], callback: Callback | None) -> None:
        """Queue a proposal; ``callback(result, fail_reason)`` runs on the tick thread (or on this thread
        with QUEUE_FULL). ``command`` may come in pieces: they are joined once, behind the entry's type
        byte (pysyncobj would copy a whole command again to put that byte in front)."""
        if isinstance(command, tuple):
            entry = b"".join((USER_TYPE_BYTE, *command))
        else:
            entry = USER_TYPE_BYTE + command
        self._applyCommand(entry, callback)  # no command type: the entry already starts with it
        self._notify_activity()

    def tick_soon(self) -> None:
        """Any thread: have the next round tick this replica, quiet or not (a leader refusing a proposal
        for want of room hands its leadership over in that tick: core_space)."""
        self._notify_activity()

    def submit_membership(self, change: str, node_id: str, callback: Callback | None) -> None:
        """Propose one membership change (``membership.CHANGES``: "learner", "promote", "add", "rem"). The
        leader denies it (REQUEST_DENIED) while its previous change or its own no-op is not applied, or
        when ``Membership.refusal`` says so for the configuration in effect."""
        self._applyCommand(encode_change(change, node_id), callback, COMMAND_MEMBERSHIP)
        self._notify_activity()

    def request_transfer(self, node_id: str | None, callback: Callback) -> None:
        """Hand leadership over (Raft thesis 3.10); starts on the next tick. The leader stops appending new
        proposals, waits until the target (None: the most caught-up connected follower) holds its whole
        log, then sends TimeoutNow and keeps appending nothing for an election timeout, so the target
        wins the election it is asked to hold even under load. Denied (REQUEST_DENIED) if the target is
        not a voter or is not caught up within an election timeout; queued proposals wait meanwhile and
        fail NOT_LEADER, never appended, if leadership moves."""
        self.addOnTickCallback(TransferAttempt(self, node_id, callback))
        self._notify_activity()

    def request_compaction(self, timeout_s: float, callback: Callback) -> None:
        """Compact the journal up to what is applied now, whatever the compaction settings (a snapshot,
        as ``__tryLogCompaction`` takes one): a member joining after it gets the snapshot and its state
        machine copies the records the journal held from its peers' logs, under the replication
        throttles (a throttled replica move). Starts on the next tick; ``callback(None, SUCCESS)`` once
        the journal starts at most one entry before that index (two are kept), REQUEST_DENIED if the
        state machine answers "not now" until ``timeout_s`` or the disk has no room for the file."""
        self.addOnTickCallback(CompactionAttempt(self, timeout_s, callback))
        self._notify_activity()

    def needs_tick(self) -> bool:
        """Work is waiting that should not wait for the next idle tick. Acknowledgements and applies that
        wait for a running journal sync are not: its end marks the core active."""
        journal = self._journal
        return bool(
            self.activity
            or (self._held_replies and not journal.sync_in_flight)
            or self._followers_to_send
            or (
                min(self._SyncObj__raftCommitIndex, journal.durable_index) > self._SyncObj__raftLastApplied
                and self._apply_space_error is None  # else retried at its time (next_timer)
            )
        )

    def next_timer(self) -> tuple[float, bool]:
        """The time on this core's ``clock`` of this group's next timed duty, and whether it is a routine
        one: a leader's heartbeat, or a reconnect while a peer is not connected (routine), or a follower's or
        candidate's election deadline (not routine). Between them only messages and proposals need a
        tick (they set ``activity``), so the driver may leave the group alone until then. The driver
        gathers routine duties of all groups on a coarse grid; an election deadline keeps its random
        spread, so that two followers rarely stand for election in the same instant. A quiet replica's
        only timed duty is its rare tick (``CoreConfig.quiet_tick_ms``)."""
        retry = self._apply_retry_at  # an apply refused for want of room is retried then (inf: none)
        if self._quiet:
            release = self._handles_release_at
            return min(self._quiet_tick_at, retry, math.inf if release is None else release), True
        if self._SyncObj__raftState == LEADER:
            timer, routine = float(self._SyncObj__newAppendEntriesTime), True
        else:
            timer, routine = float(self._SyncObj__raftElectionDeadline), False
        if not (self._SyncObj__otherNodes | self._learner_nodes) <= self._SyncObj__connectedNodes:
            # a peer is not connected: ticks drive reconnects (pysyncobj's TCP transport)
            reconnect = self._clock() + self._config.connection_retry_ms / 1000
            if reconnect < timer:
                timer, routine = reconnect, True
        return (retry, True) if retry < timer else (timer, routine)

    # -- tick ---------------------------------------------------------------------------------------
    def _onTick(self, timeToWait: float = 0.0) -> None:
        if self._stopped_error is not None:
            raise InvariantViolation(f"group {self.node_id} ticked after it stopped: {self._stopped_error!r}")
        self.activity = False
        self._ticking = True
        try:
            self._tick(timeToWait)
        except _Unpersisted as error:
            # an election this replica could not persist the term of (no room): it asked for nothing and
            # stands down; the rest of this tick waits for the next
            logger.warning("%s: not standing for election: %s", self.node_id, error)
            if self._SyncObj__raftState == CANDIDATE:
                self._SyncObj__setState(FOLLOWER)
        except BaseException as error:
            self._stopped_error = error
            raise
        finally:
            self._ticking = False

    def _tick(self, time_to_wait: float) -> None:
        transport = self._SyncObj__transport
        if not transport.ready:
            try:
                transport.tryGetReady()
            except TransportNotReadyError as error:
                logger.warning("%s: transport not ready: %s", self.node_id, error)
            if not transport.ready:
                time.sleep(time_to_wait)
                return
        self._credit_stall(self._clock())
        if self._receive is not None:
            self._receive()
        self._journal.finish_sync()  # a sync that ended since the last tick: its entries are durable now
        if self._SyncObj__needLoadDumpFile:
            self._SyncObj__needLoadDumpFile = False
            path = self._config.snapshot_path
            if path is not None and os.path.isfile(path):
                self._load_snapshot(clear_journal=False)

        now = self._clock()
        state = self._SyncObj__raftState
        if self._quiet and state == LEADER and not self._quiet_holds(now):
            self._wake(now)  # a proposal, a transfer, a majority gone, a behind follower reconnected
        if self._journal.disk_full is not None:
            self._give_way_for_space(now)  # see core_space
        if (
            state in (FOLLOWER, CANDIDATE)
            and not self._quiet
            and self.selfNode is not None
            and self._SyncObj__raftElectionDeadline < now
        ):
            if not self._voting:
                # a learner (or a removed replica) never stands: its deadline only moves on, so that the
                # driver does not tick it for a deadline long past; having heard no leader for as long,
                # it knows none (a removed one is sent nothing more: its owner sees it leaderless)
                self._SyncObj__raftElectionDeadline = now + self._election_timeout_s()
                if self._SyncObj__raftLeader is not None:
                    self._SyncObj__raftLeader = None
                    self._SyncObj__onLeaderChanged()
            elif self._late_for_deadline(now):
                pass  # put off once: see core_stall
            elif self._SyncObj__connectedToAnyone():
                self._start_election(now)

        committed = self._SyncObj__raftCommitIndex
        if self._SyncObj__raftState == LEADER:
            self._advance_commit_index()
            if not self._quiet:
                self._step_down_without_quorum(now)

        self._SyncObj__applyLogEntries()
        self._release_journal()
        appended = self._checkCommandsToApply()

        if self._SyncObj__raftState == LEADER:
            announce = self._config.announce_commits and self._SyncObj__raftCommitIndex > committed
            self._quiescing = self._may_quiesce(now)
            if appended or announce or (not self._quiet and now > self._SyncObj__newAppendEntriesTime):
                self._SyncObj__sendAppendEntries()
            elif self._followers_to_send:
                self._send_to_followers(self._followers_to_send)
            self._settle_quiet(now)
        self._followers_to_send = set()

        if (
            not self._SyncObj__onReadyCalled
            and self._SyncObj__raftLastApplied == self._SyncObj__leaderCommitIndex
        ):
            self._SyncObj__onReadyCalled = True

        try:
            self._SyncObj__tryLogCompaction()
        except DiskFull as full:  # no room for the snapshot file: the journal stays whole, tried later
            logger.warning("%s: log compaction put off: %s", self.node_id, full)
            self._compaction_retry_at = now + SPACE_RETRY_COMPACTION_S

        with self._SyncObj__onTickCallbacksLock:
            callbacks = list(self._SyncObj__onTickCallbacks)
        for callback in callbacks:
            callback()

        if not self._external_poll:
            self._ticking = False  # what this poll delivers is handled by the next tick
            poll_transport(self._poller, time_to_wait, self.node_id)
        if self.defer_sync:
            self._sync_deferred_at = now
            return
        self._after_tick(now)

    @property
    def sync_deferred(self) -> bool:
        """A tick left its sync to :meth:`finish_sync` (``defer_sync``)."""
        return self._sync_deferred_at is not None

    @property
    def acknowledges(self) -> bool:
        """Acknowledgements wait for this replica's sync: a leader elsewhere waits for them."""
        return bool(self._held_replies)

    def finish_sync(self) -> None:
        """The end of a tick that deferred it (``defer_sync``), on the tick thread: the journal's sync, the
        acknowledgements it makes true, the commit it allows. Errors stop the core as a tick's do."""
        now = self._sync_deferred_at
        if now is None:
            return
        self._sync_deferred_at = None
        self._ticking = True
        try:
            self._after_tick(now)
        except BaseException as error:
            self._stopped_error = error
            raise
        finally:
            self._ticking = False

    def _after_tick(self, now: float) -> None:
        """A tick's end: its group commit and what it releases."""
        self._sync_and_release_replies()
        if self._SyncObj__raftState == LEADER:
            # What this tick's sync made durable may commit already (a group of one voter hears no
            # acknowledgement that would tick it again): counted now, applied in the next round
            # (``needs_tick``), not at the next heartbeat
            self._advance_commit_index()
        if self._quiet:
            if now >= self._quiet_tick_at:
                self._quiet_tick_at = now + self._config.quiet_tick_ms / 1000
            self._release_idle_handles(now)
        else:
            self._handles_release_at = None
        self._ticked_at = now
        self._led_when_ticked = self._SyncObj__raftState == LEADER and not self._quiet

    def _release_idle_handles(self, now: float) -> None:
        """An idle group holds no open files: a quiet replica closes its journal's files once it has been
        quiet for ``journal_handles_idle_ms`` (its next timer, ``next_timer``). Not at once: a group whose
        records come a few milliseconds apart goes quiet between them (a group of one replica at every
        commit), and closing and reopening two files around every record cost its Raft thread four
        system calls a record, each giving up the interpreter lock and waiting to take it back."""
        idle_s, last_index = self._config.journal_handles_idle_ms / 1000, self._journal.last_index
        if self._handles_release_at is None or last_index != self._handles_idle_index:
            # quiet from now on (a tick may wake, append and go quiet again: the append counts)
            self._handles_release_at, self._handles_idle_index = now + idle_s, last_index
        elif now >= self._handles_release_at:
            released = self._journal.release_handles()  # refused while a sync needs them: later
            self._handles_release_at = math.inf if released else now + idle_s

    def _sync_and_release_replies(self) -> None:
        """Group commit: one fsync for everything appended this tick, then the acknowledgements it makes
        true. With a ``sync_runner`` a sync of at least ``sync_runner_min_bytes``, or any sync while the
        disk is slow (``journal_files.SYNC_LATENCY``), runs on another thread and the tick ends at once;
        what is appended meanwhile goes in the next sync, and acknowledgements leave once their entries
        are durable (a later tick, marked active when the sync ends). On a slow disk the syncs of many
        groups then overlap, and the thread goes on ticking: in a storm of thousands of groups each
        fsyncing in turn for 10 ms, the groups behind waited seconds, their leaders heard no majority and
        stepped down, whose elections fsynced in turn again."""
        journal = self._journal
        runner = self.sync_runner
        if runner is None or (
            journal.pending_bytes < self.sync_runner_min_bytes and not journal_files.SYNC_LATENCY.slow
        ):
            if self.before_sync is not None and journal.sync_pending:
                self.before_sync()
            journal.sync()
        else:
            journal.finish_sync()
            if journal.sync_pending and not journal.sync_in_flight:
                job = journal.begin_sync()
                if job is not None:
                    runner(job, self._notify_activity)
        if self._held_replies:
            self._release_replies()

    # -- pysyncobj's overrides of connections, role and term -------------------------------------------
    def _SyncObj__onNodeConnected(self, node: Any) -> None:
        self._on_node_connected(node)  # core_quiet

    def _SyncObj__onNodeDisconnected(self, node: Any) -> None:
        self._on_node_disconnected(node)  # core_quiet

    def _SyncObj__setState(self, newState: int) -> None:
        if newState != self._SyncObj__raftState:
            self._wake(self._clock())
            self._quiescing = False
            CoreBase.role_changes += 1
        SyncObj._SyncObj__setState(self, newState)

    def _SyncObj__setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        # Durable first, then in memory (pysyncobj sets memory first): a write refused for want of room
        # fails closed, changing nothing, and the step that needed it is abandoned (_Unpersisted). A
        # leader that learns of a higher term steps down all the same (that persists nothing).
        try:
            self._journal.setCurrentTerm(term, votedForNodeId)
        except DiskFull as full:
            if term > self._SyncObj__raftCurrentTerm and self._SyncObj__raftState == LEADER:
                self._SyncObj__setState(FOLLOWER)
                self._SyncObj__raftLeader = None
            raise _Unpersisted(f"term {term} and vote {votedForNodeId} not persisted: {full}") from full
        if term != self._SyncObj__raftCurrentTerm:
            self._wake(self._clock())
            self._prevote_term = None
        SyncObj._SyncObj__setCurrentTerm(self, term, votedForNodeId)  # (the journal has them already)

    # -- log access ---------------------------------------------------------------------------------
    def _SyncObj__getEntries(
        self,
        fromIDx: int | None,
        count: int | None = None,
        maxSizeBytes: int | None = None,
    ) -> list[tuple[bytes, int, int]]:
        return core_log.entries(self._journal, fromIDx, count, maxSizeBytes, self._config.message_entries_max)

    # -- proposals and apply ------------------------------------------------------------------------
    def _checkCommandsToApply(self) -> bool:
        """Move queued proposals into the log (leader) or fail them (others). True if any appended."""
        return self._append_proposals()  # core_proposals

    def _SyncObj__applyLogEntries(self) -> bool:
        return self._apply_committed()  # core_proposals

    # -- messages -----------------------------------------------------------------------------------
    def _SyncObj__onMessageReceived(self, node: Any, message: dict[str, Any]) -> None:
        """Runs on the tick thread, inside this core's tick or (with a Driver) inside the driver's poll.
        An error stops the core: it is recorded and raised by the next tick (poll must go on for the
        other cores sharing it)."""
        if self._stopped_error is not None:
            return
        if not self._ticking:
            self._notify_activity()  # delivered by a poll between ticks (TCPTransport): tick soon
        try:
            self._on_message(node, cast(RaftMessage, message))  # decoded and checked by the wire
        except _Unpersisted as error:
            # a new term or a vote this replica could not persist (no room): dropped, as if lost
            logger.warning("%s: dropping %r from %s: %s", self.node_id, message.get("type"), node, error)
        except Exception as error:
            logger.exception(
                "%s: stopping after an error handling %r from %s", self.node_id, message.get("type"), node
            )
            self._stopped_error = error

    def _on_message(self, node: Any, message: RaftMessage) -> None:
        if message["type"] == "wake":
            # from a replica that knows no leader (says nothing of leaders or candidates: early
            # campaigns go on); a leader, quiet or not, heartbeats in this tick
            if self._SyncObj__raftState == LEADER:
                self._wake(self._clock())
                self._SyncObj__newAppendEntriesTime = 0.0
            return
        self._early_campaigns = 0
        if message["type"] == "leader_gone":
            if message["term"] == self._SyncObj__raftCurrentTerm and node == self._SyncObj__raftLeader:
                self._SyncObj__raftLeader = None  # and an election if no leader is heard in time
                self._leader_lost = "leader_gone"
                self._wake(self._clock())
        elif message["type"] == "append_entries":
            self._on_append_entries(node, message)
        elif message["type"] == "next_node_idx":
            self._on_append_reply(node, message)
        elif message["type"] == "request_vote":
            self._on_request_vote(node, message)
        elif message["type"] == "response_vote":
            if message.get("pre") is True:
                self._on_pre_vote_granted(node, message)
            elif decisions.vote_counts(
                self._SyncObj__raftState == CANDIDATE,
                message["term"],
                self._SyncObj__raftCurrentTerm,
                node in self._SyncObj__otherNodes,  # a learner's vote counts for nothing
            ):
                self._voters.add(node.id)  # a repeated vote from the same node counts once
                if self._has_majority(self._voters):
                    self._SyncObj__onBecomeLeader()
        elif message["type"] == "timeout_now":
            if (
                message["term"] >= self._SyncObj__raftCurrentTerm
                and node == self._SyncObj__raftLeader
                and self._voting
            ):
                self._quiet = False
                self._SyncObj__raftElectionDeadline = 0
                self._SyncObj__transferInProgress = True
        elif message["type"] == "apply_command":
            # This cluster never forwards proposals; a peer that does is misconfigured.
            logger.warning("%s: refusing forwarded proposal from %s", self.node_id, node)
            if "request_id" in message:
                self._send(
                    node,
                    {
                        "type": "apply_command_response",
                        "request_id": message["request_id"],
                        "error": FAIL_REASON.REQUEST_DENIED,
                    },
                )
        else:
            kind = message["type"]  # (the wire decodes none other: a stock peer's is refused there)
            logger.warning("%s: ignoring message of unknown type %r from %s", self.node_id, kind, node)

    # -- replication (leader) -----------------------------------------------------------------------
    def _SyncObj__sendAppendEntries(self) -> None:
        self._SyncObj__newAppendEntriesTime = self._clock() + self._config.heartbeat_period_ms / 1000
        followers = self._SyncObj__otherNodes | self._SyncObj__readonlyNodes | self._learner_nodes
        self._send_to_followers(followers, heartbeat=True)

    def _SyncObj__onBecomeLeader(self) -> None:
        """pysyncobj's, which starts every voter's progress over; the learners' too, here."""
        for node in self._learner_nodes:
            self._SyncObj__raftNextIndex[node] = self._journal.last_index + 1
            self._SyncObj__raftMatchIndex[node] = 0
        SyncObj._SyncObj__onBecomeLeader(self)
        # every voter heard from now, as pysyncobj starts its own times over (on its clock: this core's)
        now = self._clock()
        self._credited_heard_at = dict.fromkeys(self._SyncObj__otherNodes | self._SyncObj__readonlyNodes, now)
        # Reads: no reply of this term heard yet; the term's no-op, appended now, confirms the leadership
        self._heard_at = {}
        self._caught_up_at = {}
        self._last_reply = {}
        self._read_confirmed = self._read_token()
        self._read_barrier_term = None
        self._on_became_leader()

    # -- snapshots ----------------------------------------------------------------------------------
    def _SyncObj__tryLogCompaction(self) -> None:
        self._try_log_compaction()  # core_snapshots


def poll_transport(poller: Any, timeout_s: float, owner: str) -> None:
    """Poll pysyncobj sockets. Our message handling records its own errors (RaftCore stops); anything else
    escaping here is the stock transport choking on a peer (a malformed handshake, a socket closed under
    it): a dead or misbehaving peer is expected, so log it and keep going."""
    try:
        poller.poll(timeout_s)
    except Exception:
        logger.exception("%s: transport error while polling (peer connection dropped or malformed)", owner)
