"""The controller's metadata on this node (Redpanda's ``topics_frontend``): this node's seat in the
controller group, the applied metadata and its reads, and ``propose``, the one way to change it. The
changes themselves live by job: topics, moves and node flags (``topic_changes``), users, ACLs and tokens
(``security_records``), the group's voters (``controller_voters``).

The controller group starts with the first nodes of the static peer list as its voters; each holds a
replica of it. Any other node (one started with ``join``, or one removed from the group) holds none and
copies the controller's applied metadata from the controller leader (``MetadataFollower``). Either way
``metadata()`` is the applied state, an immutable ``ControllerMetadata`` replaced whole at every apply,
and ``on_change`` runs on the event loop after each.

The group's members change one at a time (``controller_members``): the controller leader adds a node as a
learner and asks it to open its replica (``join_controller``; the node keeps following the leader's
metadata until its replica has caught up with it), its ``Operator`` promotes it, and a node removed, which
is sent nothing more, finds itself outside the group (``_watch``) and goes back to following. A node with
a controller replica on disk reopens it at start; one that left remembers it (``controller.left``).

Proposals are made only on the controller leader (NotLeader elsewhere: a front door runs the call there).
Placement and every check against liveness happen in those modules before proposing, so the apply stays
deterministic; nothing changes when a check refuses.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import msgpack

from partitions.controller.commands import ControllerCommand, FormCluster
from partitions.controller.commands import encode as encode_controller
from partitions.controller.members import ControllerMembers
from partitions.controller.state import (
    CONTROLLER_GROUP,
    ControllerMetadata,
    ControllerStateMachine,
    TopicMetadata,
)
from partitions.errors import (
    ControllerChangeRefused,
    FeatureUpdateRefused,
    NoControllerLeader,
    UnknownNode,
    UnknownTopic,
)
from partitions.metadata.catch_up import CatchUp
from partitions.metadata.follower import FetchSnapshot, MetadataFollower
from partitions.metadata.service import ControllerSnapshot
from partitions.replicas.manager import FIRST_CAMPAIGN_ATTEMPTS, FIRST_CAMPAIGN_DELAY_MS, Notifying
from partitions.replicas.raft_host import RaftHost
from raftlog.consensus.bridge import LoopNotifier
from raftlog.consensus.errors import NotLeader
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.interface import Role
from raftlog.consensus.journal_files import write_file_durably
from raftlog.errors import RaftlogError, check

log = logging.getLogger("raftlog.node")

ADMIN_TIMEOUT_MS = 10_000  # how long a controller change waits for its commit when its request sets no time
WATCH_S = 1.0  # how often a node with a controller replica checks that it is still a member
LEADERLESS_WATCHES = 3  # watches without a controller leader before asking the others about membership
ASK_EVERY_WATCHES = 30  # and, whatever it sees, asks that often (a quiet replica may see nothing amiss)
CONTROLLER_LEFT = "controller.left"  # in the node's raft directory: it left the controller group
CONTROLLER_JOINED = "joined"  # in the controller replica's directory: the configuration it joined
FetchMembers = Callable[[str], Awaitable[ControllerMembers]]  # a node's answer: the controller's members
TellLeave = Callable[[str, str], Awaitable[None]]  # (node, why): have a node removed leave the group


class Members(Protocol):
    """What the frontend asks of routing: which nodes exist and which are alive."""

    def known_nodes(self) -> set[str]: ...

    def alive_nodes(self) -> list[str]: ...

    def supported_features(self, node_id: str) -> Mapping[str, int] | None: ...

    def placeable(self) -> list[str]: ...

    def standby(self) -> list[str]: ...

    def has_leader(self, metadata: TopicMetadata, partition: int) -> bool: ...

    def http_address(self, node_id: str) -> str | None: ...


class MetadataFrontend:
    """Create with the node; ``await start(...)`` on its event loop; ``await close()``."""

    def __init__(
        self,
        node_id: str,
        controller_voters: list[str],
        joined: bool,
        raft: RaftHost,
        formation: Mapping[str, int] | None = None,
        on_levels: Callable[[Mapping[str, int]], None] = lambda levels: None,
    ) -> None:
        """``controller_voters``: the controller group's voters when the cluster was made (the first static
        peers); ``joined``: this node joined a running cluster and is none of them; ``formation``: the
        feature levels this node was told to form a new cluster at (``local_levels.formation``), None when
        it formed none; ``on_levels``: called with the finalized levels whenever they change, on the
        thread that applied them (the driver thread for a controller replica: before any proposal the
        event loop makes on seeing them can reach a peer)."""
        self.node_id = node_id
        self.controller_voters = controller_voters
        self.voter = node_id in controller_voters and not joined
        self._raft = raft
        self._machine = ControllerStateMachine()
        self._group: ReplicaGroup | None = None
        # a controller replica joining: its own state machine, until it has caught up with what the
        # follower keeps publishing (``_applied``)
        self._catching_up: ControllerStateMachine | None = None
        self._follower: MetadataFollower | None = None
        self._members: Members | None = None
        self._on_change: Callable[[], None] = lambda: None
        self._fetch: FetchSnapshot | None = None
        self._fetch_members: FetchMembers | None = None
        self._tell_leave: TellLeave | None = None
        self._seat = asyncio.Lock()  # joining and leaving the controller group, one at a time
        self._watcher: asyncio.Task[None] | None = None
        self._retired: asyncio.Task[None] | None = None  # the follower a caught-up replica took over from
        self._fence: CatchUp | None = None  # lifted once the metadata caught up since the start
        self._formation = formation
        self._on_levels = on_levels
        self._levels_seen: Mapping[str, int] | None = None
        self._forming = asyncio.Lock()  # the formation's proposal, once, before any other command

    async def start(
        self,
        members: Members,
        on_change: Callable[[], None],
        fetch: FetchSnapshot,
        fetch_members: FetchMembers,
        tell_leave: TellLeave,
    ) -> None:
        """Open the controller replica (a member of the controller group) or start following the
        controller leader (``fetch`` asks a node for the controller's snapshot, ``fetch_members`` for the
        controller's members, ``tell_leave`` has a node this leader removed leave the group)."""
        self._members = members
        self._on_change = on_change
        self._fetch = fetch
        self._fetch_members = fetch_members
        self._tell_leave = tell_leave
        seat = self._seat_at_start()
        if seat is None:
            self._follow()
        else:
            await self._open_replica(*seat, catching_up=False)
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        self._fence = CatchUp(
            self.node_id,
            lambda: self._machine.applied_index,
            self.controller,
            lambda: self._group is not None and self._catching_up is None,
            lambda: self._follower is not None and self._follower.synced,
            fetch,
            formed=lambda: not self._unformed(),
        )
        self._fence.start()

    def _seat_at_start(self) -> tuple[list[str], list[str]] | None:
        """The configuration to open this node's controller replica with (voters, learners), or None:
        follow. A replica on disk is reopened (its log says what it is now); a node that left the group
        does not come back by itself."""
        directory = self._raft.group_dir(CONTROLLER_GROUP)
        joined = _read_joined(directory)
        if joined is not None:
            return joined
        if os.path.isdir(directory):  # a replica of one of the first voters
            return list(self.controller_voters), []
        if self.voter and not os.path.exists(os.path.join(self._raft.root, CONTROLLER_LEFT)):
            return list(self.controller_voters), []
        return None

    async def _open_replica(self, voters: list[str], learners: list[str], catching_up: bool) -> None:
        machine = ControllerStateMachine() if catching_up else self._machine
        notifier = LoopNotifier(asyncio.get_running_loop(), self._applied)
        self._group = await self._raft.open(
            CONTROLLER_GROUP,
            voters,
            Notifying(_LevelWatch(machine, self._watch_levels), notifier.notify),
            announce_commits=True,  # every node reconciles its replicas on applying metadata
            ticked_first=True,  # every node's routing and placement wait on it: no storm queues it
            learners=learners,
        )
        if catching_up:
            self._catching_up = machine
        elif self.voter and self.node_id == self.controller_voters[0] and voters == self.controller_voters:
            # a new cluster: its first controller voter stands at once (no-op after a first election)
            self._group.campaign_if_new(FIRST_CAMPAIGN_DELAY_MS, FIRST_CAMPAIGN_ATTEMPTS)

    def _follow(self) -> None:
        check(self._fetch is not None, "the metadata frontend is not started")
        assert self._fetch is not None  # narrowed for the type checker; checked above

        def followed() -> None:
            self._watch_levels(self._machine.metadata)
            self._on_change()

        self._follower = MetadataFollower(self.node_id, self._machine, self._fetch, self._sources, followed)
        self._follower.start()

    def _watch_levels(self, metadata: ControllerMetadata) -> None:
        """On the thread that applied ``metadata``: tell ``on_levels`` when its finalized levels changed."""
        features = metadata.features
        if features is not self._levels_seen:
            self._levels_seen = features
            if features:
                self._on_levels(features)

    def _applied(self) -> None:
        """Event loop, after the controller replica applied: a replica that joined takes over from the
        follower once it holds everything the follower has published."""
        joining = self._catching_up
        if joining is not None and joining.applied_index >= max(1, self._machine.applied_index):
            self._machine = joining
            self._catching_up = None
            follower, self._follower = self._follower, None
            if follower is not None:
                self._retired = asyncio.get_running_loop().create_task(follower.close())
            log.info("node %s: controller replica caught up at index %d", self.node_id, joining.applied_index)
        self._on_change()

    async def close(self) -> None:
        if self._fence is not None:
            await self._fence.close()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        if self._retired is not None:
            await self._retired
        if self._follower is not None:
            await self._follower.close()
        if self._group is not None:
            self._group.close()

    # -- this node's seat in the controller group ----------------------------------------------------

    async def join_controller(self, voters: list[str]) -> None:
        """Asked by the controller leader once it made this node a learner of the controller group: open
        this node's controller replica (a learner; the group's voters ``voters``) unless it has one. The
        metadata keeps coming from the follower until the replica has caught up with it."""
        if not voters or self.node_id in voters:
            raise ControllerChangeRefused(self.node_id, f"cannot join a controller group of voters {voters}")
        async with self._seat:
            if self._group is not None:
                return
            left = os.path.join(self._raft.root, CONTROLLER_LEFT)
            if os.path.exists(left):
                os.unlink(left)
            directory = self._raft.group_dir(CONTROLLER_GROUP)
            os.makedirs(directory, exist_ok=True)
            body = msgpack.packb({"voters": list(voters), "learners": [self.node_id]}, use_bin_type=True)
            await asyncio.to_thread(write_file_durably, os.path.join(directory, CONTROLLER_JOINED), body)
            log.info("node %s: joining the controller group (voters %s)", self.node_id, voters)
            await self._open_replica(list(voters), [self.node_id], catching_up=True)

    async def leave_controller(self, why: str) -> None:
        """This node is no member of the controller group: close its replica and delete it, remember
        having left (a restart follows too), and follow the controller's metadata from now on."""
        async with self._seat:
            group = self._group
            if group is None:
                return
            log.warning("node %s: leaving the controller group: %s", self.node_id, why)
            self._group = None
            self._catching_up = None
            group.close()
            await self._raft.barrier()  # nothing more is applied into the machine the follower now fills
            root = self._raft.root
            await asyncio.to_thread(write_file_durably, os.path.join(root, CONTROLLER_LEFT), why.encode())
            self._raft.discard(self._raft.group_dir(CONTROLLER_GROUP))
            if self._follower is None:
                self._follow()
            self._on_change()

    async def _watch(self) -> None:
        """Every ``WATCH_S``: a controller replica that is outside its own configuration, has known no
        leader for ``LEADERLESS_WATCHES`` watches, or has not asked for ``ASK_EVERY_WATCHES``, asks the
        others who the controller's members are, and leaves when the controller leader, in a term at
        least its own, counts it none. A removed replica is sent nothing more: the leader that removed it
        tells it (``tell_leave``), and this is how it learns when that word was lost (it was down, or
        the leader died), a quiet replica among them: it sees its leader's node up and expects nothing."""
        leaderless = 0
        watches = 0
        while True:
            await asyncio.sleep(WATCH_S)
            watches += 1
            group = self._group
            if group is None:
                leaderless = 0
                continue
            status = group.status()
            leaderless = 0 if status.leader is not None else leaderless + 1
            member = self.node_id in status.voters or self.node_id in status.learners
            if member and leaderless < LEADERLESS_WATCHES and watches % ASK_EVERY_WATCHES:
                continue
            try:
                members = await self._ask_members()
            except (RaftlogError, OSError) as error:
                log.info("node %s: controller members not known: %s", self.node_id, error)
                continue
            if (
                members is not None
                and members.leader != self.node_id
                and members.term >= status.term
                and self.node_id not in members.voters
                and self.node_id not in members.learners
                and self._group is group
            ):
                await self.leave_controller(
                    f"the controller leader {members.leader} (term {members.term}) counts it no member: "
                    f"voters {list(members.voters)}, learners {list(members.learners)}"
                )

    async def _ask_members(self) -> ControllerMembers | None:
        """The controller's members as its leader has them, asked of the live nodes (following a leader
        hint once); None when no node answers for the leader."""
        fetch = self._fetch_members
        if fetch is None:
            return None
        for node in self._sources():
            target = node
            for _ in range(2):
                try:
                    return await fetch(target)
                except NotLeader as refusal:
                    if refusal.leader_hint is None or refusal.leader_hint in (target, self.node_id):
                        break
                    target = refusal.leader_hint
                except RaftlogError:
                    break
        return None

    def _sources(self) -> list[str]:
        members = self.members()
        return [n for n in members.alive_nodes() if n != self.node_id and members.http_address(n)]

    def members(self) -> Members:
        """Which nodes exist and are alive (routing's view), once started."""
        check(self._members is not None, "the metadata frontend is not started")
        assert self._members is not None  # narrowed for the type checker; checked above
        return self._members

    # -- reads ---------------------------------------------------------------------------------------

    def metadata(self) -> ControllerMetadata:
        """The applied metadata: one immutable view (read it once per decision)."""
        return self._machine.metadata

    def topics(self) -> list[str]:
        return sorted(self._machine.metadata.topics)

    def topics_by_name(self) -> Mapping[str, TopicMetadata]:
        return self._machine.metadata.topics

    def topic(self, name: str) -> TopicMetadata:
        metadata = self._machine.metadata.topics.get(name)
        if metadata is None:
            raise UnknownTopic(name)
        return metadata

    def controller(self) -> str | None:
        """The controller leader; None while unknown, and while this node leads the controller group but
        has not yet applied the metadata committed before its election (it cannot answer for topics)."""
        if self._group is None or self._catching_up is not None:
            follower = self._follower
            return None if follower is None or not follower.synced else follower.leader
        role, leader = self._group.role_and_leader()  # asked several times a second: no whole status
        if role is Role.LEADER and not self._group.leader_ready():
            return None
        return leader

    def leads(self) -> bool:
        return self.controller() == self.node_id

    def caught_up(self) -> bool:
        """Whether this node's metadata caught up with the controller's since the node started
        (``catch_up``): until then its Kafka listener stays closed and it is not ready."""
        return self._fence is not None and self._fence.caught_up

    async def wait_caught_up(self) -> None:
        check(self._fence is not None, "the metadata frontend is not started")
        assert self._fence is not None  # narrowed for the type checker; checked above
        await self._fence.wait()

    def term(self) -> int | None:
        """The controller group's term as this node's replica knows it (None without one): an election of
        the controller raises it (Kafka's controller epoch)."""
        return None if self._group is None else self._group.leader_and_term()[1]

    # -- proposals (the changes themselves: topic_changes.py, security_records.py, controller_voters.py)

    def known_node(self, node_id: str) -> None:
        """UnknownNode unless the cluster knows ``node_id``."""
        if node_id not in self.members().known_nodes():
            raise UnknownNode(node_id)

    async def tell_leave(self, node_id: str, why: str) -> None:
        """Have a node this leader removed from the controller group leave it (a node without the word
        finds out by itself: ``_watch``)."""
        if self._tell_leave is not None:
            await self._tell_leave(node_id, why)

    def replica_group(self) -> ReplicaGroup | None:
        """This node's controller replica (None on a node that only follows the metadata)."""
        return self._group

    def leader_group(self) -> ReplicaGroup:
        """This node's controller replica when it leads; NotLeader naming the leader otherwise."""
        if self._group is None:
            leader = self.controller()
            if leader is None:
                raise NoControllerLeader(CONTROLLER_GROUP)
            raise NotLeader(CONTROLLER_GROUP, leader)
        if not self.leads():
            raise NotLeader(CONTROLLER_GROUP, self._group.role_and_leader()[1])
        return self._group

    async def propose(self, command: ControllerCommand, timeout_ms: int = ADMIN_TIMEOUT_MS) -> object:
        """Propose to the controller group (NotLeader when another node leads it); a refusal is raised.
        Not committed and applied within ``timeout_ms``: OutcomeUnknown (it may still be, later). On a
        new cluster's first leader, its formation goes first (``form_if_new``)."""
        group = self._group
        if group is None:
            self.leader_group()  # raises: no controller replica here
            raise AssertionError("unreachable")
        if not isinstance(command, FormCluster) and self._unformed():
            await self.form_if_new(timeout_ms)
        result = await group.propose(encode_controller(command), timeout_ms)
        if isinstance(result, Exception):
            raise result
        return result

    def _unformed(self) -> bool:
        """This node formed the cluster and its controller log holds no command yet."""
        return self._formation is not None and self._machine.applied_index == 0

    async def form_if_new(self, timeout_ms: int = ADMIN_TIMEOUT_MS) -> None:
        """On the controller leader of a new cluster (this node formed it, its log holds no command): the
        levels it forms at, as the log's first command (``FormCluster``; the apply refuses it after any
        other, so a log with commands, however they came, keeps its levels). Nothing elsewhere."""
        async with self._forming:
            if not self._unformed() or not self.leads():
                return
            assert self._formation is not None  # narrowed for the type checker: _unformed checked it
            levels = dict(self._formation)
            try:
                await self.propose(FormCluster(levels), timeout_ms)
            except FeatureUpdateRefused as exc:
                log.info("node %s: the cluster formed already: %s", self.node_id, exc)
                return
            log.info("node %s: a new cluster formed at feature levels %s", self.node_id, levels)

    # -- for nodes outside the controller group ------------------------------------------------------

    async def snapshot(self, known_index: int | None) -> ControllerSnapshot:
        """The controller's applied metadata, taken on the driver thread between applies; NotLeader on a
        node without a controller replica (the caller asks another). No snapshot when the applied index is
        still ``known_index``."""
        group = self._group
        if group is None:
            raise NotLeader(CONTROLLER_GROUP, self.controller())
        leader = self.controller()
        if leader is None:
            raise NoControllerLeader(CONTROLLER_GROUP)
        leader_http = self.members().http_address(leader) or ""
        machine = self._machine
        if known_index is not None and machine.applied_index == known_index:
            return ControllerSnapshot(leader, leader_http, known_index, None)

        def take() -> tuple[int, bytes]:
            return machine.applied_index, machine.snapshot()

        applied_index, snapshot = await self._raft.run(take)
        check(group is self._group, "controller replica changed while snapshotting")
        return ControllerSnapshot(leader, leader_http, applied_index, snapshot)


class _LevelWatch:
    """The controller state machine, with ``watch`` told of the metadata after each apply or restore (on
    the driver thread)."""

    def __init__(self, inner: ControllerStateMachine, watch: Callable[[ControllerMetadata], None]) -> None:
        self.inner = inner
        self._watch = watch

    def apply(self, index: int, term: int, command: bytes | memoryview) -> object:
        result = self.inner.apply(index, term, command)
        self._watch(self.inner.metadata)
        return result

    def snapshot(self) -> bytes | None:
        return self.inner.snapshot()

    def restore(self, snapshot: bytes) -> None:
        self.inner.restore(snapshot)
        self._watch(self.inner.metadata)


def _read_joined(directory: str) -> tuple[list[str], list[str]] | None:
    """The configuration (voters, learners) a controller replica that joined the group was opened with,
    or None (no such replica: one of the first voters', or none)."""
    try:
        with open(os.path.join(directory, CONTROLLER_JOINED), "rb") as file:
            joined = msgpack.unpackb(file.read(), raw=False)
    except FileNotFoundError:
        return None
    check(
        isinstance(joined, dict) and isinstance(joined.get("voters"), list) and joined["voters"],
        f"malformed {CONTROLLER_JOINED} in {directory}: {joined!r}",
    )
    return [str(n) for n in joined["voters"]], [str(n) for n in joined.get("learners", [])]
