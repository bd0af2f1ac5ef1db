"""The controller leader's background work: replica moves, decommissions, the leader balancer, and the
controller group's own joining members.

Every node runs one ``Operator`` task; it acts only while its node leads the controller group and has
applied the metadata committed before its election. Each tick it:

1. advances every recorded replica move by one step (``reconfigure.next_step``), asking the partition's
   leader for its Raft view and membership changes wherever it is (in-process when it is this node, else
   through the peer client, following leader hints), and each node that joined in the move for its own
   account of its partition log (``reconfigure.ReplicaLog``: a joiner is promoted, an old replica removed
   and the move ended only once the joiners' logs hold every record);
2. starts moves off decommissioning nodes, a few at a time (``reconfigure.replacement_for``);
3. every ``BALANCE_INTERVAL_S`` (at once while a node in maintenance, or one lacking a door the others
   serve, ``Routing.may_lead``, still leads something), performs one
   leadership transfer from ``balancer.plan``: a drain at once, a transfer that evens leaders out only
   on a lasting imbalance (``balancer.Hysteresis``: seen in 3 rounds in a row, never a partition whose
   leader changed in the last 10 s, at most 10 transfers a minute, a gap of at least 10% of a node's
   share of the leaderships);
4. has a learner of the controller group open its replica, and promotes it once caught up
   (``controller_members.learner_to_promote``).

All decisions are made from fresh state each tick, so a failed step, a lost answer or a new controller
leader only repeats work: each step is idempotent (see ``reconfigure``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from partitions.controller import balancer, reconfigure
from partitions.controller import members as controller_members
from partitions.controller.commands import ControllerCommand, MoveReplicas, StepMove
from partitions.controller.members import ControllerMembers
from partitions.controller.reconfigure import MemberView, Record, ReplicaLog, Wait
from partitions.controller.state import ControllerMetadata, Reassignment
from partitions.peers.service import PeerService
from partitions.worker import Worker
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.operations")
P = ParamSpec("P")
T = TypeVar("T")

TICK_S = 0.2
BALANCE_INTERVAL_S = 3.0
DECOMMISSION_MOVES_MAX = 4  # moves a decommission keeps in flight at once
MEMBERSHIP_TIMEOUT_MS = 10_000
# a joiner's account of its log is read in memory on its driver thread: one not given within this is asked
# again next tick (a joiner that hangs holds up no other duty for the peer client's 15 s)
REPLICA_LOG_TIMEOUT_S = 2.0


class Controller(Protocol):
    """The controller metadata and its proposals (``metadata.MetadataFrontend``)."""

    node_id: str

    def metadata(self) -> ControllerMetadata: ...

    def leads(self) -> bool: ...

    async def propose(self, command: ControllerCommand) -> object: ...

    async def form_if_new(self) -> None:
        """A new cluster's levels, proposed as its controller log's first command (on the leader)."""
        ...


class Voters(Protocol):
    """The controller group's members (``controller_voters.ControllerVoters``)."""

    def controller_members(self) -> ControllerMembers: ...

    async def promote_controller_learner(self, node_id: str) -> None: ...


class Nodes(Protocol):
    """Who is alive and who leads what (``routing.Routing``)."""

    def alive_nodes(self) -> list[str]: ...

    def known_nodes(self) -> set[str]: ...

    def known_leader(self, topic: str, partition: int) -> str | None: ...

    def may_lead(self, node_id: str) -> str | None: ...


class PartitionLeaders(Protocol):
    """A partition's leader, wherever it is (``cluster.ClusterPeer``): ``call(PeerService.method, ...)``
    runs there."""

    async def call(
        self,
        method: Callable[Concatenate[PeerService, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T: ...

    async def join_controller(self, node_id: str, voters: list[str]) -> None:
        """Have ``node_id`` open its replica of the controller group (it is a learner of it)."""
        ...

    async def replica_log(self, node_id: str, topic: str, partition: int) -> ReplicaLog:
        """``node_id``'s own account of its replica's partition log (``PeerService.replica_log``)."""
        ...


@dataclass(eq=False)
class Operator(Worker):
    """Create with the node's parts, ``start()`` on its event loop, ``await close()``."""

    _controller: Controller
    _voters: Voters
    _nodes: Nodes
    _leaders: PartitionLeaders
    _clock: Callable[[], float] = field(default=time.monotonic, repr=False)  # the balancer's time
    # (topic, partition, learner joining) -> the commit index when it was first seen a learner
    _goals: dict[tuple[str, int, str], int] = field(default_factory=dict, init=False)
    # (controller learner, its catch-up goal)
    _controller_goal: tuple[str, int] | None = field(default=None, init=False)
    _balanced_at: float = field(default=0.0, init=False)
    _hysteresis: balancer.Hysteresis = field(default_factory=balancer.Hysteresis, init=False)
    steps_taken: int = field(default=0, init=False)
    ticks: int = field(default=0, init=False)  # rounds of duties run as the controller leader
    leadership_transfers: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        super().__init__()

    @property
    def node_id(self) -> str:
        return self._controller.node_id

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if not self._controller.leads():
                self._goals.clear()
                continue
            try:
                await self._tick()
                self.ticks += 1
            except (RaftlogError, TimeoutError, OSError, ValueError, KeyError) as exc:
                log.warning("node %s: admin operations tick failed, retrying: %s", self.node_id, exc)
            except Exception:  # a bug: logged loudly with its traceback; the next tick starts afresh
                log.exception("node %s: admin operations tick failed", self.node_id)
                await asyncio.sleep(1)

    async def _tick(self) -> None:
        """The three duties, each on its own: a move that keeps failing does not stall the others."""
        moves = dict(self._controller.metadata().reassignments)
        duties: list[Callable[[], Awaitable[None]]] = [
            lambda: _bounded([self._advance(t, p, move) for (t, p), move in sorted(moves.items())]),
            lambda: self._decommission(len(moves)),
            lambda: self._balance(bool(moves)),
            self._controller_learners,
            self._controller.form_if_new,
        ]
        for duty in duties:
            try:
                await duty()
            except (RaftlogError, TimeoutError, OSError, ValueError, KeyError) as exc:
                log.warning("node %s: admin operations: %s", self.node_id, exc)

    # -- moves ---------------------------------------------------------------------------------------

    async def _advance(self, topic: str, partition: int, move: Reassignment) -> None:
        metadata = self._controller.metadata().topics.get(topic)
        if metadata is None:
            return
        recorded = metadata.replicas[partition]
        view = await self._member_view(topic, partition)
        if view is None:
            return
        learners = sorted(view.learners)
        goal = None
        if learners:
            goal = self._goals.setdefault((topic, partition, learners[0]), view.commit_index)
        logs = await self._replica_logs(topic, partition, reconfigure.joined(move, view))
        step = reconfigure.next_step(move, recorded, view, goal, logs)
        if isinstance(step, Wait):
            log.debug("move of %s/%d waits: %s", topic, partition, step.reason)
            return
        log.info("node %s: move of %s/%d: %s", self.node_id, topic, partition, step)
        self.steps_taken += 1
        if isinstance(step, Record):
            for key in [k for k in self._goals if k[:2] == (topic, partition)]:
                del self._goals[key]
            await self._controller.propose(StepMove(topic, partition, list(step.replicas), step.adding))
        else:
            await self._change(topic, partition, step.kind, step.node)

    async def _member_view(self, topic: str, partition: int) -> MemberView | None:
        """The partition leader's Raft view; None when it cannot be had now (no leader, unreachable)."""
        try:
            return await self._leaders.call(PeerService.member_view, topic, partition)
        except RaftlogError as exc:
            log.info("move of %s/%d: no membership view from its leader: %s", topic, partition, exc)
            return None

    async def _replica_logs(self, topic: str, partition: int, nodes: list[str]) -> dict[str, ReplicaLog]:
        """Each node's own account of its replica's log, asked now; one that cannot be had (down, its
        replica not open yet, a node of release 0.1.0, which serves no such call) is left out: its log is
        not known to be complete, and the move waits for it."""
        logs = {}
        for node in nodes:
            try:
                async with asyncio.timeout(REPLICA_LOG_TIMEOUT_S):  # keeps a cancel (test_cancel_safety)
                    logs[node] = await self._leaders.replica_log(node, topic, partition)
            except (RaftlogError, TimeoutError) as exc:
                log.debug("move of %s/%d: no account of %s's log: %s", topic, partition, node, exc)
        return logs

    async def _change(self, topic: str, partition: int, change: str, node: str) -> None:
        await self._leaders.call(
            PeerService.change_membership, topic, partition, change, node, MEMBERSHIP_TIMEOUT_MS
        )

    # -- the controller group -------------------------------------------------------------------------

    async def _controller_learners(self) -> None:
        """A node joining the controller group (a learner of it): ask it to open its replica until it
        answers the leader, and promote it once its match index reaches the commit index this operator
        saw when it first met it."""
        members = self._voters.controller_members()
        if not members.learners:
            self._controller_goal = None
            return
        node = members.learners[0]
        if self._controller_goal is None or self._controller_goal[0] != node:
            self._controller_goal = (node, members.commit_index)
        if controller_members.learner_to_promote(members, self._controller_goal[1]) == node:
            log.info("node %s: promoting %s to controller voter", self.node_id, node)
            await self._voters.promote_controller_learner(node)
            self._controller_goal = None
        elif members.match_index.get(node, 0) == 0:
            await self._leaders.join_controller(node, list(members.voters))

    # -- decommission --------------------------------------------------------------------------------

    async def _decommission(self, moving: int) -> None:
        machine = self._controller.metadata()
        leaving = machine.node_flags["decommissioning"]
        if not leaving or moving >= DECOMMISSION_MOVES_MAX:
            return
        candidates = [n for n in self._nodes.alive_nodes() if n not in leaving]
        load: dict[str, int] = {}
        for metadata in machine.topics.values():
            for replicas in metadata.replicas:
                for node in replicas:
                    load[node] = load.get(node, 0) + 1
        for metadata in sorted(machine.topics.values(), key=lambda m: m.name):
            for partition, replicas in enumerate(metadata.replicas):
                if moving >= DECOMMISSION_MOVES_MAX:
                    return
                if (metadata.name, partition) in machine.reassignments:
                    continue
                node = next((n for n in replicas if n in leaving), "")
                if not node:
                    continue
                target = reconfigure.replacement_for(node, replicas, candidates, load)
                if target is None:
                    continue
                await self._controller.propose(MoveReplicas(metadata.name, partition, target))
                newcomer = target[replicas.index(node)]
                load[newcomer] = load.get(newcomer, 0) + 1
                moving += 1

    # -- leader balance ------------------------------------------------------------------------------

    async def _balance(self, moving: bool) -> None:
        machine = self._controller.metadata()
        alive = self._nodes.alive_nodes()
        # in maintenance, or lacking a door the others serve (its clients could not reach it): lead nothing
        unfit = set(machine.node_flags["maintenance"]) | {n for n in alive if self._nodes.may_lead(n)}
        now = self._clock()
        due = not moving and now - self._balanced_at >= BALANCE_INTERVAL_S
        if not due and not unfit:
            return  # nothing to drain, not yet time to even out: no walk over every partition
        partitions = []
        for metadata in machine.topics.values():
            for partition, replicas in enumerate(metadata.replicas):
                leader = self._nodes.known_leader(metadata.name, partition)
                partitions.append(balancer.Led(metadata.name, partition, replicas, leader))
        draining = any(p.leader in unfit for p in partitions)
        if not draining and not due:
            return
        self._balanced_at = now
        leaving = machine.node_flags["decommissioning"]
        eligible = [n for n in alive if n not in unfit and n not in leaving]
        hysteresis = self._hysteresis
        hysteresis.observe(partitions, now)
        settling = hysteresis.settling(now)
        gap_min = balancer.gap_min_for(partitions, eligible)
        for move in balancer.plan(partitions, eligible, moves_max=1, settling=settling, gap_min=gap_min):
            drain = balancer.is_drain(move, eligible)
            if not drain and not hysteresis.allows(True, now):
                return  # an imbalance that has not lasted yet, or enough transfers for now
            log.info(
                "node %s: leader balance (%s): %s/%d from %s to %s",
                self.node_id, "drain" if drain else "even out", move.topic, move.partition, move.source,
                move.target,
            )  # fmt: skip
            self.leadership_transfers += 1
            await self._change(move.topic, move.partition, "transfer", move.target)
            return
        hysteresis.allows(False, now)


async def _bounded(work: list[Awaitable[None]], at_once: int = 8) -> None:
    """Run the coroutines with at most ``at_once`` in flight; the first failure is raised after all end."""
    semaphore = asyncio.Semaphore(at_once)

    async def one(item: Awaitable[None]) -> None:
        async with semaphore:
            await item

    results = await asyncio.gather(*(one(w) for w in work), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
