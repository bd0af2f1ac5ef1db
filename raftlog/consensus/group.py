"""RaftGroup over the patched pysyncobj core: what ``partitions/`` uses (see interface.py).

A :class:`ReplicaGroup` is this node's replica of one group. It owns a RaftCore ticked by a shared
:class:`~raftlog.consensus.driver.Driver`; it must be created and used on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from pysyncobj.node import TCPNode

from raftlog.consensus.bridge import CallbackBridge
from raftlog.consensus.config import CoreConfig
from raftlog.consensus.core import RaftCore
from raftlog.consensus.driver import Driver
from raftlog.consensus.errors import GroupClosed, NoLeader, NotLeader, OutcomeUnknown, ProposalRejected
from raftlog.consensus.failures import timeout_error
from raftlog.consensus.interface import (
    READ_NOT_LEADER,
    READ_UNCONFIRMED,
    GroupStatus,
    Role,
    StateMachine,
)
from raftlog.consensus.journal import RaftJournal
from raftlog.consensus.membership import ADD, LEARNER, PROMOTE, REMOVE
from raftlog.storage.errors import DiskFull

logger = logging.getLogger(__name__)

STATUS_POLL_S = 0.02  # transfer_leadership watches status at this period
TRANSFER_CATCH_UP_S = 1.0  # how long transfer_leadership waits for its target to catch up first


def role_changes() -> int:
    """How many times a replica of this process changed role (follower, candidate, leader): a cheap
    test of whether anything's leadership changed since it was last read (any thread)."""
    return RaftCore.role_changes


def election_counts() -> dict[str, int]:
    """Elections the replicas of this process stood for on an election timeout (a leadership transfer's
    and a new group's first campaigns are not counted), pre-vote rounds they asked for, pre-votes they
    granted, and pre-votes they refused in their first shortest election timeout knowing no leader yet:
    with pre-vote, an election on timeout means a majority of the group had lost its leader (any
    thread)."""
    return {
        "elections_on_timeout": RaftCore.elections_on_timeout,
        "pre_vote_rounds": RaftCore.pre_vote_rounds,
        "pre_votes_granted": RaftCore.pre_votes_granted,
        "pre_votes_refused_starting": RaftCore.pre_votes_refused_starting,
    }


def leader_changes() -> dict[str, int]:
    """Leaderships the replicas of this process won, by cause (``RaftCore._on_became_leader``): each
    leader change of a group is counted once, by its new leader (any thread)."""
    return dict(RaftCore.leader_changes)


def _member_times(core: RaftCore) -> tuple[dict[str, int], dict[str, int]]:
    """A leader's members' times (``GroupStatus.heard_at_ms``, ``caught_up_at_ms``): the core keeps them
    on its monotonic clock, turned into wall-clock ms only here, when a status is read (no clock read per
    reply). Empty on a replica that does not lead."""
    if core.role is not Role.LEADER:
        return {}, {}
    now = core.clock()
    ages = core.member_ages(now)
    wall_ms = time.time() * 1000
    heard = {core.node_id: int(wall_ms)}
    caught_up = dict(heard)
    for node, (heard_s, caught_up_s) in ages.items():
        if heard_s is not None:
            heard[node] = int(wall_ms - heard_s * 1000)
        if caught_up_s is not None:
            caught_up[node] = int(wall_ms - caught_up_s * 1000)
    return heard, caught_up


class ReplicaGroup:
    """Build with ``await ReplicaGroup.open(...)``; use on that event loop only."""

    def __init__(
        self, group_id: str, core: RaftCore, driver: Driver, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Internal: wraps a core already built on the driver thread (see :meth:`open`)."""
        self.group_id = group_id
        self._loop = loop
        self._driver = driver
        self._core = core
        self._closed = False
        self._failure: BaseException | None = None  # what stopped the core (set on the driver thread)
        self._stop_callbacks: list[Callable[[], None]] = []
        self._bridge = CallbackBridge(group_id, loop, lambda: core.leader_id)
        core.group_id = group_id  # for its log lines
        driver.add(core, self._on_core_failure, group_id=group_id)

    @classmethod
    async def open(
        cls,
        group_id: str,
        node_id: str,
        peer_ids: list[str],
        state_machine: StateMachine,
        driver: Driver,
        config: CoreConfig | None = None,
        journal: RaftJournal | None = None,
        *,
        transport_class: Any,
        node_class: Any = TCPNode,
        learners: Collection[str] = (),
    ) -> ReplicaGroup:
        """Build this node's replica of ``group_id`` on the driver thread (it binds sockets and registers
        them with the driver's poller) and start driving it. ``node_id``/``peer_ids`` are pysyncobj node
        ids; ``transport_class`` as ``RaftCore`` takes it (no default: the pickling ``TCPTransport`` only
        when named, and then ``config.bind_address`` must be set, normally to ``node_id``).
        ``learners``: the members (``node_id`` among them, for a replica joining a group) that are
        learners in the configuration a new group starts from (see ``RaftCore``)."""

        def build() -> RaftCore:
            return RaftCore(
                node_id,
                [peer for peer in peer_ids if peer != node_id],
                state_machine,
                config,
                journal=journal,
                transport_class=transport_class,
                poller=driver.poller,
                node_class=node_class,
                learners=learners,
                clock=driver.clock,
            )

        core = await asyncio.wrap_future(driver.submit(build))
        return cls(group_id, core, driver, asyncio.get_running_loop())

    @property
    def core(self) -> RaftCore:
        """For tests and benchmarks; product code uses the RaftGroup methods."""
        return self._core

    async def propose(self, command: bytes | tuple[bytes, ...], timeout_ms: int) -> object:
        """Replicate ``command`` (or the pieces it is made of, joined once on the way) and return what
        the state machine's apply returned. ``DiskFull``: refused before anything was queued, this
        replica's disk being full (the leader hands its leadership over meanwhile: a retry may find
        another leader)."""
        self._check_open()
        core = self._core
        if core.role is not Role.LEADER:
            leader = core.leader_id
            raise NoLeader(self.group_id) if leader is None else NotLeader(self.group_id, leader)
        full = core.journal.disk_full
        if full is not None:
            core.tick_soon()  # a quiet leader too hands over (RaftCore, "Disk full")
            raise DiskFull(full.path, f"group {self.group_id} refuses writes: {full.reason}")
        future, callback = self._bridge.pending("proposal")
        core.submit(command, callback)
        return await self._wait(future, timeout_ms, "proposal")

    def campaign_if_new(self, delay_ms: int, attempts: int) -> None:
        """Stand for election ``delay_ms`` from now if this replica's group never held one, retrying a
        few times while no peer answers (``RaftCore.campaign_if_new``); nothing otherwise. For the
        preferred replica of a new partition."""
        self._check_open()
        core = self._core

        def campaign() -> None:
            core.campaign_if_new(delay_ms / 1000, attempts)

        self._driver.call(campaign)

    def leader_term(self) -> int | None:
        """The term if this replica is the leader, else None: what leadership claims need, without the
        cost of a whole status() (looked at for every group several times a second). A stopped core
        leads nothing, whatever role it had when it stopped."""
        core = self._core
        if core.role is not Role.LEADER or self.stopped_error is not None:
            return None
        return core.term

    @property
    def stopped_error(self) -> BaseException | None:
        """Why this replica's core stopped (an apply or a message raised: it is no longer driven), or None
        while it runs. Any thread."""
        return self._core.stopped_error or self._failure

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when the core stops: on the driver thread, or at once if it has already
        stopped (a replay can fail before the caller gets here); twice if the stop races this call, so
        make it idempotent. Hand it ``bridge.LoopNotifier.notify`` to hear of it on an event loop."""
        self._stop_callbacks.append(callback)
        if self.stopped_error is not None:
            callback()

    def read_refusal(self) -> str | None:
        """Why this replica may not answer a read from its own state now (None: it may): not the leader, its
        term's first entry not applied, or it cannot show that no other leader was elected since
        (``RaftCore.read_refusal``, "Reads": a majority not heard within its read lease, its Raft thread
        standing still, or its leadership not confirmed since that thread last stood still, in which case
        a confirmation is asked for at once, so that a read that waits is answered after one round trip).
        Any thread, no locks; what every read asks (a clock read and a few attributes)."""
        core = self._core
        if self.stopped_error is not None:
            return READ_NOT_LEADER
        refusal = core.read_refusal(self._driver.clock())
        if refusal == READ_UNCONFIRMED:
            core.confirm_leadership()
        return refusal

    def role_and_leader(self) -> tuple[Role, str | None]:
        """What every request asks first (is this replica the leader, else who is), without building a
        whole :meth:`status`. Any thread, no locks."""
        core = self._core
        return core.role, core.leader_id

    def leader_ready(self) -> bool:
        """Leader, and its term's first entry applied (``GroupStatus.leader_ready``), without a whole
        :meth:`status`. Any thread, no locks."""
        return self._core.leader_ready

    def leader_and_term(self) -> tuple[str | None, int]:
        """The leader this replica knows and its current term (Kafka's leader epoch, once a leader is
        known: a follower's term is its leader's), without a whole :meth:`status`. Any thread, no locks."""
        core = self._core
        return core.leader_id, core.term

    def status(self) -> GroupStatus:
        """Any thread, no locks (fields may be one tick apart). After close(): the last state seen."""
        core = self._core
        journal = core.journal
        heard_at_ms, caught_up_at_ms = _member_times(core)
        return GroupStatus(
            group_id=self.group_id,
            node_id=core.node_id,
            role=core.role,
            term=core.term,
            leader=core.leader_id,
            commit_index=core.commit_index,
            last_applied=core.last_applied,
            last_index=journal.last_index,
            durable_index=journal.durable_index,
            match_index=core.match_indexes(),
            leader_ready=core.leader_ready,
            voters=core.membership.voters,
            learners=core.membership.learners,
            heard_at_ms=heard_at_ms,
            caught_up_at_ms=caught_up_at_ms,
        )

    async def add_learner(self, node_id: str, timeout_ms: int) -> None:
        await self._change_membership(LEARNER, node_id, timeout_ms)

    async def promote_learner(self, node_id: str, timeout_ms: int) -> None:
        await self._change_membership(PROMOTE, node_id, timeout_ms)

    async def add_replica(self, node_id: str, timeout_ms: int) -> None:
        await self._change_membership(ADD, node_id, timeout_ms)

    async def remove_replica(self, node_id: str, timeout_ms: int) -> None:
        await self._change_membership(REMOVE, node_id, timeout_ms)

    async def compact_now(self, timeout_ms: int) -> None:
        """Compact this replica's journal up to what it has applied, whatever the compaction settings
        (``RaftCore.request_compaction``): a member added next installs the snapshot instead of receiving
        the journal's entries. ProposalRejected if the state machine cannot take its snapshot in time."""
        self._check_open()
        future, callback = self._bridge.pending("log compaction")
        # the core gives up in half the time, so its denial, not a timeout, answers a "not now"
        self._core.request_compaction(timeout_ms / 2000, callback)
        await self._wait(future, timeout_ms, "log compaction")

    def membership_pending(self) -> str | None:
        """Why no membership change may start now (None: one may): not the leader, or a change (or the
        leader's own first entry) not applied yet. Any thread."""
        return self._core.membership_pending()

    async def _change_membership(self, change: str, node_id: str, timeout_ms: int) -> None:
        """One membership change, committed. Refused at once, saying why (``ProposalRejected``), when the
        leader would deny it now (another change in flight, a change that changes nothing, the leader
        removing itself); the core decides again when it appends."""
        self._check_open()
        core = self._core
        if core.role is not Role.LEADER:
            raise NotLeader(self.group_id, core.leader_id)
        refusal = core.membership_refusal(change, node_id)
        if refusal is not None:
            raise ProposalRejected(self.group_id, f"membership change {change} {node_id}: {refusal}")
        future, callback = self._bridge.pending(f"membership change {change} {node_id}")
        self._core.submit_membership(change, node_id, callback)
        await self._wait(future, timeout_ms, f"membership change {change} {node_id}")

    async def transfer_leadership(self, target_node_id: str | None, timeout_ms: int) -> None:
        """Hand leadership to ``target_node_id`` (None: the most caught-up follower) and wait until this
        replica sees another leader. Raises NotLeader / ProposalRejected (target not caught up) if not
        started, OutcomeUnknown if started but not observed in time."""
        self._check_open()
        core = self._core
        if core.role is not Role.LEADER:
            raise NotLeader(self.group_id, core.leader_id)
        deadline = self._loop.time() + timeout_ms / 1000
        if target_node_id is not None:
            # The leader denies a target that is not fully caught up. Right after a write the target's
            # acknowledgement may still be on its way, so give it a moment (within the timeout).
            catch_up_deadline = min(deadline, self._loop.time() + TRANSFER_CATCH_UP_S)
            while (
                core.match_indexes().get(target_node_id, 0) < core.journal.last_index
                and self._loop.time() < catch_up_deadline
            ):
                await asyncio.sleep(STATUS_POLL_S)
        future, callback = self._bridge.pending("leadership transfer")
        core.request_transfer(target_node_id, callback)
        await self._wait(future, timeout_ms, "leadership transfer")
        while self._loop.time() < deadline:
            leader = core.leader_id
            if core.role is not Role.LEADER and leader is not None and leader != core.node_id:
                if target_node_id is not None and leader != target_node_id:
                    raise OutcomeUnknown(self.group_id, f"leadership moved to {leader}, not {target_node_id}")
                return
            await asyncio.sleep(STATUS_POLL_S)
        raise OutcomeUnknown(self.group_id, f"leadership transfer not observed within {timeout_ms} ms")

    def close(self) -> None:
        """Stop this replica (idempotent): its core is destroyed on the driver thread, pending calls fail
        with OutcomeUnknown (a proposal may be committed by the next leader) and later ones with
        GroupClosed. No farewell to quiet followers (``RaftCore.farewell``, said when a core fails):
        a node closes a replica it no longer holds (its topic deleted, so every replica goes; or moved
        away, which a leader never is before its leadership left) or stops, closing its connections.
        A farewell from each replica of a deleted topic woke each of its peers into an election."""
        if self._closed:
            return
        self._closed = True
        core = self._core
        self._bridge.fail_all(GroupClosed(self.group_id))

        def destroy() -> None:
            self._driver.remove(core)
            core.destroy()  # closes the transport and the journal

        self._driver.call(destroy)

    # -- internals ------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise GroupClosed(self.group_id)
        error = self.stopped_error
        if error is not None:
            raise GroupClosed(self.group_id, error)

    async def _wait(self, future: asyncio.Future[object], timeout_ms: int, request: str) -> object:
        try:  # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancel that meets the result
            async with asyncio.timeout(timeout_ms / 1000):
                return await future
        except TimeoutError:
            self._bridge.forget(future)
            raise timeout_error(self.group_id, timeout_ms, request) from None

    def _on_core_failure(self, core: RaftCore, error: BaseException) -> None:
        """Driver thread: the core raised (a broken invariant or a disk error)."""
        logger.error("group %s replica %s stopped: %r", self.group_id, core.node_id, error)
        self._failure = error
        self._bridge.fail_all(GroupClosed(self.group_id, error))
        core.farewell()  # were it the leader, its quiet followers would wait for it
        for callback in list(self._stop_callbacks):
            callback()
