"""This node in gossip: what it tells the others and what it hears of them.

It publishes a small metadata blob through SWIM gossip (``membership``): its HTTP and Raft addresses, its
leadership claims (group -> term, recomputed only after a role change or a replica coming or going), its
disk use, whether its disk is full (``raftlog.storage.space``: a write was refused for want of room and
none got through since; while it is, a scratch reservation probes every second whether room came back),
and its replicas that cannot open or replay (only while there are any). When claims or failures
do not fit a datagram only their version or digest travels, and peers fetch the whole table through the
peer client (``PeerService.leadership`` / ``replica_failures``). What it hears goes into ``ClusterView``;
addresses it learns go to routing and to the Raft transport. Gossip never changes a Raft voter set.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable, Coroutine
from dataclasses import InitVar, dataclass, field
from typing import Any

import raftlog
from membership import Gossip, GossipConfig, Member, MemberState
from partitions import features
from partitions.controller import decommission
from partitions.controller.state import ControllerMetadata
from partitions.metadata.service import NodeInfo
from partitions.peers.client import PeerClient, remote_peer
from partitions.peers.service import Claims, Failures
from partitions.replicas import failures as replica_failures
from partitions.replicas.cluster_view import ClusterView, encode_meta
from partitions.replicas.failures import NO_FAILURES_DIGEST, ReplicaFailure
from partitions.replicas.manager import ReplicaManager
from partitions.replicas.raft_host import RaftHost
from partitions.replicas.routing import Routing
from raftlog.consensus.group import role_changes
from raftlog.errors import RaftlogError
from raftlog.storage import removal

log = logging.getLogger("raftlog.node")

CLAIMS_PUBLISH_INTERVAL_S = 0.2  # how often leadership changes are looked for and gossiped
FAILURES_FETCH_ATTEMPTS = 5  # a peer's failure list that did not fit its gossip, fetched from it
FAILURES_FETCH_RETRY_S = 1.0
REJOIN_INTERVAL_S = 1.0  # how often a node that gossip has found alone retries its seeds
DISK_USAGE_INTERVAL_S = 15.0  # how often this node measures its data dir (a walk of every replica's files)
DISK_USAGE_WALK_SHARE = 0.02  # ... or less often, so that the walk takes at most this share of the time
DISK_USAGE_STEP_BYTES = 1 << 20  # a change smaller than this is not worth a gossip update
SPACE_PROBE_INTERVAL_S = 1.0  # while the disk is full: how often room is probed for


def disk_usage(data_dir: str) -> tuple[int, int]:
    """(bytes of every file under ``data_dir``, bytes free on its file system)."""
    return removal.tree_bytes(data_dir), shutil.disk_usage(data_dir).free


@dataclass(eq=False)
class Presence:
    """Create with the node, ``await start()`` on its event loop, ``await close()``.

    ``gossip_bind_address`` and ``cluster_secret`` go to this node's ``Gossip`` and are not kept."""

    node_id: str
    _http: str
    _raft_address: str
    _data_dir: str
    gossip_bind_address: InitVar[str]
    cluster_secret: InitVar[bytes]
    _config: GossipConfig
    _seeds: tuple[str, ...]
    _view: ClusterView
    _routing: Routing
    _replicas: ReplicaManager
    _raft: RaftHost
    _client: PeerClient
    _metadata: Callable[[], ControllerMetadata]
    kafka: str | None = None  # this node's Kafka listener as clients reach it (gossiped), None without one
    _claims: dict[str, int] = field(default_factory=dict, init=False)
    _claims_version: int = field(default=0, init=False)
    # (bytes used under data_dir, bytes free on its disk)
    _disk: tuple[int, int] | None = field(default=None, init=False)
    _disk_full: bool = field(default=False, init=False)  # as last published (raft.space.full())
    # as last published, with their digest
    _failures: list[ReplicaFailure] = field(default_factory=list, init=False)
    _failures_digest: int = field(default=NO_FAILURES_DIGEST, init=False)
    # peers whose failure list is being fetched
    _failures_fetching: set[str] = field(default_factory=set, init=False)
    _closing: bool = field(default=False, init=False)
    _background: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    gossip: Gossip = field(init=False)

    def __post_init__(self, gossip_bind_address: str, cluster_secret: bytes) -> None:
        self.gossip = Gossip(self.node_id, gossip_bind_address, cluster_secret, self._meta(), self._config)

    @property
    def gossip_address(self) -> str:
        return self.gossip.address

    async def start(self) -> None:
        await self.gossip.start()
        self.gossip.subscribe(self._on_member)
        for member in self.gossip.members():
            self._on_member(member)
        if self._seeds:
            answered = await self.gossip.join(list(self._seeds))
            log.info(
                "node %s: gossip join through %d seed(s): %d answered",
                self.node_id,
                len(self._seeds),
                answered,
            )
        self._spawn(self._publish())
        if self._seeds:
            self._spawn(self._rejoin_while_alone())

    async def leave(self) -> None:
        """Tell the cluster this node leaves (gossip LEFT, sent its full retransmit count): the others
        route nothing more here. A stop's first step (``Node.hand_over``); ``close`` leaves too, once."""
        await self.gossip.leave()

    async def close(self) -> None:
        self._closing = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        try:
            await self.leave()
        finally:
            await self.gossip.stop()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- what this node publishes --------------------------------------------------------------------

    def _meta(self) -> bytes:
        return encode_meta(
            self._http,
            self._raft_address,
            self._claims_version,
            self._claims,
            self._config.meta_bytes_max,
            self._disk,
            self._failures,
            self.kafka,
            self._disk_full,
            (raftlog.version(), features.SUPPORTED),
        )

    def _local_claims(self) -> dict[str, int]:
        claims = {}
        for group_id, replica in self._replicas.items():
            term = replica.group.leader_term()
            if term is not None:
                claims[group_id] = term
        return claims

    async def _publish(self) -> None:
        """Re-publish this node's gossip metadata whenever its claims, disk use or failures change."""
        measure_at = 0.0  # a walk over thousands of replicas' files takes seconds: spaced by its duration
        probe_at = 0.0
        seen: tuple[int, int] | None = None  # (role changes of this process's groups, replica map changes)
        space = self._raft.space
        while not self._closing:
            changed = False
            if space.full() is not None and time.monotonic() >= probe_at:
                probe_at = time.monotonic() + SPACE_PROBE_INTERVAL_S
                try:
                    await asyncio.to_thread(space.probe, self._data_dir)
                except OSError as exc:
                    log.warning(
                        "node %s: probing for room in %s failed: %s", self.node_id, self._data_dir, exc
                    )
            full = space.full() is not None
            if full != self._disk_full:
                self._disk_full, changed = full, True
                measure_at = 0.0  # what is free now goes out with it
                log.warning(
                    "node %s: data disk %s: %s", self.node_id, self._data_dir,
                    f"full, writes refused ({space.full()})" if full else "room again, writes accepted",
                )  # fmt: skip
            if time.monotonic() >= measure_at:
                started = time.monotonic()
                disk = await asyncio.to_thread(disk_usage, self._data_dir)
                took = time.monotonic() - started
                measure_at = started + max(DISK_USAGE_INTERVAL_S, took / DISK_USAGE_WALK_SHARE)
                if self._disk is None or any(
                    abs(now - before) >= DISK_USAGE_STEP_BYTES
                    for now, before in zip(disk, self._disk, strict=True)
                ):
                    self._disk = disk
                    changed = True
            marker = (role_changes(), self._replicas.changes)  # read before the claims it vouches for
            if marker != seen:  # else no group changed role and no replica came or went: nothing to walk
                seen = marker
                claims = self._local_claims()
                if claims != self._claims:
                    self._claims = claims
                    self._claims_version += 1
                    changed = True
            changed = self._update_failures() or changed
            if changed:
                self.gossip.set_meta(self._meta())
            await asyncio.sleep(CLAIMS_PUBLISH_INTERVAL_S)

    def _update_failures(self) -> bool:
        """Settle retried replicas that have run long enough; True when the failure list to gossip changed
        (nothing to do per replica while none failed)."""
        self._replicas.settle_failures()
        failures = self._replicas.failed.failures()
        if failures == self._failures:
            return False
        self._failures = failures
        self._failures_digest = replica_failures.digest(failures)
        return True

    async def _rejoin_while_alone(self) -> None:
        """Retry the seeds while gossip knows nobody else (a node started before every seed)."""
        while not self._closing and all(m.node_id == self.node_id for m in self.gossip.members()):
            await asyncio.sleep(REJOIN_INTERVAL_S)
            await self.gossip.join(list(self._seeds))

    def leadership(self) -> Claims:
        """This node's published claims and their version (what peers fetch when gossip carried only the
        version)."""
        return Claims(self.node_id, self._claims_version, dict(self._claims))

    def replica_failures(self) -> Failures:
        """This node's published failed replicas and their digest."""
        return Failures(self.node_id, self._failures_digest, tuple(self._failures))

    def led_count(self) -> int:
        return len(self._claims)

    # -- what it hears -------------------------------------------------------------------------------

    def _on_member(self, member: Member) -> None:
        """A gossip change (on the event loop): update the view, learn addresses, fetch claims."""
        if member.state is MemberState.LEFT or member.state is MemberState.DEAD:
            self._view.update(member.node_id, member.state.value, member.incarnation, b"")
        meta = self._view.update(member.node_id, member.state.value, member.incarnation, member.meta)
        if member.node_id == self.node_id or meta is None:
            return
        self._routing.learn(member.node_id, meta.http, meta.kafka)
        if not self._closing:
            self._raft.learn_peer(member.node_id, meta.raft)
        if self._view.needs_claims(member.node_id) and not self._closing:
            self._spawn(self._fetch_claims(member.node_id))
        if (
            self._view.needs_failures(member.node_id)
            and member.node_id not in self._failures_fetching
            and not self._closing
        ):
            self._failures_fetching.add(member.node_id)
            self._spawn(self._fetch_failures(member.node_id))

    async def _fetch_claims(self, node_id: str) -> None:
        try:
            claims = await remote_peer(self._client, node_id).leadership()
        except RaftlogError as exc:
            log.warning("node %s: fetching leadership claims of %s failed: %s", self.node_id, node_id, exc)
            return
        self._view.set_claims(node_id, claims.version, claims.claims)

    async def _fetch_failures(self, node_id: str) -> None:
        """A peer's failed replicas, when its gossip carried only their digest (the list did not fit);
        retried a few times while still wanted, since the next gossip event may be long in coming."""
        try:
            for attempt in range(1, FAILURES_FETCH_ATTEMPTS + 1):
                if not self._view.needs_failures(node_id) or self._closing:
                    return
                try:
                    answer = await remote_peer(self._client, node_id).replica_failures()
                except RaftlogError as exc:
                    log.warning(
                        "node %s: fetching the failed replicas of %s failed (attempt %d of %d): %s",
                        self.node_id, node_id, attempt, FAILURES_FETCH_ATTEMPTS, exc,
                    )  # fmt: skip
                else:
                    self._view.set_failures(node_id, answer.failures)
                    return
                await asyncio.sleep(FAILURES_FETCH_RETRY_S)
        finally:
            self._failures_fetching.discard(node_id)

    # -- nodes ---------------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        led = self._view.leader_counts()
        led[self.node_id] = len(self._claims)
        metadata = self._metadata()
        flags = metadata.node_flags
        assignments = (
            {m.name: m.replicas for m in metadata.topics.values()} if flags["decommissioning"] else {}
        )
        return [
            NodeInfo(
                node_id,
                self._routing.http_address(node_id) or "",
                self._routing.liveness(node_id),
                self.gossip.incarnation if node_id == self.node_id else self._view.incarnation(node_id),
                led.get(node_id, 0),
                node_id in flags["maintenance"],
                node_id in flags["decommissioning"],
                decommission.finished(node_id, flags["decommissioning"], assignments),
                *self._disk_of(node_id),
                self._disk_full_of(node_id),
                *self._release_of(node_id),
                self._routing.kept_out(node_id),
                self._routing.doors_missing(node_id),
            )
            for node_id in sorted(self._routing.known_nodes())
        ]

    def _release_of(self, node_id: str) -> tuple[str | None, dict[str, int] | None]:
        """(version, supported feature levels) as the node gossiped them; (None, None) for a node of
        release 0.1.0 (it gossiped neither) or one not heard from."""
        if node_id == self.node_id:
            return raftlog.version(), dict(features.SUPPORTED)
        meta = self._view.meta(node_id)
        if meta is None or meta.supported is None:
            return None, None
        return meta.release, dict(meta.supported)

    def _disk_full_of(self, node_id: str) -> bool:
        if node_id == self.node_id:
            return self._raft.space.full() is not None
        meta = self._view.meta(node_id)
        return meta is not None and meta.disk_full

    def _disk_of(self, node_id: str) -> tuple[int | None, int | None]:
        if node_id == self.node_id:
            disk = self._disk
        else:
            meta = self._view.meta(node_id)
            disk = None if meta is None else meta.disk
        return (None, None) if disk is None else disk
